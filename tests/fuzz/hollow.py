"""Shapes the schema-valid strategies never build, for the idempotence fuzz (tests/fuzz/test_idempotence_fuzz.py).

kube-apiserver decodes an object before the mutating webhooks see it and validates it only after them, so a pod
under review may carry an empty list or object wherever one is expected (`required...: {}`, sent as
`nodeSelectorTerms: null`), nulls inside its scheduling fields, and a Job carries all of that one level deeper in
its template. A policy ConfigMap's YAML is read by nobody before us: anchors, tags, duplicate and null keys.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import strategies as st

from rules.model import Json
from testkit.reviews import admission_review
from tests.fuzz import strategies as s
from tests.fuzz.mutations import Path, _replace, get, one_of_list, paths

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
#: The fields of a pod spec (and below) whose containers the rules walk.
CONTAINERS = frozenset(
    {
        "metadata", "labels", "annotations", "spec", "template", "volumes", "persistentVolumeClaim", "ephemeral",
        "volumeClaimTemplate", "accessModes", "affinity", "nodeAffinity", REQUIRED, PREFERRED, "nodeSelectorTerms",
        "matchExpressions", "matchFields", "values", "preference", "nodeSelector", "tolerations", "schedulingGates",
    }
)  # fmt: skip
#: Scheduling values planted whole into a pod spec: every empty or null the decoder lets through.
PLANTED: dict[str, tuple[Any, ...]] = {
    "affinity": (
        None,
        {},
        {"nodeAffinity": None},
        {"nodeAffinity": {}},
        {"nodeAffinity": {REQUIRED: None}},
        {"nodeAffinity": {REQUIRED: {}}},
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": None}}},
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}},
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{}]}}},
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": None, "matchFields": []}]}}},
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "Exists",
                                                                                 "values": None}]}]}}},
        {"nodeAffinity": {PREFERRED: None, REQUIRED: {"nodeSelectorTerms": None}}},
        {"nodeAffinity": {PREFERRED: [], REQUIRED: {}}, "podAffinity": {}},
    ),
    "nodeSelector": (None, {}),
    "tolerations": (None, [], [{}], [{"key": None, "operator": None, "value": None, "effect": None}]),
    "volumes": (None, []),
    "schedulingGates": (None, []),
    "nodeName": (None, ""),
}  # fmt: skip


def pod_specs(obj: Json) -> list[Path]:
    """Where the pod specs of a Pod or Job are, inside `request.object`."""
    if obj.get("kind") == "Job":
        return [("request", "object", "spec", "template", "spec")]
    return [("request", "object", "spec")]


def _is_container(doc: Json, path: Path) -> bool:
    last = next((p for p in reversed(path) if isinstance(p, str)), None)
    return last in CONTAINERS and isinstance(get(doc, path), dict | list) and path[:2] == ("request", "object")


def emptied(draw: st.DrawFn, doc: Json) -> Json:
    """An object or list the rules walk made empty (of its own type) or null."""
    found = [p for p in paths(doc) if len(p) > 2 and _is_container(doc, p)]
    if not found:
        return doc
    path = one_of_list(draw, found)
    empty: Json | list[Any] = {} if isinstance(get(doc, path), dict) else []
    return _replace(doc, path, empty if draw(st.booleans()) else None)


def planted(draw: st.DrawFn, doc: Json) -> Json:
    """A scheduling field of a pod spec set to an empty or null shape (the user's own content replaced)."""
    spec_path = one_of_list(draw, pod_specs(doc["request"]["object"]))
    try:
        spec = get(doc, spec_path)
    except (KeyError, IndexError, TypeError):
        return doc
    if not isinstance(spec, dict):
        return doc
    name = one_of_list(draw, ["affinity", "affinity", *sorted(PLANTED)])  # the one whose shapes matter most
    return _replace(doc, (*spec_path, name), copy.deepcopy(one_of_list(draw, PLANTED[name])))


def nulled(draw: st.DrawFn, doc: Json) -> Json:
    """One field of an object inside the scheduling fields set to null (absent fields too)."""
    found = [p for p in paths(doc) if len(p) > 2 and _is_container(doc, p) and isinstance(get(doc, p), dict)]
    if not found:
        return doc
    path = one_of_list(draw, found)
    target = get(doc, path)
    names = sorted({*(k for k in target if isinstance(k, str)), "nodeSelectorTerms", "values", "tolerations"})
    return _replace(doc, path, {**target, one_of_list(draw, names): None})


HOLLOWINGS = (emptied, planted, planted, nulled)


def as_job(review: Json) -> Json:
    """A Pod review as the review of a Job whose template is that pod: the same rules, one level deeper."""
    pod = review["request"]["object"]
    metadata = pod.get("metadata") or {}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hollow-job", "namespace": metadata.get("namespace") or s.NAMESPACE},
        "spec": {"template": {"metadata": metadata, "spec": {**(pod.get("spec") or {}), "restartPolicy": "Never"}}},
    }
    return admission_review("CREATE", job, uid="hollow-job", userInfo={"username": "fuzzer"})


@st.composite
def hollowed(draw: st.DrawFn, review: Json) -> Json:
    """A Pod or Job review (a Pod sometimes made a Job) after one to three hollowings."""
    if review["request"]["object"].get("kind") == "Pod" and draw(st.integers(0, 2)) == 0:
        review = as_job(review)
    for _ in range(draw(st.integers(1, 3))):
        review = one_of_list(draw, HOLLOWINGS)(draw, review)
    return review


# --- policy YAML --------------------------------------------------------------------------------------------

#: Lines a person could write into a policy, each a shape JSON has no word for.
ODD_LINES = (
    "~: a",
    "null: 1",
    "1: a",
    "true: [x]",
    "? [a, b]\n: c",
    "tolerations: &t []\nloadAffinity: *t",
    "enforcement: !!str deny",
    "enforcement: !!binary ZGVueQ==",
    "excludedNamespaces: !!set {a, b}",
    "onLookupFailure: !custom allow",
    "backupPVC: {2026-01-01: {storageClass: gp3}}",
    'tolerations: [{key: "\\ud800", operator: Exists}]',
    "roles: {~: {selectors: []}}",
    "<<: {enforcement: warn}",
)


@st.composite
def odd_policy_texts(draw: st.DrawFn) -> str:
    """A valid policy's YAML with a block repeated (a duplicate key), a key made null, or an odd line added."""
    doc = draw(s.policy_documents())
    text = yaml.safe_dump(doc, default_flow_style=False, sort_keys=False)
    lines = text.splitlines()
    how = draw(st.integers(0, 2))
    if how == 0 and lines:
        starts = [i for i, line in enumerate(lines) if line and not line.startswith((" ", "-"))]
        begin = one_of_list(draw, starts)
        end = next((i for i in starts if i > begin), len(lines))
        lines = [*lines, *lines[begin:end]]
    elif how == 1 and lines:
        keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("- ")]
        if keyed:
            at = one_of_list(draw, keyed)
            indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
            lines[at] = indent + draw(st.sampled_from(("~", "null", "1", "true"))) + ":" + lines[at].split(":", 1)[1]
    else:  # between two top-level blocks, so the line is read as one more key of the policy
        starts = [i for i, line in enumerate(lines) if line and not line.startswith((" ", "-"))]
        lines.insert(one_of_list(draw, [*starts, len(lines)]), one_of_list(draw, ODD_LINES))
    return "\n".join(lines) + "\n"
