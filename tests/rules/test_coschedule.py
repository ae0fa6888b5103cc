"""Co-scheduling of data movers (docs/design.md#4-co-scheduling-movers): the table in tests/data/coschedule/*.yaml,
run through the mutating and then the validating pipeline exactly as the API server chains them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules.model import Json
from tests.support import DATA, check_table_case, load_yaml, merged, policy, table_cases, view_from

CASES_DIR = DATA / "coschedule"
LIBRARY = load_yaml(CASES_DIR / "library.yaml")
CASE_KEYS = {
    "name", "why", "state", "policy", "mover", "job", "patch", "warnings", "violations",
    "validation_warnings", "reasons", "audit", "source",
}  # fmt: skip


def shorthand_pod(spec: Json) -> Json:
    """`{pod: db-0, claims: [data], phase: Running, node: n, ...}` as a complete Pod in namespace shop."""
    volumes: list[Json] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in spec.get("claims", ())]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in spec.get("ephemeral", ())]
    metadata: Json = {"name": spec["pod"], "namespace": spec.get("namespace", "shop")}
    for key, field in (("created", "creationTimestamp"), ("labels", "labels"), ("annotations", "annotations")):
        if key in spec:
            metadata[field] = spec[key]
    if spec.get("deleting"):
        metadata["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    pod_spec: Json = {"containers": [{"name": "app", "image": "busybox"}], "volumes": volumes}
    if "node" in spec:
        pod_spec["nodeName"] = spec["node"]
    if "tolerations" in spec:
        pod_spec["tolerations"] = spec["tolerations"]
    pod: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    if "phase" in spec:
        pod["status"] = {"phase": spec["phase"]}
    return pod


def state_object(entry: Any) -> Json:
    if isinstance(entry, str):
        return copy.deepcopy(LIBRARY["objects"][entry])
    if isinstance(entry, dict) and "pod" in entry:
        return shorthand_pod(entry)
    return copy.deepcopy(entry)


def load_cases() -> list[Any]:
    return table_cases(CASES_DIR, CASE_KEYS)


def subject_object(case: Json) -> Json:
    if "job" in case:
        return merged(LIBRARY["job"], case["job"] or {})
    return merged(LIBRARY["mover"], case.get("mover") or {})


@pytest.mark.parametrize("case", load_cases())
def test_case(case: Json) -> None:
    view = view_from(*(state_object(e) for e in case.get("state", ())))
    pol = policy(case.get("policy"))
    obj = subject_object(case)

    check_table_case(case, view, pol, obj)
