"""Why a storage pod is stuck: one cause per pod, with a stable code and a one-line remedy.

The audit names the most specific cause it can prove from cluster state; the code is what reports, metrics and
scripts key on, so codes never change meaning once shipped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rules.annotations import FOLLOWS_VM
from rules.cluster import ClusterView, LookupFailed
from rules.context import PodTarget
from rules.coscheduling.anchors import Hold, age_key, claim_hold, name_of, node_of, parse_time
from rules.datasource.mutation import conflict
from rules.datasource.scope import cdi_worker
from rules.datasource.sources import NODE, SourcePlace, data_source_ref, source_places, source_state
from rules.datasource.vm import vm_spec, vms_to_follow
from rules.kube.conditions import condition
from rules.kube.nodeaffinity import HOSTNAME_LABEL, pinned_node, pod_fits_node, required_terms, volume_terms_match
from rules.kube.tolerations import untolerated_taint
from rules.kube.volumes import OWNED, SINGLE_POD, ClaimVolume, node_local_terms
from rules.loadaffinity.nodeagents import pending_pod_problem
from rules.model import Json
from rules.policy import ROLES, Policy
from rules.quoting import ShownText, clip


@dataclass(frozen=True)
class StuckCause(ShownText):
    """`code` is stable (CamelCase, e.g. `MultiAttach`); `message` says what holds the pod, naming objects and
    nodes; `remedy` says what an operator does about it, in one line. Escaped when made (`ShownText`): the
    message quotes names and what the scheduler or the kubelet wrote."""

    code: str
    message: str
    remedy: str

    def as_json(self) -> Json:
        return {"code": self.code, "message": self.message, "remedy": self.remedy}


#: How much of a message the scheduler or the kubelet wrote a cause quotes.
MESSAGE_LIMIT = 300
#: The role the audit gives CDI's importer, upload and clone-source pods, which have no policy role.
CDI_WORKER = "cdi-worker"


def storage_role(target: PodTarget) -> str:
    """The role under which the audit explains this pod when it is stuck: its policy role (mover, backup,
    restore), or `cdi-worker` for a CDI worker pod not left alone; "" for any other pod. The one test of
    "storage pod" every caller uses."""
    role = target.role.role
    if role is not None and role in ROLES:
        return role
    if target.role.exempt or target.role.unplaced or cdi_worker(target.metadata) is None:
        return ""
    return CDI_WORKER


def stuck_seconds(pod: Mapping[str, Any], now: datetime) -> float | None:
    """How long the pod has been Pending, or Running without being Ready; None when it is neither or when no
    timestamp tells since when (a pod without one cannot be proved stuck)."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    if phase == "Pending":
        since = created
    elif phase == "Running":
        ready = condition(pod, "Ready")
        if ready is None or ready.get("status") == "True":
            return None
        since = parse_time(ready.get("lastTransitionTime")) or created
    else:
        return None
    return None if since is None else max(0.0, (now - since).total_seconds())


