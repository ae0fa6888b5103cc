"""A worker SIGKILLed under steady load: gunicorn replaces it, and only its own in-flight connections fail.

Each client thread keeps one kept-alive, verified connection, which gunicorn hands to one worker for its life. When
that worker dies, the request in flight on it (or the next one sent on it) fails with a connection error — what
kube-apiserver would see as a call error, handled by its timeout and the webhook's failurePolicy — and the client's
next request opens a new connection to a live worker. Requests on the other worker's connections never fail.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from testkit.server import Server, running_server
from tests.hardening.answers import RecordProperty
from tests.hardening.hostile import encode, mover, review
from tests.hardening.procs import children, client_connections, wait_for_workers
from tests.support import EXAMPLES
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e

CLIENTS = 6


def test_killed_worker_is_replaced_and_only_its_connections_fail(
    tmp_path: Path, record_property: RecordProperty
) -> None:
    sent = review(mover())
    body = encode(sent)
    outcomes: Counter[str] = Counter()
    failures_per_client: Counter[int] = Counter()
    after_replacement: Counter[str] = Counter()
    replaced = threading.Event()
    stop = threading.Event()
    lock = threading.Lock()

    def client(server: Server, index: int) -> None:
        with server.session() as session:
            while not stop.is_set():
                try:
                    answer = session.post(f"{server.url}/mutate", data=body, timeout=10)
                except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
                    outcome = "connection error"  # the connection died under the request
                    failures_per_client[index] += 1
                except Exception as exc:  # counted; the assertions below reject it
                    outcome = f"{type(exc).__name__}: {exc}"
                else:
                    try:
                        check_response(sent, answer.json(), mutating=True)
                        outcome = "ok" if answer.status_code == 200 else f"http {answer.status_code}"
                    except Exception as exc:
                        outcome = f"bad answer {answer.status_code}: {type(exc).__name__}: {exc}"
                with lock:
                    outcomes[outcome] += 1
                    if replaced.is_set():
                        after_replacement[outcome] += 1

    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), workers=2) as server:
        master = server.process.pid
        before = wait_for_workers(master, 2)
        threads = [threading.Thread(target=client, args=(server, i)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        victim = min(before)
        held = client_connections(victim, urlsplit(server.url).port or 443)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not ((after := children(master)) - before and len(after) == 2):
            assert time.monotonic() < deadline, f"no replacement for worker {victim}: {after}"
            time.sleep(0.05)
        replaced.set()
        time.sleep(1.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        assert victim not in after and before - {victim} <= after, "the other worker must live on"
        with server.session() as session:
            assert session.get(server.url + "/readyz", timeout=10).status_code == 200

    record_property("requests", sum(outcomes.values()))
    record_property("connection_errors", outcomes["connection error"])
    record_property("victim_connections", held)
    assert set(outcomes) <= {"ok", "connection error"}, outcomes  # never a wrong answer or an HTTP error
    assert outcomes["connection error"] <= held, (outcomes, held)  # only the killed worker's connections
    assert all(count == 1 for count in failures_per_client.values()), failures_per_client
    assert after_replacement["ok"] > 0 and after_replacement["connection error"] == 0, after_replacement
