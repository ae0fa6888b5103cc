"""Why a storage pod ended Failed: who stopped it, or what killed it, with the remedy that keeps the next one alive.

Kubernetes records who disrupted a pod in its `DisruptionTarget` condition (status True), whose reason names the
actor: `EvictionByEvictionAPI` (kubectl drain, the descheduler, the cluster autoscaler), `PreemptionByScheduler`,
`DeletionByTaintManager`, `DeletionByPodGC` (its node is gone or out of service) and `TerminationByKubelet`, which
the kubelet sets for node-pressure eviction (status reason `Evicted`), graceful node shutdown (`Terminated`, before
Kubernetes 1.22 `Shutdown`) and preemption for a critical pod (`Preempting`). A kubelet without the condition
(before 1.26) still writes the status reason. What the pod's containers say comes after: OOM-killed, or exited
with an error. The table is read in order, most specific first; its last entry always holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from rules import deadline
from rules.causes.scheduler import MESSAGE_LIMIT
from rules.causes.stuck import Cause, Stuck, StuckCause, first_cause
from rules.coscheduling.claimpods import parse_time
from rules.kube.conditions import condition
from rules.quoting import clip

FAILED = "Failed"
DISRUPTION_TARGET = "DisruptionTarget"
#: The DisruptionTarget reasons of k8s.io/api/core/v1 (types.go, `PodReason...`).
BY_EVICTION_API = "EvictionByEvictionAPI"
BY_SCHEDULER = "PreemptionByScheduler"
BY_TAINT_MANAGER = "DeletionByTaintManager"
BY_POD_GC = "DeletionByPodGC"
BY_KUBELET = "TerminationByKubelet"
#: The actors whose disruption deletes the pod: it is removed as soon as its containers have stopped.
DELETING = frozenset({BY_EVICTION_API, BY_SCHEDULER, BY_TAINT_MANAGER, BY_POD_GC})
#: The status reasons the kubelet writes when it ends a pod (pkg/kubelet: eviction, nodeshutdown, preemption).
KUBELET_EVICTED, KUBELET_PREEMPTING = "Evicted", "Preempting"
NODE_SHUTDOWN_REASONS = frozenset({"Terminated", "Shutdown"})
OOM_KILLED = "OOMKilled"
#: Velero's role → the label on its backup or restore pod naming the DataUpload or DataDownload it serves, and that
#: kind (vmware-tanzu/velero pkg/exposer): what a message names and what an audit Event's owner must be.
VELERO_OWNERS = {
    "backup": ("velero.io/data-upload", "DataUpload"),
    "restore": ("velero.io/data-download", "DataDownload"),
}


def ended_seconds(pod: Mapping[str, Any], now: datetime) -> float | None:
    """How long ago the pod ended Failed: since the latest of its DisruptionTarget and Ready conditions' and its
    containers' termination times. None when it is not Failed or no timestamp says when (a pod without one is
    not proved recent, and is not explained)."""
    status = pod.get("status") or {}
    if status.get("phase") != FAILED:
        return None
    stamps = [
        parse_time(c.get("lastTransitionTime"))
        for c in (condition(pod, DISRUPTION_TARGET), condition(pod, "Ready"))
        if c is not None and (c.get("type") != "Ready" or c.get("status") != "True")
    ]
    stamps += [parse_time(terminated.get("finishedAt")) for _, terminated in _terminated(pod)]
    known = [s for s in stamps if s is not None]
    return max(0.0, (now - max(known)).total_seconds()) if known else None


def _terminated(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(container name, its `terminated` state) for every container that ended, init containers first."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        deadline.check()
        terminated = (container.get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping):
            yield str(container.get("name") or ""), terminated


def _disruption(stuck: Stuck) -> Mapping[str, Any] | None:
    found = condition(stuck.pod, DISRUPTION_TARGET)
    return found if found is not None and found.get("status") == "True" else None


def _by(stuck: Stuck) -> str:
    found = _disruption(stuck)
    return str(found.get("reason") or "") if found is not None else ""


def _status_reason(stuck: Stuck) -> str:
    return str((stuck.pod.get("status") or {}).get("reason") or "")


def _said(stuck: Stuck) -> str:
    """What Kubernetes wrote about the ending: the condition's reason and message, or the status's."""
    found = _disruption(stuck)
    status = stuck.pod.get("status") or {}
    reason, message = (
        (f"{DISRUPTION_TARGET} {found.get('reason')}", found.get("message"))
        if found is not None
        else (f"status {status.get('reason')}", status.get("message"))
    )
    return f" ({_quoted(reason)}: {_quoted(message)})" if message else f" ({_quoted(reason)})"


def _on_node(stuck: Stuck) -> str:
    return f" on node {stuck.node_name}" if stuck.node_name else ""


def _evicted_by_api(stuck: Stuck) -> str | None:
    if _by(stuck) != BY_EVICTION_API:
        return None
    who = "evicted through the Eviction API (kubectl drain, the descheduler or the cluster autoscaler)"
    return f"{who}{_on_node(stuck)}{_said(stuck)}{_velero_wait(stuck)}"


def _preempted(stuck: Stuck) -> str | None:
    if _by(stuck) == BY_SCHEDULER:
        who = "preempted by the scheduler for a pod of higher priority"
        return f"{who}{_on_node(stuck)}{_said(stuck)}{_velero_wait(stuck)}"
    if _status_reason(stuck) == KUBELET_PREEMPTING and _by(stuck) in ("", BY_KUBELET):
        return f"preempted by the kubelet{_on_node(stuck)} to admit a critical pod{_said(stuck)}"
    return None


def _taint_manager(stuck: Stuck) -> str | None:
    if _by(stuck) != BY_TAINT_MANAGER:
        return None
    node = f"its node {stuck.node_name}" if stuck.node_name else "its node"
    why = f"{node} has a NoExecute taint the pod does not tolerate (NotReady or unreachable past tolerationSeconds)"
    return f"deleted by the taint manager: {why}{_said(stuck)}{_velero_wait(stuck)}"


def _node_shutdown(stuck: Stuck) -> str | None:
    if _by(stuck) == BY_POD_GC:
        gone = f"its node{_named_node(stuck)} is gone or out of service"
        return f"deleted by pod garbage collection: {gone}{_said(stuck)}{_velero_wait(stuck)}"
    if _by(stuck) in ("", BY_KUBELET) and _status_reason(stuck) in NODE_SHUTDOWN_REASONS:
        return f"terminated by the kubelet as its node{_named_node(stuck)} shut down{_said(stuck)}"
    return None


def _named_node(stuck: Stuck) -> str:
    return f" {stuck.node_name}" if stuck.node_name else ""


def _node_pressure(stuck: Stuck) -> str | None:
    if _by(stuck) in ("", BY_KUBELET) and _status_reason(stuck) == KUBELET_EVICTED:
        return f"evicted by the kubelet{_on_node(stuck)}, short of a resource{_said(stuck)}"
    return None


def _oom_killed(stuck: Stuck) -> str | None:
    for name, terminated in _terminated(stuck.pod):
        if terminated.get("reason") == OOM_KILLED:
            code = f", exit code {terminated['exitCode']}" if terminated.get("exitCode") is not None else ""
            return f"container {_quoted(name)} was killed for passing its memory limit ({OOM_KILLED}{code})"
    return None


def _container_failed(stuck: Stuck) -> str | None:
    for name, terminated in _terminated(stuck.pod):
        if terminated.get("exitCode") not in (None, 0):
            reason = f" ({_quoted(terminated['reason'])})" if terminated.get("reason") else ""
            message = f": {_quoted(terminated['message'])}" if terminated.get("message") else ""
            return f"container {_quoted(name)} exited with code {terminated['exitCode']}{reason}{message}"
    return None


def _failed_unexplained(stuck: Stuck) -> str:
    if _disruption(stuck) is not None or (stuck.pod.get("status") or {}).get("reason"):
        return f"ended Failed{_on_node(stuck)}{_said(stuck)}"
    return f"ended Failed{_on_node(stuck)}, and nothing the audit reads says why"


def _velero_wait(stuck: Stuck) -> str:
    """For a Velero backup or restore pod deleted before any of its containers started: Velero fails its
    DataUpload or DataDownload early only when its pod watch sees the pod Failed while that is still Accepted
    (`IsPodUnrecoverable`, pkg/util/kube/pod.go); a pod removed before that leaves it waiting for the
    node-agent's prepare timeout (vmware-tanzu/velero#9212)."""
    owned = VELERO_OWNERS.get(stuck.target.role.role or "")
    if owned is None or any(_started(t) for _, t in _terminated(stuck.pod)):
        return ""
    label, kind = owned
    value = ((stuck.pod.get("metadata") or {}).get("labels") or {}).get(label)
    named = f"{kind} {_quoted(value)}" if value else f"its {kind}"
    return (
        f"; it never started, so {named} was not prepared yet: unless Velero saw this pod Failed before it was"
        " removed, it waits out the node-agent's prepare timeout (--data-mover-prepare-timeout, 30 min by default)"
    )


