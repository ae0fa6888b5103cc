"""SIGTERM to the gunicorn master: requests in flight are answered, the listener closes, idle connections don't wait.

This is what a rolling update or a node drain does to a replica (after the chart's preStop sleep): kube-apiserver
must get an answer to every review it already sent, and must find the port closed for new ones, so it dials the
other replica. A connection the kernel accepted is answered; a client may only find the port closed.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.fakeapi import Request, running_fake_api
from testkit.hey import HeyResult, finish_hey, start_hey
from testkit.rawtls import port_of
from testkit.server import Server, issue_certs, running_server
from tests.e2e.test_server import mover_review
from tests.hardening.procs import children, wait_for_workers
from tests.support import EXAMPLES
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e

GRACEFUL = 10  # seconds: --graceful-timeout of these servers
HOLD_AFTER_SIGTERM = 1.0  # seconds the lookups of the reviews in flight still take after SIGTERM
IN_FLIGHT = 24


def refuses_connections(port: int, within: float) -> bool:
    """True once a TCP connect to the port is refused (the listening socket is closed), polling up to `within`.

    From SIGTERM until the listening socket closes, the server completes no handshake: a connect then goes
    unanswered, and the next attempt finds the port closed.
    """
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except ConnectionRefusedError:
            return True
        except TimeoutError:
            continue
        time.sleep(0.05)
    return False


class LookupGate:
    """Holds the fake API's answers to single-PVC GETs (the lookup a review makes on a cache miss) until opened."""

    def __init__(self) -> None:
        self.opened = threading.Event()

    def __call__(self, req: Request) -> bool:  # the fake API's `delay` predicate, called before it answers
        if req.method == "GET" and not req.watch and "/persistentvolumeclaims/" in req.path:
            self.opened.wait(30)
        return False


def test_sigterm_answers_every_request_in_flight_then_exits(tmp_path: Path) -> None:
    # An empty cluster: the mover's claim is a cache miss, so each review waits for one delayed GET.
    with running_fake_api() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = ("--kubeconfig", str(kubeconfig), "--lookup-timeout", "4", "--graceful-timeout", str(GRACEFUL))
        with running_server(tmp_path, *args, workers=2) as server:
            gate = LookupGate()
            api.delay(0, gate)

            def one(i: int) -> tuple[dict[str, Any], requests.Response]:
                review = mover_review(f"inflight-{i}")
                with server.session() as session:  # one connection each, spread over both workers
                    return review, session.post(server.url + "/mutate", json=review, timeout=30)

            with ThreadPoolExecutor(IN_FLIGHT) as pool:
                futures = [pool.submit(one, i) for i in range(IN_FLIGHT)]
                deadline = time.monotonic() + 10
                while api.count("GET", "PersistentVolumeClaim", name=True) < IN_FLIGHT:
                    assert time.monotonic() < deadline, "the reviews never reached their lookup"
                    time.sleep(0.01)
                sent = time.monotonic()
                server.process.send_signal(signal.SIGTERM)  # every review is now waiting for the API
                assert refuses_connections(port_of(server), within=HOLD_AFTER_SIGTERM), "the listener is open"
                time.sleep(max(0.0, sent + HOLD_AFTER_SIGTERM - time.monotonic()))
                assert not any(future.done() for future in futures)
                gate.opened.set()
                answers = [future.result() for future in futures]
            server.process.wait(timeout=GRACEFUL + 5)
            took = time.monotonic() - sent

    assert len(answers) == IN_FLIGHT
    for review, answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.headers["Connection"] == "close"  # kube-apiserver won't reuse a connection to this replica
        check_response(review, answer.json(), mutating=True)
    assert server.process.returncode == 0
    assert took < GRACEFUL, f"shutdown took {took:.2f} s"


