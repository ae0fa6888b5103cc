"""The in-server audit's Events, written to the fake API (which enforces the chart's RBAC and validates Events as
kube-apiserver does) by the replica holding the Lease: on a stuck VolSync mover, a stuck Velero backup pod and a
stuck CDI importer, and on the objects their operators watch; a series instead of a new Event on later runs;
the per-run and per-namespace bounds; and nothing from a replica that does not hold the Lease."""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from rules.auditevents import NOTE_LIMIT, REPORTING_CONTROLLER, AuditEvent, ObjectRef
from rules.model import Json
from testkit.fakeapi import FakeKubeAPI
from testkit.fakeapi.resources import Request
from tests.rules.test_causes import NOW, TABLE
from tests.state.conftest import NAMESPACE
from tests.state.test_lease import LEASE, api_client
from tests.support import validate_strict
from webhook.audit import loop as loop_module
from webhook.audit.events import FAILURES_PER_RUN, NAMESPACE_LIMIT, RUN_LIMIT, EventWriter
from webhook.audit.lease import LeaseElector
from webhook.audit.loop import AuditLoop
from webhook.audit.reports import ReportWriter
from webhook.audit.workloads import trim_workload
from webhook.policy.file import load_policy_file
from webhook.runtime import Runtime
from webhook.settings import LeaseTiming
from webhook.state.static import load_static_state

#: Long enough that the lease, taken once, outlasts a test (no renewal thread).
TIMING = LeaseTiming(duration=120.0, renew_deadline=90.0, retry_period=1.0)
INSTANCE = "storage-affinity-webhook-7d9f8-abcde"
RS_UID, JOB_UID, DU_UID, DV_UID = "rs-3c1f", "job-8e2a", "du-5b7d", "dv-0c9b"
SOURCE = "backube/volsync controllers/mover/rsync (mover Job owned by its ReplicationSource)"


def _case(name: str) -> dict[str, Any]:
    (case,) = [c for c in TABLE["cases"] if c["name"].startswith(name)]
    return copy.deepcopy(case)


def stuck_cluster() -> tuple[list[Json], list[Json]]:
    """The cluster objects and the listed Jobs: three stuck pods of tests/data/audit/causes.yaml, each with the
    owner its operator creates it with (VolSync's Job and ReplicationSource, Velero's DataUpload, CDI's DataVolume)."""
    mover, backup, importer = (
        _case("mover scheduled away"),
        _case("backup pod whose load affinity (zone-a)"),
        _case("CDI importer that follows"),
    )
    mover["stuck"]["metadata"].update(
        uid="pod-mover",
        ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "volsync-src-db", "uid": JOB_UID,
                          "controller": True, "blockOwnerDeletion": True}],
    )  # fmt: skip
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "volsync-src-db",
            "namespace": "shop",
            "uid": JOB_UID,
            "resourceVersion": "7",
            "ownerReferences": [
                {
                    "apiVersion": "volsync.backube/v1alpha1",
                    "kind": "ReplicationSource",
                    "name": "db",
                    "uid": RS_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/created-by": "volsync"}},
                "spec": {
                    "containers": [{"name": "rsync", "image": "quay.io/backube/volsync:0.11.0"}],
                    "restartPolicy": "Never",
                },
            }
        },
    }
    backup["stuck"]["metadata"]["uid"] = "pod-backup"
    backup["stuck"]["metadata"]["labels"]["velero.io/data-upload"] = "nightly-9735-xk2p1"
    backup["stuck"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "velero.io/v2alpha1", "kind": "DataUpload", "name": "nightly-9735-xk2p1", "uid": DU_UID,
         "controller": True}
    ]  # fmt: skip
    importer["stuck"]["metadata"]["uid"] = "pod-importer"
    data_volume = {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "fedora-root", "namespace": "vms", "uid": DV_UID},
        "spec": {"source": {"http": {"url": "https://download.fedoraproject.org/fedora.qcow2"}}},
        "status": {"phase": "ImportScheduled", "claimName": "fedora-root"},
    }
    objects = [*TABLE["base"], data_volume]
    for case in (mover, backup, importer):
        objects += [*case.get("state", ()), case["stuck"]]
    return copy.deepcopy(objects), [job]


def tenant_pods(namespace: str, count: int) -> list[Json]:
    """`count` VolSync-labelled pods stuck for a day on a claim of their namespace: what any tenant may create."""
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard"},
        "status": {"phase": "Pending"},
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"mover-{i}",
                "namespace": namespace,
                "uid": f"{namespace}-{i}",
                "creationTimestamp": "2026-11-19T12:00:00Z",
                "labels": {"app.kubernetes.io/created-by": "volsync"},
            },
            "spec": {
                "containers": [{"name": "m", "image": "busybox"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            },
            "status": {"phase": "Pending"},
        }
        for i in range(count)
    ]
    return [claim, *pods]


