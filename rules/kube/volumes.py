"""Volume classes of a pod's claims (docs/design.md#3-volume-classes, from the KCP storage design).

Every placement rule asks the same questions of a pod's claims — can another node mount it, can another pod,
does its PV tie it to some nodes — so the answers are computed here once, from the PVC and its PV.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules import deadline
from rules.cluster import ClusterView
from rules.model import Json

SHARED = "shared"  # ReadWriteMany or ReadOnlyMany: any node, any number of pods
OWNED = "owned"  # ReadWriteOnce: one node at a time
SINGLE_POD = "single-pod"  # ReadWriteOncePod: one pod at a time

RWO, RWOP, RWX, ROX = "ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
#: The node the scheduler picked for a WaitForFirstConsumer claim (set on the claim before provisioning).
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def waits_for_first_consumer(view: ClusterView, pvc: Mapping[str, Any]) -> bool:
    """Whether the claim is unbound and of a WaitForFirstConsumer class: its first consumer's node decides where
    it is provisioned."""
    if (pvc.get("status") or {}).get("phase") == "Bound":
        return False
    class_name = (pvc.get("spec") or {}).get("storageClassName")
    storage_class = view.storage_class(str(class_name)) if isinstance(class_name, str) and class_name else None
    return storage_class is not None and storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER


@dataclass
class ClaimVolume:
    """One `persistentVolumeClaim` or generic `ephemeral` volume of a pod, with what the cluster knows of it.

    Read-only by convention (rules share one list per review), not frozen: a frozen dataclass sets each field
    through `object.__setattr__`, which made building one, for every claim of every review, four times dearer.
    """

    index: int  # position in spec.volumes
    volume: str  # the volume's name
    claim: str | None  # the PVC name; None for an ephemeral volume of a pod whose name is not known yet
    ephemeral: bool
    pvc: Json | None  # None when the PVC does not exist (yet)
    pv: Json | None
    access: str | None  # SHARED, OWNED, SINGLE_POD, or None when no access mode is known
    pv_terms: tuple[Json, ...] | None  # the PV's required node selector terms: set exactly when node-local

    @property
    def node_local(self) -> bool:
        return self.pv_terms is not None

    @property
    def bound(self) -> bool:
        return bool(self.pvc) and (self.pvc or {}).get("status", {}).get("phase") == "Bound"

    @property
    def field(self) -> str:
        """The field path of the claim reference, relative to the pod (prefix with `PodTarget.field`)."""
        leaf = "ephemeral" if self.ephemeral else "persistentVolumeClaim.claimName"
        return f"spec.volumes[{self.index}].{leaf}"


def access_modes(pvc: Mapping[str, Any]) -> list[str]:
    """`status.accessModes` once the claim is bound (what the PV grants), else what the claim asks for."""
    status = pvc.get("status") or {}
    if status.get("phase") == "Bound" and status.get("accessModes"):
        return list(status["accessModes"])
    return list((pvc.get("spec") or {}).get("accessModes") or ())


def access_class(modes: Sequence[str]) -> str | None:
    """Shared wins over owned (any node can mount it); ReadWriteOnce wins over ReadWriteOncePod."""
    if RWX in modes or ROX in modes:
        return SHARED
    if RWO in modes:
        return OWNED
    if RWOP in modes:
        return SINGLE_POD
    return None


def pv_required_terms(pv: Mapping[str, Any] | None) -> tuple[Json, ...] | None:
    """A PV's `spec.nodeAffinity.required` terms, or None when it can be used from any node."""
    if not pv:
        return None
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    terms = required.get("nodeSelectorTerms")
    return tuple(map(dict, terms)) if terms else None


def claim_pv(view: ClusterView, namespace: str, pvc: Mapping[str, Any] | None) -> Json | None:
    """The PV a claim names in `spec.volumeName`, only when that PV's `claimRef` names this claim back: a claim
    may name any PV, and one bound to another namespace's claim is none of its business (its node affinity, its
    driver). A PV not bound yet (no claimRef) is not the claim's either, until the binder makes it so.

    The PV is looked up only for a claim the binder has made Bound (`status.phase`, which its author cannot
    write): `spec.volumeName` alone is a name its author wrote, and looking it up (a GET when the index lacks
    it) would tell by its timing whether a PV of that name exists. Each test returns as soon as it fails: every
    claim of every review asks, and most claims are not bound to a PV the index knows."""
    if not pvc or (pvc.get("status") or {}).get("phase") != "Bound":
        return None
    volume_name = (pvc.get("spec") or {}).get("volumeName")
    pv = view.pv(str(volume_name)) if volume_name else None
    if pv is None:
        return None
    ref = (pv.get("spec") or {}).get("claimRef")
    if not isinstance(ref, (dict, Mapping)):  # dict first: the ABC check is far dearer
        return None
    meta = (pvc or {}).get("metadata") or {}
    if ref.get("namespace") != namespace or ref.get("name") != meta.get("name"):
        return None
    ref_uid, uid = ref.get("uid"), meta.get("uid")
    return pv if not (ref_uid and uid) or ref_uid == uid else None


