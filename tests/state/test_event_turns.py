"""Every Event gets its turn (webhook/audit/events.py `rotation`): with more stuck pods than the per-run and
per-namespace bounds let one run write, consecutive runs reach every one of them, in as few runs as the bounds
allow (ceil(total / what one run may write)), and no run writes past its bounds. Against the fake API (which
validates every Event as kube-apiserver does) with the shipped bounds, and as a generated property over any
bounds and any number of namespaces and pods, with the writer's two API calls held in memory."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client import ApiException

from rules.auditevents import AuditEvent, ObjectRef
from testkit.fakeapi import FakeKubeAPI
from tests.rules.test_causes import NOW
from tests.state.test_audit_events import INSTANCE, writes_by_namespace
from tests.state.test_lease import api_client
from tests.support import validate_strict
from webhook.audit.events import NAMESPACE_LIMIT, RUN_LIMIT, EventWriter, rotation


def stuck_pods(namespaces: int, pods: int) -> list[AuditEvent]:
    """One Event for each of `pods` stuck pods in each of `namespaces` namespaces."""
    return [
        AuditEvent(ObjectRef("v1", "Pod", f"team-{n:03}", f"mover-{i:03}", f"uid-{n}-{i}"), "Unschedulable",
                   "stuck for 2 h: 0/3 nodes are available. Remedy: add capacity")
        for n in range(namespaces)
        for i in range(pods)
    ]  # fmt: skip


def runs_needed(namespaces: int, pods: int, run_limit: int, namespace_limit: int) -> int:
    """The fewest runs that can reach every Event: what one run may write is the smaller of its own bound and the
    namespaces' shares."""
    return math.ceil(namespaces * pods / min(run_limit, namespaces * min(namespace_limit, pods)))


@pytest.mark.parametrize(
    ("namespaces", "pods"),
    [(1, 60), (75, 2)],
    ids=["one tenant of 60 (its share binds)", "75 namespaces of 2 (the run's bound binds, then new and old mix)"],
)
def test_consecutive_runs_reach_every_stuck_pod_within_the_fewest_runs_the_bounds_allow(
    fake_api: FakeKubeAPI, tmp_path: Path, namespaces: int, pods: int
) -> None:
    writer = EventWriter(api_client(fake_api, tmp_path, "a"), lambda: 60.0, INSTANCE)
    events = stuck_pods(namespaces, pods)
    needed = runs_needed(namespaces, pods, RUN_LIMIT, NAMESPACE_LIMIT)
    share = min(RUN_LIMIT, namespaces * min(NAMESPACE_LIMIT, pods))
    before: dict[str, int] = {}
    for run in range(1, needed + 1):
        counts = writer.write(events, NOW)
        written = writes_by_namespace(fake_api)
        this_run = {ns: count - before.get(ns, 0) for ns, count in written.items() if count > before.get(ns, 0)}
        before = written
        assert sum(this_run.values()) == share and max(this_run.values()) <= NAMESPACE_LIMIT, run
        created = min(share, len(events) - (run - 1) * share)  # nothing twice before everything once
        assert (counts.created, counts.updated) == (created, share - created), run
        assert counts.left_out_run + counts.left_out_namespace == len(events) - share
        reached = {(e["regarding"]["namespace"], e["regarding"]["name"]) for e in fake_api.objects("Event")}
        assert len(reached) == min(len(events), run * share), run
    assert reached == {(e.namespace, e.regarding.name) for e in events}
    counts = writer.write(events, NOW)  # the next turns go on with series: updates, no new Event
    assert (counts.created, counts.updated) == (0, share) and len(fake_api.objects("Event")) == len(events)
    validate_strict(next(e for e in fake_api.objects("Event") if "series" in e))


