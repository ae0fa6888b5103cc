"""What the index keeps of data sources and of the VMs that will use a disk (docs/design.md#12-data-sources):
VolumeSnapshots, VolumeSnapshotContents, KubeVirt VirtualMachines, CDI DataVolumes, the ReferenceGrants that
open a namespace's sources to claims of another and Velero's DataUploads, trimmed to the fields the rules read,
the data-source fields of claims and the CSI handle of volumes, and the lookups built from them (a CSI volume
handle → its PV; a claim or DataVolume → the VMs that name it; a namespace → its grants), kept in step with every
apply and remove.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from rules.datasource.sources import MANAGED_BY
from rules.datasource.vm import PRIME_PREFIX, vm_claims
from rules.kube.nodeaffinity import REQUIRED_KEY, required_node_affinity
from rules.model import Json


def trim_data_source(obj: Mapping[str, Any], out: Json) -> None:
    """Add to a trimmed PVC its data source (and a prime claim's owner), to a trimmed PV its CSI driver and
    handle: what resolving a snapshot or clone source reads."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "PersistentVolumeClaim":
        for key in ("dataSource", "dataSourceRef"):
            if isinstance(spec.get(key), Mapping):
                out["spec"][key] = {
                    k: v for k, v in spec[key].items() if k in ("apiGroup", "kind", "name", "namespace")
                }
        meta = obj.get("metadata") or {}
        owners = meta.get("ownerReferences")
        # a CDI prime claim keeps its owner: the way back to the target claim and the DataVolume
        if str(meta.get("name") or "").startswith(PRIME_PREFIX) and isinstance(owners, list):
            out["metadata"]["ownerReferences"] = [
                {k: o[k] for k in ("kind", "name", "controller") if k in o} for o in owners if isinstance(o, Mapping)
            ]
        return
    csi = spec.get("csi")
    if isinstance(csi, Mapping):
        # the driver name repeats on every PV of a driver: one string for all
        out["spec"]["csi"] = {
            k: sys.intern(v) if k == "driver" and isinstance(v, str) else v
            for k, v in csi.items()
            if k in ("driver", "volumeHandle")
        }


def _snapshot(obj: Mapping[str, Any], out: Json) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out["spec"] = {"source": dict(spec.get("source") or {})}
    out["status"] = {k: status[k] for k in ("readyToUse", "boundVolumeSnapshotContentName") if k in status}


def _snapshot_content(obj: Mapping[str, Any], out: Json) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out["spec"] = {k: spec[k] for k in ("driver", "source", "volumeSnapshotRef", "nodeAffinity") if k in spec}
    out["status"] = {k: status[k] for k in ("readyToUse",) if k in status}
    node = ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY)
    if node is not None:  # the node of a distributed snapshot, where its source PV is gone
        out["metadata"]["labels"] = {MANAGED_BY: node}


def _data_upload(obj: Mapping[str, Any], out: Json) -> None:
    spec = obj.get("spec") or {}
    out["spec"] = {k: spec[k] for k in ("sourceNamespace", "sourcePVC") if k in spec}


def _virtual_machine(obj: Mapping[str, Any], out: Json) -> None:
    spec = obj.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    kept: Json = {k: template[k] for k in ("nodeSelector", "tolerations") if template.get(k)}
    required = required_node_affinity(template)
    if required is not None:
        kept["affinity"] = {"nodeAffinity": {REQUIRED_KEY: required}}
    kept["volumes"] = [
        {k: v[k] for k in ("name", "dataVolume", "persistentVolumeClaim") if k in v}
        for v in template.get("volumes") or ()
        if isinstance(v, Mapping) and ("dataVolume" in v or "persistentVolumeClaim" in v)
    ]
    templates = [
        {"metadata": {"name": (t.get("metadata") or {}).get("name")}}
        for t in spec.get("dataVolumeTemplates") or ()
        if isinstance(t, Mapping)
    ]
    out["spec"] = {"template": {"spec": kept}, "dataVolumeTemplates": templates}


def _data_volume(obj: Mapping[str, Any], out: Json) -> None:
    status = obj.get("status") or {}
    out["status"] = {k: status[k] for k in ("phase", "claimName") if k in status}


def _reference_grant(obj: Mapping[str, Any], out: Json) -> None:
    spec = obj.get("spec") or {}
    out["spec"] = {
        side: [{k: e[k] for k in keys if k in e} for e in spec.get(side) or () if isinstance(e, Mapping)]
        for side, keys in (("from", ("group", "kind", "namespace")), ("to", ("group", "kind", "name")))
    }


def _replication_destination(obj: Mapping[str, Any], out: Json) -> None:
    latest = (obj.get("status") or {}).get("latestImage")
    if isinstance(latest, Mapping):
        out["status"] = {"latestImage": {k: latest[k] for k in ("apiGroup", "kind", "name") if k in latest}}


#: kind → what its trimmed object keeps besides name and namespace.
TRIMMERS: dict[str, Callable[[Mapping[str, Any], Json], None]] = {
    "VolumeSnapshot": _snapshot,
    "VolumeSnapshotContent": _snapshot_content,
    "VirtualMachine": _virtual_machine,
    "DataVolume": _data_volume,
    "ReferenceGrant": _reference_grant,
    "ReplicationDestination": _replication_destination,
    "DataUpload": _data_upload,
}


def _handle(pv: Mapping[str, Any]) -> tuple[str, str] | None:
    csi = (pv.get("spec") or {}).get("csi") or {}
    driver, handle = csi.get("driver"), csi.get("volumeHandle")
    return (str(driver), str(handle)) if driver and handle else None


class SourceLinks:
    """The two lookups over data-source objects; the index calls `update` under its lock on every change."""

    def __init__(self) -> None:
        self.handles: dict[tuple[str, str], str] = {}
        self.vm_users: dict[tuple[str, str], dict[str, Json]] = {}
        self.grants: dict[str, dict[str, Json]] = {}  # namespace → name → ReferenceGrant

    def update(self, kind: str, key: tuple[str, str], previous: Json | None, current: Json | None) -> None:
        if kind == "PersistentVolume":
            if previous is not None and (old := _handle(previous)) is not None and self.handles.get(old) == key[1]:
                del self.handles[old]
            if current is not None and (new := _handle(current)) is not None:
                self.handles[new] = key[1]
        elif kind == "VirtualMachine":
            namespace, name = key
            for claim in vm_claims(previous or {}):
                users = self.vm_users.get((namespace, claim))
                if users is not None:
                    users.pop(name, None)
                    if not users:
                        del self.vm_users[(namespace, claim)]
            for claim in vm_claims(current or {}):
                self.vm_users.setdefault((namespace, claim), {})[name] = current or {}
        elif kind == "ReferenceGrant":
            namespace, name = key
            grants = self.grants.setdefault(namespace, {})
            if current is None:
                grants.pop(name, None)
            else:
                grants[name] = current
            if not grants:
                del self.grants[namespace]

    def take(self, kind: str, fresh: SourceLinks) -> None:
        """After a re-list of `kind`: its lookup is the fresh one."""
        if kind == "PersistentVolume":
            self.handles = fresh.handles
        elif kind == "VirtualMachine":
            self.vm_users = fresh.vm_users
        elif kind == "ReferenceGrant":
            self.grants = fresh.grants

    def virtual_machines_using(self, namespace: str, claim: str) -> list[Json]:
        return sorted(
            (self.vm_users.get((namespace, claim)) or {}).values(),
            key=lambda vm: str((vm.get("metadata") or {}).get("name")),
        )

    def reference_grants(self, namespace: str) -> list[Json]:
        return list((self.grants.get(namespace) or {}).values())
