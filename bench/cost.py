"""`python -m bench.cost`: what a hostile tenant's objects, each within the review budget, cost the real server.

A tenant who can create Pods, Jobs, StatefulSets and claims in their own namespace (often with `--dry-run=server`)
grows a dimension the review budget (rules/budget.py) does not count. On a server of one gunicorn worker (the
chart's default), whose state is `serve --cluster` of 1,000 and of 5,000 nodes:

- crafted reviews: each of testkit/hostile.py's objects to /mutate and /validate, and 50 ms later, each on a
  connection of its own, a trivial review, `/healthz` and `/readyz` (all four latencies);
- stored variants: live state from the fake API holding one such object, audited by the server every second
  (`--audit-interval 1`) while a node changes every two seconds (a new node set: no memo answers from an
  earlier run) and trivial reviews keep being sent: their worst latency, and the audits' durations from the log;
- memory: the worker's RSS after 200 distinct large reviews, and its peak while it audits 100 Deployments of
  1.25 MiB.

Every request has a timeout of CASE_TIMEOUT_S: a case that takes longer is reported as such (and the server,
whose worker may still be busy with it, is started again), not waited on. Targets: 0.5 s for a crafted review and
the one beside it, 1 s for the probes, 0.5 s for trivial reviews during audits, 100 MB of RSS growth.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

from bench import servers
from bench.costaudit import (
    CASE_TIMEOUT_S,
    DEPLOYMENTS,
    LARGE_REVIEWS,
    PENDING_CLAIM,
    TRIVIAL,
    Case,
    audited,
    deployments,
    large_reviews,
    renamed,
    review_body,
    static,
    stored,
    timed,
    write_list,
)
from bench.report import header, save, step, table, target
from testkit import hostile
from testkit.server import Server, issue_certs

NODE_COUNTS = (1_000, 5_000)
TARGET_S = 0.5
PROBE_S = 1.0
RSS_GROWTH_MB = 100.0
BESIDE_S = 0.05
#: The claim of the crafted mover whose users run on two nodes.
SPLIT_CLAIM = "disk-1"


def crafted() -> list[Case]:
    """Every case of the issue's "What was measured" that one review can carry."""
    backup = hostile.role_claimed_pod(100, 60)
    return [
        Case("load-affinity annotation 100 × 60 DoesNotExist, role by annotation (Pod)", backup),
        Case(
            "load-affinity annotation 100 × 60 DoesNotExist, role by annotation (Job)",
            hostile.as_job(hostile.role_claimed_pod(100, 60, prefix="j")),
        ),
        Case(
            "mover: 20,000 volumes on one claim, 200 Pending users",
            hostile.mover_of_one_claim(20_000, PENDING_CLAIM),
            [hostile.claim_object(PENDING_CLAIM), *hostile.claim_users(200, claim=PENDING_CLAIM)],
        ),
        Case(
            "mover: 5,000 volumes on one claim, 200 users Running on two nodes",
            hostile.mover_of_one_claim(5_000, SPLIT_CLAIM, name="mover-split"),
            [hostile.claim_object(SPLIT_CLAIM), *renamed(hostile.claim_users(200, nodes=2, claim=SPLIT_CLAIM))],
        ),
        Case("distinct review: 8,000 requirements with 290-character keys", hostile.long_key_pod(8_000, salt="c")),
        Case("one term of 10,000 matchFields requirements failing spec.nodeName", hostile.named_node_pod(10_000)),
        Case("StatefulSet: 20,000 volumes × 15,000 claim templates", hostile.stateful_set(20_000, 15_000)),
        Case("1,000 terms of kubernetes.io/hostname Gt <n>", hostile.gt_terms_pod(1_000)),
        Case("unknown storage-affinity.io/ annotation keys, 255 KiB", hostile.unknown_annotations_pod()),
        Case("unknown csi-baremetal disk types, 255 KiB", hostile.unknown_disk_types_pod()),
        Case("runs of 19 digits inside strings, 2.7 MiB", hostile.digit_runs_pod()),
        Case("a float among matchFields values", hostile.float_field_pod()),
    ]


