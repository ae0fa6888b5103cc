"""Records the audit's Events (content from rules/auditevents.py) from the replica that holds the Lease.

A series, not a flood, as client-go's events broadcaster keeps one (k8s.io/client-go/tools/events): the first
time an object has a cause, an Event is created; each later run that finds the same cause patches the Event's
`series` (count and lastObservedTime) and nothing else. A cause that clears is forgotten, so its Event gets no more
updates; another cause is another Event. The Event of a pod that ended (`AuditEvent.once`) is created once and never
patched: its cause cannot change. The Event's name follows from the object and the cause (`AuditEvent.name`), so a
replica that takes the Lease over, or a restarted one, finds the series already there (a create answers 409): it
adopts the Event if this controller wrote it about that object and cause (a JSON Patch whose `test` operations
check it, and whose answer gives the count), and leaves any other alone.

Every update is a JSON Patch that tests the Event's UID first: an Event deleted and re-created by someone else
under the name is never changed. An Event that expired (kube-apiserver's `--event-ttl`, an hour by default) answers
404 and is created anew, as client-go does.

Bounded: at most RUN_LIMIT writes per run and NAMESPACE_LIMIT per namespace, taken round-robin across namespaces
(one write per namespace per round), so a tenant with 500 stuck pods gets ten writes and never another namespace's
share. The bounds rotate (`rotation`): within a namespace the Events tried least recently go first, and each run's
rounds start at the namespace after the one the last run wrote to last, so over consecutive runs every Event gets
its turn, whatever the namespace's name or the number of namespaces. What is left out is counted in
`storage_affinity_events_left_out_total`. Each request is bounded by what the Lease leaves and REQUEST_TIMEOUT; a
run stops after FAILURES_PER_RUN failed writes (an API that is down costs a few timeouts, not a hundred). Failures
are counted and logged at most once a minute; they never fail the audit.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client import ApiException

from rules.audit import ObjectAudit
from rules.auditevents import AuditEvent, audit_events
from rules.cluster import ClusterView
from rules.model import Json
from rules.policy import Policy
from webhook import metrics
from webhook.audit.lease import NotLeader, instance, micro_time, write_time
from webhook.logs import Throttle
from webhook.state.apierrors import describe

log = logging.getLogger(__name__)

RUN_LIMIT = 100
NAMESPACE_LIMIT = 10
REQUEST_TIMEOUT = 5.0
FAILURES_PER_RUN = 3
JSON_PATCH = "application/json-patch+json"


class _LeftOut(Exception):
    """A write past a bound: `limit` is `run` or `namespace`."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


_UPDATED, _GONE, _FOREIGN = "updated", "gone", "foreign"
#: The fields an Event at this writer's name must hold for the writer to adopt it (JSON Patch `test` operations).
ADOPTED_WHEN = ("reportingController", "reason", "regarding", "type")


@dataclass
class _Series:
    """An Event this writer created or adopted: where it is, its UID, and the count it last wrote. An Event recorded
    once (`AuditEvent.once`) that a create found already there has no UID: it is never patched."""

    namespace: str
    name: str
    uid: str
    count: int


@dataclass
class EventCounts:
    created: int = 0
    updated: int = 0
    left_out_run: int = 0
    left_out_namespace: int = 0
    failed: int = 0
    foreign: int = 0  # an Event at the name this writer did not write: left alone
    recorded: int = 0  # an ended pod's Event, recorded already: not written again


#: Whose turn it is: an Event's key → the run in which it last got a write (0: never).
Turns = Mapping[tuple[str, str], int]


