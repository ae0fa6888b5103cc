"""What a pod's status says is written by its containers and controllers, up to kilobytes a message: the index keeps
each message only as far as a cause quotes it (rules/causes/scheduler.py MESSAGE_LIMIT), for a Pending pod as for
one that ended Failed, so that no tenant grows the index by what its pods say."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rules.causes.scheduler import MESSAGE_LIMIT
from webhook.state.index import trim


def _messages(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [m for k, v in value.items() for m in ([v] if k == "message" and isinstance(v, str) else _messages(v))]
    if isinstance(value, list):
        return [m for item in value for m in _messages(item)]
    return []


@given(phase=st.sampled_from(["Pending", "Running", "Failed"]), size=st.integers(0, 20_000))
def test_every_message_the_index_keeps_is_cut_where_a_cause_stops_quoting(phase: str, size: int) -> None:
    text = "m" * size
    status = {
        "phase": phase,
        "reason": "Evicted",
        "message": text,
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": text},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": text},
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": text},
        ],
        "containerStatuses": [
            {"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": text}}},
            {"name": "b", "state": {"terminated": {"reason": "Error", "exitCode": 1, "message": text}}},
        ],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
        "status": status,
    }
    kept = _messages(trim(pod)["status"])
    assert kept, "the index keeps what says why the pod is stuck or ended"
    assert all(len(message) == min(size, MESSAGE_LIMIT + 1) for message in kept), [len(m) for m in kept]
