"""Assemble a Runtime and its app from Settings: policy, cluster state, readiness checks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from flask import Flask

from rules.audit import finding_families
from rules.causes import CODES, ENDED_CODES
from rules.model import Json
from rules.policy import Policy
from webhook import metrics
from webhook.app.endpoints import ENDPOINTS, create_app
from webhook.policy.file import load_policy_file
from webhook.runtime import Runtime
from webhook.settings import Settings
from webhook.state.static import StaticCacheGauges, load_static_state

if TYPE_CHECKING:
    from webhook.audit.events import EventWriter
    from webhook.audit.lease import LeaseElector
    from webhook.audit.reports import ReportWriter

log = logging.getLogger(__name__)


def build_runtime(settings: Settings) -> Runtime:
    policy, source = load_policy_file(settings.policy_file)
    if settings.live:
        return _live_runtime(settings, policy, source)
    view = load_static_state(settings.cluster_files)
    StaticCacheGauges(read_at=time.monotonic()).start()
    return Runtime(
        policy=policy, view=view, namespace=settings.namespace, cert_file=settings.cert, policy_source=source
    )


def _live_runtime(settings: Settings, policy: Policy, source: str) -> Runtime:
    """State from the API, listed and watched by this worker; the policy ConfigMap overrides the base policy."""
    from webhook.policy.lastgood import ReplicaPolicy
    from webhook.state.apisource import load_configuration
    from webhook.state.live import LiveClusterState
    from webhook.state.watch import LiveOptions

    configuration, api_source = load_configuration(settings.kubeconfig)
    options = LiveOptions(
        namespace=settings.namespace,
        policy_configmap=settings.policy_configmap,
        lookup_timeout=settings.lookup_timeout,
    )
    state = LiveClusterState(configuration, options)
    runtime = Runtime(
        policy=policy, view=state, namespace=settings.namespace, cert_file=settings.cert, policy_source=source
    )
    replica = ReplicaPolicy(settings.replica_dir) if settings.replica_dir is not None else None
    state.attach(runtime, base=(policy, source), replica=replica)
    state.start()
    log.info("live cluster state from %s", api_source)
    return runtime


def build_app(settings: Settings) -> Flask:
    runtime = build_runtime(settings)
    auditing = settings.audit_interval > 0
    metrics.start_series(
        {name: endpoint.mutating for name, endpoint in ENDPOINTS.items()},
        audit_families=finding_families() if auditing else (),
        causes=CODES if auditing else (),
        failed_causes=ENDED_CODES if auditing else (),
    )
    if auditing:
        _start_audit(runtime, settings)
    return create_app(
        runtime,
        max_body=settings.max_body,
        trivial_endpoint=settings.trivial_endpoint,
        log_reviews=settings.log_reviews,
    )


def _start_audit(runtime: Runtime, settings: Settings) -> None:
    """The periodic audit on the state this worker holds; one worker of the server runs it (a lock file). On live
    state it also writes policy reports, while its replica holds the Lease."""
    from webhook.audit.loop import AuditLoop, lock_path

    lease, writer, events = _writers(settings) if settings.live else (None, None, None)
    workloads = _workload_lister(settings) if settings.live else None
    loop = AuditLoop(
        runtime,
        settings.audit_interval,
        lock_path(),
        reports=writer,
        lease=lease,
        workloads=workloads,
        by_namespace=settings.metrics_namespaces,
        events=events,
    )
    loop.start()


def _workload_lister(settings: Settings) -> Callable[[], Iterable[Json]]:
    """The workloads each audit run lists (one paged list per kind), on an API client of their own."""
    from kubernetes import client

    from webhook.audit.workloads import list_workloads
    from webhook.state.apisource import load_configuration

    configuration, _ = load_configuration(settings.kubeconfig)
    api = client.ApiClient(configuration)
    return lambda: list_workloads(api)


def _writers(settings: Settings) -> tuple[LeaseElector | None, ReportWriter | None, EventWriter | None]:
    """The Lease, the reports and the Events, on an API client of their own: a renewal never queues behind the
    watches. No Lease when neither reports nor Events are written."""
    from kubernetes import client

    from webhook.audit import lease
    from webhook.audit.events import EventWriter
    from webhook.audit.reports import ReportWriter
    from webhook.state.apisource import load_configuration

    if settings.reports == "off" and settings.events == "off":
        return None, None, None
    configuration, _ = load_configuration(settings.kubeconfig)
    api = client.ApiClient(configuration)
    elector = lease.register(lease.LeaseElector(api, settings.namespace, settings.lease_name, settings.lease_timing))
    writer = ReportWriter(api, settings.reports, elector.remaining) if settings.reports != "off" else None
    events = EventWriter(api, elector.remaining) if settings.events == "on" else None
    return elector, writer, events
