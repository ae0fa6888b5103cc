"""What the audit tells as Events (rules/auditevents.py): which causes, about which objects, and the owner only
where the cluster state proves it, never from a label or owner reference alone; every Event valid as the API
server checks it (testkit/fakeapi/patches.py) and the official schema, whatever the pod's names and texts."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.audit import DRIFT, STUCK, AuditFinding, ObjectAudit
from rules.auditevents import (
    NOTE_LIMIT,
    REPORTING_CONTROLLER,
    AuditEvent,
    ObjectRef,
    audit_events,
    clip_bytes,
    job_key,
    owner_of,
)
from rules.causes import StuckCause, duration, ended_seconds
from rules.model import Json
from rules.policy import default_policy
from testkit.fakeapi.patches import invalid_object
from tests.rules.test_causes import TABLE as CAUSES_TABLE
from tests.rules.test_causes import audited
from tests.rules.test_ended_causes import NOW as FAILED_NOW
from tests.rules.test_ended_causes import TABLE as FAILED_TABLE
from tests.rules.test_ended_causes import audited as ended_audited
from tests.support import validate_strict, view_from
from webhook.state.index import trim

POLICY = default_policy()
NOW = "2026-11-20T12:00:00.000000Z"
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CAUSE = StuckCause("Unschedulable", "0/3 nodes are available", "Add capacity or relax the pod's constraints.")


def report(role: str, namespace: str, name: str, **fields: Any) -> ObjectAudit:
    audit = ObjectAudit("Pod", namespace, name, role=role, phase="Pending", **fields)
    if audit.cause is not None:
        audit.findings.append(AuditFinding(STUCK, "status", f"stuck for 42 min: {audit.cause.message}", "warn"))
    return audit


def pod(namespace: str, name: str, *, labels: Json | None = None, owner: Json | None = None, claim: str = "") -> Json:
    """A pod as the index keeps it (webhook/state/index.py trim)."""
    metadata: Json = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {}}
    if owner is not None:
        metadata["ownerReferences"] = [{**owner, "controller": True}]
    volumes = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    spec = {"containers": [{"name": "c", "image": "busybox"}], "volumes": volumes}
    return trim({"kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Pending"}})


JOB_REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "volsync-src-db", "uid": "job-1"}
RS_REF = {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource", "name": "db", "uid": "rs-1"}
DU_REF = {"apiVersion": "velero.io/v2alpha1", "kind": "DataUpload", "name": "nightly-x", "uid": "du-1"}


def job(namespace: str = "shop", uid: str = "job-1", owner: Json | None = RS_REF) -> Json:
    metadata: Json = {"name": "volsync-src-db", "namespace": namespace, "uid": uid}
    if owner is not None:
        metadata["ownerReferences"] = [{**owner, "controller": True}]
    return {"kind": "Job", "metadata": metadata}


def test_a_mover_s_owner_is_its_listed_job_s_volsync_owner() -> None:
    mover = pod("shop", "volsync-src-db-x", labels={"app.kubernetes.io/created-by": "volsync"}, owner=JOB_REF)
    audit = report("mover", "shop", "volsync-src-db-x", cause=CAUSE)
    events = audit_events(audit, mover, jobs_by_uid([job()]), view_from(), POLICY)
    assert [(e.regarding.kind, e.regarding.name, e.reason) for e in events] == [
        ("Pod", "volsync-src-db-x", "Unschedulable"),
        ("ReplicationSource", "db", "Unschedulable"),
    ]
    assert events[0].regarding.uid == "uid-volsync-src-db-x" and events[1].regarding.uid == "rs-1"
    assert events[1].related == events[0].regarding and events[0].note == events[1].note
    assert events[0].note == (
        "stuck for 42 min: 0/3 nodes are available. Remedy: Add capacity or relax the pod's constraints."
    )


def test_a_mover_s_owner_is_not_taken_from_its_owner_reference_alone() -> None:
    mover = pod("shop", "m", owner=JOB_REF)
    audit = report("mover", "shop", "m", cause=CAUSE)
    for jobs in (
        [],  # no such Job listed
        [job(uid="job-2")],  # another Job of that name: not the one the pod names
        [job(namespace="other")],  # a Job of that UID in another namespace
        [job(owner={"apiVersion": "batch/v1", "kind": "CronJob", "name": "db", "uid": "cj"})],  # not VolSync's
        [job(owner=None)],
    ):
        assert owner_of(audit, mover, jobs_by_uid(jobs), view_from(), POLICY) is None, jobs
    not_a_job = pod("shop", "m", owner={**JOB_REF, "kind": "ReplicaSet", "apiVersion": "apps/v1"})
    assert owner_of(audit, not_a_job, jobs_by_uid([job()]), view_from(), POLICY) is None


def test_a_backup_pod_s_data_upload_only_in_velero_s_namespace_with_velero_s_owner_reference() -> None:
    labels = {"velero.io/data-upload": "nightly-x"}
    velero = POLICY.velero_namespace
    audit = report("backup", velero, "nightly-x", cause=CAUSE)
    found = owner_of(audit, pod(velero, "nightly-x", labels=labels, owner=DU_REF), {}, view_from(), POLICY)
    assert found == ObjectRef("velero.io/v2alpha1", "DataUpload", velero, "nightly-x", "du-1")
    tenant = report("backup", "shop", "nightly-x", cause=CAUSE)  # a tenant's pod claiming a DataUpload
    assert owner_of(tenant, pod("shop", "nightly-x", labels=labels, owner=DU_REF), {}, view_from(), POLICY) is None
    assert owner_of(audit, pod(velero, "nightly-x", owner=DU_REF), {}, view_from(), POLICY) is None  # no label
    download = {**DU_REF, "kind": "DataDownload"}
    assert owner_of(audit, pod(velero, "n", labels=labels, owner=download), {}, view_from(), POLICY) is None
    restore = report("restore", velero, "r", cause=CAUSE)
    restored = pod(velero, "r", labels={"velero.io/data-download": "r"}, owner=download)
    assert owner_of(restore, restored, {}, view_from(), POLICY) == ObjectRef(
        "velero.io/v2alpha1", "DataDownload", velero, "nightly-x", "du-1"
    )
    forged = {**DU_REF, "apiVersion": "example.com/v1"}
    assert owner_of(audit, pod(velero, "n", labels=labels, owner=forged), {}, view_from(), POLICY) is None


CDI_LABELS = {"app": "containerized-data-importer", "cdi.kubevirt.io": "importer"}
PRIME = "prime-1f4c"


def cdi_state(*, data_volume: bool = True) -> list[Json]:
    target = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "fedora-root", "namespace": "vms"},
        "spec": {"accessModes": ["ReadWriteOnce"]},
    }
    prime = {
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": PRIME,
            "namespace": "vms",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "fedora-root", "controller": True}
            ],
        },
        "spec": {"accessModes": ["ReadWriteOnce"]},
    }
    dv = {
        "kind": "DataVolume",
        "metadata": {"name": "fedora-root", "namespace": "vms", "uid": "dv-1"},
        "status": {"claimName": "fedora-root"},
    }
    return [target, prime, *([dv] if data_volume else [])]


def test_a_cdi_importer_s_data_volume_is_the_one_the_index_holds_for_the_claim_it_fills() -> None:
    owner = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": PRIME, "uid": "p"}
    importer = pod("vms", "importer-prime-1f4c", labels=CDI_LABELS, owner=owner, claim=PRIME)
    audit = report("cdi-worker", "vms", "importer-prime-1f4c", cause=CAUSE)
    found = owner_of(audit, importer, {}, view_from(*cdi_state()), POLICY)
    assert found == ObjectRef("cdi.kubevirt.io/v1beta1", "DataVolume", "vms", "fedora-root", "dv-1")
    assert owner_of(audit, importer, {}, view_from(*cdi_state(data_volume=False)), POLICY) is None
    unowned = pod("vms", "importer-prime-1f4c", labels=CDI_LABELS, claim=PRIME)
    assert owner_of(audit, unowned, {}, view_from(*cdi_state()), POLICY) is None
    other_claim = pod("vms", "i", labels=CDI_LABELS, owner={**owner, "name": "fedora-root"}, claim=PRIME)
    assert owner_of(audit, other_claim, {}, view_from(*cdi_state()), POLICY) is None  # controlled by no claim it mounts
    clone_source = pod(
        "vms", "i", labels={**CDI_LABELS, "cdi.kubevirt.io": "cdi-clone-source"}, owner=owner, claim=PRIME
    )
    assert owner_of(audit, clone_source, {}, view_from(*cdi_state()), POLICY) is None


def test_multi_attach_on_a_mover_not_stuck_yet_is_an_event_too_and_never_twice() -> None:
    drift = AuditFinding(DRIFT, "spec.nodeName", "runs on node n2; admission would place it on node n1 now", "warn")
    audit = report("mover", "shop", "m", multi_attach=True, findings=[drift])
    (event,) = audit_events(audit, pod("shop", "m"), {}, view_from(), POLICY)
    assert event.reason == "MultiAttach" and "node n1" in event.note and "Remedy: Delete the pod" in event.note
    stuck = report("mover", "shop", "m", multi_attach=True, cause=StuckCause("MultiAttach", "attached to n1", "Delete"))
    assert [e.reason for e in audit_events(stuck, pod("shop", "m"), {}, view_from(), POLICY)] == ["MultiAttach"]
    assert audit_events(report("mover", "shop", "m"), pod("shop", "m"), {}, view_from(), POLICY) == []


def test_one_name_per_object_and_cause() -> None:
    pod_ref = ObjectRef("v1", "Pod", "shop", "m", "u1")
    names = {AuditEvent(ref, reason, "n").name for ref in (pod_ref, ObjectRef("v1", "Pod", "shop", "m", "u2"))
             for reason in ("MultiAttach", "NoNodeAgent")}  # fmt: skip
    assert len(names) == 4
    assert AuditEvent(pod_ref, "MultiAttach", "one note").name == AuditEvent(pod_ref, "MultiAttach", "another").name


def test_a_note_is_clipped_to_the_byte_limit_at_a_character() -> None:
    assert clip_bytes("é" * 600) == "é" * 510 + "…" and len(clip_bytes("é" * 600).encode()) <= NOTE_LIMIT
    assert clip_bytes("short") == "short"


LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
#: Pod names as the API allows them: DNS subdomains of up to 253 characters.
NAMES = st.lists(LABEL, min_size=1, max_size=8).map(".".join).filter(lambda name: len(name) <= 253)
TEXT = st.text(st.characters(codec="utf-8"), max_size=3000)


@settings(max_examples=60, deadline=None)
@given(name=NAMES, message=TEXT, remedy=TEXT, reason=st.sampled_from(["MultiAttach", "NoNodeAgent", "Unexplained"]))
def test_every_event_is_one_the_api_server_accepts(name: str, message: str, remedy: str, reason: str) -> None:
    """Whatever the pod is called and whatever its cause quotes (the scheduler's or the kubelet's words, control
    and bidi characters, kilobytes of text), the Event is valid, its note printable and within 1 KB."""
    audit = report("mover", "shop", name, cause=StuckCause(reason, message, remedy))
    for event in audit_events(audit, pod("shop", name), {}, view_from(), POLICY):
        body = event.body(NOW, "storage-affinity-webhook-7d9f8-abcde")
        assert event.note.isprintable() and len(event.note.encode()) <= NOTE_LIMIT
        assert SUBDOMAIN.match(body["metadata"]["name"]) and len(body["metadata"]["name"]) <= 253
        assert invalid_object(copy.deepcopy(body), None) is None
        assert body["reportingController"] == REPORTING_CONTROLLER
        validate_strict(body)


def test_the_index_keeps_the_controller_references_rules_read_and_no_other() -> None:
    def kept(owner_kind: str) -> Any:
        owner = {"apiVersion": "v1", "kind": owner_kind, "name": "o", "uid": "u", "controller": True}
        return pod("ns", "p", owner=owner)["metadata"].get("ownerReferences")

    for kind in ("Job", "DataUpload", "DataDownload", "PersistentVolumeClaim"):
        assert kept(kind) == [{"apiVersion": "v1", "kind": kind, "name": "o", "uid": "u", "controller": True}]
    for kind in ("ReplicaSet", "StatefulSet", "DaemonSet"):  # most pods that mount a claim: nothing more held
        assert kept(kind) is None


def test_the_in_server_audit_trusts_a_cdi_worker_cdi_created() -> None:
    """The index keeps the importer's controller reference (its prime claim), so the audit of the index, like the
    audit of the API's objects, finds no untrusted grant on it (kubevirt/containerized-data-importer#4275)."""
    (case,) = [c for c in CAUSES_TABLE["cases"] if c["name"].startswith("CDI importer that follows")]
    for indexed in (False, True):
        report = audited(case, indexed=indexed)
        assert report.cause is not None and report.cause.code == "VMPlacementConflict"
        assert not [f for f in report.findings if f.family == "roleTrust"], indexed


def test_an_ended_pod_is_told_once_and_how_long_ago() -> None:
    """A pod that ended Failed: the note says how long ago (the failedPod finding), and the Event is recorded once
    (`once`), where a stuck pod's is a series."""
    (case,) = [c for c in FAILED_TABLE["cases"] if c["name"].startswith("mover evicted by kubectl drain")]
    ended = ended_audited(case, indexed=True)
    ago = ended_seconds(case["ended"], FAILED_NOW)
    assert ago is not None
    (event,) = audit_events(ended, trim(case["ended"]), {}, view_from(), POLICY)
    assert event.once and event.reason == "EvictedByAPI"
    assert event.note.startswith(f"ended Failed {duration(ago)} ago: evicted through the Eviction API"), event.note
    stuck = report("mover", "shop", "m", cause=CAUSE)
    assert [e.once for e in audit_events(stuck, pod("shop", "m"), {}, view_from(), POLICY)] == [False]


def jobs_by_uid(objects: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The Jobs among `objects`, by (namespace, UID), as the audit's one pass gathers them."""
    return {key: obj for obj in objects if (key := job_key(obj)) is not None}
