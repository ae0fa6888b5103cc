"""The fuzz reaches every registered rule past its early returns (tests/fuzz/reach.py says what counts).

The scenario strategies the admission fuzz draws, each kind of them a fixed number of times, go through the
pipeline with every rule of rules/registry.py counted; each rule must leave an outcome in at least MINIMUM
reviews. A rule that no scenario reaches fails here by name: build a scenario that gets past its guards (a claim
of the state it reads, the object or policy it answers), in tests/fuzz/strategies.py, not a change to the rule.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import strategies as st

from rules import pipeline, registry
from rules.context import Context, PodTarget
from rules.model import Json
from rules.policy import Policy, policy_from_document
from tests.fuzz import mutations as m
from tests.fuzz import reach
from tests.fuzz import strategies as s
from tests.fuzz.profiles import fixed_draws
from tests.support import subject, view_from

#: Reviews with an outcome each rule needs in the bounded run.
MINIMUM = 3
#: Draws of each kind of scenario: the same ones every run.
DRAWS = 20
#: Kinds drawn more often: a workload's template is checked by the template rules alone, which read no cluster, so
#: it is drawn without one, at a third of the cost.
MORE = {"workload": 3}

Review = tuple[list[Json], Policy, Json]


def _with_policy(scenarios: st.SearchStrategy[tuple[list[Json], Json]]) -> st.SearchStrategy[Review]:
    return st.tuples(scenarios, s.policies()).map(lambda sp: (sp[0][0], sp[1], sp[0][1]))


def _velero(role: tuple[str, str]) -> st.SearchStrategy[Review]:
    return s.velero_scenarios(role).map(lambda sc: (sc[0], policy_from_document(sc[1]), sc[2]))


def scenario_kinds() -> dict[str, st.SearchStrategy[Review]]:
    """What the admission fuzz reviews, by kind: each drawn DRAWS times, so no kind depends on its share of a
    random draw. Velero's node-agent ConfigMap is reviewed under the structural fuzz's policy, which names it."""
    states = s.cluster_states()
    velero_source = st.just(policy_from_document(m.fuzz_policy_document()))
    return {
        "pod": _with_policy(s.pod_scenarios()),
        "mover": _with_policy(s.mover_scenarios()),
        "mover job": _with_policy(s.mover_scenarios(job=True)),
        "backup": _velero(s.BACKUP),
        "restore": _velero(s.RESTORE),
        **{f"data source ({k})": _with_policy(s.data_source_scenarios(k)) for k in s.DATA_SOURCE_KINDS},
        "cdi worker": _with_policy(s.cdi_scenarios()),
        "job": st.tuples(states, s.policies(), s.jobs()),
        "workload": st.tuples(st.just([]), s.policies(), s.workloads()),
        "policy configmap": st.tuples(states, s.policies(), s.config_maps()),
        "load affinity policy": st.tuples(states, s.policies(), s.load_affinity_policies().map(s.policy_config_map)),
        "velero configmap": st.tuples(states, velero_source, s.velero_config_map()),
    }


def review_all(reviews: list[Review]) -> None:
    """Both webhooks on each review, as the API server chains them."""
    for state, policy, obj in reviews:
        pipeline.mutate_then_validate(subject(obj), view_from(*state), policy, s.OWN_NAMESPACE)


def shortfall(counts: Counter[str], minimum: int) -> str:
    """Empty when every registered rule reached `minimum`; else the ones that did not, with their counts."""
    missed = [(name, counts[name]) for name in reach.registered() if counts[name] < minimum]
    if not missed:
        return ""
    lines = "\n".join(f"  {reach.short(name)} ({name.partition(': ')[2]}): {n}" for name, n in missed)
    return (
        f"registered rules the fuzz reached past their early returns fewer than {minimum} times:\n{lines}\n"
        "make a scenario of tests/fuzz/strategies.py get past the rule's guards (docs/development.md, Adding a rule)"
    )


@pytest.fixture(scope="module")
def drawn() -> list[Review]:
    kinds = scenario_kinds()
    return [review for kind, drawn in kinds.items() for review in fixed_draws(drawn, DRAWS * MORE.get(kind, 1))]


@pytest.fixture(scope="module")
def counts(drawn: list[Review]) -> Counter[str]:
    with reach.counting() as counted:
        review_all(drawn)
    return counted


def test_every_registered_rule_is_reached(counts: Counter[str]) -> None:
    assert not shortfall(counts, MINIMUM), shortfall(counts, MINIMUM)


def _never_reached(ctx: Context, target: PodTarget) -> None:
    """A registered rule whose guard no scenario passes."""
    if (target.metadata.get("labels") or {}).get("example.com/unreachable") != "yes":
        return
    ctx.warn("reached")


def _always_reached(ctx: Context, target: PodTarget) -> None:
    """A registered rule that warns on every pod it is given."""
    ctx.warn("reached")


def test_a_rule_no_scenario_reaches_fails_the_check_by_name(
    drawn: list[Review], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered the one way any rule is, the unreachable rule is counted with no step of its own, and named."""
    monkeypatch.setattr(registry, "POD_VALIDATORS", [*registry.POD_VALIDATORS, _never_reached, _always_reached])
    with reach.counting() as counted:
        review_all(drawn[::DRAWS])  # a review of each kind: the rule's count is 0 however many there are
    message = shortfall(counted, 1)
    assert f"  POD_VALIDATORS: _never_reached ({__name__}._never_reached): 0\n" in message, message
    assert "_always_reached" not in message  # registered the same way, it is counted: the wrapping works


def test_a_rule_reached_fewer_times_than_the_minimum_is_named_with_its_count(counts: Counter[str]) -> None:
    name, count = min(((name, n) for name, n in counts.items() if n), key=lambda item: item[1])
    assert f"  {reach.short(name)} ({name.partition(': ')[2]}): {count}\n" in shortfall(counts, count + 1)