class EventWriter:
    """`may_write()` is how many seconds this process may still write (the lease's `remaining`)."""

    def __init__(
        self,
        api: client.ApiClient,
        may_write: Callable[[], float],
        reporting_instance: str | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        run_limit: int = RUN_LIMIT,
        namespace_limit: int = NAMESPACE_LIMIT,
    ) -> None:
        self.events = client.EventsV1Api(api)
        self.may_write = may_write
        self.instance = reporting_instance or instance()
        self.clock = clock
        self.run_limit, self.namespace_limit = run_limit, namespace_limit
        self._series: dict[tuple[str, str], _Series] = {}
        self._turns: dict[tuple[str, str], int] = {}  # Turns, of the Events wanted on the last run
        self._run = 0
        self._after = ""  # the namespace of this writer's last write: the next run's rounds start after it
        self._writes: defaultdict[str, int] = defaultdict(int)  # this run's writes by namespace
        self._spent = 0  # this run's writes
        self._failures = Throttle(clock=clock)  # a line a minute about failed writes, counting the others

    def forget(self) -> None:
        """Forget the series (the lease was lost: another replica may have written since; the names find them).
        Whose turn it is stays: it says nothing about what the API holds."""
        self._series = {}

    def record(
        self,
        causes: Iterable[tuple[ObjectAudit, Mapping[str, Any]]],
        jobs: Mapping[tuple[str, str], Mapping[str, Any]],
        view: ClusterView,
        policy: Policy,
        *,
        between: Callable[[], None] = lambda: None,
    ) -> EventCounts:
        """Record the Events the run's causes call for: each audited pod with a cause or a Multi-Attach finding,
        with the pod, and the run's listed Jobs by (namespace, UID), as the audit's one pass over its reports
        gathers them (webhook/audit/loop.py). `between` is called between the pods whose Events are built."""
        wanted: list[AuditEvent] = []
        for report, pod in causes:
            wanted += audit_events(report, pod, jobs, view, policy)
            between()
        return self.write(wanted, datetime.now(UTC))

    def write(self, wanted: Iterable[AuditEvent], now: datetime) -> EventCounts:
        """Create or update each wanted Event within the bounds, whose turn it is first (`rotation`); forget the
        series of causes that cleared."""
        counts = EventCounts()
        unique = {event.key: event for event in wanted}
        at = micro_time(now)
        self._run += 1
        self._writes, self._spent = defaultdict(int), 0
        due = [event for event in unique.values() if not (event.once and event.key in self._series)]
        counts.recorded = len(unique) - len(due)
        order, counts.left_out_namespace = rotation(due, self._turns, self._after, self.namespace_limit)
        try:
            for event in order:
                if counts.failed >= FAILURES_PER_RUN:
                    counts.left_out_run += 1  # the API fails: the rest wait for the next run
                    continue
                spent = self._spent
                try:
                    self._one(event, at, counts)
                except _LeftOut as out:
                    if out.limit == "run":
                        counts.left_out_run += 1
                    else:
                        counts.left_out_namespace += 1
                except NotLeader:
                    raise
                except Exception as exc:
                    counts.failed += 1
                    self._failed(event, exc)
                finally:
                    if self._spent > spent:
                        self._turns[event.key] = self._run
        except NotLeader:
            log.info("events: the lease ran out during the run; the holder records them")
            self.forget()
            return counts
        finally:
            self._turns = {key: run for key, run in self._turns.items() if key in unique}
            _publish(counts)
        self._series = {key: series for key, series in self._series.items() if key in unique}
        return counts

    # -- one Event ------------------------------------------------------------------------------------------

    def _one(self, event: AuditEvent, at: str, counts: EventCounts) -> None:
        known = self._series.get(event.key)
        if known is not None:
            state = self._update(event, known, at, counts)
            if state == _UPDATED:
                return
            del self._series[event.key]
            if state == _FOREIGN:
                return
        timeout = self._spend(event.namespace)  # the bounds first: an Event left out costs no body
        try:
            created = self.events.create_namespaced_event(
                event.namespace, cast(Any, event.body(at, self.instance)), _request_timeout=timeout
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            if event.once:  # there already: recorded (by this writer or its predecessor), or someone else's
                self._series[event.key] = _Series(event.namespace, event.name, "", 0)
                counts.recorded += 1
                return
            self._adopt(event, at, counts)
            return
        counts.created += 1
        self._series[event.key] = _Series(event.namespace, event.name, _uid(created), 1)

    def _update(self, event: AuditEvent, known: _Series, at: str, counts: EventCounts) -> str:
        """Patch the series of an Event this writer knows: _UPDATED, or _GONE (expired: 404), or _FOREIGN (the
        UID test failed: someone else's Event holds the name now)."""
        count = known.count + 1
        patch: list[Json] = [
            {"op": "test", "path": "/metadata/uid", "value": known.uid},
            {"op": "add", "path": "/series", "value": {"count": count, "lastObservedTime": at}},
        ]
        try:
            self._patch(event.namespace, known.name, patch)
        except ApiException as exc:
            if exc.status == 404:
                return _GONE
            if exc.status == 422:
                counts.foreign += 1
                return _FOREIGN
            raise
        known.count = count
        counts.updated += 1
        return _UPDATED

    def _adopt(self, event: AuditEvent, at: str, counts: EventCounts) -> None:
        """An Event at the name already: adopt it when this controller wrote it about this object and cause (the
        test operations; the answer gives its UID and count) and count it up; leave it alone otherwise."""
        body = event.body(at, self.instance)
        tests = [{"op": "test", "path": f"/{key}", "value": body[key]} for key in ADOPTED_WHEN]
        try:
            found = self._patch(event.namespace, event.name, tests)
        except ApiException as exc:
            if exc.status not in (404, 422):
                raise
            counts.foreign += exc.status == 422
            return  # deleted meanwhile (the next run creates it), or not this writer's
        count = int(found.series.count) if found.series is not None else 1
        known = _Series(event.namespace, event.name, _uid(found), count)
        self._series[event.key] = known
        self._update(event, known, at, counts)

    def _patch(self, namespace: str, name: str, patch: list[Json]) -> Any:
        return self.events.patch_namespaced_event(
            name, namespace, patch, _content_type=JSON_PATCH, _request_timeout=self._spend(namespace)
        )

    def _spend(self, namespace: str) -> float:
        """Count one write against the run's bounds (_LeftOut past them); the seconds it may take."""
        if self._spent >= self.run_limit:
            raise _LeftOut("run")
        if self._writes[namespace] >= self.namespace_limit:
            raise _LeftOut("namespace")
        timeout = write_time(self.may_write, REQUEST_TIMEOUT, "Event")
        self._writes[namespace] += 1
        self._spent += 1
        self._after = namespace
        return timeout

    def _failed(self, event: AuditEvent, exc: BaseException) -> None:
        """Log a failed write, at most once a minute (the others are counted in the next line)."""
        if (count := self._failures.due("failed")) is None:
            return
        more = f" ({count - 1} more failed since the last line)" if count > 1 else ""
        log.warning(
            "events: %s about %s %s/%s not recorded: %s%s",
            event.reason,
            event.regarding.kind,
            event.namespace,
            event.regarding.name,
            describe(exc),
            more,
        )


def rotation(events: Iterable[AuditEvent], turns: Turns, after: str, share: int) -> tuple[list[AuditEvent], int]:
    """The order in which to try `events` this run, and how many are past their namespace's `share`.

    In each namespace, the `share` Events tried least recently (never first, then by key); one namespace per round,
    the rounds in namespace order starting after `after`, the namespace last written to. So a namespace of many
    Events sees each of them within as many runs as its share takes to cover them, and when the run's bound cuts a
    round, the next run goes on where it stopped instead of at the first namespace again. Each try costs at least one
    write, so a namespace never gets more than its share tried: those past it are left out untried."""
    queues: dict[str, list[AuditEvent]] = defaultdict(list)
    for event in events:
        queues[event.namespace].append(event)
    past = 0
    chosen: dict[str, list[AuditEvent]] = {}
    for namespace, queue in queues.items():
        past += max(0, len(queue) - share)
        chosen[namespace] = heapq.nsmallest(share, queue, key=lambda e: (turns.get(e.key, 0), e.key))
    names = sorted(chosen)
    start = bisect.bisect_right(names, after)
    rounds = [chosen[namespace] for namespace in names[start:] + names[:start]]
    return [queue[turn] for turn in range(share) for queue in rounds if turn < len(queue)], past


def _uid(event: Any) -> str:
    """The UID of an Event the API answered with."""
    return str(getattr(event.metadata, "uid", None) or "")


def _publish(counts: EventCounts) -> None:
    metrics.EVENTS_WRITTEN.labels("created").inc(counts.created)
    metrics.EVENTS_WRITTEN.labels("updated").inc(counts.updated)
    metrics.EVENTS_LEFT_OUT.labels("run").inc(counts.left_out_run)
    metrics.EVENTS_LEFT_OUT.labels("namespace").inc(counts.left_out_namespace)
    metrics.EVENTS_FAILED.inc(counts.failed)
