"""`python -m bench.hostile`: what a hostile tenant's objects cost a review, against the review budget's target of
0.5 s (rules/budget.py, docs/design.md#6-validation).

Three measurements, against a static state of 1,000 nodes:
- in process: each crafted review's mutation and validation (best of three), as the rules alone cost them;
- a real gunicorn server with one worker: each crafted review sent to /mutate and /validate, and a trivial review
  sent 20 ms after it on another connection, which must not wait for it;
- the same server auditing every second a stored Pending pod of 10,000 terms: trivial reviews meanwhile.

The crafted objects are testkit/hostile.py's, as the budget tests build them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import servers, workload
from bench.audit import _FINISHED
from bench.report import header, save, step, table, target
from rules import pipeline
from rules.model import Json, Subject
from rules.policy import default_policy
from testkit import hostile
from testkit.server import Server, issue_certs
from webhook.state.index import ClusterIndex

TARGET_S = 0.5
NODES = 1_000
#: Sent this long after the crafted review, on another connection: it arrives while the crafted one is served.
ALONGSIDE_S = 0.02
#: CDI's controller service account where upstream CDI installs: the requester of its importer pods.
CDI_REQUESTER = "system:serviceaccount:cdi:cdi-sa"
AUDIT_INTERVAL_S = 1.0


def crafted() -> dict[str, tuple[Json, list[Json]]]:
    """Each crafted review's pod, and the objects its namespace must hold."""
    out: dict[str, tuple[Json, list[Json]]] = {
        f"{n:,} NotIn+DoesNotExist terms": (hostile.affinity_pod(n), []) for n in (500, 1_000, 2_000, 10_000)
    }
    out["CDI importer 100 × 100 terms"] = hostile.cdi_importer(100, 100)
    out["load affinity 100 × 100"] = (hostile.backup_pod(100, 100), [])
    out["load-affinity annotation of 5,000 entries"] = (hostile.backup_pod(0, 5_000), [])
    return out


def in_process(cases: dict[str, tuple[Json, list[Json]]]) -> list[dict[str, Any]]:
    """Each case's mutation then validation of the object, as the two webhooks receive it: best of three."""
    policy = default_policy()
    nodes = hostile.nodes(NODES)
    rows = []
    for name, (pod, objects) in cases.items():
        subject = Subject(kind="Pod", operation="CREATE", namespace=pod["metadata"]["namespace"], name=name, obj=pod)
        best = float("inf")
        for _ in range(3):
            index = ClusterIndex()  # a new node snapshot each round: nothing is answered from an earlier memo
            for obj in [*nodes, *objects]:
                index.apply(obj)
            started = time.perf_counter()
            mutation = pipeline.mutate(subject, index, policy)
            validation = pipeline.validate(subject, index, policy)
            best = min(best, time.perf_counter() - started)
        rows.append(
            {
                "review": name,
                "seconds": round(best, 4),
                "body_kb": round(len(json.dumps(pod)) / 1024),
                "patch_kb": round(len(json.dumps(mutation.patch)) / 1024, 1),
                "limit": mutation.over_budget or validation.over_budget,
            }
        )
    return rows


def alongside(server: Server, cases: dict[str, tuple[Json, list[Json]]], rounds: int = 3) -> list[dict[str, Any]]:
    """Per case and endpoint: the crafted review's latency and that of a trivial one sent alongside (worst of
    `rounds`), on one worker."""
    trivial = json.dumps(workload.review(hostile.trivial_pod())).encode()
    rows = []
    for name, (pod, _) in cases.items():
        body = json.dumps(_review(pod)).encode()
        for endpoint in ("mutate", "validate"):
            worst = {"crafted": 0.0, "trivial": 0.0}
            status: dict[str, Any] = {}
            for _ in range(rounds):
                times = _pair(server, endpoint, body, trivial, status)
                worst = {k: max(worst[k], times[k]) for k in worst}
            rows.append(
                {"review": name, "endpoint": endpoint, **{f"{k}_s": round(v, 4) for k, v in worst.items()}, **status}
            )
    return rows


def _review(pod: Json) -> Json:
    """The review kube-apiserver sends for this pod: a CDI worker's comes from CDI's service account, which the
    default policy trusts to make one (docs/design.md#2-pod-roles)."""
    review = workload.review(pod)
    if "cdi.kubevirt.io" in (pod["metadata"].get("labels") or {}):
        review["request"]["userInfo"]["username"] = CDI_REQUESTER
    return review


