"""VolSync's volume populator (backube/volsync internal/controller/volumepopulator_controller.go): a claim whose
`dataSourceRef` is a ReplicationDestination (`volsync.backube`) is filled from the destination's
`status.latestImage`, a VolumeSnapshot in the same namespace. VolSync makes a temporary claim restored from that
snapshot, on the node the scheduler selected for the consumer, so a node-local driver must find the snapshot there
(backube/volsync#1847, #1255). Here the reference is turned into the snapshot's, which the existing snapshot chain
follows to its source node.

VolSync reads the destination in the claim's own namespace whatever `dataSourceRef.namespace` says (it does not
support cross-namespace population), and so does this: nothing of another namespace is looked up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.cluster import ClusterView
from rules.model import Json

VOLSYNC_GROUP = "volsync.backube"
POPULATOR_KIND = "ReplicationDestination"
SNAPSHOT_KIND, SNAPSHOT_GROUP = "VolumeSnapshot", "snapshot.storage.k8s.io"


def is_populator_ref(ref: Mapping[str, Any]) -> bool:
    """Whether a claim's data source is VolSync's populator, as VolSync decides it
    (pvcHasReplicationDestinationDataSourceRef: group volsync.backube, kind ReplicationDestination, a name)."""
    return ref.get("kind") == POPULATOR_KIND and ref.get("apiGroup") == VOLSYNC_GROUP and bool(ref.get("name"))


@dataclass(frozen=True)
class LatestImage:
    """What a populator reference leads to: `ref`, the VolumeSnapshot to follow (None when there is none yet),
    `label` naming the destination for messages, and `why` nothing can be followed."""

    label: str
    ref: Json | None
    why: str = ""


def latest_image(view: ClusterView, namespace: str, ref: Mapping[str, Any]) -> LatestImage:
    """The snapshot a claim of `namespace` populated from the ReplicationDestination `ref` is restored from.

    VolSync waits while the destination does not exist or has no `latestImage`, and refuses an image that is not a
    VolumeSnapshot (volumepopulator_controller.go, reconcilePVCPrime); each is said in `why`."""
    name = str(ref["name"])
    label = f"ReplicationDestination {namespace}/{name}"
    destination = view.replication_destination(namespace, name)
    if destination is None:
        return LatestImage(label, None, f"{label} does not exist")
    image = (destination.get("status") or {}).get("latestImage")
    if not isinstance(image, Mapping) or not image.get("name"):
        return LatestImage(label, None, f"{label} has no latestImage yet")
    if image.get("kind") != SNAPSHOT_KIND or image.get("apiGroup") != SNAPSHOT_GROUP:
        kind = f"{image.get('kind') or 'an unnamed kind'}"
        return LatestImage(label, None, f"{label}'s latestImage is a {kind}, not a VolumeSnapshot: VolSync refuses it")
    return LatestImage(label, {"apiGroup": SNAPSHOT_GROUP, "kind": SNAPSHOT_KIND, "name": str(image["name"])})
