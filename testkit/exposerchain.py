"""Velero's CSI data mover chain as its exposer leaves it (vmware-tanzu/velero pkg/exposer/csi_snapshot.go Expose):
the DataUpload, the re-created snapshot and content, the backup claim and the backup pod, all named after the
DataUpload, in Velero's namespace. One builder for the state tests, the end-to-end test and the fuzzers."""

from __future__ import annotations

from rules.model import Json
from testkit.velero import IMAGE, NAMESPACE

SNAPSHOT_API = "snapshot.storage.k8s.io/v1"


def data_upload(name: str, source_namespace: str, source_claim: str, *, namespace: str = NAMESPACE) -> Json:
    """A DataUpload of a CSI snapshot of `source_namespace/source_claim` (pkg/apis/velero/v2alpha1
    data_upload_types.go; created by pkg/backup/actions/csi/pvc_action.go), accepted by a node-agent."""
    return {
        "apiVersion": "velero.io/v2alpha1",
        "kind": "DataUpload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"velero.io/backup-name": name.rsplit("-", 1)[0]},
        },
        "spec": {
            "snapshotType": "CSI",
            "csiSnapshot": {
                "volumeSnapshot": f"velero-{source_claim}-5wz8r",
                "storageClass": "topolvm-provisioner",
                "snapshotClass": "topolvm",
                "driver": "topolvm.io",
            },
            "sourcePVC": source_claim,
            "sourceNamespace": source_namespace,
            "backupStorageLocation": "default",
            "operationTimeout": "10m0s",
        },
        "status": {"phase": "Accepted"},
    }


def backup_chain(name: str, *, namespace: str = NAMESPACE, storage_class: str = "topolvm-provisioner") -> list[Json]:
    """The backup snapshot (createBackupVS), its content with only a snapshot handle (createBackupVSC) and the
    backup claim restored from it (createBackupPVC), waiting for the backup pod."""
    snapshot = {
        "apiVersion": SNAPSHOT_API,
        "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": {"volumeSnapshotContentName": name}, "volumeSnapshotClassName": "topolvm"},
        "status": {"boundVolumeSnapshotContentName": name, "readyToUse": True},
    }
    content = {
        "apiVersion": SNAPSHOT_API,
        "kind": "VolumeSnapshotContent",
        "metadata": {"name": name},
        "spec": {
            "deletionPolicy": "Delete",
            "driver": "topolvm.io",
            "source": {"snapshotHandle": f"snap-{name}"},
            "volumeSnapshotClassName": "topolvm",
            "volumeSnapshotRef": {"name": name, "namespace": namespace},
        },
        "status": {"readyToUse": True, "snapshotHandle": f"snap-{name}"},
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {"apiVersion": "velero.io/v2alpha1", "kind": "DataUpload", "name": name, "uid": f"uid-{name}"}
            ],
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "volumeMode": "Filesystem",
            "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": name},
            "resources": {"requests": {"storage": "10Gi"}},
        },
        "status": {"phase": "Pending"},
    }
    return [snapshot, content, claim]


def backup_pod(name: str, *, namespace: str = NAMESPACE, terms: list[Json] | None = None) -> Json:
    """The backup pod (createBackupPod): labelled with its DataUpload, mounting the backup claim; its required
    terms as `ToSystemAffinity` writes them (before Velero 1.18.1 only `kubernetes.io/os NotIn [windows]`)."""
    required = terms or [
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}]}
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"velero.io/data-upload": name, "velero.io/exposer-pod-group": "snapshot-exposer"},
            "ownerReferences": [
                {"apiVersion": "velero.io/v2alpha1", "kind": "DataUpload", "name": name, "uid": f"uid-{name}"}
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": required}}
            },
            "containers": [{"name": f"uid-{name}", "image": IMAGE, "command": ["/velero", "data-mover", "backup"]}],
            "volumes": [{"name": f"uid-{name}", "persistentVolumeClaim": {"claimName": name}}],
        },
    }


def source_volume(node: str, *, claim: str = "db", namespace: str = "shop", pv: str = "pvc-6a1f0c2e") -> list[Json]:
    """What a DataUpload backs up, on TopoLVM: its StorageClass, the claim `namespace/claim` Bound to the PV `pv`,
    whose node affinity names `node` (as TopoLVM writes it, by its own topology key)."""
    term = {"matchExpressions": [{"key": "topology.topolvm.io/node", "operator": "In", "values": [node]}]}
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "topolvm-provisioner"},
            "provisioner": "topolvm.io",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "10Gi"},
                "storageClassName": "topolvm-provisioner",
                "csi": {"driver": "topolvm.io", "volumeHandle": "0b4e0f43"},
                "claimRef": {"namespace": namespace, "name": claim},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "topolvm-provisioner", "volumeName": pv},
            "status": {"phase": "Bound"},
        },
    ]
