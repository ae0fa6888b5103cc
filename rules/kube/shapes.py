"""The typed boundary: every field any rule reads is checked here, once, before any rule runs.

Rules may then index and iterate what they read without guarding types: a body whose fields have the wrong JSON
types is not an object the API server could have sent (the caller answers 400 naming each field), and a well-typed
object with a value no rule can digest (a Gt/Lt bound that is not a 64-bit integer) is a finding naming the field.
The API server only sends well-typed objects; this guards every other caller (`review`, curl, fuzzers) and keeps a
rule crash from admitting a pod unchecked.

The shapes are a small declarative table rather than a JSON Schema: jsonschema took 116 µs for a pod against the
4 µs of this walk, on a path where the whole stack costs about 450 µs a request.
"""

from __future__ import annotations

from typing import Any

from rules.budget import (
    MAX_ANNOTATIONS,
    MAX_CONTAINERS,
    MAX_TOLERATIONS,
    MAX_VOLUMES,
    containers_excess,
    count_excess,
    selector_excess,
)
from rules.kube.selectors import is_int64, type_name
from rules.kube.shapekit import Problems, Shape, boolean, int64, join, list_of, map_of, obj, string

_PARSED_PREFIXES = (
    "storage-affinity.io/",
    "affinity.volumes.csi-baremetal.dell.com/",
    "antiaffinity.volumes.csi-baremetal.dell.com/",
)


class _Annotations(Shape):
    """Only the values rules parse must be strings: a foreign tool's odd value is not ours to refuse. At most
    MAX_ANNOTATIONS keys (rules/budget.py), counted first."""

    def ok(self, value: Any) -> bool:
        if not isinstance(value, dict) or len(value) > MAX_ANNOTATIONS:
            return False
        for key, item in value.items():  # a plain loop: a generator cost more than its checks
            if not isinstance(item, str) and str(key).startswith(_PARSED_PREFIXES):
                return False
        return True

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not isinstance(value, dict):
            out.types.append((path, f"must be a map of strings, not {type_name(value)}"))
            return
        excess = count_excess(value, "annotations", MAX_ANNOTATIONS)
        if excess is not None:
            out.limits.append((path, f"has {excess}"))
        for key, item in value.items():
            if not isinstance(item, str) and str(key).startswith(_PARSED_PREFIXES):
                out.types.append((f"{path}[{key}]", f"must be a string, not {type_name(item)}"))


class _RequirementValues(Shape):
    """Gt and Lt compare integers: their one value must be a 64-bit integer (what kube-apiserver requires)."""

    def ok(self, value: Any) -> bool:
        if value.get("operator") not in ("Gt", "Lt"):
            return True
        values = value.get("values")
        return isinstance(values, list) and len(values) == 1 and is_int64(values[0])

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not self.ok(value):
            out.values.append((f"{path}.values", f"{value['operator']} needs exactly one 64-bit integer value"))


_STRINGS = map_of(string)
_REQUIREMENT = obj(
    {"key": string, "operator": string, "values": list_of(string)},
    required=("key", "operator"),
    extra=_RequirementValues(),
)
_TERM = obj({"matchExpressions": list_of(_REQUIREMENT), "matchFields": list_of(_REQUIREMENT)})


class _Budgeted(Shape):
    """A required node affinity within the review budget (rules/budget.py), counted before its types are walked:
    an object past a limit is answered at once, without naming a path for each of its parts (its types are
    checked, without paths, so a mistyped one is still a 400 and no rule ever reads mistyped terms)."""

    def __init__(self, inner: Shape) -> None:
        self.inner = inner

    def ok(self, value: Any) -> bool:
        return selector_excess(value) is None and self.inner.ok(value)

    def walk(self, value: Any, path: str, out: Problems) -> None:
        excess = selector_excess(value)
        if excess is None or not self.inner.ok(value):  # mistyped is refused for its types, whatever its size
            self.inner.walk(value, path, out)
        if excess is not None:
            out.limits.append((join(path, "nodeSelectorTerms"), f"has {excess}"))


class _Containers(Shape):
    """A pod spec's containers of every kind, counted together (rules/budget.py); no rule reads them. A pod
    without init or ephemeral containers (most) costs two lookups and a length."""

    def ok(self, value: Any) -> bool:
        if value.get("initContainers") is None and value.get("ephemeralContainers") is None:
            containers = value.get("containers")
            return not isinstance(containers, list) or len(containers) <= MAX_CONTAINERS
        return containers_excess(value) is None

    def walk(self, value: Any, path: str, out: Problems) -> None:
        excess = containers_excess(value)
        if excess is not None:
            out.limits.append((join(path, excess[0]), f"has {excess[1]}"))


