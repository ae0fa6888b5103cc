"""No answer a tenant reads depends on a node label it may not know (docs/design.md#13-what-a-review-may-tell).

Two clusters that differ only in the values (and presence) of node labels outside the disclosed keys (the
well-known topology labels and those the policy names, rules/kube/disclosed.py) must give every pod the same
answers: the mutation's patch, warnings and reasons, the validation's verdict, findings and warnings, and the
audit of the pod as a stuck pod. The pods are built to ask exactly the questions that made the oracle: `matchFields`
pinning one node with `Gt`/`Lt`/`In` on a secret label, nodeSelectors on it with or without `spec.nodeName`, a
mover whose own constraints may exclude its anchor's node, and backup pods claiming the role with load-affinity
entries `hostname=node-i, customer=<guess>`.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules import pipeline
from rules.annotations import LOAD_AFFINITY
from rules.audit import audit_objects
from rules.model import Json
from rules.policy import Policy, default_policy, policy_from_document
from tests.fuzz.profiles import examples
from tests.support import subject, view_from

NOW = datetime.fromisoformat("2026-11-20T12:00:00+00:00")
NODES = ("node-0", "node-1", "node-2")
HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
#: Labels no tenant may read: a customer name and an integer (the two the bisection and the guessing recovered).
SECRET = ("customer", "rack")
#: A key the policy below names in its load affinity: disclosed by it, so held equal in both clusters.
NAMED = "pool"
GUESSES = ("acme", "globex", "initech", "3", "7", "12")
POLICIES = (
    default_policy(),
    policy_from_document({"loadAffinity": [{"nodeSelector": {"matchLabels": {NAMED: "backup"}}}]}),
)


def _secret_labels() -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries(
        {}, optional={"customer": st.sampled_from(GUESSES[:3]), "rack": st.sampled_from(GUESSES[3:])}
    )


@st.composite
def twin_clusters(draw: st.DrawFn) -> tuple[list[Json], list[Json]]:
    """The same nodes (names, hostname, zone, the policy's key) with secret labels drawn twice."""
    first: list[Json] = []
    second: list[Json] = []
    for name in NODES[: draw(st.integers(1, len(NODES)))]:
        labels = {HOSTNAME: name, ZONE: draw(st.sampled_from(("zone-a", "zone-b")))}
        if draw(st.booleans()):
            labels[NAMED] = "backup"
        for out in (first, second):
            node_labels = {**labels, **draw(_secret_labels())}
            out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}})
    return first, second


def _requirement(draw: st.DrawFn) -> Json:
    key = draw(st.sampled_from((*SECRET, HOSTNAME, ZONE, NAMED)))
    operator = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")))
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    if operator in ("Gt", "Lt"):
        return {"key": key, "operator": operator, "values": [draw(st.sampled_from(("0", "5", "10")))]}
    values = draw(
        st.lists(st.sampled_from((*GUESSES, *NODES, "zone-a", "backup")), min_size=1, max_size=2, unique=True)
    )
    return {"key": key, "operator": operator, "values": values}


@st.composite
def _term(draw: st.DrawFn) -> Json:
    term: Json = {}
    expressions = [_requirement(draw) for _ in range(draw(st.integers(0, 3)))]
    if expressions:
        term["matchExpressions"] = expressions
    if draw(st.booleans()) or not expressions:
        term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": [draw(st.sampled_from(NODES))]}]
    return term


@st.composite
def tenant_pods(draw: st.DrawFn) -> Json:
    """A pod of namespace tenant-a asking about the secret labels, in each role a tenant can claim."""
    role = draw(st.sampled_from(("plain", "mover", "backup")))
    metadata: Json = {
        "name": "probe",
        "namespace": "tenant-a",
        "creationTimestamp": "2026-11-20T11:00:00Z",
        "labels": {},
        "annotations": {},
    }
    spec: Json = {"containers": [{"name": "c", "image": "busybox"}]}
    if role == "mover":
        metadata["labels"]["app.kubernetes.io/created-by"] = "volsync"
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    if role == "backup":
        metadata["annotations"]["storage-affinity.io/role"] = "backup"
        entries = [
            {"nodeSelector": {"matchLabels": {HOSTNAME: node, "customer": draw(st.sampled_from(GUESSES))}}}
            for node in draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3))
        ]
        metadata["annotations"][LOAD_AFFINITY] = json.dumps(entries)
    if draw(st.booleans()):
        spec["nodeName"] = draw(st.sampled_from((*NODES, "node-9")))
    selector = draw(
        st.dictionaries(
            st.sampled_from((*SECRET, HOSTNAME, ZONE, NAMED)), st.sampled_from((*GUESSES, *NODES)), max_size=2
        )
    )
    if selector:
        spec["nodeSelector"] = selector
    terms = draw(st.lists(_term(), max_size=3))
    if terms:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


def _claim_objects(anchor_node: str) -> list[Json]:
    """A ReadWriteOnce claim of tenant-a held by a running pod on `anchor_node`: a mover is pinned there."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "tenant-a"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "volumeName": "pv-data"},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "app", "namespace": "tenant-a", "creationTimestamp": "2026-11-20T10:00:00Z"},
            "spec": {
                "nodeName": anchor_node,
                "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            },
            "status": {"phase": "Running"},
        },
    ]


def told(pod: Json, state: list[Json], pol: Policy) -> dict[str, Any]:
    """Everything the pod's author reads: the mutation, the validation of its result, the audit of the pod."""
    view = view_from(*copy.deepcopy(state))
    mutation = pipeline.mutate(subject(copy.deepcopy(pod)), view, pol)
    validation = pipeline.mutate_then_validate(subject(copy.deepcopy(pod)), view, pol).validation
    (audit,) = audit_objects([copy.deepcopy(pod)], view, pol, now=NOW)
    return {
        "patch": mutation.patch,
        "warnings": mutation.warnings,
        "reasons": mutation.reasons,
        "audit annotations": mutation.audit,
        "allowed": validation.allowed,
        "findings": [[f.field, f.message, f.severity.value] for f in validation.findings],
        "validation warnings": validation.warnings,
        "audit": audit.as_json(),
    }


@settings(max_examples=examples(300))
@given(
    clusters=twin_clusters(),
    pod=tenant_pods(),
    anchor=st.sampled_from(NODES),
    pol=st.sampled_from(POLICIES),
)
def test_undisclosed_label_values_change_no_answer(
    clusters: tuple[list[Json], list[Json]], pod: Json, anchor: str, pol: Policy
) -> None:
    first, second = clusters
    anchor = anchor if any(n["metadata"]["name"] == anchor for n in first) else first[0]["metadata"]["name"]
    claims = _claim_objects(anchor)
    assert told(pod, [*first, *claims], pol) == told(pod, [*second, *claims], pol)
