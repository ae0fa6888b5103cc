"""`python -m bench.instructions`: CPU instructions one review costs in-process, counted by callgrind.

Seconds drift with the machine (the same code measured a third faster on one host than on another, and the
stack's share of a review with it); an instruction count does not: the same code, inputs and interpreter give the
same count whatever else runs. A review here is what the server does between the socket and the response: decode,
the endpoint's rules, build and serialize the answer (bench/handler.py), on the benchmark's cluster and policy,
after three warm-up reviews. Each count is (101 reviews − 1 review) ÷ 100, so start-up cancels out. The garbage
collector is off while they run: whether one of its full collections (a walk over every object of the process, a
few million instructions) falls inside the 100 reviews depends on everything the process has allocated, and moved
the count of the same code by 10 %; what a review costs the collector in a server depends on the server's heap,
not on the review.

`make bench` and this command compare the counts with BASELINE, measured with this harness at the commit named
there, against each path's LIMITS (the command exits 1 when one is missed). `--save-baseline` rewrites the baseline;
the limits are ratios to the commit it names, so they change with it (say why in its commit).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.report import table, target
from rules.model import Json

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "bench" / "results" / "instructions-baseline.json"
PATHS = ("mover", "backup", "plain")
ENDPOINTS = ("mutate", "validate")
REVIEWS = 100
#: The most a review may cost, as a share of the baseline's count of it: the mover's and the backup's mutations at
#: half, their validations at 0.7, and the plain pod's reviews, which are near the floor of a review, no dearer.
LIMITS = {
    "mover /mutate": 0.5,
    "backup /mutate": 0.5,
    "mover /validate": 0.7,
    "backup /validate": 0.7,
    "plain /mutate": 1.0,
    "plain /validate": 1.0,
}
_TOTAL = re.compile(r"^summary:\s+(\d+)", re.M)


def reviews(path: str, endpoint: str, count: int) -> Json:
    """Review `count` times, in this process (what callgrind runs); the last answer, for the tests."""
    from bench import workload
    from bench.handler import answering, runtime_for
    from webhook.policy.file import load_policy_file

    policy, _ = load_policy_file(workload.POLICY)
    answer = answering(endpoint, runtime_for(workload.base_objects(), policy))
    body = workload.review_bodies()[path]
    gc.collect()
    gc.disable()  # see the module docstring
    try:
        for _ in range(3 + count):
            answered = answer(body)
    finally:
        gc.enable()
    return dict(json.loads(answered))


def _instructions(path: str, endpoint: str, count: int, tmp: Path) -> int:
    out = tmp / f"callgrind.{path}.{endpoint}.{count}"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "bench.instructions",
    ]
    command += ["--run", path, endpoint, str(count)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = _TOTAL.search(out.read_text())
    if found is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(found[1])


def measure() -> dict[str, int]:
    """Instructions per review, by `<path> /<endpoint>`."""
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="saw-instructions-") as tmp_dir:
        tmp = Path(tmp_dir)
        for path in PATHS:
            for endpoint in ENDPOINTS:
                one, many = (_instructions(path, endpoint, n, tmp) for n in (1, 1 + REVIEWS))
                counts[f"{path} /{endpoint}"] = (many - one) // REVIEWS
    return counts


def baseline() -> dict[str, Any]:
    return dict(json.loads(BASELINE.read_text()))


def targets(counts: dict[str, int], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Each counted review against the baseline's count of the same review, within the path's limit (a review the
    baseline lacks is not compared)."""
    out = []
    for name, count in counts.items():
        if before := base["counts"].get(name):
            what = f"instructions per review, {name}: {count:,} ÷ {base['commit'][:7]}'s {before:,}"
            out.append(target(what, count / before, LIMITS[name], unit="×"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--run", nargs=3, metavar=("PATH", "ENDPOINT", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--save-baseline", metavar="COMMIT", help="write the counts as the baseline of COMMIT")
    args = parser.parse_args(argv)
    if args.run:
        reviews(args.run[0], args.run[1], int(args.run[2]))
        return 0
    counts = measure()
    if args.save_baseline:
        BASELINE.write_text(json.dumps({"commit": args.save_baseline, "counts": counts}, indent=2) + "\n")
    counted = targets(counts, baseline())
    print(table(counted))
    return 0 if all(t["met"] for t in counted) else 1


if __name__ == "__main__":
    sys.exit(main())
