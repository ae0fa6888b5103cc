"""Start the real server as `storage-affinity-webhook serve` does: gunicorn, gevent workers, TLS."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from testkit import ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def issue_certs(out: Path, *options: str) -> Path:
    """Certificates from the project's own `certs` command (and its `options`); returns the CA bundle path."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "certs",
            "--service",
            "saw",
            "--namespace",
            "saw-system",
            "--out",
            str(out),
            *options,
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    return out / "ca.crt"


@dataclass
class Server:
    url: str
    ca: Path
    process: subprocess.Popen[bytes]
    metrics_dir: Path
    log: Path
    ready_after: float = 0.0  # seconds from process start to the first 200 from /readyz

    def session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # REQUESTS_CA_BUNDLE would otherwise override `verify`
        session.verify = str(self.ca)
        return session

    def samples(self, metric: str, label: str = "") -> dict[str, float]:
        """One scrape of /metrics: each sample of `metric` by the value of its `label` ("" for a metric without
        labels)."""
        from prometheus_client.parser import text_string_to_metric_families

        with self.session() as session:
            text = session.get(self.url + "/metrics", timeout=10).text
        return {
            sample.labels.get(label, ""): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == metric
        }

    def until_samples(self, metric: str, label: str, expected: dict[str, float], deadline: float = 30.0) -> None:
        """Scrape until `metric` by `label` is `expected`, or fail after `deadline` seconds saying what it was."""
        end = time.monotonic() + deadline
        while (found := self.samples(metric, label)) != expected:
            assert time.monotonic() < end, f"{metric}: {found}, expected {expected}"
            time.sleep(0.25)


#: How long a server may take to answer `/readyz`: a wait, not a measure (`make bench` measures the start). Beside
#: other work on every core, importing and forking the workers can take far longer than 30 s; under pytest-timeout's
#: 120 s, so that the server's log is what a test that waits too long reports.
READY_TIMEOUT_S = 90.0


@contextmanager
def running_server(
    tmp: Path,
    *args: str,
    workers: int = 2,
    env: dict[str, str] | None = None,
    certs: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
    cpus: set[int] | None = None,
    wait_for: str = "/readyz",
    program: str = "webhook",
) -> Iterator[Server]:
    """The server on a free port; with `certs`, serve the files already there (a test may rotate them).

    `program` is the module run as `python -m program serve ...`: a benchmark serves its own WSGI app through
    the same gunicorn application, started the same way.

    It is handed over once `wait_for` answers 200: `/healthz` for a server expected not to become ready.

    `cpus` pins the server (master and workers) to those CPUs: the benchmark keeps its load generators off them.
    """
    if certs is None:
        certs = tmp / "certs"
        ca = issue_certs(certs)
    else:
        ca = certs / "ca.crt"
    port = free_port()
    metrics_dir = tmp / "metrics"
    metrics_dir.mkdir()
    log = tmp / "server.log"
    command = [
        sys.executable,
        "-m",
        program,
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
        "--cert",
        str(certs / "tls.crt"),
        "--key",
        str(certs / "tls.key"),
        "--workers",
        str(workers),
        "--namespace",
        "saw-system",
        *args,
    ]
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), **(env or {})}
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT)
    if cpus:  # at once: the master is still importing, its workers (which inherit it) are forked much later
        os.sched_setaffinity(process.pid, cpus)
    # The certificate's SANs include localhost: verification is real, by name.
    server = Server(f"https://localhost:{port}", ca, process, metrics_dir, log)
    try:
        _wait_ready(server, ready_timeout, wait_for)
        server.ready_after = time.monotonic() - started
        yield server
    finally:
        process.terminate()  # tests close their sessions first: kept-alive connections would hold shutdown
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_ready(server: Server, deadline: float = READY_TIMEOUT_S, path: str = "/readyz") -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited: {server.log.read_text()[-3000:]}")
        try:
            if requests.get(server.url + path, verify=str(server.ca), timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"server not ready: {server.log.read_text()[-3000:]}")