def beside(server: Server, endpoint: str, body: bytes) -> dict[str, Any]:
    """The crafted review; 50 ms later a trivial review, /healthz and /readyz, each on a connection of its own
    (opened before the clock starts: no TLS handshake is timed)."""
    names = ("crafted", "trivial", "healthz", "readyz")
    sessions = {name: server.session() for name in names}
    for session in sessions.values():
        session.get(f"{server.url}/healthz", timeout=CASE_TIMEOUT_S).raise_for_status()
    headers = {"Content-Type": "application/json"}
    calls: dict[str, Callable[[], requests.Response]] = {
        "crafted": lambda: sessions["crafted"].post(
            f"{server.url}/{endpoint}", data=body, headers=headers, timeout=CASE_TIMEOUT_S
        ),
        "trivial": lambda: sessions["trivial"].post(
            f"{server.url}/mutate", data=TRIVIAL, headers=headers, timeout=CASE_TIMEOUT_S
        ),
        "healthz": lambda: sessions["healthz"].get(f"{server.url}/healthz", timeout=CASE_TIMEOUT_S),
        "readyz": lambda: sessions["readyz"].get(f"{server.url}/readyz", timeout=CASE_TIMEOUT_S),
    }
    results: dict[str, dict[str, Any]] = {}

    def run(name: str) -> None:
        results[name] = timed(calls[name])

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    threads[0].start()
    time.sleep(BESIDE_S)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join()
    for session in sessions.values():
        session.close()
    return results


def _idle_beside(server: Restartable, endpoint: str, body: bytes) -> dict[str, Any]:
    """`beside` on a server whose worker answers: one that does not answer /healthz within the timeout (still on
    an earlier case) is started again first."""
    for _ in range(3):
        try:
            server.server.session().get(f"{server.server.url}/healthz", timeout=CASE_TIMEOUT_S).raise_for_status()
            break
        except requests.RequestException:
            server.restart()
    return beside(server.server, endpoint, body)


class Restartable:
    """A static server that is started again when a case left its worker busy past the timeout."""

    def __init__(self, tmp: Path, certs: Path, cluster: Path) -> None:
        self.tmp, self.certs, self.cluster = tmp, certs, cluster
        self.stack = contextlib.ExitStack()
        self.starts = 0
        self.server = self._start()

    def _start(self) -> Server:
        self.starts += 1
        return self.stack.enter_context(static(self.tmp / f"run-{self.starts}", self.certs, self.cluster)).server

    def restart(self) -> None:
        self.stack.close()
        self.stack = contextlib.ExitStack()
        self.server = self._start()

    def close(self) -> None:
        self.stack.close()


