"""Every Pod and Job review of the test corpora, workloads made of their pods, and a generated cluster workload,
for the matchConditions tests.

One item is what the API server would evaluate the webhooks' matchConditions on (object, oldObject, operation)
together with what the in-process pipeline needs to answer it (the cluster view and the policy).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rules.model import Json
from rules.policy import Policy, default_policy, policy_from_document
from tests.fuzz import mutations as m
from tests.rules.table_objects import table_objects
from tests.support import fixtures, policy, view_from
from webhook.state.index import ClusterIndex


@dataclass(frozen=True)
class Item:
    name: str
    operation: str
    obj: Json
    old: Json | None
    view: ClusterIndex
    policy: Policy
    user: str | None = None  # userInfo.username, which the conditions do not read and the pipeline may


def _pods_and_jobs(review: Json) -> tuple[str, Json, Json | None] | None:
    request = review.get("request") or {}
    obj = request.get("object") or request.get("oldObject")
    if not isinstance(obj, dict) or obj.get("kind") not in ("Pod", "Job"):
        return None
    if request.get("operation") not in ("CREATE", "UPDATE") or request.get("object") is None:
        return None
    return str(request["operation"]), request["object"], request.get("oldObject")


def _reviews(named: list[tuple[str, Json]], view: ClusterIndex, pol: Policy, prefix: str) -> Iterator[Item]:
    for name, review in named:
        found = _pods_and_jobs(review)
        if found is not None:
            yield Item(f"{prefix}{name}", *found, view, pol)


def _tables() -> Iterator[Item]:
    """The rule tables' Pods and Jobs, each on its case's cluster and policy."""
    for case in table_objects():
        if case.obj.get("kind") in ("Pod", "Job"):
            view = view_from(*case.state)
            yield Item(case.name, case.operation, case.obj, case.old, view, policy(case.policy), case.user)


@functools.cache
def corpus() -> tuple[Item, ...]:
    """Fixtures and examples on the example cluster, the fuzz seeds on their states, and the rule tables."""
    fuzz_policy = policy_from_document(m.fuzz_policy_document())
    example_view = view_from(*m.cluster_state())
    items = [*_reviews(list(m.static_seeds()), example_view, fuzz_policy, "seed: ")]
    for name, review, state in m.built_pool():
        found = _pods_and_jobs(review)
        if found is not None:
            items.append(Item(f"built: {name}", *found, view_from(*state), fuzz_policy))
    items.extend(_tables())
    items.extend(_workloads(items))
    seen = set()
    for what, pod in workload():  # the generated workload of the share measurement, each kind once
        if what not in seen:
            seen.add(what)
            items.append(Item(f"workload: {what}", "CREATE", pod, None, example_view, default_policy()))
    return tuple(items)


def _workloads(pods: list[Item]) -> Iterator[Item]:
    """Workloads: the table of tests/data/workloads in every kind it names, and every Pod creation of the corpus
    as a Deployment's and a CronJob's template, created, scaled, and given that template in an update."""
    from tests.rules import test_workload_templates as templates

    for param in templates.CASES:
        case = param.values[0]
        for kind in templates.kinds(case):
            obj, old = templates.objects(case, kind)
            operation = case.get("operation", "CREATE")
            yield Item(
                f"workloads: {case['name']} ({kind})", operation, obj, old, view_from(), policy(case.get("policy"))
            )
    for item in pods:
        if item.operation != "CREATE" or item.obj.get("kind") != "Pod":
            continue
        metadata = item.obj.get("metadata") or {}
        template = {
            "metadata": {k: metadata[k] for k in ("labels", "annotations") if k in metadata},
            "spec": item.obj.get("spec") or {},
        }
        bare = {"metadata": {"labels": metadata.get("labels") or {}}, "spec": template["spec"]}
        namespace = str(metadata.get("namespace") or "shop")
        for kind in ("Deployment", "CronJob"):
            created = templates.workload(kind, template, namespace=namespace)
            name = f"{item.name} as a {kind}"
            yield Item(f"{name}, created", "CREATE", created, None, item.view, item.policy, item.user)
            scaled = templates.workload(
                kind, template, {"suspend": True} if kind == "CronJob" else {"replicas": 4}, namespace
            )
            yield Item(f"{name}, scaled", "UPDATE", scaled, created, item.view, item.policy, item.user)
            before = templates.workload(kind, bare, namespace=namespace)
            yield Item(f"{name}, given its template", "UPDATE", created, before, item.view, item.policy, item.user)


# --- a cluster's pod creations ----------------------------------------------------------------------------------


def _pod(name: str, labels: Json, spec: Json, annotations: Json | None = None) -> Json:
    metadata: Json = {"name": name, "namespace": "shop", "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    base = {"containers": [{"name": "main", "image": "registry.example/app:1"}], **spec}
    token = {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    base["volumes"] = [token, *spec.get("volumes", ())]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": base}


def _claim(name: str) -> Json:
    return {"name": "data", "persistentVolumeClaim": {"claimName": name}}


_SCRATCH = [{"name": "tmp", "emptyDir": {}}]

#: Pod creations per 100 in a general-purpose cluster: (count, kind of workload, pod).
WORKLOAD: tuple[tuple[int, str, Json], ...] = (
    (50, "Deployment replica, stateless", _pod("web-7d9c-x1", {"app": "web", "pod-template-hash": "7d9c"}, {})),
    (8, "Deployment replica, nodeSelector kubernetes.io/os",
     _pod("api-5f6b-x2", {"app": "api"}, {"nodeSelector": {"kubernetes.io/os": "linux"}})),
    (12, "Job or CronJob pod, stateless",
     _pod("report-2891-x3", {"job-name": "report-2891"}, {"restartPolicy": "Never", "volumes": _SCRATCH})),
    (5, "DaemonSet pod (pinned by matchFields)", _pod("node-exporter-x4", {"app": "node-exporter"}, {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}}})),
    (12, "StatefulSet replica with a claim", _pod("db-0", {"app": "db"}, {"volumes": [_claim("data-db-0")]})),
    (5, "pod with a generic ephemeral volume", _pod("scratch-x5", {"app": "batch"}, {"volumes": [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}]})),
    (4, "VolSync mover", _pod("volsync-src-db-x6", {"app.kubernetes.io/created-by": "volsync"},
                              {"restartPolicy": "Never", "volumes": [_claim("data-db-0")]})),
    (4, "Velero backup or restore exposer", _pod("backup-x7", {"velero.io/exposer-pod-group": "snapshot-exposer"},
                                                 {"restartPolicy": "Never", "volumes": [_claim("backup-x7")]})),
)  # fmt: skip


def workload() -> list[tuple[str, Json]]:
    """100 pod creations of a general-purpose cluster (WORKLOAD), as (what it is, the pod)."""
    return [(what, pod) for count, what, pod in WORKLOAD for _ in range(count)]


def foreign_pod_creations() -> list[tuple[str, Json]]:
    """The foreign fixtures' Pod creations: pods written by other projects' tests."""
    out = []
    for name, review in fixtures():
        found = _pods_and_jobs(review)
        if found is not None and found[0] == "CREATE" and found[1].get("kind") == "Pod":
            out.append((name, found[1]))
    return out


def chart_roles(pol: Policy) -> Any:
    """The `policy.roles` chart value that renders the policy's role selectors."""
    roles = pol.document.get("roles")
    return roles if roles is not None else default_policy().document.get("roles")
