"""A claim's pods are read and sorted once (`ClaimPods`), and each pod's view of them (`Hold`) is the claim less
the pod itself: the same answer as walking every pod for every review, at the cost of one walk per claim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.audit import audit_objects
from rules.cluster import ClusterView
from rules.coscheduling import claimpods
from rules.coscheduling.claimpods import FINISHED, ClaimPods, age_key, node_of, phase_of
from rules.kube.volumes import OWNED, ClaimVolume
from rules.model import Json
from rules.policy import default_policy
from rules.roles import classify
from testkit import hostile
from tests.rules.test_coschedule_counts import Counting, claim
from tests.support import counted_deadline_checks, view_from

NAMESPACE = hostile.NAMESPACE
MOVER_LABELS = {"app.kubernetes.io/created-by": "volsync"}


def naive(pods: list[Json], uid: object, name: object) -> dict[str, Any]:
    """What a pod with this uid and name sees of the claim, by walking every pod (the definition)."""
    users, holders, running, pending, running_users, nodes = [], [], [], [], [], set()
    policy = default_policy()
    for pod in pods:
        metadata = pod.get("metadata") or {}
        phase = phase_of(pod)
        if phase in FINISHED or metadata.get("deletionTimestamp"):
            continue
        if (uid and metadata.get("uid") == uid) or (name and metadata.get("name") == name):
            continue
        node = node_of(pod)
        if phase == "Running" or node:
            holders.append(pod)
        if classify(metadata, NAMESPACE, policy).role == "mover":
            continue
        users.append(pod)
        if phase == "Running":
            running_users.append(pod)
        if node and phase == "Running":
            running.append(pod)
            nodes.add(node)
        elif node and phase == "Pending":
            pending.append(pod)
    candidates = running or pending
    return {
        "users": sorted(map(id, users)),
        "holders": sorted(map(id, holders)),
        "anchor": id(min(candidates, key=age_key)) if candidates else None,
        "running_nodes": tuple(sorted(nodes)),
        "oldest": id(min(holders, key=age_key)) if holders else None,
        "running_users": [id(p) for p in sorted(running_users, key=age_key)],
        "elsewhere": {
            away: (
                id(min(there, key=age_key))
                if (there := [h for h in holders if node_of(h) not in (None, away)])
                else None
            )
            for away in ("n0", "n1", "n2")
        },
    }


pod_shapes = st.fixed_dictionaries(
    {
        "phase": st.sampled_from(["Running", "Pending", "Succeeded", "Failed", None]),
        "node": st.sampled_from([None, "n0", "n1", "n2"]),
        "mover": st.booleans(),
        "deleting": st.booleans(),
        "born": st.sampled_from([None, "2026-11-28T10:00:00Z", "2026-11-28T11:00:00Z", "bad"]),
        "uid": st.sampled_from(["u0", "u1", "u2", None]),
    }
)


def built(index: int, shape: dict[str, Any]) -> Json:
    pod = hostile.pod(f"p{index % 7}", claim="data", labels=MOVER_LABELS if shape["mover"] else None)
    pod["metadata"]["uid"] = shape["uid"] or f"uid-{index}"
    if shape["born"]:
        pod["metadata"]["creationTimestamp"] = shape["born"]
    if shape["deleting"]:
        pod["metadata"]["deletionTimestamp"] = "2026-11-28T12:00:00Z"
    if shape["node"]:
        pod["spec"]["nodeName"] = shape["node"]
    if shape["phase"]:
        pod["status"] = {"phase": shape["phase"]}
    return pod


@settings(max_examples=200, deadline=None)
@given(
    shapes=st.lists(pod_shapes, max_size=12),
    asking=st.lists(
        st.tuples(st.sampled_from(["u0", "u1", None]), st.sampled_from(["p0", "p3", None])), min_size=1, max_size=3
    ),
)
def test_a_hold_is_the_claim_less_the_pod_under_review(
    shapes: list[dict[str, Any]], asking: list[tuple[str | None, str | None]]
) -> None:
    """Duplicated uids and names, finished, terminating and mover pods, unreadable timestamps, one pod after
    another asking (the first by a walk, the next through the index of names): the hold built from the claim's
    pods read once answers as the walk of every pod does."""
    pods = [built(i, shape) for i, shape in enumerate(shapes)]
    volume = ClaimVolume(0, "v", "data", False, None, None, OWNED, None)
    claim_pods = ClaimPods(pods, NAMESPACE, default_policy())
    for uid, name in asking:
        hold = claim_pods.hold(volume, uid, name)
        want = naive(pods, uid, name)
        running_users = hold.pods.running_users(hold.own)
        got = {
            "users": sorted(id(pod) for pod in hold.pods.users if id(pod) not in hold.mine),
            "holders": sorted(id(pod) for pod in hold.pods.holders if id(pod) not in hold.mine),
            "anchor": id(hold.anchor) if hold.anchor is not None else None,
            "running_nodes": hold.running_nodes,
            "oldest": id(o) if (o := hold.oldest_holder()) is not None else None,
            "running_users": [id(p) for p in running_users],
            "elsewhere": {
                away: id(o) if (o := hold.oldest_holder(away_from=away)) is not None else None
                for away in ("n0", "n1", "n2")
            },
        }
        assert got == want
        assert len(running_users) == len(want["running_users"])
        assert [id(p) for p in running_users[:2]] == want["running_users"][:2]


def stuck_pod(index: int) -> Json:
    """A pod of a claim many pods share: every third Running on a node of its own, the rest waiting, half of them
    movers."""
    pod = hostile.pod(f"p{index}", claim="data", labels=MOVER_LABELS if index % 2 else None)
    pod["metadata"]["uid"] = f"uid-{index}"
    pod["metadata"]["creationTimestamp"] = "2026-11-28T10:00:00Z"
    if index % 3 == 0:
        pod["spec"]["nodeName"] = f"node-{index // 3:05d}"
        pod["status"] = {"phase": "Running"}
    else:
        pod["status"] = {"phase": "Pending"}
    return pod


@pytest.mark.parametrize("pods", [10, 300])
def test_an_audit_reads_a_shared_claim_once(pods: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit of N pods on one claim walks the claim's pods once, not once per pod (N² for the claim), and its
    loops stay linear in N: counted, never timed."""
    objects = [*hostile.nodes(pods // 3 + 1), claim("data"), *(stuck_pod(i) for i in range(pods))]
    view = Counting(view_from(*objects))
    checks = counted_deadline_checks(monkeypatch)
    listed_nodes: list[int] = []  # the walk of the claim's nodes, which a pod's hold must not take
    real = ClaimPods.running_nodes

    def counted(self: ClaimPods, own: Sequence[Json]) -> tuple[str, ...]:
        listed_nodes.append(1)
        return real(self, own)

    monkeypatch.setattr(ClaimPods, "running_nodes", counted)
    reports = audit_objects([o for o in objects if o["kind"] == "Pod"], cast(ClusterView, view), default_policy())
    assert len(reports) == pods
    assert view.walked == ["data"]
    assert not listed_nodes  # its users on pods // 3 nodes: each hold counts them, it does not list them
    assert len(checks) < 60 * pods  # a few dozen a pod; the walk of the claim for each pod made N more each


def test_the_role_memo_holds_no_pod_with_many_labels() -> None:
    """The memo keeps a pod's metadata alive after the index lets it go: only a pod with few labels is kept."""
    few = {"name": "db-0", "labels": {f"k{i}": "v" for i in range(3)}}
    many = {"name": "db-1", "labels": {f"k{i}": "v" for i in range(claimpods._MEMO_LABELS + 1)}}
    long = {"name": "db-2", "labels": {f"{'k' * 300}{i}": "v" * 63 for i in range(3)}}
    claimpods._ROLES.clear()
    for pod in (many, long):
        claimpods._is_mover(pod, NAMESPACE, default_policy())
    assert len(claimpods._ROLES) == 0
    claimpods._is_mover(few, NAMESPACE, default_policy())
    assert len(claimpods._ROLES) == 1
