"""What the audit tells as Kubernetes Events: a Warning `events.k8s.io/v1` Event for each stuck storage pod (its cause
code as the reason, the cause and its remedy as the note), for each storage pod that ended Failed within the
policy's window (the same, the note saying how long ago), and for each mover scheduled away from its claim's holder
(Multi-Attach), about the pod and about the object its operator watches.

A stuck pod's Event is a series the writer counts up each run the cause still holds: that it still holds is news. An
ended pod's is recorded once (`AuditEvent.once`): the pod is dead and its cause cannot change, so a count growing
each run until `audit.failedWithinSeconds` passes, and a lastObservedTime that moves, would only make an old
failure look current.

`kubectl describe pod`, `kubectl get events` and Velero's own diagnosis read them: Velero prints a data-mover pod's
Warning events, matched by the pod's UID, when its prepare timeout expires (vmware-tanzu/velero
pkg/util/kube/pod.go `DiagnosePod`), so `regarding` carries the UID whenever the state knows it.

The owner an Event also goes to is read from cluster state, never from a label alone (labels and owner references
are the pod author's to write; what the state holds is not):
- a VolSync mover: the pod's controller is a Job the audit listed with that UID, and that Job's controller is a
  ReplicationSource or ReplicationDestination (VolSync's mover Jobs, controllerutil.SetControllerReference);
- a Velero backup or restore pod: a pod in Velero's namespace, labelled `velero.io/data-upload` (or
  `velero.io/data-download`) and controlled by a DataUpload (DataDownload), as Velero's exposers create it
  (pkg/exposer/csi_snapshot.go createBackupPod); the owner reference gives the full name and UID, the label may be
  truncated. Here the trust is the namespace's: only the operator creates pods in Velero's namespace, so its
  owner reference is taken as written;
- a CDI importer or upload pod controlled by the claim it mounts (as CDI creates it): the DataVolume the index holds
  for that claim (a prime claim's owner, then the DataVolume named after it, rules/datasource/vm.py).
An owner Event is in the owner's namespace, which is always the pod's: no pod can direct an Event to another
namespace. Pure: the audit's reports and the state come in, the Events to record go out
(webhook/audit/events.py writes them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.audit import DRIFT, FAILED, STUCK, ObjectAudit
from rules.causes import CAUSES, CDI_WORKER, ENDED_CODES, MULTI_ATTACH
from rules.causes.ended import VELERO_OWNERS
from rules.cluster import ClusterView, LookupFailed
from rules.datasource.scope import FILLING_WORKERS, cdi_worker
from rules.datasource.vm import data_volume_of, target_claim
from rules.kube.owners import controller_reference
from rules.kube.volumes import ClaimVolume
from rules.model import Json
from rules.policy import Policy
from rules.quoting import ShownText

REPORTING_CONTROLLER = "storage-affinity.io/webhook"
#: What the Event says was done (required, at most 128 characters): the audit looked and found the cause.
ACTION = "Audit"
WARNING = "Warning"
#: events.k8s.io/v1 validation: the note at most 1 KB (bytes), reportingInstance and reason at most 128 characters.
NOTE_LIMIT = 1024
FIELD_LIMIT = 128
#: The longest Event name: a DNS subdomain (253) with room for the suffix.
_NAME_LIMIT = 253 - 17

VOLSYNC_API = "volsync.backube/v1alpha1"
VOLSYNC_OWNERS = frozenset({"ReplicationSource", "ReplicationDestination"})
VELERO_GROUP = "velero.io"
DATA_VOLUME_API = "cdi.kubevirt.io/v1beta1"

_MULTI_ATTACH_REMEDY = next(cause.remedy for cause in CAUSES if cause.code == MULTI_ATTACH)


@dataclass(frozen=True)
class ObjectRef:
    """An Event's `regarding` or `related`: an object reference (core/v1 ObjectReference)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    def as_json(self) -> Json:
        out: Json = {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        return out

    @property
    def identity(self) -> str:
        """The object, across renames of nothing: its UID when known, else kind, namespace and name."""
        return self.uid or f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class AuditEvent(ShownText):
    """One Event to record: about `regarding`, for the cause `reason`. Escaped when made (`ShownText`). `once`: the
    cause of a pod that ended, recorded once and never counted up (module docstring)."""

    regarding: ObjectRef
    reason: str
    note: str
    related: ObjectRef | None = None
    once: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """One Event per object and cause: later runs update its series."""
        return self.regarding.identity, self.reason

    @property
    def namespace(self) -> str:
        return self.regarding.namespace

    @property
    def name(self) -> str:
        """The Event's name, the same for the same object and cause in every replica and run: a successor that
        holds the Lease finds the series its predecessor started (a create answers 409) instead of a second one."""
        digest = hashlib.sha256(f"{REPORTING_CONTROLLER}\n{self.regarding.identity}\n{self.reason}".encode())
        prefix = self.regarding.name[:_NAME_LIMIT].rstrip(".-") or "object"
        return f"{prefix}.{digest.hexdigest()[:16]}"

    def body(self, event_time: str, instance: str) -> Json:
        """The events.k8s.io/v1 Event as created: the first of its series (a later run patches `series`)."""
        event: Json = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "eventTime": event_time,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": instance[:FIELD_LIMIT],
            "action": ACTION,
            "reason": self.reason[:FIELD_LIMIT],
            "note": self.note,
            "type": WARNING,
            "regarding": self.regarding.as_json(),
        }
        if self.related is not None:
            event["related"] = self.related.as_json()
        return event


