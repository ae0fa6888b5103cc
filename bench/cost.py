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
import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from bench import servers, workload
from bench.audit import _FINISHED
from bench.report import header, save, step, table, target
from rules.model import Json
from testkit import hostile
from testkit.reviews import admission_review
from testkit.server import Server, issue_certs, running_server

NODE_COUNTS = (1_000, 5_000)
TARGET_S = 0.5
PROBE_S = 1.0
RSS_GROWTH_MB = 100.0
#: The longest any one request is waited for: past it the case is reported as "timed out".
CASE_TIMEOUT_S = 30.0
BESIDE_S = 0.05
#: A tenant of the namespace, not trusted with any role.
TENANT = "system:serviceaccount:tenant:builder"
#: Claims of the crafted movers: users Pending without a node, and users Running on two nodes.
PENDING_CLAIM, SPLIT_CLAIM = "disk-0", "disk-1"
LARGE_REVIEWS = 200
LARGE_REVIEWS_CAP_S = 120.0
AUDIT_WINDOW_S = 12.0
DEPLOYMENTS = 100


@dataclass
class Case:
    """A crafted review: the object, the endpoints it is sent to and the objects its namespace must hold."""

    name: str
    obj: Json
    state: list[Json] = field(default_factory=list)
    endpoints: tuple[str, ...] = ("mutate", "validate")