def duration(seconds: float) -> str:
    """A wait as people say it: minutes up to two hours, hours up to two days, then days."""
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h" if minutes < 48 * 60 else f"{minutes // (24 * 60)} d"


@dataclass
class Stuck:
    """A stuck storage pod and the cluster state its cause is read from; the facts several causes share are
    computed once, on first use."""

    pod: Json
    target: PodTarget
    view: ClusterView
    policy: Policy
    seconds: float

    @property
    def spec(self) -> Json:
        return self.pod.get("spec") or {}

    @property
    def node_name(self) -> str:
        return str(self.spec.get("nodeName") or "")

    @functools.cached_property
    def volumes(self) -> list[ClaimVolume]:
        return self.target.volumes(self.view)

    @functools.cached_property
    def holds(self) -> list[Hold]:
        """Who else mounts each ReadWriteOnce and ReadWriteOncePod claim of the pod."""
        considered = [v for v in self.volumes if v.access in (OWNED, SINGLE_POD) and v.claim]
        return [claim_hold(self.view, self.policy, self.target, v) for v in considered]

    @functools.cached_property
    def source_nodes(self) -> list[SourcePlace]:
        """The pod's claims whose node-local snapshot or clone source ties them to one node
        (rules/datasource/sources.py)."""
        places = source_places(self.view, self.policy, self.target.namespace, self.volumes)
        return [p for p in places if p.kind == NODE]

    @functools.cached_property
    def fits_own(self) -> Callable[[Json], bool]:
        """`pod_fits_node` for the pod's nodeSelector and required node affinity, as a test of a bit set: the
        terms are evaluated against every node once (rules/kube/nodeset.py), not once per node."""
        nodes = self.view.node_set()
        selector = self.spec.get("nodeSelector")
        return functools.partial(nodes.contains, nodes.admitting(required_terms(self.spec), selector=selector))

    @property
    def own_groups(self) -> list[list[Json]]:
        """The pod's required node affinity as term groups, to narrow the nodes a NodeSet checks."""
        terms = required_terms(self.spec)
        return [terms] if terms is not None else []

    def fitting(self, fits: Callable[[Json], bool], groups: list[list[Json]]) -> Iterator[Json]:
        """The nodes that pass `fits`, checking only those the pod's nodeSelector and `groups` allow."""
        return self.view.node_set().matching(fits, groups, self.spec.get("nodeSelector") or None)

    def candidates(self) -> Iterator[Json]:
        """The nodes the pod could run on by its own constraints and its volumes' topology: its node when it has
        one, else every node that passes its nodeSelector, required node affinity and node-local PVs."""
        if self.node_name:
            node = self.view.node(self.node_name)
            return iter([node] if node is not None else [])
        local = node_local_terms(self.volumes)
        nodes = self.view.node_set()
        admitted = nodes.admitting(volume_terms=local)

        def fits(node: Json) -> bool:
            return self.fits_own(node) and nodes.contains(admitted, node)

        return self.fitting(fits, [*self.own_groups, *(list(t) for t in local)])

    @functools.cached_property
    def unusable(self) -> dict[str, tuple[str, str]] | None:
        """Why each candidate node cannot take the pod, by node name: (cause code, what is wrong); None when
        there is no candidate or one of them can."""
        found: dict[str, tuple[str, str]] = {}
        for node in self.candidates():
            why = _unusable(node, self.spec, scheduled=bool(self.node_name))
            if why is None:
                return None  # the first usable node settles it
            found[name_of(node)] = why
        return dict(sorted(found.items())) or None


@dataclass(frozen=True)
class Cause:
    """One entry of the cause table: `detect` says what holds the pod, or None when this is not why."""

    code: str
    meaning: str
    remedy: str
    detect: Callable[[Stuck], str | None]

    def judge(self, stuck: Stuck) -> StuckCause | None:
        message = self.detect(stuck)
        return None if message is None else StuckCause(self.code, message, self.remedy)


def stuck_cause(stuck: Stuck) -> StuckCause:
    """The first cause of the table that holds; the last one always does. A cause whose state cannot be read
    (`LookupFailed`) is not proved, and the next one is tried."""
    for cause in CAUSES:
        try:
            found = cause.judge(stuck)
        except LookupFailed:
            continue
        if found is not None:
            return found
    raise AssertionError("the cause table ends with a cause that always holds")


# --- detectors, in table order ----------------------------------------------------------------------------


def _multi_attach(stuck: Stuck) -> str | None:
    if not stuck.node_name:
        return None
    for hold in stuck.holds:
        elsewhere = [h for h in hold.holders if node_of(h) not in (None, stuck.node_name)]
        if hold.volume.access == OWNED and elsewhere:
            holder = min(elsewhere, key=age_key)
            return (
                f"ReadWriteOnce claim {hold.claim} is attached to node {node_of(holder)} for pod {name_of(holder)}, "
                f"and this pod is on node {stuck.node_name}: a volume attaches to one node at a time (Multi-Attach)"
            )
    return None


def _no_node_agent(stuck: Stuck) -> str | None:
    if stuck.target.role.role not in ("backup", "restore"):
        return None
    problem = pending_pod_problem(stuck.view, stuck.policy, stuck.target.namespace, stuck.spec)
    return None if problem is None else problem[1]


def _read_write_once_pod(stuck: Stuck) -> str | None:
    for hold in stuck.holds:
        if hold.volume.access == SINGLE_POD and hold.holders:
            holder = min(hold.holders, key=age_key)
            where = f" on node {node_of(holder)}" if node_of(holder) else ""
            return f"ReadWriteOncePod claim {hold.claim} is in use by pod {name_of(holder)}{where}"
    return None


def _source_not_ready(stuck: Stuck) -> str | None:
    """A claim the provisioner cannot fill yet because its source is missing or not ready
    (rules/datasource/sources.py source_state)."""
    for volume in stuck.volumes:
        ref = data_source_ref(volume.pvc) if volume.pvc is not None and not volume.bound else None
        if ref is None:
            continue
        state = source_state(stuck.view, stuck.target.namespace, ref)
        if state.problem:
            how = "cloned from" if ref.get("kind") == "PersistentVolumeClaim" else "restored from"
            return f"claim {volume.claim} is {how} {state.label}, which {state.problem}"
    return None


def _sources_apart(stuck: Stuck) -> str | None:
    return conflict(stuck.source_nodes) or None


def _source_elsewhere(stuck: Stuck) -> str | None:
    nodes = stuck.source_nodes
    if not nodes or conflict(nodes):
        return None
    place = nodes[0]
    where = f"claim {place.claim} is restored from {place.source}, which lives on node {place.node}"
    if stuck.node_name:
        return f"{where}; the pod is on node {stuck.node_name}" if stuck.node_name != place.node else None
    node = stuck.view.node(place.node)
    if node is None:
        return f"{where}; node {place.node} does not exist"
    if not pod_fits_node(stuck.spec, node):
        return f"{where}; the pod's nodeSelector and required node affinity exclude that node"
    why = _unusable(node, stuck.spec, scheduled=False)
    return None if why is None else f"{where}; node {place.node} {why[1]}"


def _vm_apart(stuck: Stuck) -> str | None:
    """A CDI worker that follows the VM which will use its disk and is left with no node: CDI's workload
    placement and the VM's constraints have no node in common (kubevirt/containerized-data-importer#4275)."""
    if stuck.node_name or cdi_worker(stuck.target.metadata) is None:
        return None
    followed = str((stuck.target.metadata.get("annotations") or {}).get(FOLLOWS_VM) or "").split(",")
    if next(stuck.fitting(stuck.fits_own, stuck.own_groups), None) is not None:
        return None  # it can be scheduled somewhere: not stuck by its constraints
    for follow in vms_to_follow(stuck.view, stuck.target.namespace, stuck.volumes):
        for vm in follow.vms:
            if name_of(vm) not in followed:
                continue
            spec = vm_spec(vm)
            terms = required_terms(spec)
            nodes = stuck.view.node_set()
            fits = functools.partial(nodes.contains, nodes.admitting(terms, selector=spec.get("nodeSelector")))
            groups = [terms] if terms is not None else []
            vm_nodes = nodes.matching(fits, groups, spec.get("nodeSelector") or None)
            allowed = sorted(vm_nodes, key=name_of)
            on = f"it follows VM {name_of(vm)}, which will use claim {follow.claim}"
            if not allowed:
                return f"{on}: the VM's nodeSelector and required node affinity match no node"
            shown = ", ".join(name_of(n) for n in allowed[:3]) + (", …" if len(allowed) > 3 else "")
            return (
                f"{on} and may run on {shown}; with its own nodeSelector and required node affinity (CDI's "
                "workload placement) no node is left"
            )
    return None


def _volume_topology(stuck: Stuck) -> str | None:
    local = [v for v in stuck.volumes if v.pv_terms is not None]
    if not local:
        return None
    if stuck.node_name:
        node = stuck.view.node(stuck.node_name)
        outside = [v for v in local if node is not None and not volume_terms_match(v.pv_terms or (), node)]
        return _outside(outside[0], f"node {stuck.node_name}") if outside else None
    if next(stuck.candidates(), None) is not None:
        return None
    groups = [list(v.pv_terms or ()) for v in local]
    nodes = stuck.view.node_set()
    fits = functools.partial(nodes.contains, nodes.admitting(volume_terms=groups))
    together = sorted(nodes.matching(fits, groups), key=name_of)
    if not together:
        if len(local) == 1:
            return f"{_pv_of(local[0])}'s node affinity matches no node"
        return f"the node affinities of {', '.join(_pv_of(v) for v in local)} have no node in common"
    if next(stuck.fitting(stuck.fits_own, stuck.own_groups), None) is None:
        return None  # its own constraints match no node at all: not the volumes' doing
    shown = ", ".join(name_of(n) for n in together[:3]) + (", …" if len(together) > 3 else "")
    return (
        f"its nodeSelector and required node affinity exclude every node {_pv_of(local[0])} can be used from ({shown})"
    )


def _outside(volume: ClaimVolume, where: str) -> str:
    return f"{where} is outside the node affinity of {_pv_of(volume)}"


def _pv_of(volume: ClaimVolume) -> str:
    pv = name_of(volume.pv or {})
    return f"PV {pv} (claim {volume.claim})" if pv else f"the PV of claim {volume.claim}"


def _node_gone(stuck: Stuck) -> str | None:
    if stuck.node_name and stuck.view.node(stuck.node_name) is None:
        return f"its node {stuck.node_name} does not exist"
    pinned = pinned_node(required_terms(stuck.spec))
    if not stuck.node_name and pinned and stuck.view.node(pinned) is None:
        return f"it is pinned to node {pinned} (metadata.name In [{pinned}]), which does not exist"
    return None


def _unusable_as(code: str) -> Callable[[Stuck], str | None]:
    """A detector for one kind of unusable node: it holds when no candidate node can take the pod and at least
    one of them fails for this reason; the message names every candidate's reason."""

    def detect(stuck: Stuck) -> str | None:
        reasons = stuck.unusable
        if reasons is None or code not in {c for c, _ in reasons.values()}:
            return None
        listed = [f"{node} {why}" for node, (_, why) in reasons.items()]
        shown = "; ".join(listed[:3]) + (f"; and {len(listed) - 3} more" if len(listed) > 3 else "")
        if stuck.node_name:
            return f"its node {shown}"
        return f"every node its affinity and volumes allow is unusable: {shown}"

    return detect


def _unusable(node: Mapping[str, Any], spec: Mapping[str, Any], *, scheduled: bool) -> tuple[str, str] | None:
    """Why the node cannot run the pod, or None. A pod with a node already bypasses the scheduler: only a
    NotReady node (no kubelet to start it) keeps it then."""
    ready = condition(node, "Ready")
    if ready is not None and ready.get("status") != "True":
        return NODE_NOT_READY, f"is NotReady ({ready.get('reason') or 'status ' + str(ready.get('status'))})"
    if scheduled:
        return None
    if (node.get("spec") or {}).get("unschedulable"):
        return NODE_CORDONED, "is cordoned"
    taint = untolerated_taint(spec.get("tolerations") or (), node)
    if taint is not None:
        shown = f"{taint.get('key')}={taint['value']}" if taint.get("value") else str(taint.get("key"))
        return NODE_TAINTED, f"has taint {shown}:{taint.get('effect')}, which the pod does not tolerate"
    return None


def _hostname_label(stuck: Stuck) -> str | None:
    if stuck.node_name:
        return None
    wanted: list[tuple[str, str]] = []
    if selected := (stuck.spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL):
        wanted.append(("nodeSelector", str(selected)))
    for term in required_terms(stuck.spec) or ():
        for requirement in term.get("matchExpressions") or ():
            values = list(requirement.get("values") or [])
            if requirement.get("key") == HOSTNAME_LABEL and requirement.get("operator") == "In" and len(values) == 1:
                wanted.append(("required node affinity", str(values[0])))
    for where, hostname in wanted:
        if next(stuck.view.node_set().matching(lambda _: True, labels={HOSTNAME_LABEL: hostname}), None):
            continue
        if stuck.view.node(hostname) is not None:
            # the node is named, its label is not: reports reach the pod's namespace, whose tenants may not read Nodes
            asked = f"its {where} asks for {HOSTNAME_LABEL}={hostname}, which no node carries"
            return f"{asked}; a node named {hostname} exists, with another {HOSTNAME_LABEL} label or none"
    return None


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


# --- the table ----------------------------------------------------------------------------------------------

MULTI_ATTACH = "MultiAttach"
NO_NODE_AGENT = "NoNodeAgent"
NODE_NOT_READY, NODE_CORDONED, NODE_TAINTED = "NodeNotReady", "NodeCordoned", "NodeTainted"

#: Who else holds the pod's claims.
CLAIM_CAUSES: tuple[Cause, ...] = (
    Cause(
        MULTI_ATTACH,
        "A ReadWriteOnce claim of the pod is attached to another node, for another pod.",
        "Delete the pod: its controller recreates it and the webhook places it on the holder's node.",
        _multi_attach,
    ),
    Cause(
        "ReadWriteOncePodInUse",
        "A ReadWriteOncePod claim of the pod is in use by another pod (named).",
        "Stop the pod that holds the claim, or copy from a snapshot or a clone (copyMethod: Snapshot or Clone).",
        _read_write_once_pod,
    ),
)
#: Whether a Ready Velero node-agent runs on the pod's node.
NODE_AGENT_CAUSES: tuple[Cause, ...] = (
    Cause(
        NO_NODE_AGENT,
        "A backup or restore pod is on, or pinned to, a node where no Velero node-agent is Ready: its DataUpload or "
        "DataDownload waits for one until Velero's prepare timeout (vmware-tanzu/velero#9735).",
        "Get the node-agent Ready on that node (its DaemonSet's tolerations and nodeSelector), or delete the pod so "
        "the webhook places the next one where a node-agent runs.",
        _no_node_agent,
    ),
)
#: Whether the pod's data source (a clone's source, a snapshot) can be read where the pod must run.
DATA_SOURCE_CAUSES: tuple[Cause, ...] = (
    Cause(
        "DataSourceNotReady",
        "A claim of the pod is restored or cloned from a source that does not exist or is not ready (a VolumeSnapshot "
        "not readyToUse, a source claim missing or not Bound), or that lies in another namespace no ReferenceGrant "
        "opens to it: it cannot be provisioned yet.",
        "Create the source or get it ready (kubectl describe volumesnapshot or pvc says why it is not); a source in "
        "another namespace needs a ReferenceGrant there.",
        _source_not_ready,
    ),
    Cause(
        "DataSourcesApart",
        "Claims of the pod are restored or cloned from node-local sources on different nodes: one pod can never "
        "provision them all (backube/volsync#1019).",
        "Restore or clone the claims from sources on one node, or use one pod per claim.",
        _sources_apart,
    ),
    Cause(
        "DataSourceElsewhere",
        "A claim of the pod is restored or cloned from a node-local source on a node the pod is not on or cannot "
        "use (backube/volsync#1019, kubevirt/containerized-data-importer#3287).",
        "Let the pod reach the source's node (uncordon it, widen the pod's node affinity), or delete the pod so the "
        "webhook places the next one there.",
        _source_elsewhere,
    ),
    Cause(
        "VMPlacementConflict",
        "A CDI worker follows the VM that will use its disk and no node is left: CDI's workload placement and the "
        "VM's constraints have no node in common (kubevirt/containerized-data-importer#4275).",
        "Let CDI's workload placement (the CDI resource's spec.workloads) reach a node where the VM may run, or widen "
        "the VM's nodeSelector and node affinity.",
        _vm_apart,
    ),
)
#: Whether the nodes the volumes can be used from and the nodes the pod may run on meet.
TOPOLOGY_CAUSES: tuple[Cause, ...] = (
    Cause(
        "VolumeTopologyConflict",
        "The node affinity of the pod's PVs excludes its node, or every node its own constraints allow.",
        "Let the pod's node affinity (load affinity, nodeSelector) reach a node of the PV's topology.",
        _volume_topology,
    ),
)
#: Whether the node the pod has, or could have, can run it.
NODE_CAUSES: tuple[Cause, ...] = (
    Cause(
        "NodeGone",
        "The node the pod is bound or pinned to does not exist.",
        "Delete the pod: its controller recreates it and the webhook places it from the current state.",
        _node_gone,
    ),
    Cause(
        NODE_NOT_READY,
        "Its node, or every node it may use, is NotReady.",
        "Bring the node back (kubelet, network), or drain it so the pod is recreated elsewhere.",
        _unusable_as(NODE_NOT_READY),
    ),
    Cause(
        NODE_CORDONED,
        "Every node the pod may use is cordoned (or otherwise unusable).",
        "Uncordon the node, or widen the pod's node affinity to usable nodes.",
        _unusable_as(NODE_CORDONED),
    ),
    Cause(
        NODE_TAINTED,
        "Every node the pod may use has a NoSchedule or NoExecute taint the pod does not tolerate.",
        "Add a matching toleration (policy tolerations, Velero's node-agent ConfigMap), or remove the taint.",
        _unusable_as(NODE_TAINTED),
    ),
    Cause(
        "HostnameLabelMismatch",
        f"The pod asks for a {HOSTNAME_LABEL} label no node carries, while a node of that name exists.",
        "Pin by node name (coScheduling.placement: requiredAffinity), or fix the node's hostname label.",
        _hostname_label,
    ),
)
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
#: Most specific first: the first cause that holds is the pod's.
CAUSES: tuple[Cause, ...] = (
    *CLAIM_CAUSES,
    *NODE_AGENT_CAUSES,
    *DATA_SOURCE_CAUSES,
    *TOPOLOGY_CAUSES,
    *NODE_CAUSES,
    *SCHEDULER_CAUSES,
)
CODES: tuple[str, ...] = tuple(c.code for c in CAUSES)
