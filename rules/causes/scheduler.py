"""Stuck-pod causes of the last tier: what the pod and the scheduler say themselves (scheduling gates, the
scheduler's message, a waiting container); its last entry always holds."""

from __future__ import annotations

from collections.abc import Mapping

from rules import deadline
from rules.causes.stuck import Cause, Stuck
from rules.kube.conditions import condition
from rules.quoting import clip

#: How much of a message the scheduler or the kubelet wrote a cause quotes.
MESSAGE_LIMIT = 300


def _scheduling_gated(stuck: Stuck) -> str | None:
    gates = stuck.spec.get("schedulingGates") or ()
    if stuck.node_name or not gates:
        return None
    return f"its scheduling gates ({', '.join(str(g.get('name')) for g in gates)}) are still set"


def _scheduler(stuck: Stuck) -> str | None:
    scheduled = condition(stuck.pod, "PodScheduled")
    if scheduled is None or scheduled.get("status") != "False":
        return None
    reason, message = scheduled.get("reason") or "Unschedulable", scheduled.get("message") or "no message"
    return f"the scheduler: {_quoted(reason)}: {_quoted(message)}"


def _container_waiting(stuck: Stuck) -> str | None:
    status = stuck.pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        deadline.check()
        waiting = (container.get("state") or {}).get("waiting")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            message = f": {_quoted(waiting['message'])}" if waiting.get("message") else ""
            return f"container {container.get('name')} is waiting: {_quoted(waiting['reason'])}{message}"
    return None


def _unexplained(stuck: Stuck) -> str:
    phase = (stuck.pod.get("status") or {}).get("phase") or "Pending"
    state = "Pending" if phase == "Pending" else f"{phase} and not Ready"
    ready = condition(stuck.pod, "Ready")
    said = (
        f" (Ready: {_quoted(ready.get('reason'))}: {_quoted(ready['message'])})"
        if ready and ready.get("message")
        else ""
    )
    return f"{state}, and no condition of the pod or its node says why{said}"


def _quoted(text: object) -> str:
    """What the scheduler or the kubelet wrote, clipped (the cause that quotes it is escaped whole when made)."""
    return clip(str(text), MESSAGE_LIMIT)


#: What the pod and the scheduler say themselves; the last entry always holds.
SCHEDULER_CAUSES: tuple[Cause, ...] = (
    Cause(
        "SchedulingGated",
        "The pod still has scheduling gates: the scheduler does not look at it yet.",
        "Whoever added the gates removes them; check the controller that created the pod.",
        _scheduling_gated,
    ),
    Cause(
        "Unschedulable",
        "The scheduler's own PodScheduled message.",
        "Act on the scheduler's message; kubectl describe pod shows its events.",
        _scheduler,
    ),
    Cause(
        "ContainerWaiting",
        "The pod is on a node and a container waits (image, volume mount, configuration).",
        "Act on the container's waiting reason; kubectl describe pod shows the kubelet's events.",
        _container_waiting,
    ),
    Cause(
        "Unexplained",
        "Stuck, and nothing the audit reads says why.",
        "kubectl describe pod and the events of its node say more.",
        _unexplained,
    ),
)
