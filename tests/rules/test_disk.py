"""Disk (anti-)affinity annotation rules: the tables in tests/data/disk/, run through the whole pipeline."""

from __future__ import annotations

import copy

import pytest

from rules import pipeline
from rules.checks import disk
from rules.checks.disk import split_list
from rules.model import Json
from tests.support import DATA, load_yaml, policy, subject, table_cases, validate_strict, view_from

DISK_KEYS = {
    "annotations", "kind", "labels", "name", "namespace", "object", "old_annotations", "operation", "statefulset",
    "violations", "volumes", "warnings", "source"
}  # fmt: skip

TABLES = sorted((DATA / "disk").glob("*.yaml"))
CASES = table_cases(DATA / "disk", DISK_KEYS, section="cases")


def build(case: Json) -> Json:
    """The object a case describes: a full `object`, or a pod (or Job) built from annotations and labels."""
    if "object" in case:
        return copy.deepcopy(case["object"])
    if "statefulset" in case:
        return statefulset_pod(case["statefulset"])
    volumes = case.get("volumes", [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    metadata: Json = {"name": "app-0", "namespace": case.get("namespace", "shop")}
    if case.get("labels") is not None:
        metadata["labels"] = case["labels"]
    if case.get("annotations") is not None:
        metadata["annotations"] = case["annotations"]
    pod = {"metadata": metadata, "spec": {"containers": [{"name": "app", "image": "busybox"}], "volumes": volumes}}
    if case.get("kind", "Pod") == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", **pod}
    template = {"metadata": {k: v for k, v in metadata.items() if k not in ("name", "namespace")}, "spec": pod["spec"]}
    template["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "app", "namespace": metadata["namespace"]},
        "spec": {"template": template},
    }


def statefulset_pod(sts: Json, ordinal: int = 0, namespace: str = "default") -> Json:
    """The pod the StatefulSet controller creates: the template, named `<set>-<n>`, one claim per template."""
    name = f"{sts['metadata']['name']}-{ordinal}"
    template = copy.deepcopy(sts["spec"]["template"])
    spec = template["spec"]
    spec["volumes"] = [
        *spec.get("volumes", ()),
        *(
            {"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": f"{t['metadata']['name']}-{name}"}}
            for t in sts["spec"].get("volumeClaimTemplates", ())
        ),
    ]
    metadata = {**template.get("metadata", {}), "name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def old_object(case: Json, obj: Json) -> Json | None:
    """The object before an UPDATE: `obj` with the case's `old_annotations` (null: none), or None for a CREATE."""
    if "old_annotations" not in case:
        return None
    old = copy.deepcopy(obj)
    old["metadata"]["annotations"] = case["old_annotations"]
    if old["metadata"]["annotations"] is None:
        del old["metadata"]["annotations"]
    return old


@pytest.mark.parametrize("case", CASES)
def test_disk_table(case: Json) -> None:
    if "statefulset" in case:
        validate_strict(case["statefulset"])
    obj = build(case)
    validate_strict(obj)  # the inputs are real objects: the API server would pass them to the webhook
    old = old_object(case, obj)
    decision = pipeline.validate(subject(obj, case.get("operation", "CREATE"), old), view_from(), policy())
    assert [f.text() for f in decision.denials] == case.get("violations", [])
    assert decision.warnings == case.get("warnings", [])
    assert decision.allowed is not case.get("violations")
    assert decision.failure is None


@pytest.mark.parametrize(
    ("value", "items", "problems"),
    [
        ("a", ["a"], []),
        (" a ,  b ", ["a", "b"], []),
        ("a,", ["a"], ["item 2 of 2 is empty (remove the extra comma)"]),
        (",a", ["a"], ["item 1 of 2 is empty (remove the extra comma)"]),
        ("a,,b", ["a", "b"], ["item 2 of 3 is empty (remove the extra comma)"]),
        ("a, ,b", ["a", "b"], ["item 2 of 3 is empty (remove the extra comma)"]),
        ("a,b,a,a", ["a", "b"], ['"a" is listed more than once']),
        ("a, a", ["a"], ['"a" is listed more than once']),
        ("", [], ["must not be empty"]),
        ("   ", [], ["must not be empty"]),
        (",", [], ["item 1 of 2 is empty (remove the extra comma)", "item 2 of 2 is empty (remove the extra comma)"]),
    ],
)
def test_list_grammar(value: str, items: list[str], problems: list[str]) -> None:
    assert split_list(value) == (items, problems)


def test_every_table_case_is_distinct() -> None:
    names = [case["name"] for table in TABLES for case in load_yaml(table)["cases"]]
    assert len(names) == len(set(names))


#: Annotation maps the rule skips at once (no disk annotation, no misplaced taint), with keys that come close: the
#: domain elsewhere in the key, a prefix that only ends like it, csi-baremetal keys of other domains.
SKIPPED = [
    {},
    {"team": "a"},
    {"example.com/volumes.csi-baremetal.dell.com": "x"},
    {"xvolumes.csi-baremetal.dell.com/types": "pod-bound-preferred"},
    {"affinity.csi-baremetal.dell.com/types": "pod-bound-preferred", "csi-baremetal.dell.com/x": "y"},
    {"volumes.csi-baremetal.dell.com": "no slash"},
]


@pytest.mark.parametrize("annotations", SKIPPED)
def test_pods_without_disk_annotations_are_skipped_and_would_have_no_finding(
    annotations: Json, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path only skips what the whole rule would find nothing in."""
    obj = build({"annotations": annotations})
    assert not disk._mentions_disks(annotations)
    monkeypatch.setattr(disk, "_mentions_disks", lambda annotations: True)
    decision = pipeline.validate(subject(obj), view_from(), policy())
    assert decision.findings == []


@pytest.mark.parametrize("case", [p for p in CASES if p.values[0].get("operation", "CREATE") == "CREATE"])
def test_the_fast_path_gives_every_created_table_case_the_whole_rule_s_answer(
    case: Json, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path is taken on CREATE only; an UPDATE always runs the whole rule."""
    obj = build(case)
    fast = pipeline.validate(subject(copy.deepcopy(obj)), view_from(), policy())
    monkeypatch.setattr(disk, "_mentions_disks", lambda annotations: True)
    whole = pipeline.validate(subject(obj), view_from(), policy())
    assert (fast.findings, fast.warnings) == (whole.findings, whole.warnings)
