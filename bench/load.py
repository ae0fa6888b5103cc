"""Load generators: `hey` (Go's net/http client, which is what kube-apiserver uses) and `wrk` (C, Lua POST script).

Both keep connections alive, as the API server does. Neither verifies the server certificate; the benchmark's
readiness probe does, with the development CA.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from testkit.hey import finish_hey, start_hey

LUA = Path(__file__).with_name("post.lua")


@dataclass
class Run:
    tool: str
    url: str
    seconds: float
    connections: int
    rate: int | None  # requests/s in all, None for as fast as possible
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    timeouts: int
    detail: str = ""
    max_ms: float | None = None  # wrk only: hey reports no maximum
    over_1s: int | None = None  # wrk only: requests answered after more than a second

    def json(self) -> dict[str, object]:
        return asdict(self)


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SystemExit(f"{tool} is not installed: make bench installs it (apt-get install {tool})")
    return path


def hey(url: str, body: Path, *, seconds: float, connections: int, rate: int | None = None) -> Run:
    """`hey -z` with keep-alive; with `rate`, each connection is limited to rate/connections requests per second."""
    per_connection = max(1, round(rate / connections)) if rate else 0
    process = start_hey(url, body, seconds=seconds, concurrency=connections, keepalive=True, rate=per_connection)
    result = finish_hey(process, timeout=seconds + 60)
    return Run(
        tool="hey",
        url=url,
        seconds=seconds,
        connections=connections,
        rate=rate,
        requests=result.sent,
        rps=result.rps,
        p50_ms=result.p50_ms,
        p99_ms=result.p99_ms,
        errors=result.failed,
        timeouts=result.timeouts,
        detail="; ".join(text[:160] for text in list(result.errors)[:3]),
    )


def wrk(url: str, body: Path | None, *, seconds: float, connections: int, threads: int = 2) -> Run:
    """`wrk` POSTing `body` on every request; GET with `body` None."""
    command = [
        require("wrk"),
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        f"{max(1, round(seconds))}s",
        "--timeout",
        "10s",
    ]
    command += ["-s", str(LUA), url, *(("--", str(body)) if body is not None else ())]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    errors = sum(summary[k] for k in ("connect_errors", "read_errors", "write_errors", "status_errors"))
    return Run(
        tool="wrk",
        url=url,
        seconds=seconds,
        connections=connections,
        rate=None,
        requests=summary["requests"],
        rps=summary["requests"] / (summary["duration_us"] / 1e6),
        p50_ms=summary["p50_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        errors=errors + summary["timeouts"],
        timeouts=summary["timeouts"],
        max_ms=summary["max_us"] / 1000,
        over_1s=summary["over_1s"],
    )
