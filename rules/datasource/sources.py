"""Where the data of a claim comes from (docs/design.md#12-data-sources): a claim restored from a VolumeSnapshot or
cloned from another claim is provisioned by the source's CSI driver, and a node-local driver (ZFS/LVM local PVs,
TopoLVM, hostpath) can only provision it on the node that holds the source (backube/volsync#1019,
kubevirt/containerized-data-importer#3287). With `WaitForFirstConsumer` the scheduler picks the consumer's node
without knowing that, so the pod must be told.

Only claims that are unbound, of a WaitForFirstConsumer class and have a `dataSource`/`dataSourceRef` of kind
VolumeSnapshot, PersistentVolumeClaim or VolSync's ReplicationDestination are resolved: every other claim costs one
check of fields already read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rules import deadline
from rules.cluster import ClusterView
from rules.datasource.exposer import UploadSource
from rules.datasource.populator import is_populator_ref, latest_image
from rules.kube.disclosed import EVERY_LABEL
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.referencegrants import reference_granted
from rules.kube.volumes import SELECTED_NODE, ClaimVolume, claim_pv, pv_required_terms, waits_for_first_consumer
from rules.model import Json
from rules.policy import Policy

SNAPSHOT_GROUP = "snapshot.storage.k8s.io"
#: The node whose snapshotter sidecar manages a content, set by the distributed snapshotter
#: (kubernetes-csi/external-snapshotter pkg/utils/util.go VolumeSnapshotContentManagedByLabel) and kept by Velero's
#: exposer on the content it re-creates (vmware-tanzu/velero pkg/exposer/csi_snapshot.go createBackupVSC).
MANAGED_BY = "snapshot.storage.kubernetes.io/managed-by"

NODE, ZONE, FREE, UNRESOLVED = "node", "zone", "free", "unresolved"


@dataclass(frozen=True)
class SourcePlace:
    """Where one claim's source lets it be provisioned.

    `kind` is NODE (only `node`), ZONE (only where `terms` hold: a zone-following driver), FREE (anywhere the
    scheduler likes: a zonal or network source, nothing to add) or UNRESOLVED (not known yet: `why` says what).
    """

    volume: ClaimVolume
    source: str  # "VolumeSnapshot shop/snap-1 of claim db", "claim shop/db"
    kind: str
    node: str = ""
    pv: str = ""
    terms: tuple[Json, ...] = ()
    why: str = ""
    #: the VolumeSnapshotContent that told where, when no PV did (its `nodeAffinity`, its managed-by label)
    content: str = ""
    #: the DataUpload followed to the source (Velero's exposer chain), whose PV's required terms (`terms`) load
    #: affinity ANDs into the backup pod's (rules/loadaffinity/source.py)
    upload: str = ""

    @property
    def claim(self) -> str:
        return str(self.volume.claim)

    @property
    def holder(self) -> str:
        """What holds the data, as a reason names it: "PV pv-1" or "VolumeSnapshotContent snapcontent-1"."""
        return f"PV {self.pv}" if self.pv or not self.content else f"VolumeSnapshotContent {self.content}"


def data_source_ref(pvc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The claim's `dataSourceRef` (it wins when both are set, as in the API), else its `dataSource`; only a
    VolumeSnapshot or a PersistentVolumeClaim source, the two kinds a CSI driver provisions from, or VolSync's
    populator, which provisions from a VolumeSnapshot."""
    spec = pvc.get("spec") or {}
    for key in ("dataSourceRef", "dataSource"):
        ref = spec.get(key)
        if isinstance(ref, Mapping) and isinstance(ref.get("name"), str) and ref["name"]:
            kind, group = ref.get("kind"), ref.get("apiGroup") or ""
            if (
                (kind == "VolumeSnapshot" and group == SNAPSHOT_GROUP)
                or (kind == "PersistentVolumeClaim" and not group)
                or is_populator_ref(ref)
            ):
                return ref
            return None
    return None


def pending_sources(view: ClusterView, volumes: list[ClaimVolume]) -> list[tuple[ClaimVolume, Mapping[str, Any]]]:
    """The claims that wait for their first consumer and will be provisioned from a snapshot or clone source.

    The cheap tests come first: a bound claim, or one without a data source, is dropped before any lookup."""
    out = []
    for volume in volumes:
        deadline.check()
        pvc = volume.pvc
        if pvc is None or volume.bound:
            continue
        ref = data_source_ref(pvc)
        if ref is not None and waits_for_first_consumer(view, pvc):
            out.append((volume, ref))
    return out


@dataclass(frozen=True)
class SourceState:
    """The object a claim's data source names, looked up once: `label` names it ("VolumeSnapshot shop/snap-1",
    "claim shop/db"), `obj` is it (None when it does not exist, or lies in another namespace that granted it to no
    claim of the pod's) and `problem` says why nothing can be provisioned from it yet ("" when something can)."""

    label: str
    namespace: str
    obj: Json | None
    problem: str