def _started(terminated: Mapping[str, Any]) -> bool:
    return bool(terminated.get("startedAt"))


def _quoted(text: object) -> str:
    """What Kubernetes or a container wrote, clipped (the cause is escaped whole when made)."""
    return clip(str(text), MESSAGE_LIMIT)


#: Rerunning the work is the same for every cause: what differs is what keeps the next pod alive.
_RERUN = "then rerun the backup, restore or sync (a VolSync Job retries up to its backoffLimit)"

#: Most specific first: who disrupted the pod, then what its containers say; the last entry always holds.
ENDED_CAUSES: tuple[Cause, ...] = (
    Cause(
        "EvictedByAPI",
        "Evicted through the Eviction API (DisruptionTarget EvictionByEvictionAPI): kubectl drain, the descheduler "
        "or the cluster autoscaler; where Velero waits out its prepare timeout for a pod that never started, the "
        "message says so.",
        "Cover storage pods with a PodDisruptionBudget (maxUnavailable: 0) so that drains wait for them, and keep "
        f"them from the descheduler (DefaultEvictor ignorePvcPods: true); {_RERUN}.",
        _evicted_by_api,
    ),
    Cause(
        "Preempted",
        "Preempted for a pod of higher priority: by the scheduler (DisruptionTarget PreemptionByScheduler) or by "
        "the kubelet to admit a critical pod (status reason Preempting).",
        f"Give storage pods a PriorityClass at least as high as the pods that preempt them; {_RERUN}.",
        _preempted,
    ),
    Cause(
        "DeletedByTaintManager",
        "Deleted by the taint manager (DisruptionTarget DeletionByTaintManager): its node got a NoExecute taint the "
        "pod does not tolerate, usually NotReady or unreachable.",
        f"Find why the node was tainted (kubectl describe node); {_RERUN} once it is back or on another node.",
        _taint_manager,
    ),
    Cause(
        "NodeShutdown",
        "Its node shut down: terminated by the kubelet's graceful node shutdown (status reason Terminated or "
        "Shutdown), or deleted by pod garbage collection once the node was gone or out of service "
        "(DisruptionTarget DeletionByPodGC).",
        f"Drain nodes before shutting them down, so that evictions wait under the PodDisruptionBudget; {_RERUN}.",
        _node_shutdown,
    ),
    Cause(
        "NodePressureEviction",
        "Evicted by the kubelet, its node short of memory, disk or PIDs (status reason Evicted, DisruptionTarget "
        "TerminationByKubelet).",
        "Give storage pods memory and ephemeral-storage requests (Velero's node-agent ConfigMap podResources, "
        f"VolSync's moverResources) so the kubelet evicts them last, and relieve the node; {_RERUN}.",
        _node_pressure,
    ),
    Cause(
        "OOMKilled",
        "A container was killed for passing its memory limit (OOMKilled).",
        "Raise the container's memory limit (Velero's node-agent ConfigMap podResources, VolSync's moverResources); "
        f"{_RERUN}.",
        _oom_killed,
    ),
    Cause(
        "ContainerFailed",
        "A container exited with an error code.",
        "Read the container's log (kubectl logs POD -c CONTAINER) and the status of the pod's owner "
        "(ReplicationSource or ReplicationDestination, DataUpload or DataDownload, DataVolume).",
        _container_failed,
    ),
    Cause(
        "FailedUnexplained",
        "Ended Failed for a reason none of the above names (the status reason is quoted: a kubelet's admission "
        "refusal such as OutOfcpu), or with nothing that says why.",
        "kubectl describe pod, the events of its node and the status of its owner say more.",
        _failed_unexplained,
    ),
)
ENDED_CODES: tuple[str, ...] = tuple(c.code for c in ENDED_CAUSES)


def ended_cause(stuck: Stuck) -> StuckCause:
    """The first cause of the ended-pod table that holds; the last one always does. `stuck.seconds` is how long
    ago the pod ended."""
    return first_cause(ENDED_CAUSES, stuck)