def _pair(server: Server, endpoint: str, body: bytes, trivial: bytes, status: dict[str, Any]) -> dict[str, float]:
    """The crafted review, and 20 ms later the trivial one on another connection: each one's latency."""
    url = f"{server.url}/{endpoint}"
    times: dict[str, float] = {}
    sessions = {"crafted": server.session(), "trivial": server.session()}
    for session in sessions.values():  # connections open before the clock starts: the TLS handshake is not counted
        session.get(f"{server.url}/healthz", timeout=30).raise_for_status()

    def send(which: str, data: bytes) -> None:
        started = time.perf_counter()
        response = sessions[which].post(url, data=data, headers={"Content-Type": "application/json"}, timeout=60)
        times[which] = time.perf_counter() - started
        answer = response.json()["response"]
        if which == "crafted":
            status["allowed"] = answer["allowed"]
            status["answer"] = (answer.get("status") or {}).get("message") or "; ".join(answer.get("warnings") or [])
            status["answer"] = status["answer"][:160]

    thread = threading.Thread(target=send, args=("crafted", body))
    thread.start()
    time.sleep(ALONGSIDE_S)
    send("trivial", trivial)
    thread.join()
    for session in sessions.values():
        session.close()
    return times


def during_audit(server: Server, seconds: float) -> dict[str, Any]:
    """Trivial reviews, one after another, while the server audits its stored hostile pod every second."""
    body = json.dumps(workload.review(hostile.trivial_pod())).encode()
    session = server.session()
    latencies: list[float] = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        started = time.perf_counter()
        session.post(f"{server.url}/mutate", data=body, headers={"Content-Type": "application/json"}, timeout=60)
        latencies.append(time.perf_counter() - started)
        time.sleep(0.01)
    session.close()
    lines = server.log.read_text().splitlines()
    audits = [found for line in lines if "webhook.audit.loop: audit: " in line and (found := _FINISHED.search(line))]
    return {
        "reviews": len(latencies),
        "max_s": round(max(latencies), 4),
        "audits": len(audits),
        # every run since the server started, the first included (it ran before the reviews began)
        "longest_audit_s": max((float(found["seconds"]) for found in audits), default=float("inf")),
        "refusals_logged": sum("past the review budget" in line for line in lines),
    }


def measure(tmp: Path, certs: Path, *, audit_seconds: float = 10.0) -> dict[str, Any]:
    cases = crafted()
    step(f"hostile reviews in process, {NODES:,} nodes")
    result: dict[str, Any] = {"in_process": in_process(cases)}
    cluster = tmp / "cluster.json"
    namespace_objects = hostile.cdi_importer(0, 100)[1]
    _write(cluster, [*hostile.nodes(NODES), *namespace_objects])
    step("hostile reviews with a trivial one alongside, one gunicorn worker")
    with servers.static_server(tmp / "alongside", certs, cluster, workload.POLICY) as srv:
        result["alongside"] = alongside(srv.server, cases)
    stored = hostile.pod("stored-hostile", hostile.unnarrowable_terms(10_000), claim=hostile.CLAIM)
    stored["status"] = {"phase": "Pending"}
    audited = tmp / "audited.json"
    _write(audited, [*hostile.nodes(NODES), *namespace_objects, stored])
    step("trivial reviews while the server audits a stored pod of 10,000 terms every second")
    with servers.static_server(
        tmp / "audit", certs, audited, workload.POLICY, extra=("--audit-interval", f"{AUDIT_INTERVAL_S:g}")
    ) as srv:
        result["during_audit"] = during_audit(srv.server, audit_seconds)
    result["targets"] = targets(result)
    return result


def _write(path: Path, objects: list[Json]) -> None:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = [target(f"in process: {r['review']}", r["seconds"], TARGET_S, unit=" s") for r in result["in_process"]]
    for r in result["alongside"]:
        out.append(target(f"/{r['endpoint']} {r['review']}", r["crafted_s"], TARGET_S, unit=" s"))
        out.append(target(f"/{r['endpoint']} trivial alongside {r['review']}", r["trivial_s"], TARGET_S, unit=" s"))
    audit = result["during_audit"]
    out.append(
        target("trivial /mutate during audits of a stored hostile pod (max)", audit["max_s"], TARGET_S, unit=" s")
    )
    out.append(target("audits run meanwhile", audit["audits"], 2, at_most=False))
    out.append(target("longest audit of the stored hostile pod", audit["longest_audit_s"], TARGET_S, unit=" s"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__)
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    parser.add_argument("--audit-seconds", type=float, default=10.0, help="length of the run during audits")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    with tempfile.TemporaryDirectory(prefix="saw-hostile-") as tmp_dir:
        tmp = Path(tmp_dir)
        issue_certs(tmp / "certs")
        result = header(**measure(tmp, tmp / "certs", audit_seconds=args.audit_seconds))
    save(result, keep=args.keep, latest="hostile-latest")
    print(table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