def clip_bytes(text: str, limit: int = NOTE_LIMIT) -> str:
    """`text` within `limit` bytes of UTF-8 (what the API counts), cut at a character and marked with an ellipsis."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - len("…".encode())].decode(errors="ignore") + "…"


def audit_events(
    report: ObjectAudit,
    pod: Mapping[str, Any],
    jobs: Mapping[tuple[str, str], Mapping[str, Any]],
    view: ClusterView,
    policy: Policy,
) -> list[AuditEvent]:
    """The Events one audited pod calls for: for its stuck cause and for a Multi-Attach finding, each about the pod
    and about its owner when the state proves one. `jobs` are the listed Jobs by (namespace, UID)."""
    causes = event_causes(report)
    if not causes:
        return []
    metadata = pod.get("metadata") or {}
    subject = ObjectRef("v1", "Pod", report.namespace, report.name, str(metadata.get("uid") or ""))
    owner = owner_of(report, pod, jobs, view, policy)
    events = []
    for reason, note, once in causes:
        events.append(AuditEvent(subject, reason, note, once=once))
        if owner is not None:
            events.append(AuditEvent(owner, reason, note, related=subject, once=once))
    return events


def event_causes(report: ObjectAudit) -> list[tuple[str, str, bool]]:
    """(reason, note, once) for each cause the report names: its cause (stuck: the finding says for how long; ended:
    how long ago, and `once`), and Multi-Attach on a mover scheduled away from its claim's holder when that is not
    already its cause."""
    out = []
    if report.cause is not None:
        said = next((f.message for f in report.findings if f.family in (STUCK, FAILED)), report.cause.message)
        out.append((report.cause.code, _note(said, report.cause.remedy), report.cause.code in ENDED_CODES))
    if report.multi_attach and (report.cause is None or report.cause.code != MULTI_ATTACH):
        drift = next((f.message for f in report.findings if f.family == DRIFT), "")
        said = f"Pending on a node away from the holder of its ReadWriteOnce claim (Multi-Attach): {drift}"
        out.append((MULTI_ATTACH, _note(said, _MULTI_ATTACH_REMEDY), False))
    return out


def _note(said: str, remedy: str) -> str:
    return clip_bytes(f"{said.rstrip('.')}. Remedy: {remedy}")


def owner_of(
    report: ObjectAudit,
    pod: Mapping[str, Any],
    jobs: Mapping[tuple[str, str], Mapping[str, Any]],
    view: ClusterView,
    policy: Policy,
) -> ObjectRef | None:
    """The object the pod's operator watches, as the cluster state proves it (module docstring); None otherwise."""
    metadata = pod.get("metadata") or {}
    controller = controller_reference(metadata)
    if controller is None or not controller.get("name"):
        return None
    if report.role == "mover":
        return _volsync_owner(report.namespace, controller, jobs)
    if report.role in VELERO_OWNERS:
        label, kind = VELERO_OWNERS[report.role]
        labelled = (metadata.get("labels") or {}).get(label)
        group = str(controller.get("apiVersion") or "").split("/")[0]
        if report.namespace != policy.velero_namespace or not labelled or group != VELERO_GROUP:
            return None
        return _ref(report.namespace, controller) if controller.get("kind") == kind else None
    if report.role == CDI_WORKER:
        return _data_volume_owner(report.namespace, pod, controller, view)
    return None


