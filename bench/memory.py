"""`python -m bench.memory`: a worker's memory under a stream of distinct large reviews, each within the budget.

What a worker remembers across reviews (memos of node questions, load-affinity terms, node-agent splits) must not
keep what a review brought: a structural key made of a pod's own strings, kept as itself, held them for as long as
its entry lived. Here a real server with one worker (the chart's default) serves a static state of 1,000 nodes and
receives `--reviews` pods, each with 1,000 terms of 8 requirements whose label keys are long and new to each pod
(8,000 requirements, about 2.8 MB: within every limit of rules/budget.py), on /mutate and /validate. The worker's
resident memory (VmRSS) is read before and after; its growth must stay under 100 MB (the chart's limit is 512 Mi).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import servers, workload
from bench.report import header, save, step, table, target
from rules.model import Json
from testkit import hostile
from testkit.server import Server, issue_certs

NODES = 1_000
REVIEWS = 200
TERMS = 1_000
REQUIREMENTS_PER_TERM = 8
GROWTH_MB = 100


def large_pod(i: int) -> Json:
    """A pod of 8,000 requirements, none narrowable by the label index, whose every label key (a 253-character
    prefix and a 63-character name, the longest the API takes) is new to review `i`."""
    prefix = (f"r{i:05d}-" + "x" * 253)[: 253 - 4] + ".com"

    def requirement(term: int, j: int) -> Json:
        key = f"{prefix}/{f'k{term:04d}-{j}-':y<63}"
        if j % 2:
            return {"key": key, "operator": "DoesNotExist"}
        return {"key": key, "operator": "NotIn", "values": [f"v{i}"]}

    terms = [
        {"matchExpressions": [requirement(term, j) for j in range(REQUIREMENTS_PER_TERM)]} for term in range(TERMS)
    ]
    return hostile.pod(f"large-{i:05d}", terms)


def run(server: Server, worker: int, reviews: int) -> dict[str, Any]:
    """Each large review on /mutate then /validate; the worker's RSS before, after and at its peak."""
    session = server.session()

    def post(endpoint: str, body: bytes) -> Json:
        response = session.post(
            f"{server.url}/{endpoint}", data=body, headers={"Content-Type": "application/json"}, timeout=120
        )
        response.raise_for_status()
        answer: Json = response.json()["response"]
        return answer

    trivial = json.dumps(workload.review(hostile.trivial_pod())).encode()
    for _ in range(20):  # warm-up: what the first reviews fill once (imports, compiled patterns) is not growth
        post("mutate", trivial)
        post("validate", trivial)
    before = servers.rss_mb(worker)
    sizes, allowed, started = [], 0, time.perf_counter()
    for i in range(reviews):
        body = json.dumps(workload.review(large_pod(i))).encode()
        sizes.append(len(body))
        for endpoint in ("mutate", "validate"):
            allowed += bool(post(endpoint, body)["allowed"])
    seconds = time.perf_counter() - started
    after = servers.rss_mb(worker)
    session.close()
    return {
        "reviews": reviews,
        "body_mb": round(sum(sizes) / len(sizes) / 1e6, 2),
        "answers_allowed": allowed,
        "seconds": round(seconds, 1),
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_peak_mb": round(servers.rss_mb(worker, "VmHWM"), 1),
        "growth_mb": round(after - before, 1),
    }


def measure(tmp: Path, certs: Path, reviews: int) -> dict[str, Any]:
    cluster = tmp / "cluster.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": hostile.nodes(NODES)}))
    step(f"{reviews} distinct reviews of {TERMS * REQUIREMENTS_PER_TERM:,} requirements, one worker, {NODES:,} nodes")
    with servers.static_server(tmp / "server", certs, cluster, workload.POLICY) as srv:
        (worker,) = servers.worker_pids(srv.server.process.pid)
        result = run(srv.server, worker, reviews)
    return {"memory": result, "targets": [target("worker RSS growth", result["growth_mb"], GROWTH_MB, unit=" MB")]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--reviews", type=int, default=REVIEWS, help="distinct large reviews sent")
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    with tempfile.TemporaryDirectory(prefix="saw-memory-") as tmp_dir:
        tmp = Path(tmp_dir)
        issue_certs(tmp / "certs")
        result = header(**measure(tmp, tmp / "certs", args.reviews))
    save(result, keep=args.keep, latest="memory-latest")
    print(json.dumps(result["memory"], indent=2))
    print(table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