def crafted_reviews(tmp: Path, certs: Path, nodes: int, cases: list[Case]) -> list[dict[str, Any]]:
    tmp.mkdir()
    cluster = tmp / "cluster.json"
    state = [hostile.storage_class(), *hostile.nodes(nodes)]
    for case in cases:
        state += case.state
    write_list(cluster, state)
    rows = []
    server = Restartable(tmp, certs, cluster)
    try:
        for case in cases:
            body = review_body(case.obj)
            for endpoint in case.endpoints:
                step(f"{nodes:,} nodes: /{endpoint} {case.name}")
                got = _idle_beside(server, endpoint, body)
                rows.append(
                    {"nodes": nodes, "case": case.name, "endpoint": endpoint, "body_kb": len(body) // 1024, **got}
                )
                if any(r.get("timed_out") or _seconds(r) > CASE_TIMEOUT_S / 2 for r in got.values()):
                    server.restart()  # its worker may still be on the case: the next one starts clean
    finally:
        server.close()
    return rows


def measure(
    tmp: Path, certs: Path, node_counts: tuple[int, ...] = NODE_COUNTS, keep: str | None = None
) -> dict[str, Any]:
    """Every measurement at each node count; what is done so far is saved after each step (a long run that fails
    late keeps its results)."""
    result: dict[str, Any] = header(crafted=[], audited=[], large_reviews=[], deployments=[])
    cases = crafted()
    for nodes in node_counts:
        base = tmp / str(nodes)
        base.mkdir()
        result["crafted"] += crafted_reviews(base / "crafted", certs, nodes, cases)
        save(result, keep=keep, latest="cost-latest")
        step(f"{nodes:,} nodes: RSS after {LARGE_REVIEWS} distinct large reviews")
        result["large_reviews"].append(large_reviews(base / "large", certs, nodes))
        for i, case in enumerate(stored()):
            step(f"{nodes:,} nodes: trivial reviews while the server audits: {case.name}")
            result["audited"].append(audited(base / f"audited-{i}", certs, nodes, case))
            save(result, keep=keep, latest="cost-latest")
        step(f"{nodes:,} nodes: the audit lists {DEPLOYMENTS} Deployments of 1.25 MiB")
        result["deployments"].append(deployments(base / "deployments", certs, nodes))
        save(result, keep=keep, latest="cost-latest")
    result["targets"] = targets(result)
    return result


def _seconds(got: dict[str, Any]) -> float:
    return float("inf") if got.get("s") is None else float(got["s"])


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for row in result["crafted"]:
        what = f"{row['nodes']:,} nodes, /{row['endpoint']} {row['case']}"
        out.append(target(f"{what}: crafted", _seconds(row["crafted"]), TARGET_S, unit=" s"))
        out.append(target(f"{what}: trivial beside it", _seconds(row["trivial"]), TARGET_S, unit=" s"))
        probes = max(_seconds(row["healthz"]), _seconds(row["readyz"]))
        out.append(target(f"{what}: /healthz and /readyz beside it", probes, PROBE_S, unit=" s"))
        if row["crafted"].get("status", 200) >= 500:
            out.append(target(f"{what}: a 5xx answer", 1, 0))
    for row in result["audited"]:
        what = f"{row['nodes']:,} nodes, trivial /mutate while audits run: {row['case']}"
        out.append(target(what, row["max_s"], TARGET_S, unit=" s"))
    for row in result["large_reviews"]:
        what = f"{row['nodes']:,} nodes, worker RSS growth after {row['reviews']} distinct large reviews"
        out.append(target(what, row["growth_mb"], RSS_GROWTH_MB, unit=" MB"))
    for row in result["deployments"]:
        what = f"{row['nodes']:,} nodes, audit of {DEPLOYMENTS} Deployments of 1.25 MiB"
        out.append(target(f"{what}: worker RSS growth (peak)", row["growth_mb"], RSS_GROWTH_MB, unit=" MB"))
        out.append(target(f"{what}: trivial /mutate meanwhile (max)", row["max_s"], TARGET_S, unit=" s"))
    return out


def rows_table(result: dict[str, Any]) -> str:
    """The crafted reviews, one line each: every latency, the answer's status and size."""

    def shown(got: dict[str, Any]) -> str:
        return f"> {CASE_TIMEOUT_S:g} s" if got.get("timed_out") else f"{got.get('s')} s"

    lines = [
        "| Nodes | Review | Endpoint | crafted | trivial beside | /healthz | /readyz | answer |",
        "|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for row in result["crafted"]:
        got = row["crafted"]
        answer = f"{got.get('status', '-')}, {got.get('answer_bytes', 0) // 1024} KiB"
        lines.append(
            f"| {row['nodes']:,} | {row['case']} | /{row['endpoint']} | {shown(got)} | {shown(row['trivial'])} | "
            f"{shown(row['healthz'])} | {shown(row['readyz'])} | {answer} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def _workspace() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="saw-cost-") as tmp_dir:
        tmp = Path(tmp_dir)
        issue_certs(tmp / "certs")
        yield tmp, tmp / "certs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__)
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    parser.add_argument("--nodes", type=int, nargs="+", default=list(NODE_COUNTS), help="node counts to run at")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    with _workspace() as (tmp, certs):
        result = measure(tmp, certs, tuple(args.nodes), args.keep)
    save(result, keep=args.keep, latest="cost-latest")
    print(rows_table(result))
    print()
    print(table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