def _volsync_owner(
    namespace: str, controller: Mapping[str, Any], jobs: Mapping[tuple[str, str], Mapping[str, Any]]
) -> ObjectRef | None:
    if controller.get("kind") != "Job" or controller.get("apiVersion") != "batch/v1":
        return None
    job = jobs.get((namespace, str(controller.get("uid") or "")))
    if job is None or (job.get("metadata") or {}).get("name") != controller.get("name"):
        return None
    owner = controller_reference(job.get("metadata") or {})
    if owner is None or not owner.get("name") or owner.get("apiVersion") != VOLSYNC_API:
        return None
    if owner.get("kind") not in VOLSYNC_OWNERS:
        return None
    return _ref(namespace, owner)


def _data_volume_owner(
    namespace: str, pod: Mapping[str, Any], controller: Mapping[str, Any], view: ClusterView
) -> ObjectRef | None:
    """The DataVolume of the claim a CDI importer or upload pod fills: the pod is controlled by the claim it mounts,
    as CDI creates it, and the index holds the DataVolume of that claim (or of the prime claim's owner)."""
    if cdi_worker(pod.get("metadata") or {}) not in FILLING_WORKERS:
        return None
    if controller.get("kind") != "PersistentVolumeClaim" or controller.get("apiVersion") != "v1":
        return None
    claim = str(controller.get("name"))
    mounted = [v for v in (pod.get("spec") or {}).get("volumes") or () if _claim_name(v) == claim]
    if not mounted:
        return None
    try:
        pvc = view.pvc(namespace, claim)
        if pvc is None:
            return None
        volume = ClaimVolume(0, "", claim, False, pvc, None, None, None)
        target = target_claim(view, namespace, volume)
        name = str(((target or {}).get("metadata") or {}).get("name") or "")
        dv = data_volume_of(view, namespace, name) if name else None
    except LookupFailed:
        return None
    if dv is None:
        return None
    uid = str((dv.get("metadata") or {}).get("uid") or "")
    return ObjectRef(DATA_VOLUME_API, "DataVolume", namespace, name, uid)


def _claim_name(volume: Any) -> str:
    if not isinstance(volume, Mapping):
        return ""
    return str((volume.get("persistentVolumeClaim") or {}).get("claimName") or "")


def _ref(namespace: str, owner: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(
        str(owner.get("apiVersion")),
        str(owner.get("kind")),
        namespace,
        str(owner.get("name")),
        str(owner.get("uid") or ""),
    )


def job_key(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """A listed Job's (namespace, UID), what a mover's controller reference is checked against; None for any other
    object."""
    metadata = obj.get("metadata") or {}
    if obj.get("kind") != "Job" or not metadata.get("uid"):
        return None
    return str(metadata.get("namespace") or ""), str(metadata["uid"])