def crafted() -> list[Case]:
    """Every case of the issue's "What was measured" that one review can carry."""
    backup = hostile.role_claimed_pod(100, 60)
    return [
        Case("load-affinity annotation 100 × 60 DoesNotExist, role by annotation (Pod)", backup),
        Case("load-affinity annotation 100 × 60 DoesNotExist, role by annotation (Job)", hostile.as_job(backup)),
        Case(
            "mover: 20,000 volumes on one claim, 200 Pending users",
            hostile.mover_of_one_claim(20_000, PENDING_CLAIM),
            [hostile.claim_object(PENDING_CLAIM), *hostile.claim_users(200, claim=PENDING_CLAIM)],
        ),
        Case(
            "mover: 5,000 volumes on one claim, 200 users Running on two nodes",
            hostile.mover_of_one_claim(5_000, SPLIT_CLAIM, name="mover-split"),
            [hostile.claim_object(SPLIT_CLAIM), *_renamed(hostile.claim_users(200, nodes=2, claim=SPLIT_CLAIM))],
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


def stored() -> list[Case]:
    """The objects an audit run evaluates again after any node change (their state with them)."""
    mover = hostile.mover_of_one_claim(5_000, PENDING_CLAIM, name="stored-mover")
    named = hostile.named_node_pod(10_000)
    named["status"] = {"phase": "Pending"}
    backup = hostile.role_claimed_pod(100, 60, name="stored-backup")
    backup["status"] = {"phase": "Pending"}
    return [
        Case("load-affinity annotation 100 × 60, role by annotation (Pod)", backup),
        Case(
            "mover: 5,000 volumes on one claim, 100 Pending users",
            mover,
            [hostile.claim_object(PENDING_CLAIM), *hostile.claim_users(100, claim=PENDING_CLAIM)],
        ),
        Case("one term of 10,000 requirements failing spec.nodeName", named),
        Case("StatefulSet: 6,000 volumes × 12,000 claim templates (1.3 MiB)", hostile.stateful_set(6_000, 12_000)),
    ]


def _renamed(pods: list[Json]) -> list[Json]:
    """Users of a second claim, named apart from the first claim's."""
    for user in pods:
        user["metadata"]["name"] = "split-" + user["metadata"]["name"]
        user["metadata"]["uid"] = "uid-" + user["metadata"]["name"]
    return pods


def review_body(obj: Json) -> bytes:
    return json.dumps(admission_review("CREATE", obj, userInfo={"username": TENANT})).encode()


TRIVIAL = review_body(hostile.trivial_pod())


def _timed(call: Callable[[], requests.Response]) -> dict[str, Any]:
    """Seconds and HTTP status of one request; `timed_out` past CASE_TIMEOUT_S, `error` when it failed."""
    started = time.perf_counter()
    try:
        response = call()
    except requests.Timeout:
        return {"s": None, "timed_out": True}
    except requests.RequestException as exc:
        return {"s": round(time.perf_counter() - started, 4), "error": type(exc).__name__}
    out: dict[str, Any] = {"s": round(time.perf_counter() - started, 4), "status": response.status_code}
    if response.status_code == 200 and "response" in response.text[:200]:
        answer = response.json().get("response") or {}
        out["allowed"] = answer.get("allowed")
        out["answer"] = ((answer.get("status") or {}).get("message") or "; ".join(answer.get("warnings") or []))[:120]
        out["answer_bytes"] = len(response.content)
    elif response.status_code != 200:
        out["answer"] = response.text[:120]
    return out


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
        results[name] = _timed(calls[name])

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


@contextlib.contextmanager
def _static(tmp: Path, certs: Path, cluster: Path) -> Iterator[servers.Running]:
    """`serve --cluster` of one worker, as servers.static_server, given time to load 5,000 nodes on a busy machine."""
    tmp.mkdir(parents=True)
    args = ("--cluster", str(cluster), "--policy", str(workload.POLICY), "--trivial-endpoint")
    with running_server(tmp, *args, workers=1, certs=certs, ready_timeout=300, cpus=servers.SERVER_CPUS) as server:
        yield servers.Running(server, "static")


class Restartable:
    """A static server that is started again when a case left its worker busy past the timeout."""

    def __init__(self, tmp: Path, certs: Path, cluster: Path) -> None:
        self.tmp, self.certs, self.cluster = tmp, certs, cluster
        self.stack = contextlib.ExitStack()
        self.starts = 0
        self.server = self._start()

    def _start(self) -> Server:
        self.starts += 1
        return self.stack.enter_context(_static(self.tmp / f"run-{self.starts}", self.certs, self.cluster)).server

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
    _write(cluster, state)
    rows = []
    server = Restartable(tmp, certs, cluster)
    try:
        for case in cases:
            body = review_body(case.obj)
            for endpoint in case.endpoints:
                step(f"{nodes:,} nodes: /{endpoint} {case.name}")
                got = beside(server.server, endpoint, body)
                rows.append(
                    {"nodes": nodes, "case": case.name, "endpoint": endpoint, "body_kb": len(body) // 1024, **got}
                )
                if any(r.get("timed_out") for r in got.values()):
                    server.restart()  # its worker may still be on the case: the next one starts clean
    finally:
        server.close()
    return rows


def large_reviews(tmp: Path, certs: Path, nodes: int) -> dict[str, Any]:
    """The worker's RSS before and after LARGE_REVIEWS distinct reviews of 8,000 long-keyed requirements to
    /validate (at most LARGE_REVIEWS_CAP_S of them)."""
    tmp.mkdir()
    cluster = tmp / "cluster.json"
    _write(cluster, hostile.nodes(nodes))
    with _static(tmp / "rss", certs, cluster) as srv:
        session = srv.server.session()
        headers = {"Content-Type": "application/json"}
        session.post(f"{srv.server.url}/validate", data=TRIVIAL, headers=headers, timeout=CASE_TIMEOUT_S)
        before = max(srv.worker_rss_mb())
        started, sent, slowest = time.monotonic(), 0, 0.0
        while sent < LARGE_REVIEWS and time.monotonic() - started < LARGE_REVIEWS_CAP_S:
            body = review_body(hostile.long_key_pod(8_000, salt=f"r{sent}"))
            got = _timed(
                lambda body=body: session.post(  # type: ignore[misc]
                    f"{srv.server.url}/validate", data=body, headers=headers, timeout=CASE_TIMEOUT_S
                )
            )
            sent += 1
            if got["s"] is None:
                break
            slowest = max(slowest, got["s"])
        after = max(srv.worker_rss_mb())
        session.close()
    return {
        "nodes": nodes,
        "reviews": sent,
        "seconds": round(time.monotonic() - started, 1),
        "slowest_s": slowest,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "growth_mb": round(after - before, 1),
    }


def _node_changes(api: Any, nodes: int, stop: threading.Event) -> None:
    """A label of one node changed every two seconds: each audit run after it has a new node set."""
    node = hostile.nodes(1)[0]
    turn = 0
    while not stop.wait(2.0):
        turn += 1
        node["metadata"]["labels"]["example.com/turn"] = str(turn)
        api.update(json.loads(json.dumps(node)))


def _trivial_meanwhile(server: Server, seconds: float) -> list[float]:
    session = server.session()
    latencies = []
    ends = time.monotonic() + seconds
    headers = {"Content-Type": "application/json"}
    while time.monotonic() < ends:
        got = _timed(
            lambda: session.post(f"{server.url}/mutate", data=TRIVIAL, headers=headers, timeout=CASE_TIMEOUT_S)
        )
        latencies.append(CASE_TIMEOUT_S if got["s"] is None else got["s"])
        time.sleep(0.02)
    session.close()
    return latencies


def _audits(server: Server) -> list[float]:
    lines = server.log.read_text(errors="replace").splitlines()
    return [float(m["seconds"]) for line in lines if "audit: " in line and (m := _FINISHED.search(line))]


def audited(tmp: Path, certs: Path, nodes: int, case: Case) -> dict[str, Any]:
    """Trivial reviews for AUDIT_WINDOW_S while the server audits live state holding `case` every second."""
    objects = [hostile.storage_class(), *hostile.nodes(nodes), *case.state, case.obj]
    objects = json.loads(json.dumps(objects))  # the fake API keeps them: no object shared between runs
    extra = ("--audit-interval", "1")
    with servers.live_server(tmp, certs, objects, workload.POLICY, "audit", extra=extra) as srv:
        stop = threading.Event()
        changes = threading.Thread(target=_node_changes, args=(srv.api, nodes, stop), daemon=True)
        changes.start()
        runs_before = len(_audits(srv.server))
        try:
            latencies = _trivial_meanwhile(srv.server, AUDIT_WINDOW_S)
        finally:
            stop.set()
        runs = _audits(srv.server)
    return {
        "nodes": nodes,
        "case": case.name,
        "reviews": len(latencies),
        "max_s": round(max(latencies), 4),
        "audits_in_window": len(runs) - runs_before,
        "longest_audit_s": max(runs, default=None),
    }


def deployments(tmp: Path, certs: Path, nodes: int) -> dict[str, Any]:
    """The worker's RSS when DEPLOYMENTS Deployments of 1.25 MiB appear and the audit lists them, with trivial
    reviews meanwhile."""
    extra = ("--audit-interval", "1")
    objects = [hostile.storage_class(), *hostile.nodes(nodes)]
    with servers.live_server(tmp, certs, objects, workload.POLICY, "deployments", extra=extra) as srv:
        assert srv.api is not None
        _wait_audits(srv.server, 1)
        pid = servers.worker_pids(srv.server.process.pid)[0]
        before = servers.rss_mb(pid)
        with srv.api.silently():
            for i in range(DEPLOYMENTS):
                srv.api.create(hostile.big_deployment(f"big-{i:03d}"))
        runs = len(_audits(srv.server))
        latencies = _trivial_meanwhile(srv.server, AUDIT_WINDOW_S)
        _wait_audits(srv.server, runs + 1)
        peak, after = servers.rss_mb(pid, "VmHWM"), servers.rss_mb(pid)
    return {
        "nodes": nodes,
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_after_mb": round(after, 1),
        "growth_mb": round(peak - before, 1),
        "max_s": round(max(latencies), 4),
        "reviews": len(latencies),
    }


def _wait_audits(server: Server, count: int, timeout: float = 120.0) -> None:
    ends = time.monotonic() + timeout
    while len(_audits(server)) < count and time.monotonic() < ends:
        time.sleep(0.2)


def _write(path: Path, objects: list[Json]) -> None:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


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
