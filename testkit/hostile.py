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


# --- issue-shaped objects: each within the review budget, each growing one dimension the budget did not count ----


def load_affinity_document(entries: int, requirements: int, prefix: str = "k") -> str:
    """A `load-affinity` annotation of `entries` entries of `requirements` `DoesNotExist` requirements each: keys
    no node carries, then `kubernetes.io/os`, which every node carries, so no entry matches any node and each is
    read whole for every node. 100 × 60 is 250 KB, within the annotation limit of 256 KiB and the entry limit of
    100."""
    return json.dumps(
        [
            {
                "nodeSelector": {
                    "matchExpressions": [
                        *(
                            {"key": f"{prefix}{e * requirements + r}", "operator": "DoesNotExist"}
                            for r in range(requirements - 1)
                        ),
                        {"key": "kubernetes.io/os", "operator": "DoesNotExist"},
                    ]
                }
            }
            for e in range(entries)
        ],
        separators=(",", ":"),
    )


def role_claimed_pod(
    entries: int = 100, requirements: int = 60, *, name: str = "claims-backup", prefix: str = "k"
) -> Json:
    """A tenant pod that claims the backup role by annotation (untrusted outside Velero's namespace: no grant),
    with a load-affinity annotation of `entries` × `requirements` (keys starting with `prefix`: another prefix, other
    entries, which no memo has seen), which is still checked against the nodes."""
    return pod(
        name,
        annotations={
            "storage-affinity.io/role": "backup",
            "storage-affinity.io/load-affinity": load_affinity_document(entries, requirements, prefix),
        },
    )


def as_job(template: Json, name: str = "job") -> Json:
    """A Job whose pod template is `template` (its metadata and spec), in the template's namespace."""
    metadata = template["metadata"]
    kept = {k: v for k, v in metadata.items() if k in ("labels", "annotations")}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": metadata.get("namespace", NAMESPACE), "uid": f"uid-{name}"},
        "spec": {"template": {"metadata": kept, "spec": {**template["spec"], "restartPolicy": "Never"}}},
    }


def mover_of_one_claim(volumes: int, claim: str = CLAIM, *, name: str = "mover-volumes") -> Json:
    """A VolSync mover with `volumes` volumes that all mount one claim: one hold of that claim, whatever its
    number of volumes."""
    return claims_pod(name, [claim] * volumes)


def claim_users(count: int, *, nodes: int = 0, claim: str = CLAIM) -> list[Json]:
    """`count` pods of the tenant's namespace mounting `claim`: Pending without a node when `nodes` is 0, else
    Running on `nodes` distinct nodes in turn (on two, the claim is split and every warning lists its users)."""
    users = []
    for i in range(count):
        user = pod(f"user-{i:05d}", claim=claim)
        user["metadata"]["creationTimestamp"] = f"2026-11-20T08:{i // 60 % 60:02d}:{i % 60:02d}Z"
        if nodes:
            user["spec"]["nodeName"] = f"node-{i % nodes:05d}"
            user["status"] = {"phase": "Running"}
        else:
            user["status"] = {"phase": "Pending"}
        users.append(user)
    return users


def long_key(salt: str, index: int) -> str:
    """A valid label key of 290 characters (a DNS subdomain prefix of 226, a name of 63), distinct by `salt` and
    `index`."""
    first = f"s{salt}-{index}-"
    return f"{first:k<63}." + ".".join(["k" * 62] * 2) + ".example.com/" + "n" * 63


