"""The parts of bench/cost.py that run against a server whose state holds a hostile object: the stored variants
audited while trivial reviews keep being sent, the audit of large Deployments, and the worker's RSS after distinct
large reviews; and what bench/cost.py shares with them (the case, the review body, a timed request)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from bench import servers, workload
from bench.audit import _FINISHED
from rules.model import Json
from testkit import hostile
from testkit.reviews import admission_review
from testkit.server import Server, running_server

#: The longest any one request is waited for: past it the case is reported as "timed out".
CASE_TIMEOUT_S = 30.0
#: A tenant of the namespace, not trusted with any role.
TENANT = "system:serviceaccount:tenant:builder"
#: The claim of the crafted and stored movers whose users are Pending without a node.
PENDING_CLAIM = "disk-0"
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


def review_body(obj: Json) -> bytes:
    return json.dumps(admission_review("CREATE", obj, userInfo={"username": TENANT})).encode()


TRIVIAL = review_body(hostile.trivial_pod())


def timed(call: Callable[[], requests.Response]) -> dict[str, Any]:
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


@contextlib.contextmanager
def static(tmp: Path, certs: Path, cluster: Path) -> Iterator[servers.Running]:
    """`serve --cluster` of one worker, as servers.static_server, given time to load 5,000 nodes on a busy machine."""
    tmp.mkdir(parents=True)
    args = ("--cluster", str(cluster), "--policy", str(workload.POLICY), "--trivial-endpoint")
    with running_server(tmp, *args, workers=1, certs=certs, ready_timeout=300, cpus=servers.SERVER_CPUS) as server:
        yield servers.Running(server, "static")


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


def renamed(pods: list[Json]) -> list[Json]:
    """Users of a second claim, named apart from the first claim's."""
    for user in pods:
        user["metadata"]["name"] = "split-" + user["metadata"]["name"]
        user["metadata"]["uid"] = "uid-" + user["metadata"]["name"]
    return pods


def large_reviews(tmp: Path, certs: Path, nodes: int) -> dict[str, Any]:
    """The worker's RSS before and after LARGE_REVIEWS distinct reviews of 8,000 long-keyed requirements to
    /validate (at most LARGE_REVIEWS_CAP_S of them)."""
    tmp.mkdir()
    cluster = tmp / "cluster.json"
    write_list(cluster, hostile.nodes(nodes))
    with static(tmp / "rss", certs, cluster) as srv:
        session = srv.server.session()
        headers = {"Content-Type": "application/json"}
        session.post(f"{srv.server.url}/validate", data=TRIVIAL, headers=headers, timeout=CASE_TIMEOUT_S)
        before = max(srv.worker_rss_mb())
        started, sent, slowest = time.monotonic(), 0, 0.0
        while sent < LARGE_REVIEWS and time.monotonic() - started < LARGE_REVIEWS_CAP_S:
            body = review_body(hostile.long_key_pod(8_000, salt=f"r{sent}"))
            got = timed(
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
        got = timed(lambda: session.post(f"{server.url}/mutate", data=TRIVIAL, headers=headers, timeout=CASE_TIMEOUT_S))
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


def write_list(path: Path, objects: list[Json]) -> None:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
