"""The machine a run was on, the targets checked, and the table printed and pasted into the README."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")


def step(what: str) -> None:
    """Progress on stderr; the tables go to stdout."""
    print(f"== {what}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory = next(
        line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(int(memory) / 1024 / 1024, 1),
        "python": platform.python_version(),
        "packages": {name: version(name) for name in ("gunicorn", "gevent", "flask", "orjson", "kubernetes")},
        "tools": {name: _debian_version(name) for name in ("hey", "wrk")},
        "load_average_at_start": os.getloadavg(),
    }


def header(**fields: Any) -> dict[str, Any]:
    """What every run's result starts with: the machine, the start time (UTC), then the run's own `fields`."""
    return {"machine": machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **fields}


def _debian_version(package: str) -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def percentile(ordered: list[float], p: float) -> float:
    """The nearest-rank percentile of sorted samples: with few samples p99 is the maximum, never an interpolation
    below it."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def target(name: str, value: float, limit: float, *, at_most: bool = True, unit: str = "") -> dict[str, Any]:
    ok = value <= limit if at_most else value >= limit
    return {"target": name, "value": round(value, 3), "limit": limit, "at_most": at_most, "unit": unit, "met": ok}


def table(targets: list[dict[str, Any]]) -> str:
    rows = ["| Target | Measured | Limit | Met |", "|---|---:|---:|:---:|"]
    for t in targets:
        sign = "≤" if t["at_most"] else "≥"
        met = "yes" if t["met"] else "**no**"
        rows.append(f"| {t['target']} | {t['value']}{t['unit']} | {sign} {t['limit']}{t['unit']} | {met} |")
    return "\n".join(rows)


def save(result: dict[str, Any], *, keep: str | None, latest: str | None = None) -> str:
    """Write a run to bench/results: as `latest` (git-ignored) when given, and as `keep` (a run to report)."""
    text = json.dumps(result, indent=2) + "\n"
    RESULTS.mkdir(exist_ok=True)
    for name in (latest, keep):
        if name:
            (RESULTS / f"{name}.json").write_text(text)
    return text
