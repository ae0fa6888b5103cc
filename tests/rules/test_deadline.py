"""The review deadline (rules/deadline.py): the rules of one review, and the audit's work on one object, stop at a
fixed CPU budget and are answered as an object past the review budget is, naming the deadline. Nothing here is
timed: a rule that never ends by itself (it loops on `deadline.check()`) shows that the deadline ends it, and a
fake clock shows what is charged."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from rules import audit, budget, deadline, pipeline, registry
from rules.audit import audit_objects
from rules.context import Context
from rules.deadline import PastDeadline
from rules.model import Decision, Json, Severity
from rules.policy import Policy
from testkit import hostile
from testkit.reviews import admission_review
from tests.support import (
    EXAMPLES,
    app_client,
    counted_deadline_checks,
    example_runtime,
    load_yaml,
    manifest_objects,
    policy,
    subject,
    view_from,
)

NAMED = "past the review deadline: the rules spent 1 ms of CPU time on it"


def spin(ctx: Context, target: Any) -> None:
    """A rule that never ends by itself: only the deadline stops it."""
    while True:
        deadline.check()


@pytest.fixture(autouse=True)
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 ms: the spinning rule reaches it at once, and an honest review of the examples never does."""
    monkeypatch.setattr(deadline, "REVIEW_SECONDS", 0.001)


def mover() -> Json:
    return copy.deepcopy(load_yaml(EXAMPLES / "mover-pod.yaml"))


def refused(decision: Decision, *, denied: bool = True) -> None:
    """Answered as a budget refusal naming the deadline: a denial (or a warning under `warn`), no patch."""
    assert decision.patch == []
    assert decision.over_budget == NAMED
    assert decision.audit == {pipeline.PAST_DEADLINE: NAMED}
    found = [(f.family, f.severity, f.message) for f in decision.findings if f.family == budget.FAMILY]
    if denied:
        assert found == [(budget.FAMILY, Severity.DENY, NAMED)]
        assert not decision.allowed
    else:
        assert found in ([], [(budget.FAMILY, Severity.WARN, NAMED)])  # the mutation warns, validation relaxes
        assert decision.allowed
        assert any(NAMED in w for w in decision.warnings), decision.warnings


class FakeClock:
    """The two clocks rules/deadline.py reads, moved by hand."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def thread_time(self) -> float:
        return self.cpu

    def perf_counter(self) -> float:
        return self.wall

    def spend(self, cpu: float, wall: float | None = None) -> None:
        self.cpu += cpu
        self.wall += cpu if wall is None else wall


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(deadline, "time", fake)
    return fake


def test_outside_a_review_check_does_nothing(clock: FakeClock) -> None:
    clock.spend(3600)
    deadline.check()


def test_the_deadline_is_cpu_time_and_an_api_wait_is_not_charged(clock: FakeClock) -> None:
    with deadline.running(0.1):
        clock.spend(0.06)
        with deadline.paused():  # a GET: the wall clock runs, other greenlets spend CPU meanwhile
            clock.spend(0.5, wall=2.0)
        clock.spend(0.03)
        deadline.check()  # 90 ms charged of 100
        clock.spend(0.0, wall=5.0)  # preempted: wall time passes, no CPU time
        deadline.check()
        clock.spend(0.011)
        with pytest.raises(PastDeadline, match="past the review deadline: the rules spent 100 ms of CPU time"):
            deadline.check()
    deadline.check()  # the review is over


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> list[float]:
    """A worker that serves others for 1 ms of wall and CPU time each time a review hands it back."""
    taken: list[float] = []

    def serve_others() -> None:
        taken.append(clock.wall)
        clock.spend(0.001)

    monkeypatch.setattr(deadline, "_share", None)
    deadline.share_worker(serve_others)
    return taken


def test_a_long_review_hands_the_worker_back_every_slice_uncharged(clock: FakeClock, turns: list[float]) -> None:
    with deadline.running(0.1):
        for _ in range(95):  # 95 ms of rules, checked every millisecond
            clock.spend(0.001)
            deadline.check()
    # One turn per slice of its own run: the others' millisecond each time is neither a slice nor charged.
    assert len(turns) == 95 // round(deadline.SLICE_SECONDS * 1000)
    with deadline.running(0.1):
        clock.spend(0.101)
        with pytest.raises(PastDeadline):
            deadline.check()


def test_a_review_shorter_than_a_slice_never_hands_the_worker_back(clock: FakeClock, turns: list[float]) -> None:
    with deadline.running(0.1):
        for _ in range(4):
            clock.spend(0.001)
            deadline.check()
    assert turns == []


def test_without_a_serving_worker_no_review_hands_anything_back(clock: FakeClock) -> None:
    assert deadline._share is None  # the command line and in-process tests: nothing installed
    with deadline.running(0.1):
        clock.spend(0.05, wall=1.0)
        deadline.check()


def test_a_nested_deadline_holds_until_it_ends(clock: FakeClock) -> None:
    with deadline.running(0.1):
        clock.spend(0.05)
        with deadline.running(0.2):
            clock.spend(0.15)
            deadline.check()
        with pytest.raises(PastDeadline):
            deadline.check()  # the outer one was charged for the inner one's time


def test_a_mutation_past_the_deadline_is_dropped_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mover's own rule has written its patch when the next rule runs past the deadline: none of it lands."""
    view = example_runtime().view
    assert pipeline.mutate(subject(mover()), view, policy()).patch  # the rule that patches, honest
    monkeypatch.setattr(registry, "POD_MUTATORS", [*registry.POD_MUTATORS, spin])
    refused(pipeline.mutate(subject(mover()), view, policy()))
    refused(pipeline.mutate(subject(mover()), view, policy({"enforcement": "warn"})), denied=False)


