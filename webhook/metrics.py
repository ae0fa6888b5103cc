"""Prometheus metrics, correct across gunicorn workers.

When `PROMETHEUS_MULTIPROC_DIR` is set (the `serve` command sets it before any worker starts), every worker
writes its samples to files there and `/metrics` aggregates them; otherwise the default registry is used. Gauges
aggregate over live workers only (`livemax`/`livemin`): a dead worker's last value would otherwise stay forever
and keep an alert firing until the pod restarts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import orjson
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from rules.kube.workloads import TEMPLATE_PATHS
from rules.outcomes import STARTED

#: The kinds and operations a review can name in a label; any other is counted as OTHER. A label value taken
#: from a request unchecked makes one series per distinct value: in every worker's registry and metrics file,
#: for as long as the worker lives, and in every scrape.
KINDS = frozenset({"Pod", "ConfigMap", *TEMPLATE_PATHS})  # the kinds the webhooks are registered for
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
OTHER = "other"


class _RequestCounter:
    """The requests counter, whose `kind` and `operation` labels come from the request and so are bounded."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter

    def labels(self, endpoint: str, kind: str, operation: str, outcome: str) -> Counter:
        kind = kind if kind in KINDS else OTHER
        operation = operation if operation in OPERATIONS else OTHER
        return self.counter.labels(endpoint, kind, operation, outcome)


