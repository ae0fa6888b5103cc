"""`python -m bench.audit`: does the audit inside `serve` slow admission? p99 of `/mutate` while 100,000 pods are
audited, against the p99 of the same run's requests while no audit runs.

One server (one worker, the default) on live state from the fake API, `--audit-interval` short enough that the
run sees several audits; hey sends mover reviews at a fixed rate and records every request's time (CSV). Each
request is classed by the server's own log: during an audit (between its start and end lines) or idle.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import statistics
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import servers, workload
from bench.report import header, save, step, table, target
from testkit.hey import hey_binary
from testkit.server import issue_certs

_LOG_TIME = re.compile(r"^\[(?P<at>[^\]]+)\] \[\d+\] \[INFO\] webhook\.audit\.loop: audit: (?P<what>.*)$")
#: webhook/audit/loop.py's line at the end of a run: "N objects, N findings, N storage pods stuck, in S s".
_FINISHED = re.compile(
    r"(?P<objects>\d+) objects, (?P<findings>\d+) findings, (?:\d+ storage pods stuck, )?in (?P<seconds>[\d.]+) s"
)
#: The most /mutate's p99 during audits may be, as a multiple of its p99 while none runs.
P99_LIMIT = 1.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit", description=__doc__)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load run")
    parser.add_argument("--interval", type=float, default=20.0, help="the server's --audit-interval")
    parser.add_argument("--rate", type=int, default=200, help="mover reviews per second")
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    with tempfile.TemporaryDirectory(prefix="saw-audit-") as tmp_dir:
        tmp = Path(tmp_dir)
        certs = tmp / "certs"
        issue_certs(certs)
        body = workload.review_file(tmp)
        step(f"audit under load, {args.pods:,} pods")
        objects = workload.base_objects() + workload.bulk_objects(args.pods)
        result = measure(tmp, certs, objects, body, seconds=args.seconds, interval=args.interval, rate=args.rate)
    result = header(**result, targets=targets(result))
    print(save(result, keep=args.keep))
    print(table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


def measure(
    tmp: Path, certs: Path, objects: list[Any], body: Path, *, seconds: float, interval: float, rate: int
) -> dict[str, Any]:
    extra = ("--audit-interval", f"{interval:g}")
    with servers.live_server(tmp / "live", certs, objects, workload.POLICY, "audit", workers=1, extra=extra) as srv:
        connections = 8
        command = [hey_binary(), "-z", f"{seconds:g}s", "-c", str(connections), "-q", str(max(1, rate // connections))]
        command += ["-m", "POST", "-T", "application/json", "-D", str(body), "-o", "csv", srv.url("mutate")]
        started = time.time()
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout
        audits = _audits(srv.server.log.read_text())
    requests = [
        (started + float(r["offset"]), float(r["response-time"]) * 1000, r["status-code"])
        for r in csv.DictReader(io.StringIO(out))
    ]
    during = [ms for at, ms, _ in requests if any(a + 0.5 <= at <= b - 0.5 for a, b, _ in audits)]
    idle = [ms for at, ms, _ in requests if not any(a - 1.5 <= at <= b + 1.5 for a, b, _ in audits)]
    errors = sum(1 for _, _, status in requests if status != "200")
    return {
        "pods": sum(1 for o in objects if o.get("kind") == "Pod"),
        "rate": rate,
        "seconds": seconds,
        "audits": [{"seconds": round(b - a, 1), "objects": n} for a, b, n in audits],
        "requests": len(requests),
        "errors": errors,
        "during_audit": _percentiles(during),
        "idle": _percentiles(idle),
        "p99_ratio": round(_p(during, 99) / _p(idle, 99), 2) if during and idle else None,
    }


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """/mutate's p99 during audits ÷ idle, within P99_LIMIT; a run that saw no audit, or no request outside one,
    has no ratio and misses it."""
    ratio = result["p99_ratio"]
    during, idle = result["during_audit"], result["idle"]
    what = (
        f"/mutate p99 during an in-server audit of {result['pods']:,} pods ÷ idle "
        f"({during['p99_ms']} vs {idle['p99_ms']} ms; audits run: {len(result['audits'])})"
    )
    return [target(what, float("inf") if ratio is None else ratio, P99_LIMIT, unit="×")]


def _audits(log: str) -> list[tuple[float, float, int]]:
    """(start, end, objects) of every audit the log reports (its lines carry the end time and the duration)."""
    found = []
    for line in log.splitlines():
        match = _LOG_TIME.match(line)
        done = _FINISHED.search(match["what"]) if match else None
        if match and done:
            end = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S %z").timestamp() + 0.5  # the log has seconds
            found.append((end - float(done["seconds"]), end, int(done["objects"])))
    return found


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else (values[0] if values else 0.0)


def _percentiles(values: list[float]) -> dict[str, Any]:
    return {"requests": len(values), "p50_ms": round(_p(values, 50), 2), "p99_ms": round(_p(values, 99), 2)}


if __name__ == "__main__":
    raise SystemExit(main())
