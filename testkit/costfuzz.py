"""The cost fuzzer's objects: every shape the webhook reads, grown one dimension at a time within the review budget.

A case is an object kind (a Pod, a Job, each workload kind's pod template, the policy and Velero ConfigMaps), a
base (a plain pod, a VolSync mover, a trusted Velero backup pod; a ConfigMap is its own base) and one dimension a
tenant can grow (volumes, containers, tolerations, terms, requirements, values, annotation keys, load-affinity
entries, claim templates, the pods of a claim and the nodes in the state, ...). `build(case, n)` gives the review
and the cluster state at size n; every other dimension stays at its base. What grows is hostile: items the label
index cannot narrow, distinct at each size (no memo answers a larger size from a smaller one), near a known name
where a did-you-mean would look.

`DIMENSIONS` says which fields of rules/kube/shapes.py each one grows (`paths`), so that tests/fuzz/test_cost.py
can fail when a list or map field the rules read is grown by no dimension. tests/fuzz/test_cost.py counts the
calls of each review under a profile hook; `python -m bench.costfuzz` times them at 1,000 and 5,000 nodes.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import FrameType

import yaml

from rules.model import Json
from rules.policy import Policy, policy_from_document
from rules.safeload import dump_json
from testkit import ROOT, hostile, yamldocs
from testkit.costdims import CLAIM, DIMENSIONS, NS, POD_KINDS, POLICY_CM, Dimension
from testkit.reviews import admission_review
from webhook.app.codec import build_response, decode_review
from webhook.app.endpoints import ENDPOINTS
from webhook.runtime import Runtime
from webhook.state.index import ClusterIndex

VELERO = hostile.VELERO_NAMESPACE
ANCHOR_NODE = "node-00001"
TENANT = "system:serviceaccount:tenant:builder"
VELERO_CONFIG = ("velero", "node-agent-config")


@cache
def policy() -> Policy:
    """The benchmark's policy (load-affinity entries, backup tolerations) reading Velero's node-agent ConfigMap."""
    doc = yamldocs.load((ROOT / "examples" / "policy-load-affinity.yaml").read_text(encoding="utf-8"))
    doc["loadAffinitySource"] = {"configMap": {"namespace": VELERO_CONFIG[0], "name": VELERO_CONFIG[1]}}
    return policy_from_document(doc)


# --- bases ----------------------------------------------------------------------------------------------------


def base_pod(base: str) -> Json:
    """The pod (or pod template) a dimension grows on: a plain tenant pod, a VolSync mover of claim CLAIM, a
    Velero backup pod of Velero's namespace (trusted there by the default policy) with a load-affinity entry."""
    if base == "mover":
        return hostile.claims_pod("mover", [CLAIM])
    if base == "backup":
        return hostile.backup_pod(0, 1)
    return hostile.pod("plain")


def state(n_nodes: int = 8) -> list[Json]:
    """The base cluster: nodes, the claim's class, the claim and the Running pod that anchors it."""
    anchor = hostile.pod("anchor", claim=CLAIM)
    anchor["spec"]["nodeName"] = ANCHOR_NODE
    anchor["status"] = {"phase": "Running"}
    return [*hostile.nodes(n_nodes), hostile.storage_class(), hostile.claim_object(CLAIM), anchor]


def as_kind(pod: Json, kind: str) -> Json:
    """`pod` as the object of `kind` a tenant would create: itself, or the pod template of a workload."""
    if kind == "Pod":
        return pod
    metadata = pod["metadata"]
    name, namespace = metadata["name"], metadata.get("namespace", NS)
    template = {
        "metadata": {k: v for k, v in metadata.items() if k in ("labels", "annotations", "ownerReferences")},
        "spec": pod["spec"],
    }
    head = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{kind}-{name}"}}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": "Job", **head, "spec": {"template": template}}
    if kind == "CronJob":
        job = {"spec": {"template": template}}
        return {"apiVersion": "batch/v1", "kind": kind, **head, "spec": {"schedule": "@daily", "jobTemplate": job}}
    spec: Json = {"selector": {"matchLabels": {"app": name}}, "template": template}
    if kind == "StatefulSet":
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "claim"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
    return {"apiVersion": "apps/v1", "kind": kind, **head, "spec": spec}


@dataclass(frozen=True)
class Case:
    kind: str
    base: str
    dimension: Dimension

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.base}-{self.dimension.name}" if self.base else f"{self.kind}-{self.dimension.name}"


def cases() -> list[Case]:
    out = []
    for dimension in DIMENSIONS:
        for kind in dimension.kinds:
            bases = dimension.bases if kind in POD_KINDS else ("",)
            out += [Case(kind, base, dimension) for base in bases]
    return out


