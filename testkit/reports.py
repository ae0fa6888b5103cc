"""What the report writer meets: tenants' Reports carrying its label, and audit findings over many namespaces. One
builder for the writer's tests and the bench."""

from __future__ import annotations

from rules.audit import AuditFinding, ObjectAudit
from rules.model import Json
from rules.reports import MANAGED_BY, SOURCE


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