def test_idle_keepalive_connections_do_not_hold_shutdown(tmp_path: Path) -> None:
    """kube-apiserver parks idle connections; gunicorn's own gevent worker waited the whole graceful timeout."""
    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), "--graceful-timeout", str(GRACEFUL)) as (
        server
    ):
        context = ssl.create_default_context(cafile=str(server.ca))
        idle = []
        for _ in range(16):
            conn = http.client.HTTPSConnection("localhost", port_of(server), context=context, timeout=GRACEFUL + 5)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, b"ok\n")
            assert response.getheader("Connection") != "close"
            idle.append(conn)
        closed: list[bytes] = []

        def wait_for_close(conn: http.client.HTTPSConnection) -> None:
            assert conn.sock is not None
            closed.append(conn.sock.recv(1))  # b"" once the server closes the idle connection

        readers = [threading.Thread(target=wait_for_close, args=(conn,)) for conn in idle]
        for reader in readers:
            reader.start()
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=GRACEFUL + 5)
        took = time.monotonic() - sent
        for reader in readers:
            reader.join(5)
        for conn in idle:
            conn.close()

    assert server.process.returncode == 0
    assert closed == [b""] * len(idle)
    assert took < 2.0, f"shutdown with idle keep-alive connections took {took:.2f} s (graceful timeout {GRACEFUL} s)"


def post_review(tls: ssl.SSLSocket, uid: str) -> str:
    """POST a review on a connection the caller opened; "ok" when it is answered right and says `Connection: close`,
    otherwise what went wrong."""
    conn = http.client.HTTPSConnection("localhost", timeout=GRACEFUL)
    conn.sock = tls
    review = mover_review(uid)
    try:
        conn.request("POST", "/mutate", body=json.dumps(review), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = json.loads(response.read())
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    if (response.status, response.getheader("Connection")) != (200, "close"):
        return f"HTTP {response.status}, Connection: {response.getheader('Connection')}"
    check_response(review, answer, mutating=True)
    return "ok"


def test_connections_opened_before_sigterm_are_answered_after_it(tmp_path: Path) -> None:
    """A client that connected just before SIGTERM sends its first request after it: its connection is not idle,
    and serving it must not need the listening socket, which is closed by then."""
    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), "--graceful-timeout", str(GRACEFUL)) as (
        server
    ):
        port = port_of(server)
        context = ssl.create_default_context(cafile=str(server.ca))
        handshaking = socket.create_connection(("127.0.0.1", port), timeout=GRACEFUL)  # the server awaits its hello
        connected = context.wrap_socket(
            socket.create_connection(("127.0.0.1", port), timeout=GRACEFUL), server_hostname="localhost"
        )  # TLS established, no request yet
        server.process.send_signal(signal.SIGTERM)
        assert refuses_connections(port, within=5), "the listener is open"
        answers = {
            "handshake after SIGTERM": post_review(context.wrap_socket(handshaking, server_hostname="localhost"), "h"),
            "first request after SIGTERM": post_review(connected, "r"),
        }
        server.process.wait(timeout=GRACEFUL + 5)

    assert answers == dict.fromkeys(answers, "ok")
    assert server.process.returncode == 0
    assert "Traceback" not in server.log.read_text()


RUNS = 10
LOAD_SECONDS = 2.5  # hey's run; SIGTERM comes after the first third of it
REFUSED = "connection refused"  # by connect: the port is closed


@dataclass
class Run:
    answered: int
    failures: dict[str, int]  # hey errors (but a refused connect) by kind, and non-200 answers
    refused: int
    log_errors: list[str]  # tracebacks and ERROR lines of the server log
    exit_code: int | None

    @property
    def clean(self) -> bool:
        return self.answered > 0 and not self.failures and not self.log_errors and self.exit_code == 0


def outcome(results: list[HeyResult], server: Server) -> Run:
    failures: dict[str, int] = {}
    refused = answered = 0
    for result in results:
        answered += result.statuses.get(200, 0)
        failures.update({f"HTTP {code}": n for code, n in result.statuses.items() if code != 200})
        for error, n in result.errors.items():
            kind = error.rsplit(": ", 1)[-1]  # without the request and the client's port
            if kind == REFUSED:
                refused += n
            else:
                failures[kind] = failures.get(kind, 0) + n
    log = server.log.read_text().splitlines()
    log_errors = [line for line in log if "Traceback" in line or "[ERROR]" in line]
    return Run(answered, failures, refused, log_errors, server.process.returncode)


