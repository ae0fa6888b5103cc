"""The review budget: an object past a limit is answered at once, naming the limit; no cross product is built past
one; what is within the budget is placed as before, at a cost that does not multiply terms by nodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rules import budget, pipeline
from rules.budget import OverBudget, check_product, terms_excess
from rules.kube import nodeaffinity, selectors
from rules.kube.nodeaffinity import REQUIRED, and_terms, simplify, terms_imply
from rules.model import Decision, Json, Severity
from rules.policy import default_policy
from testkit import hostile
from tests.support import DATA, dig, mutate_checked, policy, subject, table_cases, view_from


def built(spec: Json) -> tuple[Json, list[Json]]:
    """The case's object and the objects of its namespace, from testkit/hostile.py."""
    builder = spec["builder"]
    if builder == "affinity_pod":
        return hostile.affinity_pod(spec["terms"]), []
    if builder == "cdi_importer":
        return hostile.cdi_importer(spec["pod_terms"], spec["vm_terms"], spec.get("vms", 1))
    return hostile.backup_pod(spec["pod_terms"], spec["entries"]), []


KEYS = {"name", "source", "object", "nodes", "enforcement", "mutation", "validation", "limit", "field"}
KEYS |= {"placement", "terms_written", "node_checks"}


def counting(calls: list[int], real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, appending to `calls` at each call: the work a test bounds is counted, never timed."""

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    return counted


def _named(decision: Decision, case: Json, *, denied: bool) -> None:
    """The decision names the case's limit (and field), as a denial or as a warning."""
    limit, field = case["limit"], case.get("field", "")
    assert decision.over_budget is not None and limit in decision.over_budget
    why = decision.over_budget.removeprefix(f"{field}: " if field else "")
    assert why.startswith("over the review budget: ") and why.endswith(limit), why
    if denied:
        found = [f for f in decision.findings if f.family == budget.FAMILY]
        assert [(f.field, f.severity, f.message) for f in found] == [(field, Severity.DENY, why)]
    else:
        assert any(limit in w and (not field or field in w) for w in decision.warnings), decision.warnings


@pytest.mark.parametrize("case", table_cases(DATA / "budget", KEYS, sourced=True))
def test_budget_table(case: Json, monkeypatch: pytest.MonkeyPatch) -> None:
    pod, objects = built(case["object"])
    view = view_from(*hostile.nodes(case["nodes"]), *objects)
    pol = policy({"enforcement": case["enforcement"]}) if "enforcement" in case else default_policy()
    checks: list[int] = []
    monkeypatch.setattr(nodeaffinity, "requirement_matches", counting(checks, selectors.requirement_matches))

    if case["mutation"] == "patched":
        mutation, result = mutate_checked(pod, view, pol)
        assert mutation.over_budget is None and mutation.allowed
        assert len(dig(result, "spec", *REQUIRED, "nodeSelectorTerms")) == case["terms_written"]
    else:
        mutation = pipeline.mutate(subject(pod), view, pol)
        assert mutation.patch == []  # never half-applied
        assert mutation.allowed is (case["mutation"] == "allowed")
        if "limit" in case:
            _named(mutation, case, denied=case["mutation"] == "denied")
        result = pod
    validation = pipeline.validate(subject(result), view, pol)
    assert validation.allowed is (case["validation"] != "denied")
    if "limit" not in case or case.get("placement"):
        assert validation.over_budget is None
    else:  # a limit of the object itself: validation names it too
        _named(validation, case, denied=case["validation"] == "denied")
    assert len(checks) <= case["node_checks"]


def test_a_product_past_the_limit_is_refused_before_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    merged: list[int] = []
    monkeypatch.setattr(nodeaffinity, "merge_terms", counting(merged, nodeaffinity.merge_terms))
    left, right = hostile.unnarrowable_terms(100, "a"), hostile.unnarrowable_terms(11, "b")
    with pytest.raises(OverBudget, match="the AND of 100 × 11 node selector terms would have 1,100 terms"):
        and_terms(left, right)
    assert merged == []
    assert len(and_terms(left, right[:10])) == 1_000 and len(merged) == 1_000  # at the limit: built
    wide = [{"matchExpressions": [{"key": f"k{i}", "operator": "Exists"} for i in range(5_001)]}]
    pins = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in ("a", "b")]
    with pytest.raises(OverBudget, match="would have 10,004 requirements, over the limit of 10,000"):
        check_product(wide, pins)


def test_limits_count_terms_requirements_and_values() -> None:
    assert terms_excess(hostile.unnarrowable_terms(budget.MAX_TERMS)) is None
    assert terms_excess(hostile.unnarrowable_terms(budget.MAX_TERMS + 1)) == (
        "1,001 node selector terms, over the limit of 1,000"
    )
    values = [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"] * 10_001}]}]
    assert terms_excess(values) == "10,001 node selector requirement values, over the limit of 10,000"
    assert terms_excess([{"matchExpressions": "not a list"}, "not a term"]) is None  # the types are judged apart


def test_simplify_and_implication_compare_only_terms_that_could_be_implied(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 terms of the same size imply none of each other: no pair is compared (it was a million)."""
    compared: list[int] = []
    monkeypatch.setattr(nodeaffinity, "_implies", counting(compared, nodeaffinity._implies))
    terms = hostile.unnarrowable_terms(1_000)
    assert simplify([dict(t) for t in terms]) == terms
    assert len(compared) <= 2 * len(terms)
    compared.clear()
    assert terms_imply(terms, terms)
    assert len(compared) <= 2 * len(terms)
    # a looser term is still found, and drops the terms that imply it
    looser = {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "DoesNotExist"}]}
    assert simplify([*[dict(t) for t in terms], looser]) == [looser]


def test_a_placement_past_the_limit_is_not_written() -> None:
    """The node-agent restriction and every other placement write through write_required: terms past a limit are
    refused there, so a patched pod always passes the typed boundary when it is reviewed again."""
    from rules.context import PodTarget
    from rules.coscheduling.pinning import write_required
    from rules.patch import PatchBuilder
    from rules.roles import RoleDecision

    pod = hostile.pod("p")
    target = PodTarget(
        "Pod", hostile.NAMESPACE, pod["metadata"], pod["spec"], PatchBuilder(pod), RoleDecision(None, "test")
    )
    with pytest.raises(OverBudget, match="the placement would write 1,001 node selector terms") as raised:
        write_required(target, hostile.unnarrowable_terms(1_001))
    assert raised.value.field == "spec." + ".".join(REQUIRED)
    assert not target.patch.written


def test_a_mistyped_pod_past_the_limit_is_still_refused_for_its_types() -> None:
    """The budget is counted before the types are walked, but a mistyped term is a 400 naming it whatever the size:
    no rule ever reads a mistyped term that a limit let through."""
    pod = hostile.affinity_pod(2_000)
    dig(pod, "spec", *REQUIRED, "nodeSelectorTerms")[5]["matchExpressions"] = "x"
    with pytest.raises(pipeline.BadObject) as raised:
        pipeline.validate(subject(pod), view_from(), default_policy())
    assert raised.value.problems == [
        ("spec." + ".".join(REQUIRED) + ".nodeSelectorTerms[5].matchExpressions", "must be a list, not string")
    ]
