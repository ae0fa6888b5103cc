"""What admission decided, per rule family (rules/outcomes.py), and its counter
`storage_affinity_admission_decisions_total`: the outcomes of real reviews, counted by the endpoints, with label
values from fixed sets whatever the object says."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from rules import pipeline
from rules.audit import finding_families
from rules.model import Decision, Finding, Severity
from rules.outcomes import DECISIONS, LEFT_ALONE, MUTATING_FAMILIES, WHYS, mutation_outcomes, shown, validation_outcomes
from rules.roles import RoleDecision
from testkit.reviews import admission_review
from tests.support import EXAMPLES, app_client, example_runtime, load_yaml, subject
from webhook.policy.file import load_policy_file

LOAD_AFFINITY_POLICY = EXAMPLES / "policy-load-affinity.yaml"


@pytest.mark.parametrize(
    ("example", "policy_file", "mutated", "validated"),
    [
        ("mover-pod.yaml", None, [("coScheduling", "pinned", "")], []),
        ("stuck-mover-pod.yaml", None, [("coScheduling", "left_alone", "nothing_to_do")], []),
        ("backup-pod.yaml", None, [("loadAffinity", "left_alone", "nothing_to_do")], []),
        ("backup-pod.yaml", LOAD_AFFINITY_POLICY, [("loadAffinity", "placed", "")], []),
        ("plain-pod.yaml", None, [], []),
        ("pinned-away-pod.yaml", None, [], [("placement", "refused", "")]),
        ("disk-contradiction-pod.yaml", None, [], [("diskAnnotations", "refused", "")]),
    ],
)
def test_a_review_is_counted_under_what_its_rules_decided(
    example: str, policy_file: Any, mutated: list[Any], validated: list[Any]
) -> None:
    runtime = example_runtime()
    policy = load_policy_file(policy_file)[0] if policy_file else runtime.policy
    obj = load_yaml(EXAMPLES / example)
    mutation = pipeline.mutate(subject(obj), runtime.view, policy, "saw")
    assert mutation.role is not None
    assert mutation_outcomes(mutation.role, mutation) == mutated
    assert validation_outcomes(pipeline.validate(subject(obj), runtime.view, policy, "saw")) == validated


def test_a_stopped_review_is_left_alone_with_why_and_nothing_it_recorded_counts() -> None:
    mover = RoleDecision("mover", "labels")
    recorded = {"co-scheduled-with": "db-0/n1 by requiredAffinity for claim data", "rule-error": "internal error"}
    assert mutation_outcomes(mover, Decision(audit=recorded)) == [("coScheduling", LEFT_ALONE, "rule_error")]
    assert mutation_outcomes(mover, Decision(audit={"lookup-failure": "GET node n1"})) == [
        ("coScheduling", LEFT_ALONE, "lookup_failed")
    ]
    untrusted = RoleDecision("backup", "labels", trusted=False)
    assert mutation_outcomes(untrusted, Decision()) == [("loadAffinity", LEFT_ALONE, "untrusted")]
    velero = RoleDecision("restore", "labels")
    placed = Decision(audit={"load-affinity-applied": "gp3", "node-agent-restricted": "n1"}, patch=[{}])
    assert mutation_outcomes(velero, placed) == [("loadAffinity", "placed", ""), ("nodeAgent", "restricted", "")]


def sample(family: str, decision: str, why: str = "") -> float:
    labels = {"family": family, "decision": decision, "why": why}
    return REGISTRY.get_sample_value("storage_affinity_admission_decisions_total", labels) or 0.0


def test_the_endpoints_count_each_decision_once() -> None:
    client = app_client()
    before = (sample("coScheduling", "pinned"), sample("placement", "refused"))
    mover = admission_review("CREATE", load_yaml(EXAMPLES / "mover-pod.yaml"), uid="a")
    pinned_away = admission_review("CREATE", load_yaml(EXAMPLES / "pinned-away-pod.yaml"), uid="b")
    for endpoint, review in (("mutate", mover), ("validate", mover), ("validate", pinned_away)):
        answer = client.post(f"/{endpoint}", data=json.dumps(review), content_type="application/json")
        assert answer.status_code == 200
    assert (sample("coScheduling", "pinned"), sample("placement", "refused")) == (before[0] + 1, before[1] + 1)
    assert 'storage_affinity_admission_decisions_total{decision="pinned",family="coScheduling",why=""}' in (
        client.get("/metrics").text
    )


_FAMILIES = frozenset({*MUTATING_FAMILIES, *finding_families()})
_AUDIT_KEYS = ["co-scheduled-with", "co-scheduling", "load-affinity-applied", "node-agent-restricted",
               "data-source-placed", "data-source", "follows-vm", "lookup-failure", "over-budget", "past-deadline",
               "rule-error"]  # fmt: skip


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    role=st.builds(
        RoleDecision,
        st.sampled_from([None, "mover", "backup", "restore", "none"]),
        st.just("labels"),
        trusted=st.booleans(),
    ),
    audit=st.dictionaries(
        st.one_of(st.sampled_from(_AUDIT_KEYS), st.text(max_size=10)),
        st.one_of(st.text(max_size=40), st.text(max_size=20).map(lambda t: f"not placed: {t} (x)")),
        max_size=5,
    ),
    patched=st.booleans(),
    denied=st.lists(st.one_of(st.sampled_from(sorted(_FAMILIES)), st.text(max_size=12)), max_size=4),
)
def test_label_values_come_from_fixed_sets_whatever_the_review(
    role: RoleDecision, audit: dict[str, str], patched: bool, denied: list[str]
) -> None:
    """A label value taken from input would make a series per value: family, decision and why are each one of a
    fixed set, and a family is counted at most once per review."""
    mutation = Decision(audit=audit, patch=[{"op": "add"}] if patched else [])
    validation = Decision(findings=[Finding("", "m", family, Severity.DENY) for family in denied])
    for outcomes in (mutation_outcomes(role, mutation), validation_outcomes(validation)):
        labelled = [shown(o, _FAMILIES) for o in outcomes]
        assert len({family for family, _, _ in outcomes}) == len(outcomes)
        for family, decided, why in labelled:
            assert family in _FAMILIES | {"other"} and decided in DECISIONS
            assert why in WHYS if decided == LEFT_ALONE else why == ""