@pytest.mark.timeout(300)
def test_sigterm_under_load_resets_no_connection(tmp_path: Path) -> None:
    """Kubernetes sends SIGTERM to every old replica in a rolling update, whatever its load. Under hey (kept-alive
    clients and a handshake per request), no request may fail but by finding the port closed: none reset in the
    listening socket's queue, none closed before its first request, none dropped for a closed listener."""
    certs = tmp_path / "certs"
    issue_certs(certs)
    body = tmp_path / "review.json"
    body.write_text(json.dumps(mover_review("sigterm-under-load")))
    runs = []
    for run in range(RUNS):
        directory = tmp_path / f"run-{run}"
        directory.mkdir()
        args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--graceful-timeout", str(GRACEFUL))
        with running_server(directory, *args, certs=certs) as server:
            url = server.url + "/mutate"
            kept_alive = start_hey(url, body, seconds=LOAD_SECONDS, concurrency=16, keepalive=True)
            handshaking = start_hey(url, body, seconds=LOAD_SECONDS, concurrency=4, keepalive=False)
            time.sleep(LOAD_SECONDS / 3)
            assert kept_alive.poll() is None and handshaking.poll() is None, "the load ended before SIGTERM"
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(timeout=GRACEFUL + 5)
            runs.append(outcome([finish_hey(kept_alive), finish_hey(handshaking)], server))

    assert all(run.clean for run in runs), "\n".join(map(str, runs))


def test_a_worker_stopped_alone_leaves_its_siblings_accepting(tmp_path: Path) -> None:
    """gunicorn stops a single worker to replace it (max requests, a reload, fewer workers). Its siblings share the
    listening socket: it must go on completing handshakes, and no client may see a failure."""
    body = tmp_path / "review.json"
    body.write_text(json.dumps(mover_review("worker-stopped-alone")))
    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), workers=2) as server:
        workers = wait_for_workers(server.process.pid, 2)
        victim = min(workers)
        url = server.url + "/mutate"
        kept_alive = start_hey(url, body, seconds=LOAD_SECONDS, concurrency=16, keepalive=True)
        handshaking = start_hey(url, body, seconds=LOAD_SECONDS, concurrency=4, keepalive=False)
        time.sleep(LOAD_SECONDS / 3)
        os.kill(victim, signal.SIGTERM)
        deadline = time.monotonic() + GRACEFUL
        while victim in children(server.process.pid):
            assert time.monotonic() < deadline, "the worker did not exit"
            time.sleep(0.05)
        with server.session() as session:  # a new connection once the worker has gone
            assert session.get(server.url + "/healthz", timeout=5).status_code == 200
        run = outcome([finish_hey(kept_alive), finish_hey(handshaking)], server)

    assert run.answered > 0 and not run.failures and run.refused == 0, run
    assert not run.log_errors, run


@pytest.mark.parametrize(
    ("stop", "live"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGTERM, True)],
    ids=["SIGTERM", "SIGINT", "SIGTERM-live"],
)
def test_a_stopped_server_leaves_nothing_in_tmpdir(tmp_path: Path, stop: signal.Signals, live: bool) -> None:
    """The metrics directory (and in live mode the replica's policy directory) that `serve` creates in $TMPDIR
    goes when the server stops; the workers, which exit through the same code, leave it to the master."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir), "PROMETHEUS_MULTIPROC_DIR": ""}  # empty: `serve` creates its own
    with running_fake_api() as api:
        if live:
            args: tuple[str, ...] = ("--kubeconfig", str(api.write_kubeconfig(tmp_path / "kubeconfig")))
        else:
            args = ("--cluster", str(EXAMPLES / "cluster.yaml"))
        with running_server(tmp_path, *args, workers=2, env=env) as server:
            created = sorted(p.name.rsplit("-", 1)[0] for p in tmpdir.iterdir())
            expected = ["storage-affinity-metrics"] + (["storage-affinity-replica"] if live else [])
            assert created == expected
            with server.session() as session:  # a review writes metric files into it
                assert session.post(server.url + "/mutate", json=mover_review(), timeout=10).status_code == 200
            server.process.send_signal(stop)
            assert server.process.wait(timeout=GRACEFUL) == 0
    assert list(tmpdir.iterdir()) == []
