"""Stuck-pod causes of the first tier: who else holds the pod's claims (Multi-Attach, ReadWriteOncePod)."""

from __future__ import annotations

from rules import deadline
from rules.causes.stuck import Cause, Stuck
from rules.coscheduling.claimpods import name_of, node_of
from rules.kube.volumes import OWNED, SINGLE_POD

MULTI_ATTACH = "MultiAttach"


def _multi_attach(stuck: Stuck) -> str | None:
    if not stuck.node_name:
        return None
    for hold in stuck.holds:
        deadline.check()
        if hold.volume.access == OWNED and (holder := hold.oldest_holder(away_from=stuck.node_name)) is not None:
            return (
                f"ReadWriteOnce claim {hold.claim} is attached to node {node_of(holder)} for pod {name_of(holder)}, "
                f"and this pod is on node {stuck.node_name}: a volume attaches to one node at a time (Multi-Attach)"
            )
    return None


def _read_write_once_pod(stuck: Stuck) -> str | None:
    for hold in stuck.holds:
        deadline.check()
        if hold.volume.access == SINGLE_POD and (holder := hold.oldest_holder()) is not None:
            where = f" on node {node_of(holder)}" if node_of(holder) else ""
            return f"ReadWriteOncePod claim {hold.claim} is in use by pod {name_of(holder)}{where}"
    return None


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
