"""Load generators: `hey` (Go's net/http client, which is what kube-apiserver uses) and `wrk` (C, Lua POST script).

Both keep connections alive, as the API server does. Neither verifies the server certificate; the benchmark's
readiness probe does, with the development CA.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

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

    def json(self) -> dict[str, object]:
        return asdict(self)


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SystemExit(f"{tool} is not installed: make bench installs it (apt-get install {tool})")
    return path


def hey(url: str, body: Path, *, seconds: float, connections: int, rate: int | None = None) -> Run:
    """`hey -z`; with `rate`, each connection is limited to rate/connections requests per second."""
    command = [require("hey"), "-z", f"{seconds}s", "-c", str(connections), "-m", "POST", "-T", "application/json"]
    command += ["-D", str(body), "-t", "10"]
    if rate:
        command += ["-q", str(max(1, round(rate / connections)))]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True, timeout=seconds + 60).stdout
    return parse_hey(out, url, seconds, connections, rate)


def parse_hey(out: str, url: str, seconds: float, connections: int, rate: int | None) -> Run:
    def number(pattern: str) -> float:
        """NaN when hey omits it: with fewer than 100 answers it prints its 99th percentile as `0% in 0.0000`."""
        found = re.search(pattern, out)
        return float(found.group(1)) if found else math.nan

    statuses = {int(code): int(n) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)}
    error_lines = (
        re.findall(r"^\s+\[(\d+)\]\s+(.+)$", out.split("Error distribution:")[1], re.M)
        if ("Error distribution:" in out)
        else []
    )
    transport_errors = sum(int(n) for n, _ in error_lines)
    timeouts = sum(int(n) for n, text in error_lines if "timeout" in text.lower() or "deadline" in text.lower())
    bad_status = sum(n for code, n in statuses.items() if code != 200)
    return Run(
        tool="hey",
        url=url,
        seconds=seconds,
        connections=connections,
        rate=rate,
        requests=sum(statuses.values()) + transport_errors,
        rps=number(r"Requests/sec:\s+([\d.]+)"),
        p50_ms=number(r"\s50% in ([\d.]+) secs") * 1000,
        p99_ms=number(r"\s99% in ([\d.]+) secs") * 1000,
        errors=transport_errors + bad_status,
        timeouts=timeouts,
        detail="; ".join(text.strip()[:160] for _, text in error_lines[:3]),
    )


def wrk(url: str, body: Path, *, seconds: float, connections: int, threads: int = 2) -> Run:
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
    command += ["-s", str(LUA), url, "--", str(body)]
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
    )
