"""Connection floods against the real server: thousands of connections that never send a byte and hundreds of TLS
handshakes stopped after their hello, held open, cannot keep a new connection's review out. When a worker runs
short of connections (`worker_connections`, 1000), each new one closes the idlest first.

The read timeout is set far beyond the test's length, so what makes room is the eviction, not the timeout
(tests/hardening/test_framing.py covers the timeout). The time to answer is recorded (`answer_s`); the target is
1 s, the assertion only that the review is answered at all within the client's timeout.
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit.fakeapi import running_fake_api
from testkit.rawtls import closed_by_peer, open_flood, raise_file_limit
from testkit.server import running_server
from tests.e2e.test_server import mover_review
from tests.e2e.test_shutdown import LookupGate
from tests.hardening.answers import RecordProperty
from tests.hardening.hostile import encode, mover, review
from tests.hardening.procs import wait_for_workers
from tests.support import EXAMPLES
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e

IDLE_TCP = 2000
STALLED_TLS = 500
WORKER_CONNECTIONS = 1000  # webhook.settings.Settings.worker_connections
CLIENT_TIMEOUT = 10.0


@pytest.fixture(autouse=True)
def enough_descriptors() -> Iterator[None]:
    """This process holds every flood connection: raise its soft descriptor limit as far as needed."""
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if not raise_file_limit(IDLE_TCP + STALLED_TLS):
            pytest.skip(f"the descriptor limit ({limits[1]}) is below what this flood holds")
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)


@pytest.mark.parametrize("workers", [1, 2], ids=["default-1-worker", "2-workers"])
def test_a_new_connection_is_answered_next_to_a_connection_flood(
    tmp_path: Path, workers: int, record_property: RecordProperty
) -> None:
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--read-timeout", "600")
    with running_server(tmp_path, *args, workers=workers) as server:
        wait_for_workers(server.process.pid, workers)
        flood = open_flood(server, IDLE_TCP, STALLED_TLS, timeout=CLIENT_TIMEOUT)
        try:
            sent = review(mover())
            with server.session() as session:
                started = time.perf_counter()
                answer = session.post(f"{server.url}/mutate", data=encode(sent), timeout=CLIENT_TIMEOUT)
                elapsed = time.perf_counter() - started
            record_property("answer_s", round(elapsed, 3))
            assert answer.status_code == 200, answer.text
            check_response(sent, answer.json(), mutating=True)

            closed = [closed_by_peer(sock) for sock in flood]
            record_property("flood_closed", sum(closed))
            # The oldest were closed to make room, the newest are still held: idlest first.
            assert closed[0] and not closed[-1]
            assert sum(closed) >= len(flood) - workers * WORKER_CONNECTIONS
            if workers == 1:  # one worker holds them all: exactly the oldest were closed
                assert closed.index(False) == sum(closed), "a newer connection was closed before an older one"
        finally:
            for sock in flood:
                sock.close()
        assert "Traceback" not in server.log.read_text()


def test_a_flood_never_closes_a_connection_whose_review_is_in_flight(tmp_path: Path) -> None:
    """Reviews waiting for their cluster lookup hold the oldest connections of the only worker while more
    connections arrive than it can hold: the idle ones are closed, the reviews are answered."""
    in_flight = 8
    with running_fake_api() as api:  # an empty cluster: each mover's claim is a cache miss, looked up once
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = ("--kubeconfig", str(kubeconfig), "--lookup-timeout", "4", "--read-timeout", "600")
        with running_server(tmp_path, *args, workers=1) as server:
            gate = LookupGate()
            api.delay(0, gate)

            def one(i: int) -> tuple[dict[str, object], int, dict[str, object]]:
                sent = mover_review(f"in-flight-{i}")
                with server.session() as session:
                    answer = session.post(server.url + "/mutate", json=sent, timeout=30)
                    return sent, answer.status_code, answer.json()

            flood: list[socket.socket] = []
            with ThreadPoolExecutor(in_flight) as pool:
                try:
                    futures = [pool.submit(one, i) for i in range(in_flight)]
                    deadline = time.monotonic() + 10
                    while api.count("GET", "PersistentVolumeClaim", name=True) < in_flight:
                        assert time.monotonic() < deadline, "the reviews never reached their lookup"
                        time.sleep(0.01)
                    flood = open_flood(server, WORKER_CONNECTIONS + 200, timeout=CLIENT_TIMEOUT)
                    assert closed_by_peer(flood[0]), "no idle connection was closed to make room"
                    assert not any(future.done() for future in futures)
                    gate.opened.set()
                    answers = [future.result() for future in futures]
                finally:
                    gate.opened.set()
                    for sock in flood:
                        sock.close()
    for sent, status, answer in answers:
        assert status == 200, answer
        check_response(sent, answer, mutating=True)
