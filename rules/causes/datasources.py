"""Stuck-pod causes of the data-source tier: whether the source a claim is restored or cloned from (a snapshot, a
claim, the VM that will use a CDI worker's disk) is ready and reachable where the pod must run."""

from __future__ import annotations

from rules import deadline
from rules.annotations import FOLLOWS_VM
from rules.causes.stuck import Cause, Stuck, unusable
from rules.coscheduling.claimpods import name_of
from rules.datasource.mutation import conflict
from rules.datasource.scope import cdi_worker
from rules.datasource.sources import SourcePlace, data_source_ref, source_state
from rules.datasource.vm import vm_nodes, vms_to_follow
from rules.quoting import listed


def _source_not_ready(stuck: Stuck) -> str | None:
    """A claim the provisioner cannot fill yet because its source is missing or not ready
    (rules/datasource/sources.py source_state)."""
    for volume in stuck.volumes:
        deadline.check()
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


def _backup_source_elsewhere(stuck: Stuck) -> str | None:
    """A backup pod of Velero's CSI data mover on, or held to, nodes where the snapshot of the volume its
    DataUpload backs up cannot be restored (rules/datasource/exposer.py)."""
    nodes = stuck.source_nodes
    if not nodes or conflict(nodes) or not nodes[0].upload:
        return None
    return _elsewhere(stuck, nodes[0])


def _source_elsewhere(stuck: Stuck) -> str | None:
    nodes = stuck.source_nodes
    if not nodes or conflict(nodes):
        return None
    return _elsewhere(stuck, nodes[0])


def _elsewhere(stuck: Stuck, place: SourcePlace) -> str | None:
    """Why the pod cannot be where its claim's node-local source is ("" or None when it can)."""
    where = f"claim {place.claim} is restored from {place.source}, which lives on node {place.node}"
    if stuck.node_name:
        return f"{where}; the pod is on node {stuck.node_name}" if stuck.node_name != place.node else None
    node = stuck.view.node(place.node)
    if node is None:
        return f"{where}; node {place.node} does not exist"
    if not stuck.own.fits(node):
        return f"{where}; the pod's nodeSelector and required node affinity exclude that node"
    why = unusable(node, stuck.spec, scheduled=False)
    return None if why is None else f"{where}; node {place.node} {why[1]}"


def _vm_apart(stuck: Stuck) -> str | None:
    """A CDI worker that follows the VM which will use its disk and is left with no node: CDI's workload
    placement and the VM's constraints have no node in common (kubevirt/containerized-data-importer#4275)."""
    if stuck.node_name or cdi_worker(stuck.target.metadata) is None:
        return None
    followed = str((stuck.target.metadata.get("annotations") or {}).get(FOLLOWS_VM) or "").split(",")
    if stuck.own.any():
        return None  # it can be scheduled somewhere: not stuck by its constraints
    for follow in vms_to_follow(stuck.view, stuck.target.namespace, stuck.volumes):
        for vm in follow.vms:
            deadline.check()
            if name_of(vm) not in followed:
                continue
            allowed = sorted(vm_nodes(stuck.view, vm, stuck.policy.disclosed_node_labels).nodes(), key=name_of)
            on = f"it follows VM {name_of(vm)}, which will use claim {follow.claim}"
            if not allowed:
                return f"{on}: the VM's nodeSelector and required node affinity match no node"
            shown = listed(allowed, name_of)
            return (
                f"{on} and may run on {shown}; with its own nodeSelector and required node affinity (CDI's "
                "workload placement) no node is left"
            )
    return None


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
        "BackupSnapshotElsewhere",
        "A backup pod of Velero's CSI data mover is on, or held by its node constraints away from, the node where "
        "the volume its DataUpload backs up lives: a node-local driver restores the backup claim from the snapshot "
        "only there (vmware-tanzu/velero#7044).",
        "Let the backup pod reach the volume's node (Velero's loadAffinity for its class, the node's taints, a Ready "
        "node-agent there), or run Velero 1.18.1 or later, which adds the volume's topology; then cancel the "
        "DataUpload's backup so a new pod is placed there.",
        _backup_source_elsewhere,
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
