"""The review budget: an object past a limit is answered at once, naming the limit; no cross product is built past
one; what is within the budget is placed as before, at a cost that does not multiply terms by nodes."""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import budget, pipeline
from rules.budget import OverBudget, check_product, terms_excess
from rules.kube import nodeaffinity, selectors
from rules.kube.nodeaffinity import REQUIRED, and_terms, simplify, terms_imply
from rules.kube.selectors import type_name
from rules.kube.shapes import SHAPES, object_problems, well_formed
from rules.model import Decision, Json, Severity
from rules.policy import default_policy
from testkit import hostile
from tests.support import DATA, dig, mutate_checked, policy, subject, table_cases, view_from


def built(spec: Json) -> tuple[Json, list[Json]]:
    """The case's object and the objects of its namespace, from testkit/hostile.py and the builders below."""
    builder = spec["builder"]
    if builder == "affinity_pod":
        return hostile.affinity_pod(spec["terms"]), []
    if builder == "cdi_importer":
        return hostile.cdi_importer(spec["pod_terms"], spec["vm_terms"], spec.get("vms", 1))
    if builder == "grown_pod":
        return grown_pod(spec)
    if builder == "stateful_set":
        return stateful_set(spec["volumes"], spec["claim_templates"]), []
    if builder == "load_affinity_pod":
        return load_affinity_pod(spec["entries"], spec["requirements"], spec.get("values", 0)), []
    return hostile.backup_pod(spec["pod_terms"], spec["entries"]), []


def grown_pod(spec: Json) -> tuple[Json, list[Json]]:
    """A VolSync mover whose `volumes` all mount one claim, with `containers`, `init_containers`, `tolerations`
    and `annotations` as many as the case says; and that claim, bound, with a Pending pod of the namespace using it."""
    mover = hostile.claims_pod("grown", [hostile.CLAIM] * spec.get("volumes", 1))
    pod_spec = mover["spec"]
    pod_spec["containers"] = [{"name": f"c{i}", "image": "busybox"} for i in range(spec.get("containers", 1))]
    if "init_containers" in spec:
        pod_spec["initContainers"] = [{"name": f"i{i}", "image": "busybox"} for i in range(spec["init_containers"])]
    if "tolerations" in spec:
        pod_spec["tolerations"] = [
            {"key": f"example.com/t{i}", "operator": "Exists"} for i in range(spec["tolerations"])
        ]
    if "annotations" in spec:
        mover["metadata"]["annotations"] = {f"example.com/a{i}": "x" for i in range(spec["annotations"])}
    claim = hostile.claim_object(hostile.CLAIM)
    claim["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"]}
    return mover, [claim, hostile.pod("user", claim=hostile.CLAIM)]


def stateful_set(volumes: int, claim_templates: int) -> Json:
    """A StatefulSet whose template has `volumes` emptyDir volumes and `claim_templates` volumeClaimTemplates, the
    first of which replaces the template volume of its name."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "grown", "namespace": hostile.NAMESPACE},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "grown"}},
                "spec": {
                    "containers": [{"name": "main", "image": "busybox"}],
                    "volumes": [{"name": f"v{i}", "emptyDir": {}} for i in range(volumes)],
                },
            },
            "volumeClaimTemplates": [{"metadata": {"name": f"v{i}"}} for i in range(claim_templates)],
        },
    }


def load_affinity_pod(entries: int, requirements: int, values: int) -> Json:
    """A Velero backup pod whose load-affinity annotation has `entries` entries of `requirements` requirements:
    `DoesNotExist` (no values), or `In` with `values` values."""

    def requirement(i: int, j: int) -> Json:
        key = f"example.com/e{i}-{j}"
        if not values:
            return {"key": key, "operator": "DoesNotExist"}
        return {"key": key, "operator": "In", "values": [f"v{k}" for k in range(values)]}

    listed = [
        {"nodeSelector": {"matchExpressions": [requirement(i, j) for j in range(requirements)]}} for i in range(entries)
    ]
    pod = hostile.backup_pod(0, 1)
    pod["metadata"]["annotations"]["storage-affinity.io/load-affinity"] = json.dumps(listed)
    return pod


KEYS = {"name", "source", "object", "nodes", "enforcement", "mutation", "validation", "limit", "field"}
KEYS |= {"placement", "terms_written", "node_checks"}


def counting(calls: list[int], real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, appending to `calls` at each call: the work a test bounds is counted, never timed."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    return counted


def _named(decision: Decision, case: Json, *, denied: bool) -> None:
    """The decision names the case's limit (and field), as a denial or as a warning."""
    limit, field = case["limit"], case.get("field", "")
    assert decision.over_budget is not None and limit in decision.over_budget
    why = decision.over_budget.removeprefix(f"{field}: " if field else "")
    assert why.startswith("over the review budget: ") and why.endswith(limit), why
    if denied:
        found = [(f.field, f.severity, f.message) for f in decision.findings if f.family == budget.FAMILY]
        assert found[-1] == (field, Severity.DENY, why)  # the last limit the answer names; each is a denial
        assert {severity for _, severity, _ in found} == {Severity.DENY}
    else:
        assert any(limit in w and (not field or field in w) for w in decision.warnings), decision.warnings


