"""New connections are answered while kept-alive connections saturate the server.

kube-apiserver keeps its connections to the webhook alive and opens new ones when they are all busy: under load,
a review on a new connection must not wait behind the kept-alive ones (past `timeoutSeconds`, it fails open).
"""

from __future__ import annotations

import http.client
import json
import socket
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

HEY_SECONDS = 4.0
# New connections opened one after another, each answered, while hey runs; one worker that serves its connections
# in turn answers dozens (webhook/worker.py).
NEW_CONNECTIONS = 10


def review_on_new_connection(server: Server, review: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One review on a connection of its own, its certificate verified by the CA and by name."""
    context = ssl.create_default_context(cafile=str(server.ca))
    port = int(server.url.rsplit(":", 1)[1])
    body = json.dumps(review).encode()
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        response = http.client.HTTPResponse(tls)
        response.begin()
        return response.status, json.loads(response.read())


def test_new_connections_are_answered_while_keepalive_connections_saturate(tmp_path: Path) -> None:
    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), workers=1) as server:
        body = tmp_path / "review.json"
        body.write_text(json.dumps(mover_review("saturating")))
        hey = start_hey(server.url + "/mutate", body, seconds=HEY_SECONDS, concurrency=16, keepalive=True)
        try:
            time.sleep(0.5)  # hey's connections established and busy
            answered = 0
            while hey.poll() is None:
                review = mover_review(f"new-{answered}")
                status, answer = review_on_new_connection(server, review)
                if hey.poll() is not None:  # this answer came after the saturation: it does not count
                    break
                assert status == 200, answer
                check_response(review, answer, mutating=True)
                answered += 1
        finally:
            result = finish_hey(hey, timeout=HEY_SECONDS + 30)
        assert result.failed == 0, result.summary
        assert answered >= NEW_CONNECTIONS, f"{answered} new connections answered during {HEY_SECONDS} s of hey"