def ephemeral_claim_name(pod_name: str, volume_name: str) -> str:
    """The claim the ephemeral volume controller creates for a generic ephemeral volume: `<pod>-<volume>`
    (kubernetes/kubernetes staging/src/k8s.io/component-helpers/storage/ephemeral/ephemeral.go VolumeClaimName)."""
    return f"{pod_name}-{volume_name}"


def claim_references(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> list[tuple[int, str, str | None, bool]]:
    """(index, volume name, claim name, ephemeral) for each claim volume; pure, no cluster lookups.

    A generic ephemeral volume `v` of pod `p` is the claim `p-v`; without a pod name (a Job template, a pod
    with only `generateName`) its claim is not known yet.
    """
    pod_name = metadata.get("name") or ""
    out: list[tuple[int, str, str | None, bool]] = []
    for index, volume in enumerate(spec.get("volumes") or ()):
        if not isinstance(volume, (dict, Mapping)):  # dict first: the ABC check is far dearer
            continue
        name = str(volume.get("name") or "")
        claim = volume.get("persistentVolumeClaim")
        if claim is not None and isinstance(claim, (dict, Mapping)) and claim.get("claimName"):
            out.append((index, name, str(claim["claimName"]), False))
        elif volume.get("ephemeral") is not None:
            out.append((index, name, ephemeral_claim_name(str(pod_name), name) if pod_name else None, True))
    return out


def claim_volumes(
    view: ClusterView, namespace: str, metadata: Mapping[str, Any], spec: Mapping[str, Any]
) -> list[ClaimVolume]:
    """Every claim volume of a pod, classified. Reads PVCs and PVs; `LookupFailed` propagates. A claim that several
    volumes mount is looked up and classified once: its access modes and its PV's terms are the tenant's to grow."""
    out = []
    known: dict[str, tuple[Json, Json | None, str | None, tuple[Json, ...] | None]] = {}
    for index, volume, claim, ephemeral in claim_references(metadata, spec):
        deadline.check()
        if claim is not None and (found := known.get(claim)) is not None:
            out.append(ClaimVolume(index, volume, claim, ephemeral, *found))
            continue
        pvc = view.pvc(namespace, claim) if claim else None
        if pvc is None:
            modes = list(_ephemeral_claim_spec(spec, index).get("accessModes") or ()) if ephemeral else []
            out.append(ClaimVolume(index, volume, claim, ephemeral, None, None, access_class(modes), None))
            continue
        pv = claim_pv(view, namespace, pvc)
        classified = known[str(claim)] = (pvc, pv, access_class(access_modes(pvc)), pv_required_terms(pv))
        out.append(ClaimVolume(index, volume, claim, ephemeral, *classified))
    return out


def node_local_terms(volumes: Sequence[ClaimVolume]) -> list[tuple[Json, ...]]:
    """The PV required terms of each node-local volume, one ORed term list per volume (a volume can be both
    node-local and owned: a local PV with ReadWriteOnce)."""
    return [v.pv_terms for v in volumes if v.pv_terms is not None]


def storage_class_of(volume: ClaimVolume, spec: Mapping[str, Any]) -> str | None:
    """The StorageClass a claim volume's PVC names, or for a generic ephemeral volume whose claim is not created yet,
    its template's; None when it names none. Never its PV's: Velero picks a data mover's loadAffinity entry by the
    claim's `spec.storageClassName` alone, "" when unset (vmware-tanzu/velero pkg/exposer/generic_restore.go,
    csi_snapshot.go createBackupPVC, pkg/util/kube/pod.go GetLoadAffinityByStorageClass)."""
    if volume.pvc is not None:
        name = (volume.pvc.get("spec") or {}).get("storageClassName")
    elif volume.ephemeral:
        name = _ephemeral_claim_spec(spec, volume.index).get("storageClassName")
    else:
        return None
    return str(name) if name else None


def _ephemeral_claim_spec(spec: Mapping[str, Any], index: int) -> Mapping[str, Any]:
    volume = (spec.get("volumes") or [])[index]
    template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}
    result = template.get("spec") or {}
    return result if isinstance(result, Mapping) else {}