def source_state(view: ClusterView, namespace: str, ref: Mapping[str, Any]) -> SourceState:
    """Whether a claim's source can be provisioned from: the CSI external-provisioner refuses a VolumeSnapshot that
    is not readyToUse and a source claim that is not Bound, and retries until it is
    (kubernetes-csi/external-provisioner pkg/controller/controller.go getSnapshotSource, getPVCSource); a source in
    another namespace (`dataSourceRef.namespace`) only with a ReferenceGrant there (IsGranted)."""
    ns, name = str(ref.get("namespace") or namespace), str(ref["name"])
    clone = ref.get("kind") == "PersistentVolumeClaim"
    label = f"claim {ns}/{name}" if clone else f"VolumeSnapshot {ns}/{name}"
    if ns != namespace and not reference_granted(view.reference_grants(ns), namespace, "PersistentVolumeClaim", ref):
        # not looked up: whether it exists, and where, is that namespace's to tell
        why = f"is not followed: no ReferenceGrant in namespace {ns} lets claims of {namespace} use it"
        return SourceState(label, ns, None, why)
    if clone:
        obj = view.pvc(ns, name)
        phase = ((obj or {}).get("status") or {}).get("phase") or "Pending"
        problem = "" if obj is None or phase == "Bound" else f"is {phase}, not Bound"
    else:
        obj = view.volume_snapshot(ns, name)
        ready = ((obj or {}).get("status") or {}).get("readyToUse") is True
        problem = "" if obj is None or ready else "is not ready to use yet"
    return SourceState(label, ns, obj, "does not exist" if obj is None else problem)


