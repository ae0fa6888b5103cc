"""New connections are answered while kept-alive connections saturate the server.

kube-apiserver keeps its connections to the webhook alive and opens new ones when they are all busy: under load,
a review on a new connection must not wait behind the kept-alive ones (past `timeoutSeconds`, it fails open).

Fairness is shown by order, not by time: one kept-alive connection has a long queue of pipelined reviews waiting,
16 hey connections keep the worker busy, and a new connection (TLS handshake, then one review) must be answered
while that queue is still being worked through. A worker that serves a connection's buffered requests back to
back answers the whole queue first (webhook/serving/worker.py).
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from testkit.hey import finish_hey, start_hey
from testkit.server import Server, running_server
from tests.e2e.test_server import mover_review
from tests.support import EXAMPLES
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e

HEY_SECONDS = 120.0  # an upper bound: hey is interrupted (and reports) once the new connection is answered
QUEUED = 300  # reviews pipelined on the kept-alive connection


def _request(review: dict[str, Any]) -> bytes:
    body = json.dumps(review).encode()
    head = (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 response (gunicorn sends Content-Length for every answer)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in head if line.lower().startswith("content-length:"))
    return int(head[0].split()[1]), json.loads(await reader.readexactly(length))


class _Queue:
    """The kept-alive connection's answers, counted as they arrive."""

    def __init__(self) -> None:
        self.read = 0
        self.failures: list[str] = []

    async def drain(self, reader: asyncio.StreamReader, reviews: list[dict[str, Any]]) -> None:
        for review in reviews:
            status, answer = await _answer(reader)
            if status != 200 or answer["response"]["uid"] != review["request"]["uid"]:
                self.failures.append(f"{status} {str(answer)[:200]}")
            self.read += 1


async def _queue_then_new_connection(server: Server) -> tuple[_Queue, int, int, dict[str, Any], dict[str, Any]]:
    """Queue QUEUED reviews on one kept-alive connection, then send one on a new connection; verified TLS both."""
    context = ssl.create_default_context(cafile=str(server.ca))
    port = int(server.url.rsplit(":", 1)[1])
    reviews = [mover_review(f"queued-{i}") for i in range(QUEUED)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
    queue = _Queue()
    draining = asyncio.create_task(queue.drain(reader, reviews))
    writer.write(b"".join(_request(review) for review in reviews))
    await writer.drain()
    before = queue.read
    fresh_reader, fresh_writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost"
    )
    review = mover_review("new-connection")
    fresh_writer.write(_request(review))
    _, answer = await _answer(fresh_reader)
    after = queue.read
    fresh_writer.close()
    await fresh_writer.wait_closed()  # closed before the loop is: an open TLS transport left is a ResourceWarning
    await asyncio.wait_for(draining, 60)
    writer.close()
    await writer.wait_closed()
    return queue, before, after, review, answer


def test_a_new_connection_is_answered_before_a_queue_of_kept_alive_requests(tmp_path: Path) -> None:
    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), workers=1) as server:
        body = tmp_path / "review.json"
        body.write_text(json.dumps(mover_review("saturating")))
        hey = start_hey(server.url + "/mutate", body, seconds=HEY_SECONDS, concurrency=16, keepalive=True)
        try:
            time.sleep(0.5)  # hey's connections established and busy
            queue, before, after, review, answer = asyncio.run(asyncio.wait_for(_queue_then_new_connection(server), 90))
            assert hey.poll() is None, "hey stopped before the new connection was answered"
        finally:
            hey.send_signal(signal.SIGINT)  # hey stops its workers and prints its summary
            result = finish_hey(hey, timeout=30)
        check_response(review, answer, mutating=True)
        assert queue.failures == [] and queue.read == QUEUED, (queue.read, queue.failures[:3])
        waiting = QUEUED - before
        assert waiting >= QUEUED // 3, f"only {waiting} of {QUEUED} queued reviews were left: the test proves nothing"
        served_meanwhile = after - before
        # Fair: a handful of the queue's turns (the handshake's round trips and the review). Unfair: all of it.
        assert served_meanwhile < waiting // 2, f"{served_meanwhile} of {waiting} queued reviews answered first"
        assert result.failed == 0 and result.sent > 16, result.summary
