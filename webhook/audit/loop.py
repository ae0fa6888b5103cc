"""The audit inside `serve`: as soon as the cluster state the server holds has first synced, then every
`--audit-interval` seconds, on that state.

It reads the in-memory index, and on live state lists the workloads once per run (webhook/audit/workloads.py),
and publishes `storage_affinity_audit_findings{family,namespace}` (by family alone unless `by_namespace`: the
scrape needs no certificate, and a namespace's name can be a secret of its own),
`storage_affinity_audit_stuck_pods{cause}`, `storage_affinity_audit_failed_pods{cause}` and
`storage_affinity_audit_last_run_timestamp_seconds`, and per
loadAffinity entry in force its matching nodes with and without a Ready Velero node-agent
(`storage_affinity_load_affinity_nodes`). One worker of a server audits: the one holding an advisory lock on a file
in the directory its workers share (the lock goes with a dead worker, and a sibling takes over at its next turn).
That worker also writes the policy reports and records Events on stuck storage pods when its replica holds the Lease
(webhook/audit/lease.py: one writer across replicas; webhook/audit/reports.py and webhook/audit/events.py: what it
writes). The audit yields to the worker's other greenlets every few
milliseconds, so reviews keep being answered while 100,000 pods are audited: between objects, and within one between
its parts that each run under a review deadline (rules/deadline.py), so no stretch is longer than one deadline. An
object past the review budget (rules/budget.py) or a deadline is reported from then on without being evaluated
again until it changes (the index replaces a changed object; a listed workload changes its resourceVersion). What
counts as a finding or a
stuck pod is rules/audit.py and rules/causes/; this module is when the audit runs and where its results go.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import IO, Protocol, TypeVar, cast

from rules import budget
from rules.audit import AuditFinding, ObjectAudit, audit_objects, finding_families
from rules.auditevents import job_key
from rules.causes import CODES, ENDED_CODES
from rules.cluster import LookupFailed
from rules.loadaffinity.mutation import source_settings
from rules.loadaffinity.nodeagents import entry_nodes
from rules.model import Json
from webhook import metrics
from webhook.audit.events import EventWriter
from webhook.audit.lease import LeaseElector, NotLeader
from webhook.audit.reports import ReportWriter, WriteCounts
from webhook.runtime import Runtime
from webhook.state.apierrors import describe

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The longest stretch of auditing without handing the worker back to the requests it serves, and the pause then.
SLICE = 0.001
PAUSE = 0.0005
#: How often a loop with nothing to audit yet (state not synced, no valid policy) looks again.
WAIT_POLL = 1.0


class Indexed(Protocol):
    """A view that can list what it holds: the static index, or the live state over its index."""

    def objects(self, kind: str) -> list[Json]: ...


class AuditLoop:
    def __init__(
        self,
        runtime: Runtime,
        interval: float,
        lock_file: Path | None = None,
        reports: ReportWriter | None = None,
        lease: LeaseElector | None = None,
        *,
        workloads: Callable[[], Iterable[Json]] | None = None,
        by_namespace: bool = False,
        events: EventWriter | None = None,
    ) -> None:
        self.runtime = runtime
        self.interval = interval
        self.lock_file = lock_file
        self.reports = reports
        self.lease = lease  # None: this process writes reports alone (no other replica)
        self.workloads = workloads  # lists the workloads from the API (webhook/audit/workloads.py); None: none
        self.by_namespace = by_namespace  # the findings' series per namespace (serve --metrics-namespaces)
        self.events = events  # records Events on stuck pods and their owners (webhook/audit/events.py); None: off
        self.last_write: WriteCounts | None = None  # what the last run wrote, when it wrote reports
        self._lock: IO[str] | None = None
        #: Objects past the review budget, by (kind, namespace, name): the object as audited and its report.
        self._refused: dict[tuple[str, str, str], tuple[Json, ObjectAudit]] = {}
        self._stopped = threading.Event()

    def start(self) -> AuditLoop:
        threading.Thread(target=self._loop, name="audit", daemon=True).start()
        return self

    def stop(self) -> None:
        """End the loop at its next turn (a run in progress finishes)."""
        self._stopped.set()

    def _loop(self) -> None:
        self._leader()  # the worker that takes the lock competes for the Lease from now on
        while not self._stopped.is_set():
            due = self._due()
            if due and self._leader():
                try:
                    self.run_once()
                except Exception:  # a failed audit must not end the loop (or the worker)
                    log.exception("audit of existing objects failed")
            self._stopped.wait(self.interval if due else min(self.interval, WAIT_POLL))

    def _due(self) -> bool:
        """Whether there is something to audit: the state's first lists have landed and a valid policy is in force.
        Until then the loop looks every WAIT_POLL seconds, so the first audit follows the first sync closely
        instead of an interval after start."""
        return self.runtime.loaded() and self.runtime.unavailable() is None

    def _leader(self) -> bool:
        """True while this worker holds the replica's audit lock (taken without waiting); from then on it
        competes for the Lease."""
        if self.lock_file is not None and self._lock is None:
            handle = self.lock_file.open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
            self._lock = handle
        if self.lease is not None:
            self.lease.start()  # once: later calls find it running
        return True

    def run_once(self) -> dict[tuple[str, str], int]:
        """Audit once and publish; returns the finding counts by (family, namespace), namespace "" unless
        `by_namespace`. The series are replaced whole: a namespace without findings now (deleted, or fixed) has
        none, and every family one at namespace "" (0 when it has none)."""
        started = time.monotonic()
        runtime = self.runtime
        view = cast(Indexed, runtime.view)
        held = [*view.objects("Pod"), *view.objects("ConfigMap"), *self._listed_workloads()]
        now = datetime.now(UTC)
        known: list[tuple[Json, ObjectAudit]] = []
        fresh: list[Json] = []
        audited = self._unrefused(held, known, fresh) if self._refused else held
        slices = _Slices()
        reports = audit_objects(
            _yielding(audited, slices),
            runtime.view,
            runtime.policy,
            runtime.namespace,
            now,
            ordered=False,
            between=slices.pause,
        )
        # Every object held is of an audited kind, so the reports are the objects', one each and in their order:
        # the one pass over them reads each object beside its report, and no writer walks the objects again.
        gathered = _Gathered(self.by_namespace, uids=self.reports is not None, events=self.events is not None)
        objects = fresh if self._refused else held
        for report, obj in _yielding(chain(zip(reports, objects, strict=True), ((r, o) for o, r in known))):
            gathered.add(report, obj)
        self._remember_refusals(gathered.refused, known)
        counts, stuck = gathered.counts, gathered.stuck
        for code in CODES:  # every code, so that a cause that went away reads 0
            metrics.AUDIT_STUCK.labels(code).set(stuck[code])
        for code in ENDED_CODES:
            metrics.AUDIT_FAILED.labels(code).set(stuck[code])
        findings: dict[tuple[str, ...], float] = {(family, ""): 0 for family in finding_families()}
        for key, count in counts.items():
            findings[key] = count
        metrics.AUDIT_FINDINGS.publish(findings)
        self._publish_entry_nodes()
        metrics.AUDIT_LAST_RUN.set(time.time())
        if self.reports is not None:
            self._write_reports(self.reports, gathered)
        if self.events is not None:
            self._record_events(self.events, gathered)
        total = len(reports) + len(known)
        _release(reports)
        log.info(
            "audit: %d objects, %d findings, %d storage pods stuck, in %.1f s",
            total,
            sum(counts.values()),
            sum(stuck[code] for code in CODES),  # the line bench/audit.py reads; ended pods are in the metrics
            time.monotonic() - started,
        )
        return dict(counts)

    def _unrefused(self, held: list[Json], known: list[tuple[Json, ObjectAudit]], fresh: list[Json]) -> Iterator[Json]:
        """The objects to audit, also kept in `fresh`; the objects refused by the budget or the deadline on an
        earlier run and unchanged since go to `known` with their reports. Unchanged: the very object the index held
        then (by identity: the objects are held here, so an id found is that object's), or for a workload, listed
        anew each run, the same resourceVersion. A generator, so that the audit's time slices cover it."""
        refused = {id(obj): report for obj, report in self._refused.values()}
        versions = {(key, v): report for key, (obj, report) in self._refused.items() if (v := _version(obj))}
        for obj in held:
            report = refused.get(id(obj))
            if report is None and versions and (version := _version(obj)):
                report = versions.get((_identity(obj), version))
            if report is None:
                fresh.append(obj)
                yield obj
            else:
                known.append((obj, report))

    def _remember_refusals(
        self,
        new: dict[tuple[str, str, str], tuple[Json, ObjectAudit, AuditFinding]],
        known: list[tuple[Json, ObjectAudit]],
    ) -> None:
        """Remember each object the budget or the deadline refused on this run (logged once), and forget those gone
        or changed: what `known` does not hold again."""
        refused = {_identity(obj): (obj, report) for obj, report in known}
        for key, (obj, report, over) in new.items():
            if key in refused:
                continue
            refused[key] = (obj, report)
            log.warning(
                "%s %s/%s is past the review budget (%s): reported, not audited again until it changes",
                *key,
                f"{over.field}: {over.message}" if over.field else over.message,
            )
        self._refused = refused

    def _listed_workloads(self) -> list[Json]:
        """The workloads, listed for this run; none when the API refuses or fails (the run goes on without them)."""
        if self.workloads is None:
            return []
        try:
            return list(self.workloads())
        except Exception as exc:
            log.warning("audit: workloads not listed, audited without them: %s", describe(exc))
            return []

    def _write_reports(self, writer: ReportWriter, gathered: _Gathered) -> None:
        """The reports, if this replica holds the lease; a failure waits for the next run."""
        self.last_write = None
        if self.lease is not None and not self.lease.holds():
            writer.forget()  # another replica may write meanwhile: which reports are this one's is unknown now
            return
        try:
            self.last_write = writer.write(_yielding(gathered.with_findings), gathered.uids)
        except NotLeader:
            log.info("policy reports: the lease ran out during the run; the holder writes them")
        except Exception as exc:
            log.warning("policy reports not written: %s", describe(exc))

    def _record_events(self, writer: EventWriter, gathered: _Gathered) -> None:
        """The Events, if this replica holds the lease, after the audit's own work; a failure is the writer's to
        log and never ends the run."""
        if self.lease is None or not self.lease.holds():
            writer.forget()  # another replica records them: which series are this one's is unknown now
            return
        try:
            slices = _Slices()
            writer.record(gathered.causes, gathered.jobs, self.runtime.view, self.runtime.policy, between=slices.pause)
        except Exception as exc:
            log.warning("events not recorded: %s", describe(exc))

    def _publish_entry_nodes(self) -> None:
        """Per loadAffinity entry in force, its matching nodes with and without a Ready node-agent."""
        runtime = self.runtime
        try:
            settings, _ = source_settings(runtime.view, runtime.policy)
            found = entry_nodes(settings.load_affinity, runtime.view, runtime.policy.velero_namespace)
        except LookupFailed:
            return  # not synced yet: the next run publishes
        series: dict[tuple[str, ...], float] = {}
        for entry in found:
            storage_class = entry.storage_class or "*"
            series[(str(entry.index), storage_class, "ready")] = entry.with_agent
            series[(str(entry.index), storage_class, "missing")] = entry.without
        metrics.LOAD_AFFINITY_NODES.publish(series)  # an entry that is gone is no series, not a zero


class _Gathered:
    """What the one pass over a run's reports, each beside its object, gathers: the finding and cause counts the
    metrics publish, the objects refused by the budget, the reports with findings and their objects' UIDs (what the
    policy reports hold), and for the Events the pods with a cause or a Multi-Attach finding and the listed Jobs
    (webhook/audit/events.py `record`)."""

    def __init__(self, by_namespace: bool, *, uids: bool, events: bool) -> None:
        self.by_namespace, self.want_uids, self.want_events = by_namespace, uids, events
        self.counts: Counter[tuple[str, str]] = Counter()
        self.stuck: Counter[str] = Counter()
        self.refused: dict[tuple[str, str, str], tuple[Json, ObjectAudit, AuditFinding]] = {}
        self.with_findings: list[ObjectAudit] = []
        self.uids: dict[tuple[str, str, str], str] = {}
        self.causes: list[tuple[ObjectAudit, Json]] = []
        self.jobs: dict[tuple[str, str], Json] = {}

    def add(self, report: ObjectAudit, obj: Json) -> None:
        if report.findings:
            namespace = report.namespace if self.by_namespace else ""
            self.counts.update((f.family, namespace) for f in report.findings)
            self.with_findings.append(report)
            key = (report.kind, report.namespace, report.name)
            if over := next((f for f in report.findings if f.family == budget.FAMILY), None):
                self.refused[key] = (obj, report, over)
            if self.want_uids and (uid := (obj.get("metadata") or {}).get("uid")):
                self.uids[key] = str(uid)
        if report.cause is not None:
            self.stuck[report.cause.code] += 1
        if self.want_events:
            if report.kind == "Pod" and (report.cause is not None or report.multi_attach):
                self.causes.append((report, obj))
            elif (job := job_key(obj)) is not None:
                self.jobs[job] = obj


class _Slices:
    """The audit's time slices: it hands the worker back once SLICE seconds have passed since it last did.

    A short sleep rather than `sleep(0)`: under gevent, `sleep(0)` resumes this greenlet before the hub polls the
    sockets, so requests that arrived meanwhile waited for the whole audit (measured: /mutate p50 114 ms during
    an audit of 20,000 pods, against 6 ms idle). A timer lets the hub poll and answer them first.
    """

    def __init__(self) -> None:
        self.mark = time.monotonic()

    def pause(self) -> None:
        """Hand the worker back if this slice is spent: between objects, and within one object's audit between
        the parts that each run under a review deadline (rules/audit.py), never inside one."""
        if time.monotonic() - self.mark > SLICE:
            time.sleep(PAUSE)
            self.mark = time.monotonic()


def _yielding(objects: Iterable[T], slices: _Slices | None = None) -> Iterator[T]:
    """The objects, handing the worker back every SLICE seconds of auditing (`slices`: shared with other pauses)."""
    slices = slices or _Slices()
    for obj in objects:
        yield obj
        slices.pause()


def _release(reports: list[ObjectAudit]) -> None:
    """Empty the run's reports a few hundred at a time, in time slices: freeing 20,000 at once when the run
    returned held the worker 7 ms."""
    for _ in _yielding(range(0, len(reports), _RELEASED_AT_ONCE)):
        del reports[-_RELEASED_AT_ONCE:]


_RELEASED_AT_ONCE = 500


def _version(obj: Json) -> str:
    """The object's resourceVersion, which a workload keeps when trimmed (webhook/audit/workloads.py); "" when
    unknown (the index keeps none for pods: it replaces an object that changes)."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _identity(obj: Json) -> tuple[str, str, str]:
    metadata = obj.get("metadata") or {}
    return str(obj.get("kind")), str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def lock_path() -> Path | None:
    """The server-wide lock file: in the metrics directory `serve` creates for its workers before forking."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(directory) / "audit.lock" if directory else None