def resolve(
    view: ClusterView,
    policy: Policy,
    namespace: str,
    volume: ClaimVolume,
    ref: Mapping[str, Any],
    *,
    upload: UploadSource | None = None,
) -> SourcePlace:
    """Follow a claim's source to where its data is: snapshot → its content's `nodeAffinity` (KEP-5943, which
    wins when present) → its source claim → PV, or through the content's CSI handle when that claim is gone, or
    the DataUpload of Velero's exposer (`upload`) whose re-created content names no volume, or the node the
    content is managed by; clone → the source claim's PV; VolSync's populator → its ReplicationDestination's
    latest snapshot, then as a snapshot (rules/datasource/populator.py)."""
    if is_populator_ref(ref):
        image = latest_image(view, namespace, ref)
        if image.ref is None:
            return SourcePlace(volume, image.label, UNRESOLVED, why=image.why)
        place = resolve(view, policy, namespace, volume, image.ref, upload=upload)
        return replace(place, source=f"{image.label}'s latestImage {place.source}")
    state = source_state(view, namespace, ref)
    if state.obj is None or state.problem:
        return SourcePlace(volume, state.label, UNRESOLVED, why=f"{state.label} {state.problem}")
    if ref.get("kind") == "PersistentVolumeClaim":
        return _from_claim(view, policy, volume, label=state.label, namespace=state.namespace, pvc=state.obj)
    snapshot, short = state.obj, state.label
    spec_source = (snapshot.get("spec") or {}).get("source") or {}
    status = snapshot.get("status") or {}
    claim_name = spec_source.get("persistentVolumeClaimName")
    label = f"{short} of claim {claim_name}" if claim_name else short
    # The content the snapshot controller bound (status), never the one the snapshot's author names in its spec: a
    # lookup of a name its author wrote would tell by its timing whether that content exists.
    content_name = str(status.get("boundVolumeSnapshotContentName") or "")
    content = view.volume_snapshot_content(content_name) if content_name else None
    back = ((content or {}).get("spec") or {}).get("volumeSnapshotRef") or {}
    if (back.get("namespace"), back.get("name")) != (state.namespace, (snapshot.get("metadata") or {}).get("name")):
        content = None  # as with a claim's PV: a content counts only when it names this snapshot back
    if content is not None and (terms := content_terms(content)) is not None:
        return _from_terms(view, volume, label, terms, content_name)
    if claim_name:
        pvc = view.pvc(state.namespace, str(claim_name))
        if pvc is not None:
            place = _from_claim(view, policy, volume, label=label, namespace=state.namespace, pvc=pvc)
            if place.kind != UNRESOLVED:
                return place
    if content is None:
        return SourcePlace(volume, label, UNRESOLVED, why=f"source of {short} gone, its content unknown")
    content_spec = content.get("spec") or {}
    driver, handle = content_spec.get("driver"), (content_spec.get("source") or {}).get("volumeHandle")
    pv = view.pv_for_handle(str(driver), str(handle)) if driver and handle else None
    if pv is not None:
        return _from_pv(view, policy, volume, label=label, pv=pv, pvc=None)
    if upload is not None:
        return _from_upload(view, policy, volume, label, upload)
    managed_by = ((content.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY)
    if isinstance(managed_by, str) and managed_by:
        return SourcePlace(volume, label, NODE, node=managed_by, content=content_name)
    return SourcePlace(volume, label, UNRESOLVED, why=f"no PV known for VolumeSnapshotContent {content_name}")


def content_terms(content: Json) -> tuple[Json, ...] | None:
    """A content's `spec.nodeAffinity` (KEP-5943: TopologySelectorTerms, each ANDing `key In values`
    requirements, the terms ORed) as node selector terms; None when it has none."""
    terms = []
    for term in (content.get("spec") or {}).get("nodeAffinity") or ():
        expressions = [
            {"key": str(r.get("key")), "operator": "In", "values": list(r.get("values") or ())}
            for r in term.get("matchLabelExpressions") or ()
        ]
        if expressions:
            terms.append({"matchExpressions": expressions})
    return tuple(terms) or None


def _from_terms(
    view: ClusterView, volume: ClaimVolume, label: str, terms: tuple[Json, ...], content: str
) -> SourcePlace:
    """The snapshot's own topology: its one known node, else its terms (any node they admit can restore it)."""
    nodes = volume_nodes(view, terms)
    if len(nodes) == 1:
        return SourcePlace(volume, label, NODE, node=nodes[0], content=content)
    return SourcePlace(volume, label, ZONE, terms=terms, content=content)


def _from_upload(
    view: ClusterView, policy: Policy, volume: ClaimVolume, label: str, upload: UploadSource
) -> SourcePlace:
    source = f"{label} ({upload.upload} of claim {upload.claim or 'unknown'})"
    if upload.pv is None:
        return SourcePlace(volume, source, UNRESOLVED, why=upload.why, upload=upload.upload)
    place = _from_pv(view, policy, volume, label=source, pv=upload.pv, pvc=upload.pvc)
    return replace(place, upload=upload.upload, terms=pv_required_terms(upload.pv) or ())


def _from_claim(
    view: ClusterView, policy: Policy, volume: ClaimVolume, *, label: str, namespace: str, pvc: Json
) -> SourcePlace:
    name = (pvc.get("metadata") or {}).get("name")
    pv = claim_pv(view, namespace, pvc)
    if pv is None:
        return SourcePlace(volume, label, UNRESOLVED, why=f"claim {namespace}/{name} has no known PV")
    return _from_pv(view, policy, volume, label=label, pv=pv, pvc=pvc)


def _from_pv(
    view: ClusterView, policy: Policy, volume: ClaimVolume, *, label: str, pv: Json, pvc: Json | None
) -> SourcePlace:
    """A node when the PV's affinity admits exactly one known node, or its driver is node-local and the node is
    known (the affinity, else the source claim's selected node); the PV's terms when the driver follows zones."""
    pv_name = str((pv.get("metadata") or {}).get("name") or "")
    csi = (pv.get("spec") or {}).get("csi")
    driver = str(csi.get("driver") or "") if isinstance(csi, Mapping) else ""
    terms = pv_required_terms(pv)
    if node := pv_node(view, pv):
        return SourcePlace(volume, label, NODE, node=node, pv=pv_name)
    if driver in policy.node_local_drivers:
        selected = ((pvc or {}).get("metadata") or {}).get("annotations", {}).get(SELECTED_NODE)
        if isinstance(selected, str) and selected and terms is None:
            return SourcePlace(volume, label, NODE, node=selected, pv=pv_name)
        why = f"PV {pv_name} is node-local ({driver}), its node unknown"
        return SourcePlace(volume, label, UNRESOLVED, pv=pv_name, why=why)
    if driver in policy.zone_following_drivers and terms is not None:
        return SourcePlace(volume, label, ZONE, pv=pv_name, terms=terms)
    return SourcePlace(volume, label, FREE, pv=pv_name)


def pv_node(view: ClusterView, pv: Json | None) -> str:
    """The one known node a PV's required node affinity admits; "" when it admits several or none is known (a
    volume other nodes can use too)."""
    terms = pv_required_terms(pv)
    nodes = volume_nodes(view, terms) if terms is not None else []
    return nodes[0] if len(nodes) == 1 else ""


#: A PV's own question: the nodes its required terms admit (on labels only, as the scheduler reads a PV's).
_PV_ONLY = on_labels(EVERY_LABEL, volumes=True)


def volume_nodes(view: ClusterView, terms: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of the known nodes a PV's required terms admit, sorted."""
    return sorted(Feasibility(view, _PV_ONLY, volume_terms=[terms]).names())


def source_places(
    view: ClusterView,
    policy: Policy,
    namespace: str,
    volumes: list[ClaimVolume],
    upload: UploadSource | None = None,
) -> list[SourcePlace]:
    """Every pending snapshot or clone claim of a pod with where its source lets it be provisioned; `upload` is
    the DataUpload of a backup pod of Velero's exposer, followed for the claim named after it (its backup claim)."""
    places = []
    for volume, ref in pending_sources(view, volumes):
        deadline.check()
        own = upload if upload is not None and volume.claim == upload.name else None
        places.append(resolve(view, policy, namespace, volume, ref, upload=own))
    return places