REQUESTS = _RequestCounter(
    Counter(
        "storage_affinity_admission_requests_total",
        "Admission reviews answered, by endpoint, kind, operation and outcome (allowed, patched, denied, error).",
        ["endpoint", "kind", "operation", "outcome"],
    )
)
DURATION = Histogram(
    "storage_affinity_admission_duration_seconds",
    "Time to answer one admission review, from body read to response encoded.",
    ["endpoint"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
LOOKUP_FAILURES = Counter(
    "storage_affinity_lookup_failures_total",
    "Decisions taken without the cluster state they needed, following onLookupFailure.",
    ["endpoint", "action"],
)
RULE_ERRORS = Counter(
    "storage_affinity_rule_errors_total",
    "Rules that raised (a bug): the mutation is discarded, the validation denies unless enforcement is warn.",
    ["endpoint", "rule"],
)
BAD_REQUESTS = Counter(
    "storage_affinity_bad_requests_total",
    "Bodies refused before review (not an AdmissionReview, malformed object, too large).",
    ["endpoint", "status"],
)
UNAVAILABLE = Counter(
    "storage_affinity_unavailable_total",
    "Reviews answered 503 because no valid policy is in effect (kube-apiserver applies the failurePolicy).",
    ["endpoint"],
)
CLIENT_REFUSED = Counter(
    "storage_affinity_client_certificate_refused_total",
    "Reviews answered 403 because the client presented no certificate (serve --client-ca): kube-apiserver not "
    "configured to present one applies the failurePolicy to every review.",
    ["endpoint"],
)
POLICY_ERRORS = Gauge(
    "storage_affinity_policy_errors",
    "Problems in the last policy seen that was refused (0 when the policy in effect is the latest).",
    multiprocess_mode="livemax",
)
CERT_EXPIRY = Gauge(
    "storage_affinity_certificate_expiry_timestamp_seconds",
    "Unix time at which the serving certificate expires.",
    multiprocess_mode="livemax",
)
CACHE_SYNCED = Gauge(
    "storage_affinity_cache_synced",
    "1 when the cluster state of a resource is synced, 0 otherwise.",
    ["resource"],
    multiprocess_mode="livemin",
)
CACHE_AGE = Gauge(
    "storage_affinity_cache_age_seconds",
    "Seconds since the last list or watch event of a resource.",
    ["resource"],
    multiprocess_mode="livemax",
)


class Snapshot(Collector):
    """A gauge whose series are replaced whole by each `publish`: a series the latest publish lacks is gone from
    the scrape, not left at its last value or at 0 (a deleted namespace's, an entry removed from the policy).

    prometheus_client's multiprocess mode cannot remove a series (each worker's file keeps every label set it ever
    set, until the worker dies), so there the one worker that publishes (the audit's) writes the snapshot to a file
    in the directory the workers share, replaced atomically, and every worker's `/metrics` reads it. `start` gives
    the series every scrape shows, at 0 until a publish says otherwise (what alerts and panels read)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, tuple(labels)
        self._baseline: dict[tuple[str, ...], float] = {}
        self._latest: dict[tuple[str, ...], float] = {}
        REGISTRY.register(self)

    def start(self, keys: Iterable[tuple[str, ...]]) -> None:
        self._baseline = dict.fromkeys(keys, 0.0)

    def publish(self, values: Mapping[tuple[str, ...], float]) -> None:
        self._latest = dict(values)
        if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            path = Path(directory) / f"{self.name}.snapshot.json"
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_bytes(orjson.dumps([[*key, value] for key, value in self._latest.items()]))
            temporary.replace(path)

    def values(self) -> dict[tuple[str, ...], float]:
        """What the scrape shows: the baseline, overlaid with the latest publish (of any worker of the server)."""
        latest = self._latest
        if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            try:
                rows = orjson.loads((Path(directory) / f"{self.name}.snapshot.json").read_bytes())
                latest = {tuple(row[:-1]): float(row[-1]) for row in rows}
            except (OSError, ValueError):
                latest = {}
        return {**self._baseline, **latest}

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, value in sorted(self.values().items()):
            family.add_metric(key, value)
        yield family


AUDIT_FINDINGS = Snapshot(
    "storage_affinity_audit_findings",
    "Findings of the last audit of existing objects, by rule family, and by namespace only when the server runs "
    "with --metrics-namespaces (namespace is empty otherwise).",
    ["family", "namespace"],
)
AUDIT_LAST_RUN = Gauge(
    "storage_affinity_audit_last_run_timestamp_seconds",
    "Unix time at which the last audit of existing objects finished.",
    multiprocess_mode="livemax",
)
LOAD_AFFINITY_NODES = Snapshot(
    "storage_affinity_load_affinity_nodes",
    "Known nodes matching each loadAffinity entry in force (entry index, its StorageClass or *), by whether a "
    "Velero node-agent is Ready on them (node_agent: ready or missing), as of the last audit.",
    ["entry", "storage_class", "node_agent"],
)

REPORT_SQUATTERS = Gauge(
    "storage_affinity_report_squatters",
    "Namespaces with findings whose policy report name is held by a report the writer did not create (so their "
    "findings are not published), as of the writer's last run.",
    multiprocess_mode="livemax",
)

AUDIT_STUCK = Gauge(
    "storage_affinity_audit_stuck_pods",
    "Storage pods stuck longer than the policy's audit.stuckAfterSeconds at the last audit, by cause code.",
    ["cause"],
    multiprocess_mode="livemax",
)

AUDIT_FAILED = Gauge(
    "storage_affinity_audit_failed_pods",
    "Storage pods that ended Failed within the policy's audit.failedWithinSeconds at the last audit, by cause code.",
    ["cause"],
    multiprocess_mode="livemax",
)

DECISIONS = Counter(
    "storage_affinity_admission_decisions_total",
    "What admission decided, by rule family and decision (placed, pinned, restricted, left_alone with why, "
    "refused): rules/outcomes.py.",
    ["family", "decision", "why"],
)

EVENTS_WRITTEN = Counter(
    "storage_affinity_events_written_total",
    "Kubernetes Events the audit wrote about stuck storage pods and their owners, by write: created (the first of "
    "a series) or updated (a later run's series count).",
    ["write"],
)
EVENTS_LEFT_OUT = Counter(
    "storage_affinity_events_left_out_total",
    "Event writes the audit left out, by the bound that held them: run (at most 100 writes per audit run) or "
    "namespace (at most 10 per namespace and run).",
    ["limit"],
)
EVENTS_FAILED = Counter(
    "storage_affinity_events_failed_total",
    "Event writes the API refused or that failed (logged at most once a minute); the audit goes on.",
)
#: The labels of the Event counters, created at zero with the audit's other series.
EVENT_WRITES = ("created", "updated")
EVENT_LIMITS = ("run", "namespace")

#: The gauges replaced whole by each audit: `/metrics` in multiprocess mode reads their files.
SNAPSHOTS = (AUDIT_FINDINGS, LOAD_AFFINITY_NODES)

#: The outcomes (only a mutating endpoint patches) and onLookupFailure actions a review is counted under, and the
#: statuses of refused bodies that every installation meets (webhook/app/endpoints.py).
OUTCOMES = ("allowed", "patched", "denied")
LOOKUP_ACTIONS = ("allow", "deny")
REFUSED_STATUSES = ("400", "413")


def start_series(
    endpoints: Mapping[str, bool],
    audit_families: Iterable[str] = (),
    causes: Iterable[str] = (),
    failed_causes: Iterable[str] = (),
) -> None:
    """Create at zero, in this worker, the labelled series that alerts and dashboard panels read; `endpoints` maps
    each endpoint to whether it mutates.

    A labelled series is born with its first event: until then a panel shows "No data" rather than 0, and `rate()`
    misses that first event (it needs a sample before it). Each worker writes its own samples in multiprocess mode,
    so each calls this. Reviews are created for kind Pod and operation CREATE, which every installation sees
    (panels and alerts sum over kind and operation); audit findings under an empty namespace.
    """
    for endpoint, mutating in endpoints.items():
        for outcome in OUTCOMES if mutating else tuple(o for o in OUTCOMES if o != "patched"):
            REQUESTS.labels(endpoint, "Pod", "CREATE", outcome)
        DURATION.labels(endpoint)
        for action in LOOKUP_ACTIONS:
            LOOKUP_FAILURES.labels(endpoint, action)
        for status in REFUSED_STATUSES:
            BAD_REQUESTS.labels(endpoint, status)
        UNAVAILABLE.labels(endpoint)
        CLIENT_REFUSED.labels(endpoint)
    AUDIT_FINDINGS.start((family, "") for family in audit_families)
    for cause in causes:
        AUDIT_STUCK.labels(cause)
    for cause in failed_causes:
        AUDIT_FAILED.labels(cause)
    for decided in STARTED:
        DECISIONS.labels(*decided)
    if causes:  # the audit runs in this worker: its Event counters too
        for write in EVENT_WRITES:
            EVENTS_WRITTEN.labels(write)
        for limit in EVENT_LIMITS:
            EVENTS_LEFT_OUT.labels(limit)


def render() -> tuple[bytes, str]:
    """The exposition text: aggregated over workers in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        for snapshot in SNAPSHOTS:
            registry.register(snapshot)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    """Drop a dead worker's live gauges (gunicorn's child_exit hook)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
