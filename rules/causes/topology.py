"""Stuck-pod causes of the volume-topology tier: whether the nodes the pod's PVs can be used from and the nodes
the pod may run on meet."""

from __future__ import annotations

from rules import deadline
from rules.causes.stuck import Cause, Stuck
from rules.coscheduling.claimpods import name_of
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import volume_terms_match
from rules.kube.volumes import ClaimVolume, node_local_terms
from rules.quoting import listed


def _volume_topology(stuck: Stuck) -> str | None:
    local = [v for v in stuck.volumes if v.pv_terms is not None]
    if not local:
        return None
    if stuck.node_name:
        node = stuck.view.node(stuck.node_name)
        for volume in local:
            deadline.check()
            if node is not None and not volume_terms_match(volume.pv_terms or (), node):
                return _outside(volume, f"node {stuck.node_name}")
        return None
    if next(stuck.candidates(), None) is not None:
        return None
    volumes = on_labels(stuck.policy.disclosed_node_labels, volumes=True)
    together = sorted(Feasibility(stuck.view, volumes, volume_terms=node_local_terms(local)).nodes(), key=name_of)
    if not together:
        if len(local) == 1:
            return f"{_pv_of(local[0])}'s node affinity matches no node"
        return f"the node affinities of {listed(local, _pv_of)} have no node in common"
    if not stuck.own.any():
        return None  # its own constraints match no node at all: not the volumes' doing
    shown = listed(together, name_of)
    return (
        f"its nodeSelector and required node affinity exclude every node {_pv_of(local[0])} can be used from ({shown})"
    )


def _outside(volume: ClaimVolume, where: str) -> str:
    return f"{where} is outside the node affinity of {_pv_of(volume)}"


def _pv_of(volume: ClaimVolume) -> str:
    pv = name_of(volume.pv or {})
    return f"PV {pv} (claim {volume.claim})" if pv else f"the PV of claim {volume.claim}"


#: Whether the nodes the volumes can be used from and the nodes the pod may run on meet.
TOPOLOGY_CAUSES: tuple[Cause, ...] = (
    Cause(
        "VolumeTopologyConflict",
        "The node affinity of the pod's PVs excludes its node, or every node its own constraints allow.",
        "Let the pod's node affinity (load affinity, nodeSelector) reach a node of the PV's topology.",
        _volume_topology,
    ),
)