def long_key_pod(requirements: int, *, salt: str = "", per_term: int = 8) -> Json:
    """A pod of `requirements` unnarrowable requirements (`per_term` to a term) with keys of 290 characters,
    distinct by `salt`: 8,000 of them make a review of about 2.6 MB that no memo has seen."""
    terms = [
        {
            "matchExpressions": [
                {"key": long_key(salt, t * per_term + r), "operator": "DoesNotExist"} for r in range(per_term)
            ]
        }
        for t in range(requirements // per_term)
    ]
    return pod(f"long-keys-{salt or 'x'}", terms)


def named_node_pod(requirements: int, node: str = "node-00000") -> Json:
    """A pod bound to `node` (spec.nodeName) with one required term of `requirements` `matchFields` requirements
    that the node passes but for the last: to say which one fails, each is looked at in turn."""
    fields: list[Json] = [
        {"key": "metadata.name", "operator": "NotIn", "values": [f"elsewhere-{i}"]} for i in range(requirements - 1)
    ]
    fields.append({"key": "metadata.name", "operator": "In", "values": ["elsewhere"]})
    named = pod(f"named-{requirements}", [{"matchFields": fields}])
    named["spec"]["nodeName"] = node
    return named


def stateful_set(volumes: int, claim_templates: int, *, name: str = "db") -> Json:
    """A StatefulSet whose pod template has `volumes` emptyDir volumes and `claimTemplates` volumeClaimTemplates,
    none of the same name: each template volume is compared with the claim templates' names."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "main", "image": "registry.example/main:1"}],
                    "volumes": [{"name": f"v{i}", "emptyDir": {}} for i in range(volumes)],
                },
            },
            "volumeClaimTemplates": [
                {"metadata": {"name": f"c{i}"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
                for i in range(claim_templates)
            ],
        },
    }


def gt_terms_pod(terms: int, key: str = "kubernetes.io/hostname") -> Json:
    """A pod of `terms` terms `<key> Gt <n>`: on a label every node carries with its own value (the hostname),
    each requirement is tested against each value of the label."""
    return pod(
        f"gt-{terms}",
        [{"matchExpressions": [{"key": key, "operator": "Gt", "values": [str(i)]}]} for i in range(terms)],
    )


#: kube-apiserver's limit on the total size of an object's annotations (keys and values).
ANNOTATIONS_LIMIT = 256 * 1024


def unknown_annotations_pod(size: int = ANNOTATIONS_LIMIT - 1024) -> Json:
    """A pod whose annotations, about `size` bytes in all, are unknown `storage-affinity.io/` keys of 63-character
    names: each one would get a did-you-mean."""
    annotations: dict[str, str] = {}
    used, i = 0, 0
    while True:
        key = f"storage-affinity.io/{f'rolle-{i}-':x<63}"
        if used + len(key) > size:
            break
        annotations[key] = ""
        used += len(key)
        i += 1
    return pod("unknown-annotations", annotations=annotations)


def unknown_disk_types_pod(size: int = ANNOTATIONS_LIMIT - 1024) -> Json:
    """A pod whose disk affinity types annotation lists about `size` bytes of unknown types, each near a known one
    (a did-you-mean for each)."""
    items, used, i = [], 0, 0
    while used < size:
        item = f"pod-bound-requird-{i}"
        items.append(item)
        used += len(item) + 1
        i += 1
    return pod(
        "unknown-disk-types",
        annotations={"affinity.volumes.csi-baremetal.dell.com/types": ",".join(items)},
        claim=CLAIM,
    )


def digit_runs_pod(size: int = int(2.7 * 1024 * 1024)) -> Json:
    """A pod whose container arguments, about `size` bytes, are strings holding runs of 19 digits: no number of
    the body is past 64 bits."""
    arg = "id-1234567890123456789-" * 4
    count = size // (len(arg) + 3)
    mover = pod("digit-runs")
    mover["spec"]["containers"][0]["args"] = [arg] * count
    return mover


def float_field_pod() -> Json:
    """A pod whose `matchFields` requirement has a float for its values: a body the API server would have refused,
    sent by another caller; the answer must be a 400 naming the field."""
    return pod("float-field", [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": 1.5}]}])


def big_deployment(name: str, size: int = int(1.25 * 1024 * 1024)) -> Json:
    """A Deployment of about `size` bytes (its container's environment, which no rule reads)."""
    value = "v" * 1000
    env = [{"name": f"E{i}", "value": value} for i in range(size // 1024)]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.example/main:1", "env": env}]},
            },
        },
    }
