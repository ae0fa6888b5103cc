"""Fairness under saturation: kept-alive connections served in turn, and a new connection answered at once.

kube-apiserver keeps connections alive and opens new ones when its pool is busy; a review that waits past the
webhook's `timeoutSeconds` fails open. So while `wrk` saturates the server from kept-alive connections, a prober
in this process opens a new verified TLS connection every PROBE_INTERVAL, sends one review and times the
handshake and the answer together.

`python -m bench.saturation` starts a server on static state (CPUs split as in `python -m bench`) and prints the
result as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import load, servers, workload
from bench.report import percentile
from testkit.server import issue_certs

PROBE_INTERVAL = 0.05  # seconds between the starts of two new connections (longer when one takes longer)
PROBE_TIMEOUT = 10.0  # seconds: a new connection that takes longer counts as failed
WARM_UP = 0.5  # seconds of saturation before the first probe, and left after the last
# The targets: kube-apiserver's default timeoutSeconds is 10 s and ours is far lower; a review must not queue.
MAX_SLOW = 0  # requests over a second
MAX_P99_OVER_P50 = 10.0
MAX_NEW_CONNECTION_P99_MS = 100.0


def measure(
    url_base: str, body: Path, *, ca: Path, seconds: float, connections: int = 16, endpoint: str = "allow"
) -> dict[str, Any]:
    """wrk from `connections` kept-alive connections for `seconds`, and new connections probed meanwhile.

    `url_base` is the server's `https://host:port`; `ca` verifies its certificate for the probes (wrk does not
    verify). Returns wrk's figures under "saturated", the probes' under "new_connection", and the targets met.
    """
    url = f"{url_base}/{endpoint}"
    prober = _Prober(url, body.read_bytes(), ca)
    thread = threading.Thread(target=prober.run, args=(max(seconds - 2 * WARM_UP, 0.1),), daemon=True)
    start = threading.Timer(WARM_UP, thread.start)
    start.start()
    try:
        run = load.wrk(url, body, seconds=seconds, connections=connections)
    finally:
        start.cancel()
        prober.stop.set()
        if thread.is_alive():
            thread.join(PROBE_TIMEOUT + 1)
    saturated = {
        "rps": round(run.rps, 1),
        "p50_ms": run.p50_ms,
        "p99_ms": run.p99_ms,
        "max_ms": run.max_ms,
        "over_1s": run.over_1s,
        "errors": run.errors,
    }
    new = prober.summary()
    return {
        "endpoint": endpoint,
        "connections": connections,
        "seconds": seconds,
        "saturated": saturated,
        "new_connection": new,
        "targets": {
            "no_request_over_1s": run.over_1s == MAX_SLOW and run.errors == 0,
            "p99_within_10x_p50": run.p99_ms <= MAX_P99_OVER_P50 * run.p50_ms,
            "new_connection_p99_within_100ms": new["count"] > 0
            and new["failures"] == 0
            and new["p99_ms"] <= MAX_NEW_CONNECTION_P99_MS,
        },
    }


class _Prober:
    """New connections one after another, each verified by the CA and by name, each sending one review."""

    def __init__(self, url: str, body: bytes, ca: Path) -> None:
        parts = urlsplit(url)
        assert parts.hostname and parts.port, url
        self.host, self.port, self.path, self.body = parts.hostname, parts.port, parts.path, body
        self.context = ssl.create_default_context(cafile=str(ca))
        self.stop = threading.Event()
        self.latencies: list[float] = []  # seconds from connect to the whole answer read
        self.failures: list[str] = []

    def run(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop.is_set() and time.monotonic() < end:
            started = time.monotonic()
            try:
                self.latencies.append(self.probe())
            except (OSError, http.client.HTTPException, AssertionError) as exc:
                self.failures.append(repr(exc))
            self.stop.wait(max(0.0, started + PROBE_INTERVAL - time.monotonic()))

    def probe(self) -> float:
        started = time.perf_counter()
        with (
            socket.create_connection((self.host, self.port), timeout=PROBE_TIMEOUT) as raw,
            self.context.wrap_socket(raw, server_hostname=self.host) as tls,
        ):
            head = (
                f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(self.body)}\r\nConnection: close\r\n\r\n"
            )
            tls.sendall(head.encode("ascii") + self.body)
            response = http.client.HTTPResponse(tls)
            response.begin()
            answer = response.read()
        assert response.status == 200, (response.status, answer[:200])
        assert json.loads(answer)["kind"] == "AdmissionReview", answer[:200]
        return time.perf_counter() - started

    def summary(self) -> dict[str, Any]:
        ms = sorted(seconds * 1000 for seconds in self.latencies)
        return {
            "count": len(ms),
            "failures": len(self.failures),
            "p50_ms": round(statistics.median(ms), 1) if ms else None,
            "p99_ms": round(percentile(ms, 99), 1) if ms else None,
            "max_ms": round(ms[-1], 1) if ms else None,
            "failure_detail": self.failures[:3],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.saturation", description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the saturating run")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers (the server's default: 1)")
    parser.add_argument("--connections", type=int, default=16, help="wrk's kept-alive connections")
    parser.add_argument("--endpoint", default="allow", choices=("allow", "mutate", "validate"))
    parser.add_argument("--review", default="mover", choices=sorted(workload.PATHS), help="the review posted")
    args = parser.parse_args(argv)
    load.require("wrk")
    servers.off_server_cpus()
    with tempfile.TemporaryDirectory(prefix="saw-saturation-") as tmp_dir:
        tmp = Path(tmp_dir)
        body = workload.review_file(tmp, args.review)
        certs = tmp / "certs"
        ca = issue_certs(certs)
        cluster = workload.EXAMPLES / "cluster.yaml"
        with servers.static_server(tmp / "static", certs, cluster, workload.POLICY, workers=args.workers) as srv:
            result = measure(
                srv.server.url,
                body,
                ca=ca,
                seconds=args.seconds,
                connections=args.connections,
                endpoint=args.endpoint,
            )
    result = {"workers": args.workers, "review": args.review, **result}
    print(json.dumps(result, indent=2))
    return 0 if all(result["targets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
