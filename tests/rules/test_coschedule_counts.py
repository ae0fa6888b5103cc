"""A mover's claims are each walked once, whatever its volumes: one hold per distinct claim, the pods of a claim
read once, and the work of a review counted (not timed) linear in its volumes and pods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import deadline, pipeline
from rules.coscheduling.anchors import Plan, plan
from rules.model import Json
from rules.policy import default_policy
from testkit import hostile
from tests.support import counted_deadline_checks, subject, view_from
from webhook.state.index import ClusterIndex

CLAIMS = ["a", "b", "c", "d"]


def claim(name: str, mode: str = "ReadWriteOnce") -> Json:
    obj = hostile.claim_object(name)
    obj["spec"]["accessModes"] = [mode]
    obj["status"] = {"phase": "Bound", "accessModes": [mode]}
    return obj


def user(name: str, claim_name: str, node: str) -> Json:
    pod = hostile.pod(name, claim=claim_name)
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running"}
    return pod


class Counting:
    """A view that counts the lookups of a claim and the walks of its pods."""

    def __init__(self, view: ClusterIndex) -> None:
        self.view = view
        self.walked: list[str] = []
        self.looked_up: list[str] = []

    def pvc(self, namespace: str, name: str) -> Json | None:
        self.looked_up.append(name)
        return self.view.pvc(namespace, name)

    def pods_using_claim(self, namespace: str, name: str) -> Iterator[Json]:
        self.walked.append(name)
        return iter(self.view.pods_using_claim(namespace, name))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)


def mover_plan(claims: list[str], view: Any) -> Plan:
    target = pipeline.pod_target(subject(hostile.claims_pod("mover", claims)), default_policy(), "")
    return plan(view, default_policy(), target)


@settings(max_examples=100, deadline=None)
@given(
    claims=st.lists(st.sampled_from(CLAIMS), max_size=30),
    modes=st.lists(st.sampled_from(["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]), min_size=4, max_size=4),
    nodes=st.lists(st.sampled_from(["node-00000", "node-00001"]), min_size=4, max_size=4),
)
def test_one_hold_per_distinct_claim_whatever_the_volumes(
    claims: list[str], modes: list[str], nodes: list[str]
) -> None:
    mode = dict(zip(CLAIMS, modes, strict=True))
    objects = [claim(name, mode[name]) for name in CLAIMS]
    objects += [user(f"user-{name}", name, node) for name, node in zip(CLAIMS, nodes, strict=True)]
    view = Counting(view_from(*hostile.nodes(2), *objects))
    result = mover_plan(claims, view)
    held = [name for name in dict.fromkeys(claims) if mode[name] != "ReadWriteMany"]
    assert [hold.claim for hold in result.holds] == held
    assert view.walked == held  # each claim's pods walked once
    assert view.looked_up == list(dict.fromkeys(claims))  # each claim looked up and classified once
    # each hold is its claim's first volume, so every message names the first volume that mounts it
    assert [hold.volume.index for hold in result.holds] == [claims.index(name) for name in held]
    assert len(result.problems) <= len(held)


@pytest.mark.parametrize(("volumes", "pods"), [(10, 20), (100, 20), (1_000, 20), (1_000, 200)])
def test_a_mover_review_is_linear_in_volumes_and_pods(volumes: int, pods: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loops check the deadline once an iteration: counted, a review of V volumes on one claim that P pods
    mount makes V + 1 + P checks in the plan (it made V × P pod iterations with a hold per volume)."""
    checks = counted_deadline_checks(monkeypatch)
    view = view_from(claim("a"), *(user(f"user-{i}", "a", "node-00000") for i in range(pods)))
    result = mover_plan(["a"] * volumes, view)
    (hold,) = result.holds
    assert len([pod for pod in hold.pods.users if id(pod) not in hold.mine]) == pods
    assert len(checks) == volumes + 1 + pods


def test_the_plan_runs_under_the_review_deadline() -> None:
    """Past the deadline, the plan stops at its next claim or pod, as a budget refusal."""
    view = view_from(claim("a"), user("user-0", "a", "node-00000"))
    with deadline.running(0), pytest.raises(deadline.PastDeadline):
        mover_plan(["a"], view)