class MemoryEvents:
    """The writer's two calls of EventsV1Api, in memory: which objects each run's writes were about."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], Any] = {}
        self.writes: list[tuple[str, str]] = []  # (namespace, the name of the object the Event is about)

    def create_namespaced_event(self, namespace: str, body: Any, _request_timeout: float) -> Any:
        key = (namespace, body["metadata"]["name"])
        if key in self.stored:
            raise ApiException(status=409, reason="AlreadyExists")
        self.stored[key] = body
        self.writes.append((namespace, body["regarding"]["name"]))
        return SimpleNamespace(metadata=SimpleNamespace(uid=f"uid-{len(self.stored)}"))

    def patch_namespaced_event(self, name: str, namespace: str, patch: Any, **_: Any) -> Any:
        body = self.stored[(namespace, name)]
        self.writes.append((namespace, body["regarding"]["name"]))
        return SimpleNamespace(series=None)


@settings(max_examples=60, deadline=None)
@given(
    namespaces=st.integers(1, 25),
    pods=st.integers(1, 30),
    run_limit=st.integers(1, 60),
    namespace_limit=st.integers(1, 12),
)
def test_every_stuck_pod_is_reached_within_the_fewest_runs_whatever_the_bounds(
    namespaces: int, pods: int, run_limit: int, namespace_limit: int
) -> None:
    memory = MemoryEvents()
    writer = EventWriter(
        client.ApiClient(), lambda: 60.0, INSTANCE, run_limit=run_limit, namespace_limit=namespace_limit
    )
    writer.events = memory  # type: ignore[assignment]
    events = stuck_pods(namespaces, pods)
    reached: set[tuple[str, str]] = set()
    for _ in range(runs_needed(namespaces, pods, run_limit, namespace_limit)):
        start = len(memory.writes)
        writer.write(events, NOW)
        run = memory.writes[start:]
        assert len(run) <= run_limit
        assert max(run.count((ns, name)) for ns, name in run) == 1  # one write per Event per run
        assert all(sum(1 for n, _ in run if n == ns) <= namespace_limit for ns, _ in run)
        reached.update(run)
    assert reached == {(e.namespace, e.regarding.name) for e in events}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sets(st.tuples(st.integers(0, 4), st.integers(0, 6)), max_size=30), min_size=1, max_size=8))
def test_the_writer_remembers_only_the_events_its_last_run_wanted(runs: list[set[tuple[int, int]]]) -> None:
    """Its series and turns are bounded by what the last audit wanted: a cause that clears is forgotten, so a
    cluster where pods get stuck and recover forever does not grow the leader's memory."""
    writer = EventWriter(client.ApiClient(), lambda: 60.0, INSTANCE, run_limit=10, namespace_limit=3)
    writer.events = MemoryEvents()  # type: ignore[assignment]
    for wanted in runs:
        events = [
            AuditEvent(ObjectRef("v1", "Pod", f"team-{n}", f"mover-{i}", f"uid-{n}-{i}"), "Unschedulable", "stuck")
            for n, i in sorted(wanted)
        ]
        writer.write(events, NOW)
        keys = {event.key for event in events}
        assert set(writer._series) <= keys and set(writer._turns) <= keys


def test_the_rotation_goes_on_after_the_namespace_written_last_and_takes_the_least_recently_tried_first() -> None:
    events = stuck_pods(3, 4)
    order, past = rotation(events, {}, "", 2)
    assert [(e.namespace, e.regarding.name) for e in order] == [
        ("team-000", "mover-000"), ("team-001", "mover-000"), ("team-002", "mover-000"),
        ("team-000", "mover-001"), ("team-001", "mover-001"), ("team-002", "mover-001"),
    ]  # fmt: skip
    assert past == 3 * 2
    turns = {e.key: 1 for e in order}
    order, _ = rotation(events, turns, "team-000", 2)
    assert [(e.namespace, e.regarding.name) for e in order][:3] == [
        ("team-001", "mover-002"), ("team-002", "mover-002"), ("team-000", "mover-002"),
    ]  # fmt: skip
    order, _ = rotation(events, turns, "team-002", 1)  # after the last namespace: the first again
    assert order[0].namespace == "team-000"
