"""Placement from where the data comes from (docs/design.md#12-data-sources): the tables in
tests/data/datasource/*.yaml, run through the mutating and then the validating pipeline as the API server chains
them; every patch is applied, schema-validated and reviewed again for idempotence (tests.support.mutate_checked)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules.model import Json
from tests.support import DATA, check_table_case, load_yaml, merged, policy, table_cases, view_from

CASES_DIR = DATA / "datasource"
LIBRARY = load_yaml(CASES_DIR / "library.yaml")
CASE_KEYS = {
    "name", "source", "state", "policy", "base", "pod", "job", "patch", "warnings", "violations",
    "validation_warnings", "reasons", "audit",
}  # fmt: skip


def state_objects(entries: list[Any]) -> list[Json]:
    """Library objects by name, `@cdi` for the CDI/KubeVirt set, or whole objects."""
    out: list[Json] = []
    for entry in entries:
        if entry == "@cdi":
            out.extend(LIBRARY["objects-cdi"])
        else:
            out.append(LIBRARY["objects"][entry] if isinstance(entry, str) else entry)
    return copy.deepcopy(out)


def load_cases() -> list[Any]:
    return table_cases(CASES_DIR, CASE_KEYS)


def subject_object(case: Json) -> Json:
    if "job" in case:
        return merged(LIBRARY["job"], case["job"] or {})
    base = LIBRARY["bases"][case["base"]] if "base" in case else LIBRARY["mover"]
    return merged(base, case.get("pod") or {})


@pytest.mark.parametrize("case", load_cases())
def test_case(case: Json) -> None:
    view = view_from(*state_objects(case.get("state", [])))
    pol = policy(case.get("policy"))
    obj = subject_object(case)

    check_table_case(case, view, pol, obj)


def test_a_case_that_leaves_out_a_validation_warning_fails() -> None:
    """The harness compares the validating webhook's warnings too, not only its denials and the mutation's."""
    [case] = [
        p.values[0] for p in load_cases() if p.id == "snapshot:a nodeSelector that excludes the source's node is denied"
    ]
    assert case["validation_warnings"]
    view, pol, obj = view_from(*state_objects(case["state"])), policy(case.get("policy")), subject_object(case)
    check_table_case(case, view, pol, obj)
    with pytest.raises(AssertionError):
        check_table_case({**case, "validation_warnings": []}, view, pol, obj)