_NODE_AFFINITY = obj(
    {"requiredDuringSchedulingIgnoredDuringExecution": _Budgeted(obj({"nodeSelectorTerms": list_of(_TERM)}))},
)
METADATA = obj(
    {
        "name": string,
        "generateName": string,
        "namespace": string,
        "uid": string,
        "creationTimestamp": string,
        "deletionTimestamp": string,
        "labels": _STRINGS,
        "annotations": _Annotations(),
        # Who controls the object: role trust recognises CDI's workers by the claim that controls them, and a CDI
        # prime claim's target by its owner.
        "ownerReferences": list_of(
            obj({"apiVersion": string, "kind": string, "name": string, "uid": string, "controller": boolean})
        ),
    }
)
_CLAIM_TEMPLATE = obj(
    {"spec": obj({"accessModes": list_of(string), "storageClassName": string, "volumeName": string})},
)
_VOLUME = obj(
    {
        "name": string,
        "persistentVolumeClaim": obj({"claimName": string}, required=("claimName",)),
        "ephemeral": obj({"volumeClaimTemplate": _CLAIM_TEMPLATE}),
    },
    required=("name",),
)
_TOLERATION = obj(
    {"key": string, "operator": string, "value": string, "effect": string, "tolerationSeconds": int64},
)
_VOLUMES = list_of(_VOLUME, MAX_VOLUMES, "volumes")
#: What the audit reads of a status to say why a pod waits (rules/causes/).
_CONDITION = obj(
    {"type": string, "status": string, "reason": string, "message": string, "lastTransitionTime": string},
)
_CONTAINER_STATE = obj(
    {
        "waiting": obj({"reason": string, "message": string}),
        # how a Failed pod's containers ended (rules/causes/ended.py)
        "terminated": obj(
            {"reason": string, "message": string, "exitCode": int64, "startedAt": string, "finishedAt": string}
        ),
    }
)
_CONTAINER_STATUS = obj({"name": string, "state": _CONTAINER_STATE})
_POD_STATUS = obj(
    {
        "phase": string,
        "reason": string,
        "message": string,
        "conditions": list_of(_CONDITION),
        "containerStatuses": list_of(_CONTAINER_STATUS),
        "initContainerStatuses": list_of(_CONTAINER_STATUS),
    }
)
POD = obj(
    {
        "metadata": METADATA,
        "status": _POD_STATUS,
        "spec": obj(
            {
                "nodeName": string,
                "nodeSelector": _STRINGS,
                "volumes": _VOLUMES,
                "tolerations": list_of(_TOLERATION, MAX_TOLERATIONS, "tolerations"),
                "schedulingGates": list_of(obj({"name": string})),
                "affinity": obj({"nodeAffinity": _NODE_AFFINITY}),
            },
            extra=_Containers(),
        ),
    }
)
JOB = obj({"metadata": METADATA, "spec": obj({"template": POD})})
CONFIG_MAP = obj({"metadata": METADATA, "data": _STRINGS, "binaryData": _STRINGS})
NODE = obj(
    {
        "metadata": METADATA,
        "spec": obj({"taints": list_of(obj({"key": string, "value": string, "effect": string}))}),
        "status": obj({"conditions": list_of(_CONDITION)}),
    }
)
#: A workload's pod template: what the rules that need no cluster read of it (rules/registry.py).
_POD_TEMPLATE = obj({"metadata": METADATA, "spec": obj({"volumes": _VOLUMES})})
WORKLOAD = obj({"metadata": METADATA, "spec": obj({"template": _POD_TEMPLATE})})
STATEFUL_SET = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {
                "template": _POD_TEMPLATE,
                "volumeClaimTemplates": list_of(
                    obj({"metadata": obj({"name": string})}), MAX_VOLUMES, "volumeClaimTemplates"
                ),
            }
        ),
    }
)
CRON_JOB = obj({"metadata": METADATA, "spec": obj({"jobTemplate": obj({"spec": obj({"template": _POD_TEMPLATE})})})})
SHAPES: dict[str, Shape] = {
    "Pod": POD,
    "Job": JOB,
    "ConfigMap": CONFIG_MAP,
    "Node": NODE,
    "Deployment": WORKLOAD,
    "StatefulSet": STATEFUL_SET,
    "DaemonSet": WORKLOAD,
    "ReplicaSet": WORKLOAD,
    "CronJob": CRON_JOB,
}


def well_formed(kind: str, value: Any) -> bool:
    """Whether an object of `kind` has no problem in the fields rules read: what every review asks first, without
    building the `Problems` that only an object that has some needs."""
    shape = SHAPES.get(kind)
    return shape is None or shape.ok(value)


