"""Records the audit's Events (content from rules/auditevents.py) from the replica that holds the Lease.

A series, not a flood, as client-go's events broadcaster keeps one (k8s.io/client-go/tools/events): the first
time an object has a cause, an Event is created; each later run that finds the same cause patches the Event's
`series` (count and lastObservedTime) and nothing else. A cause that clears is forgotten, so its Event gets no more
updates; another cause is another Event. The Event's name follows from the object and the cause
(`AuditEvent.name`), so a replica that takes the Lease over, or a restarted one, finds the series already there (a
create answers 409): it adopts the Event if this controller wrote it about that object and cause (a JSON Patch whose
`test` operations check it, and whose answer gives the count), and leaves any other alone.

Every update is a JSON Patch that tests the Event's UID first: an Event deleted and re-created by someone else
under the name is never changed. An Event that expired (kube-apiserver's `--event-ttl`, an hour by default) answers
404 and is created anew, as client-go does.

Bounded: at most RUN_LIMIT writes per run and NAMESPACE_LIMIT per namespace, taken round-robin across namespaces
(one write per namespace per round), so a tenant with 500 stuck pods gets ten writes and never another namespace's
share; what is left out is counted in `storage_affinity_events_left_out_total`. Each request is bounded by what
the Lease leaves and REQUEST_TIMEOUT; a run stops after FAILURES_PER_RUN failed writes (an API that is down costs a
few timeouts, not a hundred). Failures are counted and logged at most once a minute; they never fail the audit.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client import ApiException

from rules.audit import ObjectAudit
from rules.auditevents import AuditEvent, audit_events, job_key
from rules.cluster import ClusterView
from rules.model import Json
from rules.policy import Policy
from webhook import metrics
from webhook.logs import Throttle
from webhook.state.apierrors import describe

log = logging.getLogger(__name__)

RUN_LIMIT = 100
NAMESPACE_LIMIT = 10
REQUEST_TIMEOUT = 5.0
FAILURES_PER_RUN = 3
JSON_PATCH = "application/json-patch+json"


class NotLeader(Exception):
    """The lease ran out (or was never held): this replica must not write."""


class _LeftOut(Exception):
    """A write past a bound: `limit` is `run` or `namespace`."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


_UPDATED, _GONE, _FOREIGN = "updated", "gone", "foreign"
#: The fields an Event at this writer's name must hold for the writer to adopt it (JSON Patch `test` operations).
ADOPTED_WHEN = ("reportingController", "reason", "regarding", "type")


def instance() -> str:
    """This replica as Events name it (`reportingInstance`): the pod name (the chart's POD_NAME), else the host."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Series:
    """An Event this writer created or adopted: where it is, its UID, and the count it last wrote."""

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


class EventWriter:
    """`may_write()` is how many seconds this process may still write (the lease's `remaining`)."""

    def __init__(
        self,
        api: client.ApiClient,
        may_write: Callable[[], float],
        reporting_instance: str | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.events = client.EventsV1Api(api)
        self.may_write = may_write
        self.instance = reporting_instance or instance()
        self.clock = clock
        self._series: dict[tuple[str, str], _Series] = {}
        self._writes: defaultdict[str, int] = defaultdict(int)  # this run's writes by namespace
        self._failures = Throttle(clock=clock)  # a line a minute about failed writes, counting the others

    def forget(self) -> None:
        """Forget the series (the lease was lost: another replica may have written since; the names find them)."""
        self._series = {}

    def record(
        self,
        reports: Iterable[ObjectAudit],
        held: Iterable[Mapping[str, Any]],
        view: ClusterView,
        policy: Policy,
        *,
        now: datetime | None = None,
        between: Callable[[], None] = lambda: None,
    ) -> EventCounts:
        """Record the Events the run's reports call for. `held` is every object the run audited (pods, listed
        Jobs), read once for the few reports with a cause; both are iterated in the audit's time slices, and
        `between` is called between the pods whose Events are built."""
        stuck = {(r.namespace, r.name): r for r in reports if r.kind == "Pod" and (r.cause or r.multi_attach)}
        wanted: list[AuditEvent] = []
        if stuck:
            pods: dict[tuple[str, str], Mapping[str, Any]] = {}
            jobs: dict[tuple[str, str], Mapping[str, Any]] = {}
            for obj in held:
                if obj.get("kind") == "Pod":
                    metadata = obj.get("metadata") or {}
                    key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
                    if key in stuck:
                        pods[key] = obj
                elif (job := job_key(obj)) is not None:
                    jobs[job] = obj
            for key, report in stuck.items():
                wanted += audit_events(report, pods.get(key) or {}, jobs, view, policy)
                between()
        return self.write(wanted, now or datetime.now(UTC))

    def write(self, wanted: Iterable[AuditEvent], now: datetime) -> EventCounts:
        """Create or update each wanted Event within the bounds; forget the series of causes that cleared."""
        counts = EventCounts()
        unique = {event.key: event for event in wanted}
        at = micro_time(now)
        self._writes = defaultdict(int)
        try:
            for event in _round_robin(unique.values()):
                if counts.failed >= FAILURES_PER_RUN:
                    counts.left_out_run += 1  # the API fails: the rest wait for the next run
                    continue
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
        except NotLeader:
            log.info("events: the lease ran out during the run; the holder records them")
            self.forget()
            return counts
        finally:
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
        if sum(self._writes.values()) >= RUN_LIMIT:
            raise _LeftOut("run")
        if self._writes[namespace] >= NAMESPACE_LIMIT:
            raise _LeftOut("namespace")
        timeout = self._guard()
        self._writes[namespace] += 1
        return timeout

    def _guard(self) -> float:
        """The seconds the next request may take; NotLeader when the lease leaves none."""
        left = self.may_write()
        if left <= 0:
            raise NotLeader("the lease is not held: no Event is written")
        return min(left, REQUEST_TIMEOUT)

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


def _round_robin(events: Iterable[AuditEvent]) -> Iterator[AuditEvent]:
    """The events one namespace at a time per round, namespaces in order: the bounds then cut every namespace's
    share alike, and a namespace of many stuck pods takes no other's."""
    queues: dict[str, deque[AuditEvent]] = defaultdict(deque)
    for event in events:
        queues[event.namespace].append(event)
    order = sorted(queues)
    while order:
        for namespace in list(order):
            queue = queues[namespace]
            yield queue.popleft()
            if not queue:
                order.remove(namespace)


def _uid(event: Any) -> str:
    """The UID of an Event the API answered with."""
    return str(getattr(event.metadata, "uid", None) or "")


def _publish(counts: EventCounts) -> None:
    metrics.EVENTS_WRITTEN.labels("created").inc(counts.created)
    metrics.EVENTS_WRITTEN.labels("updated").inc(counts.updated)
    metrics.EVENTS_LEFT_OUT.labels("run").inc(counts.left_out_run)
    metrics.EVENTS_LEFT_OUT.labels("namespace").inc(counts.left_out_namespace)
    metrics.EVENTS_FAILED.inc(counts.failed)
