"""The Events of storage pods that ended Failed (rules/auditevents.py, webhook/audit/events.py): an operator wants to
hear once that a backup pod was preempted, and how long ago, not a count that grows each run until
`audit.failedWithinSeconds` passes and a lastObservedTime that makes an old failure look current. So an ended pod's
Event, and its owner's, say "ended Failed N ago", are created once and never patched, by this replica or by the one
that takes the Lease over."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

from rules.model import Json
from testkit.fakeapi import FakeKubeAPI
from tests.rules.test_ended_causes import TABLE as FAILED_TABLE
from tests.state.test_audit_events import DU_UID, INSTANCE, event_requests, replica, runtime, stored_events
from tests.support import validate_strict

#: The pod the case names, with the DataUpload owner Velero's exposer gives it (pkg/exposer/csi_snapshot.go).
PREEMPTED = "Velero backup pod preempted on its node before its container started"
POD = "nightly-7243-p2x8d"
SAID = re.compile(r"^ended Failed \d[^:]* ago: preempted by the scheduler .*prepare timeout.*\. Remedy: ")


def ended_cluster() -> list[Json]:
    (case,) = [c for c in FAILED_TABLE["cases"] if c["name"] == PREEMPTED]
    pod = copy.deepcopy(case["ended"])
    pod["metadata"]["uid"] = "pod-ended"
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "velero.io/v2alpha1", "kind": "DataUpload", "name": POD, "uid": DU_UID, "controller": True}
    ]
    return [*copy.deepcopy(FAILED_TABLE["base"]), pod]


def test_an_ended_pod_and_its_owner_get_one_event_each_saying_how_long_ago_and_never_a_series(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    rt = runtime(tmp_path, ended_cluster())
    rt.policy = dataclasses.replace(rt.policy, failed_within=10**9)  # the case's pod ended days before this test ran
    loop, lease = replica(fake_api, tmp_path, rt, [], "a")
    assert lease.try_once()
    loop.run_once()
    first = stored_events(fake_api)
    assert set(first) == {("Pod", POD, "Preempted"), ("DataUpload", POD, "Preempted")}
    pod_event, owner_event = first[("Pod", POD, "Preempted")], first[("DataUpload", POD, "Preempted")]
    assert owner_event["related"] == pod_event["regarding"] and owner_event["regarding"]["uid"] == DU_UID
    for event in first.values():
        assert SAID.match(event["note"]), event["note"]
        assert "series" not in event
        validate_strict(event)
    written = len(event_requests(fake_api))
    assert written == 2

    loop.run_once()
    loop.run_once()
    assert len(event_requests(fake_api)) == written  # the cause cannot change: nothing to say again
    assert stored_events(fake_api) == first

    lease.release()  # a successor finds the Events there (409) and leaves them as they are
    successor, taken = replica(fake_api, tmp_path, rt, [], "b")
    assert taken.try_once()
    successor.run_once()
    successor.run_once()
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in event_requests(fake_api, "b")] == [
        ("POST", "events"),
        ("POST", "events"),
    ]
    assert stored_events(fake_api) == first
    assert {e["reportingInstance"] for e in first.values()} == {f"{INSTANCE}-a"}