def runtime(tmp_path: Path, objects: list[Json]) -> Runtime:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    policy, source = load_policy_file(None)  # the default policy, as tests/rules/test_causes.py audits the cases
    return Runtime(policy=policy, view=load_static_state([path]), namespace="saw", policy_source=source)


def replica(
    fake: FakeKubeAPI, tmp_path: Path, rt: Runtime, jobs: list[Json], agent: str
) -> tuple[AuditLoop, LeaseElector]:
    api = api_client(fake, tmp_path, agent)
    lease = LeaseElector(api, NAMESPACE, LEASE, TIMING, holder=f"{agent}_1")
    events = EventWriter(api, lease.remaining, f"{INSTANCE}-{agent}")
    listed = [trim_workload(job, "Job") for job in jobs]
    loop = AuditLoop(rt, interval=60, lease=lease, workloads=lambda: listed, events=events)
    return loop, lease


def stored_events(fake: FakeKubeAPI) -> dict[tuple[str, str, str], Json]:
    """The Events by (kind, name, reason) of the object they are about."""
    return {(e["regarding"]["kind"], e["regarding"]["name"], e["reason"]): e for e in fake.objects("Event")}


def event_requests(fake: FakeKubeAPI, agent: str = "") -> list[Request]:
    return [r for r in fake.requests if "/events" in r.path and (not agent or r.agent == agent)]


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_two_audits_record_each_stuck_pod_and_its_owner_then_update_their_series(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    objects, jobs = stuck_cluster()
    loop, lease = replica(fake_api, tmp_path, runtime(tmp_path, objects), jobs, "a")
    assert lease.try_once()
    loop.run_once()
    first = stored_events(fake_api)
    owners = {
        ("Pod", "volsync-src-db", "MultiAttach"): ("ReplicationSource", "db", RS_UID),
        ("Pod", "nightly-9735-xk2p1", "VolumeTopologyConflict"): ("DataUpload", "nightly-9735-xk2p1", DU_UID),
        # VMPlacementConflict to the operator's `audit`: an Event reaches the tenant, who is told only what the node
        # labels they may know say (tests/rules/test_causes.py, SERVER_VIEW)
        ("Pod", "importer-prime-1f4c7a2e-3b9d-4c61-9e0a-5d8b7c6a4f21", "Unschedulable"): (
            "DataVolume", "fedora-root", DV_UID),
    }  # fmt: skip
    expected = {*owners, *((kind, name, reason) for (_, _, reason), (kind, name, _) in owners.items())}
    assert set(first) == expected
    for (kind, name, reason), (owner_kind, owner, uid) in owners.items():
        pod_event, owner_event = first[(kind, name, reason)], first[(owner_kind, owner, reason)]
        assert pod_event["regarding"]["uid"].startswith("pod-")  # what Velero's DiagnosePod matches on
        assert owner_event["regarding"]["uid"] == uid
        assert owner_event["related"] == pod_event["regarding"]
        assert owner_event["metadata"]["namespace"] == pod_event["metadata"]["namespace"]
        for event in (pod_event, owner_event):
            assert event["type"] == "Warning" and event["action"] == "Audit"
            assert event["reportingController"] == REPORTING_CONTROLLER
            assert event["reportingInstance"] == f"{INSTANCE}-a"
            assert len(event["note"].encode()) <= NOTE_LIMIT and "Remedy: " in event["note"]
            assert "series" not in event
            validate_strict(event)  # the official schema, as stored
    assert "claim data" in first[("ReplicationSource", "db", "MultiAttach")]["note"]
    assert first[("DataUpload", "nightly-9735-xk2p1", "VolumeTopologyConflict")]["regarding"]["apiVersion"] == (
        "velero.io/v2alpha1"
    )

    creates = fake_api.count("POST", "Event")
    loop.run_once()
    second = stored_events(fake_api)
    assert set(second) == expected and fake_api.count("POST", "Event") == creates  # a series, not new Events
    for key, event in second.items():
        assert event["series"]["count"] == 2 and event["series"]["lastObservedTime"], key
        validate_strict(event)
        assert {k: v for k, v in event.items() if k not in ("series", "metadata")} == {
            k: v for k, v in first[key].items() if k not in ("series", "metadata")
        }


def test_a_cause_that_clears_gets_no_more_updates_and_a_new_cause_a_new_event(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    objects, jobs = stuck_cluster()
    rt = runtime(tmp_path, objects)
    loop, lease = replica(fake_api, tmp_path, rt, jobs, "a")
    assert lease.try_once()
    loop.run_once()
    loop.run_once()
    # The backup pod runs and is Ready: its cause cleared.
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "nightly-9735-xk2p1":
            obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    rt.view = runtime(tmp_path, objects).view
    loop.run_once()
    events = stored_events(fake_api)
    assert events[("Pod", "nightly-9735-xk2p1", "VolumeTopologyConflict")]["series"]["count"] == 2
    assert events[("DataUpload", "nightly-9735-xk2p1", "VolumeTopologyConflict")]["series"]["count"] == 2
    assert events[("Pod", "volsync-src-db", "MultiAttach")]["series"]["count"] == 3
    # Another cause of the same pod is another Event, the first of its own series.
    (mover_event,) = [e for k, e in events.items() if k == ("Pod", "volsync-src-db", "MultiAttach")]
    regarding = ObjectRef("v1", "Pod", "shop", "volsync-src-db", mover_event["regarding"]["uid"])
    assert loop.events is not None
    loop.events.write([AuditEvent(regarding, "NodeCordoned", "node n2 is cordoned. Remedy: uncordon it")], NOW)
    events = stored_events(fake_api)
    assert "series" not in events[("Pod", "volsync-src-db", "NodeCordoned")]
    assert events[("Pod", "volsync-src-db", "MultiAttach")]["series"]["count"] == 3  # cleared: not updated


def writes_by_namespace(fake: FakeKubeAPI) -> dict[str, int]:
    found: dict[str, int] = {}
    for request in event_requests(fake):
        namespace = request.path.split("/namespaces/")[1].split("/")[0]
        found[namespace] = found.get(namespace, 0) + 1
    return found


def left_out(limit: str) -> float:
    return counter("storage_affinity_events_left_out_total", limit=limit)


def test_a_tenant_of_500_stuck_pods_gets_ten_writes_and_the_others_theirs(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    objects, jobs = stuck_cluster()
    loop, lease = replica(fake_api, tmp_path, runtime(tmp_path, [*objects, *tenant_pods("tenant", 500)]), jobs, "a")
    assert lease.try_once()
    before = left_out("namespace")
    loop.run_once()
    assert writes_by_namespace(fake_api) == {"tenant": NAMESPACE_LIMIT, "shop": 2, "velero": 2, "vms": 2}
    assert left_out("namespace") - before == 500 - NAMESPACE_LIMIT
    assert len(stored_events(fake_api)) == 6 + NAMESPACE_LIMIT
    loop.run_once()  # the next run takes the tenant's next ten, and updates the series of the other namespaces
    assert writes_by_namespace(fake_api)["tenant"] == 2 * NAMESPACE_LIMIT
    assert fake_api.count("POST", "Event") == 6 + 2 * NAMESPACE_LIMIT
    assert all(
        e["series"]["count"] == 2 for e in stored_events(fake_api).values() if e["regarding"]["namespace"] != "tenant"
    )


def test_a_run_writes_at_most_its_bound_shared_round_robin(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    objects, jobs = stuck_cluster()
    teams = [pod for i in range(12) for pod in tenant_pods(f"team-{i:02}", 9)]
    cluster = [*objects, *tenant_pods("tenant", 500), *teams]
    loop, lease = replica(fake_api, tmp_path, runtime(tmp_path, cluster), jobs, "a")
    assert lease.try_once()
    before = left_out("run") + left_out("namespace")
    loop.run_once()
    written = writes_by_namespace(fake_api)
    assert sum(written.values()) == RUN_LIMIT and max(written.values()) <= NAMESPACE_LIMIT
    # One write per namespace per round: the three stuck pods and their owners are all recorded.
    assert (written["shop"], written["velero"], written["vms"]) == (2, 2, 2) and len(written) == 16
    wanted = 6 + 500 + 12 * 9
    assert left_out("run") + left_out("namespace") - before == wanted - RUN_LIMIT


def test_nothing_from_a_replica_that_does_not_hold_the_lease(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    objects, jobs = stuck_cluster()
    rt = runtime(tmp_path, objects)
    holder, holder_lease = replica(fake_api, tmp_path, rt, jobs, "a")
    other, other_lease = replica(fake_api, tmp_path, rt, jobs, "b")
    assert holder_lease.try_once() and not other_lease.try_once()
    other.run_once()
    assert event_requests(fake_api, "b") == [] and stored_events(fake_api) == {}
    holder.run_once()
    assert len(stored_events(fake_api)) == 6 and event_requests(fake_api, "b") == []


def test_a_successor_continues_the_series_its_predecessor_started(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    objects, jobs = stuck_cluster()
    rt = runtime(tmp_path, objects)
    first, first_lease = replica(fake_api, tmp_path, rt, jobs, "a")
    assert first_lease.try_once()
    first.run_once()
    first_lease.release()
    successor, lease = replica(fake_api, tmp_path, rt, jobs, "b")
    assert lease.try_once()
    successor.run_once()
    events = stored_events(fake_api)
    assert len(events) == 6 and all(e["series"]["count"] == 2 for e in events.values())
    assert {e["reportingInstance"] for e in events.values()} == {f"{INSTANCE}-a"}  # adopted, not rewritten


def test_an_event_squatting_on_the_name_is_left_alone(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    objects, jobs = stuck_cluster()
    loop, lease = replica(fake_api, tmp_path, runtime(tmp_path, objects), jobs, "a")
    assert lease.try_once()
    loop.run_once()
    (key, event) = next((k, e) for k, e in stored_events(fake_api).items() if k[0] == "Pod")
    fake_api.delete("events", event["metadata"]["namespace"], event["metadata"]["name"])
    squatter = {**copy.deepcopy(event), "reportingController": "example.com/tenant", "note": "nothing to see"}
    squatter["metadata"] = {"name": event["metadata"]["name"], "namespace": event["metadata"]["namespace"]}
    fake_api.create(squatter)
    loop.run_once()
    loop.run_once()
    kept = stored_events(fake_api)[key]
    assert kept["reportingController"] == "example.com/tenant" and "series" not in kept


def test_refused_writes_are_counted_logged_once_and_never_fail_the_audit(
    fake_api: FakeKubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    objects, jobs = stuck_cluster()
    loop, lease = replica(fake_api, tmp_path, runtime(tmp_path, objects), jobs, "a")
    assert lease.try_once()
    assert fake_api.grants is not None
    fake_api.grants = frozenset(g for g in fake_api.grants if g.resource != "events")  # the chart without its rule
    failed = counter("storage_affinity_events_failed_total")
    with caplog.at_level(logging.WARNING, logger="webhook.audit.events"):
        counts = loop.run_once()
        loop.run_once()
    assert counts  # the audit itself ran and published
    # FAILURES_PER_RUN a run, then no more: the next run tries again.
    assert len(event_requests(fake_api)) == 2 * FAILURES_PER_RUN
    assert counter("storage_affinity_events_failed_total") - failed == 2 * FAILURES_PER_RUN
    lines = [r.getMessage() for r in caplog.records if r.name == "webhook.audit.events"]
    assert len(lines) == 1 and "403 Forbidden" in lines[0]  # at most one line a minute


def test_one_pass_over_the_objects_feeds_the_reports_and_the_events(
    fake_api: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The objects a run holds are walked once, by the audit itself; one pass over the reports, each beside its
    object, gathers what the policy reports and the Events need, and neither writer walks the objects again. Counted
    where every pass goes through: the audit's time slices (webhook/audit/loop.py `_yielding`)."""
    objects, jobs = stuck_cluster()
    rt = runtime(tmp_path, [*objects, *tenant_pods("tenant", 40)])
    loop, lease = replica(fake_api, tmp_path, rt, jobs, "a")
    fake_api.served_groups |= {"openreports.io"}
    loop.reports = ReportWriter(api_client(fake_api, tmp_path, "reports"), "openreports", lease.remaining)
    walked: Counter[str] = Counter()
    sliced = loop_module._yielding

    def counted(items: Iterable[Any], slices: Any = None) -> Iterator[Any]:
        for item in sliced(items, slices):
            walked[type(item).__name__] += 1  # dict: an object; tuple: a report beside its object; ObjectAudit
            yield item

    monkeypatch.setattr(loop_module, "_yielding", counted)
    assert lease.try_once()
    loop.run_once()
    view: Any = rt.view
    held = len(view.objects("Pod")) + len(view.objects("ConfigMap")) + len(jobs)
    assert walked["dict"] == held > 40  # the audit's own pass
    assert walked["tuple"] == held  # the one pass over the reports
    assert walked["ObjectAudit"] == len(reported(fake_api))  # the report writer's: those with findings only
    assert len(stored_events(fake_api)) == 6 + NAMESPACE_LIMIT and loop.last_write is not None
    assert loop.last_write.created == len(fake_api.objects("Report")) > 0


def reported(fake: FakeKubeAPI) -> set[tuple[str, str, str]]:
    """The objects the stored policy reports name: those with findings."""
    return {
        (resource["kind"], resource["namespace"], resource["name"])
        for report in fake.objects("Report")
        for result in report["results"]
        for resource in result["resources"]
    }
