"""What a tenant's pod may learn from the webhook (docs/design.md#13-what-a-review-may-tell): the cases of
tests/data/disclosure/cases.yaml, each reviewed as the API server chains the webhooks and then audited as a stuck
pod. Every text the tenant can read (warnings, denials, patches, reasons, audit annotations, audit findings,
stuck causes and the policy report of its namespace) is searched for the foreign facts the case names."""

from __future__ import annotations

import copy
import json
from datetime import datetime

import pytest

from rules import pipeline
from rules.audit import audit_objects
from rules.model import Json
from rules.reports import OPENREPORTS, build_reports
from tests.support import DATA, check_table_case, load_yaml, merged, policy, subject, table_cases, view_from

TABLE_PATH = DATA / "disclosure" / "cases.yaml"
TABLE = load_yaml(TABLE_PATH)
NOW = datetime.fromisoformat(TABLE["now"])
CASE_KEYS = {
    "name", "source", "state", "policy", "pod", "patch", "warnings", "validation_warnings", "violations", "reasons",
    "never", "same_as",
}  # fmt: skip
CASES = table_cases(TABLE_PATH, CASE_KEYS, section="cases")
BY_NAME = {param.values[0]["name"]: param.values[0] for param in CASES}


def state(case: Json) -> list[Json]:
    return copy.deepcopy([TABLE["objects"][name] for name in case["state"]])


def told(case: Json) -> Json:
    """Everything the tenant reads about its pod: the mutation, the validation of its result, the audit of the
    pod as it stands (stuck for an hour) and the report written to its namespace."""
    view, pol = view_from(*state(case)), policy(case.get("policy"))
    obj = merged(TABLE["pod"], case.get("pod") or {})
    mutation = pipeline.mutate(subject(obj), view, pol)
    result = pipeline.mutate_then_validate(subject(obj), view, pol)
    validation = result.validation
    (audit,) = audit_objects([obj], view, pol, now=NOW)
    reports = build_reports([audit], OPENREPORTS, now=0)
    return {
        "patch": mutation.patch,
        "warnings": mutation.warnings,
        "reasons": mutation.reasons,
        "audit annotations": mutation.audit,
        "findings": [[f.field, f.message, f.severity.value] for f in validation.findings],
        "validation warnings": validation.warnings,
        "validation reasons": validation.reasons,
        "audit": audit.as_json(),
        "reports": list(reports.values()),
    }


@pytest.mark.parametrize("case", CASES)
def test_case(case: Json) -> None:
    """The case's expectations, those of the case it answers as (`same_as`) where it states none."""
    expected = {**BY_NAME.get(case.get("same_as", ""), {}), **case}
    obj = merged(TABLE["pod"], case.get("pod") or {})
    check_table_case(expected, view_from(*state(case)), policy(case.get("policy")), obj)


@pytest.mark.parametrize("case", CASES)
def test_no_foreign_fact_is_told(case: Json) -> None:
    everything = told(case)
    for where, value in everything.items():
        text = json.dumps(value, ensure_ascii=False)
        for fact in case.get("never", ()):
            assert fact not in text, f"{where} tells {fact!r}: {text}"


@pytest.mark.parametrize("case", [c for c in CASES if "same_as" in c.values[0]])
def test_what_the_tenant_may_not_read_changes_no_answer(case: Json) -> None:
    assert told(case) == told(BY_NAME[case["same_as"]])