@pytest.mark.parametrize("case", table_cases(DATA / "budget", KEYS))
def test_budget_table(case: Json, monkeypatch: pytest.MonkeyPatch) -> None:
    pod, objects = built(case["object"])
    view = view_from(*hostile.nodes(case["nodes"]), *objects)
    pol = policy({"enforcement": case["enforcement"]}) if "enforcement" in case else default_policy()
    checks: list[int] = []
    monkeypatch.setattr(nodeaffinity, "requirement_matches", counting(checks, selectors.requirement_matches))

    if case["mutation"] == "unreviewed":  # a workload: the mutating webhook reads Pods and Jobs only
        mutation = pipeline.mutate(subject(pod), view, pol)
        assert mutation.patch == [] and mutation.allowed and mutation.over_budget is None
        result = pod
    elif case["mutation"] == "patched":
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


# --- every count is total over JSON ------------------------------------------------------------------------------

#: Keys the counts read, and a few others: arbitrary objects rarely hold the keys a count looks for.
_KEYS = st.sampled_from(
    [
        "nodeSelectorTerms",
        "matchExpressions",
        "matchFields",
        "values",
        "key",
        "operator",
        "nodeSelector",
        "matchLabels",
        *budget.CONTAINER_KINDS,
    ]
) | st.text(max_size=3)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=24,
)

#: Every public function of rules/budget.py, called with JSON wherever it takes a value to count.
TOTAL: dict[str, Callable[[Any], object]] = {
    "size": budget.size,
    "count_excess": lambda value: budget.count_excess(value, "volumes", 2),
    "containers_excess": budget.containers_excess,
    "selector_excess": budget.selector_excess,
    "terms_excess": budget.terms_excess,
    "check_product": lambda value: budget.check_product(value, value),
    "check_terms": lambda value: budget.check_terms(value, "spec"),
    "check_tolerations": lambda value: budget.check_tolerations(value, "spec.tolerations"),
    "check_entries": lambda value: budget.check_entries(value, "metadata.annotations"),
    "check_followed": lambda value: budget.check_followed(value, "spec.volumes"),
    "placement_over_budget": lambda value: budget.placement_over_budget(str(value), "spec"),
}


def test_every_function_of_the_budget_is_proven_total() -> None:
    public = {name for name, value in vars(budget).items() if inspect.isfunction(value) and not name.startswith("_")}
    assert public == set(TOTAL)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_the_counts_take_any_json_value(value: Any, other: Any) -> None:
    """The boundary counts before it checks types: a count answers or raises OverBudget, whatever the value."""
    for count in TOTAL.values():
        with contextlib.suppress(OverBudget):
            count(value)
    with contextlib.suppress(OverBudget):
        budget.check_product(value, other)
    with contextlib.suppress(OverBudget):
        budget.check_product(None, other)


def _pod_with(value: Any) -> Json:
    """A pod with `value` at every field the boundary counts."""
    return {
        "metadata": {"annotations": value, "labels": {"a": "b"}},
        "spec": {
            "volumes": value,
            "tolerations": value,
            **dict.fromkeys(budget.CONTAINER_KINDS, value),
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": value}},
        },
    }


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.sampled_from(sorted(SHAPES)))
def test_the_boundary_counts_any_json_value_and_names_what_it_refuses(value: Any, kind: str) -> None:
    """The boundary's limit pass never raises; what `well_formed` refuses, the walk names (a type, a value or a
    limit), and what it accepts has no problem."""
    for obj in (value, _pod_with(value), {"spec": {"template": _pod_with(value), "volumeClaimTemplates": value}}):
        problems = object_problems(kind, obj)
        assert well_formed(kind, obj) is not bool(problems.types or problems.values or problems.limits)


@pytest.mark.parametrize("values", [1.5, 7, True, "v", {"v": 1}])
def test_a_mistyped_value_list_is_a_400_naming_the_field(values: Any) -> None:
    """`values` that is not a list is the type walk's to name (the count takes it for nothing), on any term part."""
    field = f"spec.{'.'.join(REQUIRED)}.nodeSelectorTerms[0].matchFields[0].values"
    for terms in (1, 2_000):  # within the budget and past it: refused for the type either way
        pod = hostile.affinity_pod(terms)
        dig(pod, "spec", *REQUIRED, "nodeSelectorTerms")[0]["matchFields"] = [
            {"key": "metadata.name", "operator": "In", "values": values}
        ]
        with pytest.raises(pipeline.BadObject) as raised:
            pipeline.mutate(subject(pod), view_from(), default_policy())
        assert raised.value.problems == [(field, f"must be a list, not {type_name(values)}")]
