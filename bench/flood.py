"""`python -m bench.flood`: how long a new connection's review takes while a connection flood is held open.

The flood: 2,000 TCP connections that never send a byte and 500 TLS handshakes stopped after their ClientHello,
held for the whole run. With one worker (the default) and with two, each holding `worker_connections` (1,000),
the flood exceeds what the server can hold, so each new connection closes the idlest one (webhook/serving/worker.py).
For each worker count it takes the time of SAMPLES reviews, each on a new verified TLS connection (handshake
included), first without the flood and then with it. The target is 1 s at most; tests/hardening/
test_connection_flood.py asserts that the review is answered at all and which connections were closed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import header, percentile, save, step, table, target
from testkit.rawtls import closed_by_peer, open_flood, raise_file_limit
from testkit.server import Server, running_server

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
REVIEW = ROOT / "examples" / "admissionreview-mover.json"
IDLE_TCP = 2000
STALLED_TLS = 500
SAMPLES = 20
TARGET = 1.0  # seconds


def _answer_times(server: Server, body: bytes, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        with server.session() as session:  # a new connection each: accept, TLS handshake, request
            started = time.perf_counter()
            answer = session.post(f"{server.url}/mutate", data=body, timeout=30)
            times.append(time.perf_counter() - started)
        if answer.status_code != 200:
            raise RuntimeError(f"review answered {answer.status_code}: {answer.text[:200]}")
    return times


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_s": round(statistics.median(ordered), 4),
        "p95_s": round(percentile(ordered, 95), 4),
        "max_s": round(ordered[-1], 4),
    }


def run(workers: int, samples: int, idle: int, stalled: int, tmp: Path) -> dict[str, Any]:
    body = REVIEW.read_bytes()
    args = ("--cluster", str(CLUSTER), "--read-timeout", "600")  # eviction makes room here, not the timeout
    with running_server(tmp, *args, workers=workers) as server:
        quiet = _answer_times(server, body, samples)
        held = open_flood(server, idle, stalled, timeout=30)
        try:
            flooded = _answer_times(server, body, samples)
            still_open = sum(1 for sock in held if not closed_by_peer(sock))
        finally:
            for sock in held:
                sock.close()
    return {
        "workers": workers,
        "without_flood": _summary(quiet),
        "with_flood": _summary(flooded),
        "flood_connections": idle + stalled,
        "flood_still_open": still_open,
    }


def targets(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    worst = max(r["with_flood"]["max_s"] for r in runs)
    return [
        target(
            f"flood: slowest new connection's review ({' and '.join(str(r['workers']) for r in runs)} workers)",
            worst,
            TARGET,
            unit=" s",
        )
    ]


def runs_table(runs: list[dict[str, Any]]) -> str:
    """Each worker count's review times without and with the flood, and how much of the flood was still open."""
    lines = [
        "| Flood, workers | quiet median s | flood median s | flood max s | flood still open |",
        "|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        q, f = r["without_flood"], r["with_flood"]
        lines.append(
            f"| {r['workers']} | {q['median_s']} | {f['median_s']} | {f['max_s']} | "
            f"{r['flood_still_open']}/{r['flood_connections']} |"
        )
    return "\n".join(lines)


def runs(samples: int, idle: int, stalled: int, tmp: Path) -> list[dict[str, Any]]:
    """`run` with one worker, then two: the flood's measurement, as `make bench` and this command take it."""
    raise_file_limit(idle + stalled)
    done = []
    for workers in (1, 2):
        step(f"{workers} worker(s): {samples} new connections, then {idle} idle + {stalled} stalled")
        done.append(run(workers, samples, idle, stalled, tmp / str(workers)))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flood", description=__doc__)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--idle", type=int, default=IDLE_TCP, help="TCP connections that never send a byte")
    parser.add_argument("--stalled", type=int, default=STALLED_TLS, help="TLS handshakes stopped after the hello")
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json (a run you report)")
    args = parser.parse_args(argv)
    result = header(runs=[])
    with tempfile.TemporaryDirectory(prefix="saw-flood-") as tmp_dir:
        result["runs"] = runs(args.samples, args.idle, args.stalled, Path(tmp_dir))
    result["targets"] = targets(result["runs"])
    save(result, keep=args.keep, latest="flood-latest")
    print(table(result["targets"]) + "\n\n" + runs_table(result["runs"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
