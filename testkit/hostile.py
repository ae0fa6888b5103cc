"""Objects a hostile tenant can create, sized by a few numbers: one builder for the budget tests and the bench.

Each builder returns plain JSON as kube-apiserver would hold it. The terms are `NotIn` + `DoesNotExist`, which the
label index cannot narrow, and match no node: whoever checks a node goes through all of them.
"""

from __future__ import annotations

import json

from rules.model import Json

NAMESPACE = "tenant"
#: Where backup and restore pods are trusted with the policy's grants by default (docs/design.md#2-pod-roles).
VELERO_NAMESPACE = "velero"
#: The class of the claims below: WaitForFirstConsumer, so CDI workers follow the VM that will use the disk.
STORAGE_CLASS = "local-wffc"
CLAIM = "disk-0"


def unnarrowable_terms(count: int, prefix: str = "example.com/t") -> list[Json]:
    """`count` terms of `NotIn` + `DoesNotExist`, which the label index cannot narrow; each matches no node (every
    node has `kubernetes.io/os`), so a check of a node goes through every term."""
    return [
        {
            "matchExpressions": [
                {"key": f"{prefix}{i}", "operator": "NotIn", "values": ["x"]},
                {"key": "kubernetes.io/os", "operator": "DoesNotExist"},
            ]
        }
        for i in range(count)
    ]


def nodes(count: int) -> list[Json]:
    """`count` Ready nodes over three zones, labelled as a cloud's are."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{i:05d}",
                "labels": {
                    "kubernetes.io/hostname": f"node-{i:05d}",
                    "kubernetes.io/os": "linux",
                    "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}",
                },
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        for i in range(count)
    ]


def pod(
    name: str,
    terms: list[Json] | None = None,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    claim: str | None = None,
    namespace: str = NAMESPACE,
    owner: Json | None = None,
) -> Json:
    """A pod of the tenant's namespace (or `namespace`) with these required terms, labels, annotations and claim,
    controlled by `owner` when given."""
    spec: Json = {"containers": [{"name": "main", "image": "registry.example/main:1"}]}
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if claim is not None:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    metadata: Json = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner is not None:
        metadata["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def affinity_pod(terms: int) -> Json:
    """A pod whose required node affinity has `terms` unnarrowable terms."""
    return pod(f"affinity-{terms}", unnarrowable_terms(terms))


def cdi_importer(pod_terms: int, vm_terms: int, vms: int = 1) -> tuple[Json, list[Json]]:
    """A CDI importer pod with `pod_terms` terms, controlled by the claim it mounts as CDI makes it, and the objects
    of its namespace: `vms` halted VMs with `vm_terms` terms each naming the importer's unbound WaitForFirstConsumer
    claim, the claim and its class. The tenant writes the VMs; CDI then makes a genuine importer that follows them."""
    importer = pod(
        "importer-disk-0",
        unnarrowable_terms(pod_terms, "example.com/p"),
        labels={"app": "containerized-data-importer", "cdi.kubevirt.io": "importer"},
        claim=CLAIM,
        owner={"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": CLAIM, "uid": f"uid-{CLAIM}"},
    )
    machines = [_vm(f"vm-{i}", unnarrowable_terms(vm_terms, f"example.com/v{i}-")) for i in range(vms)]
    return importer, [storage_class(), claim_object(CLAIM), *machines]


def _vm(name: str, terms: list[Json]) -> Json:
    """A halted VirtualMachine whose disk is the claim CLAIM, with these required terms."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {
            "runStrategy": "Halted",
            "dataVolumeTemplates": [{"metadata": {"name": CLAIM}}],
            "template": {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
                    }
                }
            },
        },
    }


def storage_class() -> Json:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": "local.csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def claim_object(name: str) -> Json:
    """An unbound ReadWriteOnce claim of the tenant's namespace, of the WaitForFirstConsumer class."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS},
        "status": {"phase": "Pending"},
    }


def load_affinity_entries(count: int) -> list[Json]:
    """`count` global loadAffinity entries, each a distinct label selector no node satisfies."""
    return [{"nodeSelector": {"matchLabels": {f"example.com/pool-{i}": "x"}}} for i in range(count)]


def backup_pod(pod_terms: int, entries: int) -> Json:
    """A Velero backup pod (the default selector's label) of Velero's namespace, where the default policy trusts it,
    with `pod_terms` terms and a load-affinity annotation of `entries` entries."""
    return pod(
        f"backup-{pod_terms}x{entries}",
        unnarrowable_terms(pod_terms, "example.com/b") if pod_terms else None,
        labels={"velero.io/exposer-pod-group": "snapshot-exposer"},
        annotations={"storage-affinity.io/load-affinity": json.dumps(load_affinity_entries(entries))},
        namespace=VELERO_NAMESPACE,
    )


def trivial_pod() -> Json:
    """A mover pod with nothing to place: what every other tenant sends meanwhile."""
    return pod("trivial", labels={"app.kubernetes.io/created-by": "volsync"})


def claims_pod(name: str, claims: list[str], *, namespace: str = NAMESPACE) -> Json:
    """A VolSync mover (a pod whose claims the mutating webhook reads) mounting each of `claims`: with names of
    claims that do not exist, every one is a miss of the index."""
    mover = pod(name, labels={"app.kubernetes.io/created-by": "volsync"}, namespace=namespace)
    mover["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}} for i, claim in enumerate(claims)
    ]
    return mover
