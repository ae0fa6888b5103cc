"""What the index keeps of each kind's objects: only the fields rules read, which keeps memory flat in big clusters
and drops managedFields and friends. Each kind names its trimmer in webhook/state/kinds.py; `kept_names` is what
every kind keeps (webhook/state/index.py `trim` puts them together). Values that repeat across objects are shared
(webhook/state/sharing.py); a Failed pod keeps what says how it ended (webhook/state/ended.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.datasource.sources import MANAGED_BY
from rules.datasource.vm import PRIME_PREFIX
from rules.kube.nodeaffinity import REQUIRED_KEY, required_node_affinity
from rules.loadaffinity.agents import last_changed
from rules.model import PREFIX, Json
from webhook.state.ended import clipped, ended_status, kept_condition
from webhook.state.owners import READ_OWNERS, controller_reference
from webhook.state.sharing import shared, text

#: Adds to a trimmed object (`kept_names`) what rules read of its kind.
Trimmer = Callable[[Mapping[str, Any], Json], None]

_KEEP_ANNOTATION_PREFIXES = (
    PREFIX,
    "volume.kubernetes.io/",
    "kubevirt.io/",
    "kubernetes.io/config.mirror",
    # read by the audit of existing pods, which runs on this index
    "affinity.volumes.csi-baremetal.dell.com/",
    "antiaffinity.volumes.csi-baremetal.dell.com/",
    "affinity.csi-baremetal.dell.com/",
)


def kept_names(obj: Mapping[str, Any]) -> Json:
    """What the index keeps of any object: its kind, name, namespace and the annotations rules read."""
    meta = obj.get("metadata") or {}
    metadata: Json = {
        k: text(meta[k]) if k == "namespace" else meta[k] for k in ("name", "namespace") if meta.get(k) is not None
    }
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(_KEEP_ANNOTATION_PREFIXES)}
    if annotations:
        metadata["annotations"] = annotations
    return {"kind": obj.get("kind"), "metadata": metadata}


def _metadata(obj: Mapping[str, Any], out: Json, fields: tuple[str, ...]) -> Json:
    """The trimmed metadata, with `fields` of the object's own added (anchors: uid, age, deletion and labels, which
    tell movers apart; node affinity: node labels)."""
    meta = obj.get("metadata") or {}
    metadata: Json = out["metadata"]
    metadata.update({k: meta[k] for k in fields if meta.get(k) is not None})
    return metadata


def pod(obj: Mapping[str, Any], out: Json) -> None:
    """The pods the index keeps mount a claim (webhook/state/index.py): their claim volumes, what places them, how
    they run or why not, and their controller when a rule reads it."""
    metadata = _metadata(obj, out, ("uid", "creationTimestamp", "deletionTimestamp", "labels"))
    if "labels" in metadata:
        metadata["labels"] = shared(metadata["labels"])  # a workload's replicas carry the same labels
    if (owner := controller_reference(obj.get("metadata") or {}, READ_OWNERS)) is not None:
        metadata["ownerReferences"] = [owner]  # its own: a claim's, Job's or DataUpload's one pod shares it with none
    spec = obj.get("spec") or {}
    volumes = [v for v in spec.get("volumes") or () if "persistentVolumeClaim" in v or "ephemeral" in v]
    kept: Json = {
        k: shared(spec[k]) for k in ("nodeName", "tolerations", "schedulingGates", "nodeSelector") if spec.get(k)
    }
    required = required_node_affinity(spec)
    if required is not None:  # the audit checks the node against it
        kept["affinity"] = {"nodeAffinity": {REQUIRED_KEY: shared(required)}}
    kept["volumes"] = [
        {k: v[k] for k in ("name", "persistentVolumeClaim") if k in v} | ({"ephemeral": {}} if "ephemeral" in v else {})
        for v in volumes
    ]
    out["spec"] = kept
    out["status"] = _pod_status(obj.get("status") or {})


def _pod_status(status: Mapping[str, Any]) -> Json:
    """The phase, and for a pod that is not scheduled, Ready or started what says why: its PodScheduled and
    Ready conditions that are not True and its containers' waiting reasons (a healthy pod keeps its phase only,
    shared with every other pod of that phase). A Failed pod keeps what says how it ended."""
    out: Json = {"phase": status.get("phase")}
    if conditions := _failing_conditions(status, ("PodScheduled", "Ready")):
        out["conditions"] = conditions
    if status.get("phase") == "Failed":
        out.update(ended_status(status, out.get("conditions", [])))
        return out
    waiting = [
        {"name": c.get("name"), "state": {"waiting": {k: clipped(w[k]) for k in ("reason", "message") if k in w}}}
        for key in ("initContainerStatuses", "containerStatuses")
        for c in status.get(key) or ()
        if isinstance(c, Mapping) and isinstance(w := (c.get("state") or {}).get("waiting"), Mapping)
    ]
    if waiting:
        out["containerStatuses"] = waiting
    return out if len(out) > 1 else shared(out)


def _failing_conditions(status: Mapping[str, Any], kinds: tuple[str, ...]) -> list[Json]:
    return [
        kept_condition(c)
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type") in kinds and c.get("status") != "True"
    ]


def _volume_fields(obj: Mapping[str, Any], out: Json) -> None:
    """What a claim and a volume share: access, class, binding, node affinity and mode; their phase."""
    spec = obj.get("spec") or {}
    out["spec"] = {
        k: spec[k] if k in ("volumeName", "claimRef") else shared(spec[k])
        for k in ("accessModes", "storageClassName", "volumeName", "nodeAffinity", "claimRef", "volumeMode")
        if k in spec
    }
    status = obj.get("status") or {}
    out["status"] = shared({k: status[k] for k in ("phase", "accessModes") if k in status})


def claim(obj: Mapping[str, Any], out: Json) -> None:
    """A claim, with its data source (and a CDI prime claim's owner): what resolving a snapshot or clone source
    reads (docs/design.md#12-data-sources)."""
    _volume_fields(obj, out)
    spec = obj.get("spec") or {}
    for key in ("dataSource", "dataSourceRef"):
        if isinstance(spec.get(key), Mapping):
            out["spec"][key] = {k: v for k, v in spec[key].items() if k in ("apiGroup", "kind", "name", "namespace")}
    meta = obj.get("metadata") or {}
    owners = meta.get("ownerReferences")
    # a CDI prime claim keeps its owner: the way back to the target claim and the DataVolume
    if str(meta.get("name") or "").startswith(PRIME_PREFIX) and isinstance(owners, list):
        out["metadata"]["ownerReferences"] = [
            {k: o[k] for k in ("kind", "name", "controller") if k in o} for o in owners if isinstance(o, Mapping)
        ]


def volume(obj: Mapping[str, Any], out: Json) -> None:
    """A volume, with its CSI driver and handle: how a snapshot's source volume is found."""
    _volume_fields(obj, out)
    csi = (obj.get("spec") or {}).get("csi")
    if isinstance(csi, Mapping):
        # the driver name repeats on every PV of a driver: one string for all
        out["spec"]["csi"] = {
            k: text(v) if k == "driver" and isinstance(v, str) else v
            for k, v in csi.items()
            if k in ("driver", "volumeHandle")
        }


def storage_class(obj: Mapping[str, Any], out: Json) -> None:
    out.update({k: obj[k] for k in ("provisioner", "volumeBindingMode") if k in obj})


def node(obj: Mapping[str, Any], out: Json) -> None:
    """Labels, taints and cordon, and a Ready condition that is not True."""
    _metadata(obj, out, ("labels",))
    spec = obj.get("spec") or {}
    out["spec"] = {k: spec[k] for k in ("taints", "unschedulable") if k in spec}
    if conditions := _failing_conditions(obj.get("status") or {}, ("Ready",)):
        out["status"] = {"conditions": conditions}


def config_map(obj: Mapping[str, Any], out: Json) -> None:
    """Its data, and when it last changed: whether Velero's node-agents started before it (the audit)."""
    metadata = _metadata(obj, out, ("labels", "creationTimestamp"))
    out["data"] = dict(obj.get("data") or {})
    if changed := last_changed(obj):
        metadata["managedFields"] = [{"time": changed}]


def volume_snapshot(obj: Mapping[str, Any], out: Json) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out["spec"] = {"source": dict(spec.get("source") or {})}
    out["status"] = {k: status[k] for k in ("readyToUse", "boundVolumeSnapshotContentName") if k in status}


def volume_snapshot_content(obj: Mapping[str, Any], out: Json) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out["spec"] = {k: spec[k] for k in ("driver", "source", "volumeSnapshotRef", "nodeAffinity") if k in spec}
    out["status"] = {k: status[k] for k in ("readyToUse",) if k in status}
    node_name = ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY)
    if node_name is not None:  # the node of a distributed snapshot, where its source PV is gone
        out["metadata"]["labels"] = {MANAGED_BY: node_name}


def virtual_machine(obj: Mapping[str, Any], out: Json) -> None:
    """What places its VMI (node selector, tolerations, required node affinity) and the disks it will use."""
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


def data_volume(obj: Mapping[str, Any], out: Json) -> None:
    """Its phase and claim; its UID, by which the audit's Events name it (rules/auditevents.py)."""
    _metadata(obj, out, ("uid",))
    status = obj.get("status") or {}
    out["status"] = {k: status[k] for k in ("phase", "claimName") if k in status}


def reference_grant(obj: Mapping[str, Any], out: Json) -> None:
    spec = obj.get("spec") or {}
    out["spec"] = {
        side: [{k: e[k] for k in keys if k in e} for e in spec.get(side) or () if isinstance(e, Mapping)]
        for side, keys in (("from", ("group", "kind", "namespace")), ("to", ("group", "kind", "name")))
    }


def replication_destination(obj: Mapping[str, Any], out: Json) -> None:
    latest = (obj.get("status") or {}).get("latestImage")
    if isinstance(latest, Mapping):
        out["status"] = {"latestImage": {k: latest[k] for k in ("apiGroup", "kind", "name") if k in latest}}


def data_upload(obj: Mapping[str, Any], out: Json) -> None:
    spec = obj.get("spec") or {}
    out["spec"] = {k: spec[k] for k in ("sourceNamespace", "sourcePVC") if k in spec}