def object_problems(kind: str, value: Any) -> Problems:
    """The problems of an object of `kind` in the fields rules read; kinds no rule reads have none."""
    out = Problems()
    if not well_formed(kind, value):
        SHAPES[kind].walk(value, "", out)
    return out


# Data sources and the VMs that will use a disk (rules/datasource): the fields those rules read.
_REFERENCE = obj({"apiGroup": string, "kind": string, "name": string, "namespace": string})
_NAMED = obj({"name": string})
PERSISTENT_VOLUME_CLAIM = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {"storageClassName": string, "volumeName": string, "dataSource": _REFERENCE, "dataSourceRef": _REFERENCE}
        ),
    }
)
VOLUME_SNAPSHOT = obj(
    {
        "metadata": METADATA,
        "spec": obj({"source": obj({"persistentVolumeClaimName": string, "volumeSnapshotContentName": string})}),
        "status": obj({"boundVolumeSnapshotContentName": string}),
    }
)
#: KEP-5943's `nodeAffinity`: TopologySelectorTerms (kubernetes-csi/external-snapshotter#1463).
_TOPOLOGY_TERM = obj(
    {"matchLabelExpressions": list_of(obj({"key": string, "values": list_of(string)}, required=("key",)))}
)
VOLUME_SNAPSHOT_CONTENT = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {
                "driver": string,
                "source": obj({"volumeHandle": string, "snapshotHandle": string}),
                "volumeSnapshotRef": obj({"namespace": string, "name": string}),
                "nodeAffinity": list_of(_TOPOLOGY_TERM),
            }
        ),
    }
)
#: Velero's DataUpload (vmware-tanzu/velero pkg/apis/velero/v2alpha1/data_upload_types.go).
DATA_UPLOAD = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {
                "sourceNamespace": string,
                "sourcePVC": string,
                "csiSnapshot": obj({"volumeSnapshot": string, "storageClass": string}),
            }
        ),
    }
)
VIRTUAL_MACHINE = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {
                "dataVolumeTemplates": list_of(obj({"metadata": _NAMED})),
                "template": obj(
                    {
                        "spec": obj(
                            {
                                "nodeSelector": _STRINGS,
                                "tolerations": list_of(_TOLERATION),
                                "affinity": obj({"nodeAffinity": _NODE_AFFINITY}),
                                "volumes": list_of(
                                    obj(
                                        {
                                            "name": string,
                                            "dataVolume": _NAMED,
                                            "persistentVolumeClaim": obj({"claimName": string}),
                                        }
                                    )
                                ),
                            }
                        )
                    }
                ),
            }
        ),
    }
)
DATA_VOLUME = obj({"metadata": METADATA, "status": obj({"phase": string, "claimName": string})})
REFERENCE_GRANT = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {
                "from": list_of(obj({"group": string, "kind": string, "namespace": string})),
                "to": list_of(obj({"group": string, "kind": string, "name": string})),
            }
        ),
    }
)
# VolSync's volume populator fills a claim from `status.latestImage` (backube/volsync api/v1alpha1).
REPLICATION_DESTINATION = obj(
    {"metadata": METADATA, "status": obj({"latestImage": obj({"apiGroup": string, "kind": string, "name": string})})}
)
# The volumes and classes placement reads (rules/kube/volumes.py, rules/loadaffinity).
PERSISTENT_VOLUME = obj(
    {
        "metadata": METADATA,
        "spec": obj(
            {
                "storageClassName": string,
                "volumeMode": string,
                "accessModes": list_of(string),
                "claimRef": obj({"namespace": string, "name": string}),
                "csi": obj({"driver": string, "volumeHandle": string}),
                "nodeAffinity": obj({"required": obj({"nodeSelectorTerms": list_of(_TERM)})}),
            }
        ),
    }
)
STORAGE_CLASS = obj({"metadata": METADATA, "provisioner": string, "volumeBindingMode": string})
SHAPES.update(
    {
        "PersistentVolume": PERSISTENT_VOLUME,
        "StorageClass": STORAGE_CLASS,
        "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIM,
        "VolumeSnapshot": VOLUME_SNAPSHOT,
        "VolumeSnapshotContent": VOLUME_SNAPSHOT_CONTENT,
        "VirtualMachine": VIRTUAL_MACHINE,
        "DataVolume": DATA_VOLUME,
        "ReferenceGrant": REFERENCE_GRANT,
        "ReplicationDestination": REPLICATION_DESTINATION,
        "DataUpload": DATA_UPLOAD,
    }
)
