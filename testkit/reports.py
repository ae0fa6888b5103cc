"""What the report writer meets: tenants' Reports carrying its label, and audit findings over many namespaces; and the
two writer runs beside those Reports that the writer's test and the bench both measure."""

from __future__ import annotations

import tracemalloc
from dataclasses import dataclass

from rules.audit import AuditFinding, ObjectAudit
from rules.model import Json
from rules.reports import MANAGED_BY, SOURCE
from testkit.fakeapi import FakeKubeAPI
from webhook.audit.reports import ReportWriter, WriteCounts


def tenant_report(namespace: str, name: str, size: int, labels: dict[str, str] | None = None) -> Json:
    """A Report of about `size` bytes of JSON, as a tenant may create in its own namespace (with the writer's label
    unless `labels` says otherwise)."""
    result = {"source": "tenant", "policy": "p", "rule": "r", "result": "fail", "message": "x" * 400}
    results = [{**result, "rule": f"r{i}"} for i in range(size // 470)]
    metadata = {"name": name, "namespace": namespace, "labels": labels if labels is not None else {MANAGED_BY: SOURCE}}
    return {"kind": "Report", "apiVersion": "openreports.io/v1alpha1", "metadata": metadata, "results": results}


def findings(namespaces: int, per_namespace: int) -> list[ObjectAudit]:
    """Pending movers with a drift warning each: `namespaces * per_namespace` findings."""
    drift = AuditFinding("placementDrift", "spec", "not scheduled yet, and without the placement it needs", "warn")
    return [
        ObjectAudit("Pod", f"ns-{n:03d}", f"volsync-src-{i:05d}", role="mover", findings=[drift])
        for n in range(namespaces)
        for i in range(per_namespace)
    ]


def create_tenant_reports(api: FakeKubeAPI, count: int = 20, size: int = 1024 * 1024) -> set[tuple[str, str]]:
    """`count` Reports of `size` bytes with the writer's label, other names than its own, in two tenants'
    namespaces (tenant-0 and tenant-1): (namespace, name) of each."""
    tenant = {(f"tenant-{i % 2}", f"big-{i:02d}") for i in range(count)}
    for namespace, name in sorted(tenant):
        api.create(tenant_report(namespace, name, size))
    return tenant


@dataclass
class TracedRuns:
    first: WriteCounts
    second: WriteCounts
    first_peak: int  # the most bytes traced at once during each run
    second_peak: int


def runs_beside_tenants(writer: ReportWriter) -> TracedRuns:
    """Two runs of `writer` under tracemalloc: the first creates a report in each of 20 namespaces with findings,
    tenant-0 among them; the second deletes its own report of ns-000, clean by then."""
    audits = findings(namespaces=20, per_namespace=5)
    audits[0].namespace = audits[1].namespace = "tenant-0"  # the tenant's namespace has findings too
    tracemalloc.start()
    try:
        first = writer.write(audits)
        first_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        for audit in audits[2:5]:
            audit.findings = []
        second = writer.write(audits)
        second_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return TracedRuns(first, second, first_peak, second_peak)
