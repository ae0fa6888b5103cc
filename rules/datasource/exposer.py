"""Velero's CSI data mover followed back to the volume it backs up (docs/design.md#12-data-sources).

Velero's CSI snapshot exposer (vmware-tanzu/velero pkg/exposer/csi_snapshot.go) re-creates the user's snapshot in
Velero's namespace: a VolumeSnapshotContent with only `spec.source.snapshotHandle`, a VolumeSnapshot naming it and
the backup claim restored from that snapshot, all named after the DataUpload, then deletes the original snapshot
and content. Nothing left on that chain names a volume, so the backup pod's claim cannot be traced to its node the
way a snapshot-restored claim is; the DataUpload (velero.io/v2alpha1) still names the claim it backs up
(`spec.sourceNamespace`, `spec.sourcePVC`), and the pod names its DataUpload (label `velero.io/data-upload`).

A DataUpload tells where a tenant's volume lives, so it is read only for a trusted backup pod (the policy's
`trust`, rules/roles.py) in Velero's namespace as the policy names it, and only the one DataUpload the pod names:
a review looks up one DataUpload, one claim and one PV at most.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.cluster import ClusterView
from rules.context import PodTarget
from rules.kube.volumes import claim_pv
from rules.model import Json
from rules.policy import Policy

#: The label Velero puts on the data mover pods of a DataUpload (vmware-tanzu/velero
#: pkg/apis/velero/v1/labels_annotations.go DataUploadLabel).
DATA_UPLOAD_LABEL = "velero.io/data-upload"
#: The key of a review's answer in `PodTarget.shared`.
UPLOAD = "exposer.upload"


def data_mover_namespace(policy: Policy) -> str:
    """Velero's namespace where the policy names it (`nodeAgent.namespace`, else that of `loadAffinitySource`'s
    ConfigMap); "" when it names neither. DataUploads are read there alone, where the chart's Role lets the server
    list them, and not at all while the policy names no namespace: the chart cannot grant a Role in a namespace
    nobody named, which may not exist."""
    return policy.velero_namespace if policy.node_agent_namespace or policy.load_affinity_source else ""


@dataclass(frozen=True)
class UploadSource:
    """The claim a backup pod's DataUpload backs up, and its PV (None when unknown: `why` says so)."""

    upload: str  # "DataUpload velero/db-x7k2p"
    name: str  # the DataUpload's name: the backup claim, snapshot and content are named after it
    claim: str = ""  # "shop/db"
    pv: Json | None = None
    pvc: Json | None = None
    why: str = ""


def upload_source(view: ClusterView, policy: Policy, target: PodTarget) -> UploadSource | None:
    """The source of a backup pod of Velero's CSI snapshot exposer; None for any other pod, before any lookup:
    a pod without the label, not a trusted backup pod, or outside Velero's namespace. A Job's template is judged
    as the pod the Job creates, as every rule judges it."""
    role = target.role
    if role.role != "backup" or not role.trusted:
        return None
    if UPLOAD in target.shared:  # the backup role's rule and the data-source rules both ask, in one review
        found: UploadSource | None = target.shared[UPLOAD]
        return found
    found = target.shared[UPLOAD] = _upload_source(view, policy, target)
    return found


def _upload_source(view: ClusterView, policy: Policy, target: PodTarget) -> UploadSource | None:
    name = (target.metadata.get("labels") or {}).get(DATA_UPLOAD_LABEL)
    namespace = data_mover_namespace(policy)
    if not isinstance(name, str) or not name or not namespace or target.namespace != namespace:
        return None
    label = f"DataUpload {namespace}/{name}"
    upload = view.data_upload(namespace, name)
    if upload is None:
        return UploadSource(label, name, why=f"{label} is not known")
    spec = upload.get("spec") or {}
    source_namespace, source_claim = spec.get("sourceNamespace"), spec.get("sourcePVC")
    if not (isinstance(source_namespace, str) and isinstance(source_claim, str) and source_namespace and source_claim):
        return UploadSource(label, name, why=f"{label} names no source claim")
    claim = f"{source_namespace}/{source_claim}"
    pvc = view.pvc(source_namespace, source_claim)
    pv = claim_pv(view, source_namespace, pvc) if pvc is not None else None
    if pv is None:
        return UploadSource(label, name, claim, pvc=pvc, why=f"claim {claim} of {label} has no known PV")
    return UploadSource(label, name, claim, pv=pv, pvc=pvc)