def _config_map(kind: str) -> Json:
    if kind == POLICY_CM:
        document = yaml.safe_dump({"enforcement": "deny", "loadAffinity": []})
        metadata = {"name": "policy", "namespace": "saw", "labels": {"storage-affinity.io/policy": "true"}}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"policy.yaml": document}}
    metadata = {"name": VELERO_CONFIG[1], "namespace": VELERO_CONFIG[0]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"node-agent-config.json": "{}"}}


def build(case: Case, n: int, salt: str, nodes: int = 8) -> tuple[Json, list[Json]]:
    """The reviewed object with `case`'s dimension at n, and the cluster state of `nodes` nodes to review it
    against."""
    dimension = case.dimension
    if case.kind in POD_KINDS:
        pod = copy.deepcopy(base_pod(case.base))
        if not dimension.whole:
            dimension.grow(pod, n, salt)
        obj = as_kind(pod, case.kind)
    else:
        obj = _config_map(case.kind)
    if dimension.whole:
        dimension.grow(obj, n, salt)
    return obj, [*state(nodes), *dimension.cluster(n, salt)]


def body(obj: Json) -> bytes:
    namespace = str(obj["metadata"].get("namespace") or "")
    user = "system:serviceaccount:velero:velero" if namespace == VELERO else TENANT
    return json.dumps(admission_review("CREATE", obj, userInfo={"username": user})).encode()


def runtime(objects: list[Json]) -> Runtime:
    """A fresh index: a node set no memo has seen."""
    index = ClusterIndex()
    for obj in objects:
        index.apply(obj)
    return Runtime(policy=policy(), view=index, namespace="saw")


def answer(endpoint: str, rt: Runtime, review: bytes) -> bytes:
    """What the server runs for `endpoint` between the socket and the response (as bench/handler.py does)."""
    served = ENDPOINTS[endpoint]
    request = decode_review(review)
    return dump_json(build_response(request, served.handler(request, rt), mutating=served.mutating))


@dataclass
class Prepared:
    """One measurement's inputs, built before it is measured."""

    review: bytes
    runtime: Runtime
    answers: list[bytes] = field(default_factory=list)

    def run(self) -> None:
        self.answers = [answer(endpoint, self.runtime, self.review) for endpoint in ("mutate", "validate")]


def prepared(case: Case, n: int, salt: str, nodes: int = 8) -> Prepared:
    obj, objects = build(case, n, salt, nodes)
    return Prepared(body(obj), runtime(objects))


# --- counting: calls under a profile hook ---------------------------------------------------------------------

#: The refusals a measured review must not get: past the deadline, past the budget, a rule that crashed.
REFUSALS = (b"past the review deadline", b"over the review budget", b"internal error")
#: Salts of the warm-up, the base, size n and size 2n: no two measurements of a case share a name.
SALTS = ("s1", "s2", "s3", "s4")


def refusal(answers: list[bytes]) -> str | None:
    """The first refusal among a measurement's answers, or None."""
    return next((r.decode() for r in REFUSALS for a in answers if r in a), None)


class Calls:
    """A profile hook counting every function call, Python or C, while a review runs (`sys.setprofile`)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            self.count += 1


def counted(case: Case, n: int, salt: str) -> tuple[int, Prepared]:
    """The calls both webhooks make to answer `case` at size n (built first, not counted)."""
    run = prepared(case, n, salt)
    calls = Calls()
    sys.setprofile(calls)
    try:
        run.run()
    finally:
        sys.setprofile(None)
    return calls.count, run


def costs(
    case: Case, n: int, measure: Callable[[Case, int, str], tuple[float, Prepared]], *, floor: float = 1e-9
) -> Json:
    """`case` measured by `measure` at 0, n and 2n after a warm-up: the three costs, the marginal ratio
    (cost(2n) − cost(0)) ÷ max(cost(n) − cost(0), `floor`) and the first refusal any answer got. `floor` is the
    marginal cost below which a dimension counts as free: a few calls more at 2n over none at n are no growth."""
    measure(case, 0, SALTS[0])
    results = [measure(case, size, salt) for size, salt in zip((0, n, 2 * n), SALTS[1:], strict=True)]
    base, once, twice = (cost for cost, _ in results)
    refused = next(
        (
            f"{r} (size {size})"
            for size, (_, run) in zip((0, n, 2 * n), results, strict=True)
            if (r := refusal(run.answers))
        ),
        None,
    )
    return {
        "case": case.id,
        "n": n,
        "costs": [base, once, twice],
        "ratio": round((twice - base) / max(once - base, floor), 3),
        "refused": refused,
    }