def test_a_validation_past_the_deadline_is_a_budget_finding_and_no_rule_runs_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    after: list[str] = []
    monkeypatch.setattr(registry, "POD_VALIDATORS", [spin, lambda ctx, target: after.append(target.name)])
    view = example_runtime().view
    refused(pipeline.validate(subject(mover()), view, policy()))
    assert after == []
    relaxed = pipeline.validate(subject(mover()), view, policy({"enforcement": "warn"}))
    assert [(f.family, f.severity, f.message) for f in relaxed.findings] == [(budget.FAMILY, Severity.WARN, NAMED)]
    assert relaxed.allowed


def test_the_typed_boundary_and_the_template_run_under_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the deadline outside any rule (the boundary's walk, a workload's template), the review is answered
    the same way, never raised."""
    view = example_runtime().view

    def slow_boundary(kind: str, value: Any) -> bool:
        spin(None, None)  # type: ignore[arg-type]
        return True

    monkeypatch.setattr(pipeline, "well_formed", slow_boundary)
    refused(pipeline.mutate(subject(mover()), view, policy()))
    refused(pipeline.validate(subject(mover()), view, policy()))
    monkeypatch.undo()
    monkeypatch.setattr(deadline, "REVIEW_SECONDS", 0.001)
    monkeypatch.setattr(pipeline, "template_spec", lambda *args: spin(None, None))  # type: ignore[arg-type]
    job = copy.deepcopy(load_yaml(EXAMPLES / "bad-annotations-deployment.yaml"))
    refused(pipeline.validate(subject(job), view, policy()))


def test_configmap_rules_run_under_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "CONFIG_MAP_VALIDATORS", [spin, *registry.CONFIG_MAP_VALIDATORS])
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "any", "namespace": "shop"}}
    refused(pipeline.validate(subject(config_map), example_runtime().view, policy()))


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_the_webhooks_answer_past_the_deadline_naming_it(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "POD_MUTATORS", [*registry.POD_MUTATORS, spin])
    monkeypatch.setattr(registry, "POD_VALIDATORS", [*registry.POD_VALIDATORS, spin])
    answer = app_client().post(f"/{endpoint}", json=admission_review("CREATE", mover())).get_json()["response"]
    assert answer["allowed"] is False
    assert "patch" not in answer
    assert NAMED in answer["status"]["message"]
    assert answer["auditAnnotations"] == {pipeline.PAST_DEADLINE: NAMED}


def _stuck_mover() -> Json:
    return copy.deepcopy(load_yaml(EXAMPLES / "stuck-mover-pod.yaml"))


def _audited(pol: Policy) -> audit.ObjectAudit:
    now = datetime(2026, 11, 28, tzinfo=UTC)
    (report,) = audit_objects([_stuck_mover()], example_runtime().view, pol, now=now)
    return report


def test_the_audit_reports_an_object_past_the_deadline_as_not_audited(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = _audited(policy())
    assert honest.cause is not None  # the audit's own work runs on this pod: where it waits, and why
    monkeypatch.setattr(registry, "POD_VALIDATORS", [*registry.POD_VALIDATORS, spin])
    report = _audited(policy())
    *before, last = report.findings
    assert (last.family, last.field, last.message, last.severity) == (
        budget.FAMILY,
        "",
        f"not audited: {NAMED}",
        "deny",
    )
    assert before and all(found in honest.findings for found in before)  # what the rules found before it
    assert report.cause is None and report.placement == ""
    assert _audited(policy({"enforcement": "warn"})).findings[-1].severity == "warn"


def test_the_audits_own_work_on_an_object_runs_under_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the pod would go and why it waits are the audit's own work, after both webhooks: a deadline too."""

    def slow_cause(stuck: Any) -> Any:
        spin(None, None)  # type: ignore[arg-type]

    monkeypatch.setattr(audit, "stuck_cause", slow_cause)
    report = _audited(policy())
    assert report.findings[-1].as_json() == {
        "family": budget.FAMILY,
        "field": "",
        "message": f"not audited: {NAMED}",
        "severity": "deny",
    }
    assert report.cause is None


def test_the_causes_check_the_deadline_once_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stuck pod's candidate nodes, every one cordoned, are walked with a check each: the count of checks follows
    the nodes."""
    checks = counted_deadline_checks(monkeypatch)
    _audited(policy())
    assert checks  # the audit's loops check it

    def checks_for(nodes: int) -> int:
        pod = _stuck_mover()
        pod["spec"].pop("nodeSelector")
        pod["spec"]["tolerations"] = []
        cordoned = [{**node, "spec": {"unschedulable": True}} for node in hostile.nodes(nodes)]
        others = [o for o in manifest_objects(EXAMPLES / "cluster.yaml") if o.get("kind") != "Node"]
        checks.clear()
        audit_objects([pod], view_from(*cordoned, *others), policy(), now=datetime(2026, 11, 28, tzinfo=UTC))
        return len(checks)

    per_node = (checks_for(40) - checks_for(20)) / 20  # the causes' walk, and the node set's where it narrows
    assert per_node >= 1
    assert checks_for(80) - checks_for(40) == 40 * per_node  # a constant number per node: linear


def test_the_audit_may_yield_between_the_deadlines_of_an_object_never_inside_one() -> None:
    """Between the mutation, the validation and the audit's own work, each under its deadline: where the in-server
    audit hands the worker back, so that no stretch without a yield is longer than one deadline."""
    inside: list[object] = []
    now = datetime(2026, 11, 28, tzinfo=UTC)
    audit_objects(
        [_stuck_mover()],
        example_runtime().view,
        policy(),
        now=now,
        between=lambda: inside.append(deadline._CURRENT.get()),
    )
    assert inside == [None, None]
