"""The objects of the data-source kinds as their controllers leave them, for tests, fuzz strategies and benchmarks:
VolumeSnapshots and their contents (external-snapshotter client/apis/volumesnapshot/v1/types.go), KubeVirt
VirtualMachines (kubevirt/kubevirt staging/src/kubevirt.io/api/core/v1/types.go) and CDI DataVolumes
(containerized-data-importer staging/src/kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1/types.go).

A field given as None is left out of the object, as a controller that has not set it yet leaves it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rules.model import Json

SNAPSHOT_API = "snapshot.storage.k8s.io/v1"


def present(**fields: Any) -> Json:
    """The fields that are not None."""
    return {k: v for k, v in fields.items() if v is not None}


def volume_snapshot(
    name: str, namespace: str, claim: str, *, content: str | None, ready: bool | None = True, uid: str | None = None
) -> Json:
    """A VolumeSnapshot of `claim`, bound to the VolumeSnapshotContent `content`."""
    return {
        "apiVersion": SNAPSHOT_API,
        "kind": "VolumeSnapshot",
        "metadata": present(name=name, namespace=namespace, uid=uid),
        "spec": {"source": {"persistentVolumeClaimName": claim}},
        "status": present(readyToUse=ready, boundVolumeSnapshotContentName=content),
    }


def snapshot_content(
    name: str, *, driver: str, handle: str, snapshot: Json | None = None, status: Json | None = None
) -> Json:
    """A VolumeSnapshotContent of the volume `handle` of `driver`; `snapshot` is its volumeSnapshotRef, the
    snapshot it names back."""
    spec = present(driver=driver, deletionPolicy="Delete", source={"volumeHandle": handle}, volumeSnapshotRef=snapshot)
    return present(
        apiVersion=SNAPSHOT_API, kind="VolumeSnapshotContent", metadata={"name": name}, spec=spec, status=status
    )


def virtual_machine(
    name: str, namespace: str, template: Json, *, disks: Sequence[Json] = (), run_strategy: str | None = None
) -> Json:
    """A VirtualMachine whose pod template spec is `template`, with `disks` as its dataVolumeTemplates."""
    spec = present(runStrategy=run_strategy, dataVolumeTemplates=list(disks) or None, template={"spec": template})
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def data_volume(name: str, namespace: str, *, source: Json, storage: Json, phase: str | None, **status: Any) -> Json:
    """A DataVolume as CDI reports it: its claim has its name, named in the status once it has a phase."""
    return {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": source, "storage": storage},
        "status": present(phase=phase, claimName=name if phase else None, **status),
    }
