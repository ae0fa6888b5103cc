"""The audit's results as policy reports: OpenReports `Report` (openreports.io/v1alpha1) or, for older consumers,
`PolicyReport` (wgpolicyk8s.io/v1alpha2). Both carry the same result shape (openreports/reports-api
apis/openreports.io/v1alpha1/report_types.go; kubernetes-sigs/wg-policy-prototypes
policy-report/pkg/api/wgpolicyk8s.io/v1alpha2/policyreport_types.go).

Pure: what the reports of one audit should hold, and whether a stored report already holds it. The writer
(webhook/audit/reports.py) lists, creates, replaces and deletes. Only failures are reported (a result per finding; a
stuck storage pod's `stuckPod` result carries its cause code and remedy as properties): a namespace without
findings has no report, and a cluster of 100,000 clean pods costs no object per pod. A namespace has one report,
of at most MAX_RESULTS results, so that no report nears etcd's request size limit (1.5 MiB by default), and one
object adds at most MAX_OBJECT_RESULTS: beyond either limit, one `reportLimit` result says how many results were
not written (the `audit` command lists them all), so a hostile object costs one small report, not dozens.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rules.audit import FAILED, STUCK, ObjectAudit
from rules.messages import counted
from rules.model import Json

SOURCE = "storage-affinity-webhook"
#: The label that marks the reports this webhook owns: only those are replaced or deleted.
MANAGED_BY = "app.kubernetes.io/managed-by"
#: The report of a namespace is named so: the writer touches no report of another name.
REPORT_NAME = "storage-affinity-webhook"
#: The most results a report holds, and the most one object adds to it, each limit result included.
MAX_RESULTS = 1000
MAX_OBJECT_RESULTS = 20
#: The policy of the result that says how many results a limit left out.
LIMIT_POLICY = "reportLimit"
#: The fields of a report that are its content; metadata other than the labels is the API server's.
CONTENT = ("source", "summary", "results")

_API_VERSIONS = {
    "Pod": "v1",
    "ConfigMap": "v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "VirtualMachine": "kubevirt.io/v1",
}
_RESULT = {"deny": "fail", "warn": "warn"}
_SEVERITY = {"deny": "high", "warn": "medium"}


@dataclass(frozen=True)
class ReportKind:
    """One policy report API: where it is served and what its objects are called."""

    group: str
    version: str
    kind: str
    plural: str
    top_level_source: bool  # OpenReports' Report has `source`; wgpolicyk8s' PolicyReport has not

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


OPENREPORTS = ReportKind("openreports.io", "v1alpha1", "Report", "reports", top_level_source=True)
WGPOLICY = ReportKind("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "policyreports", top_level_source=False)
#: The chart's `reports.api` values, in the order `auto` prefers them.
REPORT_KINDS = {"openreports": OPENREPORTS, "wgpolicyk8s": WGPOLICY}


def build_reports(
    audits: Iterable[ObjectAudit], kind: ReportKind, now: int, uids: Mapping[tuple[str, str, str], str] | None = None
) -> dict[tuple[str, str], Json]:
    """The reports one audit should leave, by (namespace, name). `now` (seconds) stamps new results; `uids`
    ((kind, namespace, name) → uid) completes the resource references when known."""
    by_namespace: dict[str, list[Json]] = {}
    for audit in audits:
        if audit.namespace and audit.findings:
            by_namespace.setdefault(audit.namespace, []).extend(_results(audit, now, uids or {}))
    reports: dict[tuple[str, str], Json] = {}
    for namespace, results in sorted(by_namespace.items()):
        results.sort(key=_result_order)
        if len(results) > MAX_RESULTS:
            left_out = len(results) - (MAX_RESULTS - 1)
            del results[MAX_RESULTS - 1 :]
            results.append(_limit_result(left_out, f"in namespace {namespace}", None, now))
        reports[(namespace, REPORT_NAME)] = _report(kind, namespace, REPORT_NAME, results)
    return reports


def keep_timestamps(desired: Json, stored: Mapping[str, object] | None) -> Json:
    """`desired` with the timestamp of each result the stored report already holds: a result keeps the time it
    was first found, and an unchanged report compares equal."""
    old = stored.get("results") if stored is not None else None
    if not isinstance(old, list):
        return desired
    out = copy.copy(desired)
    if len(old) == len(desired["results"]) and all(map(_same_but_time, old, desired["results"])):
        out["results"] = [{**r, "timestamp": o.get("timestamp")} for o, r in zip(old, desired["results"], strict=True)]
        return out  # the common case, nothing changed: no result is serialized to be compared
    first_seen = {_identity(r): r.get("timestamp") for r in old if isinstance(r, dict)}
    out["results"] = [
        {**r, "timestamp": first_seen[_identity(r)]} if first_seen.get(_identity(r)) else r for r in desired["results"]
    ]
    return out


def same_content(stored: Mapping[str, object], desired: Json) -> bool:
    """Whether writing `desired` would change what the stored report says (its resourceVersion is not content)."""
    metadata = stored.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if labels != desired["metadata"]["labels"]:
        return False
    return all(stored.get(key) == desired.get(key) for key in CONTENT)


def _results(audit: ObjectAudit, now: int, uids: Mapping[tuple[str, str, str], str]) -> list[Json]:
    subject: Json = {
        "apiVersion": _API_VERSIONS.get(audit.kind, "v1"),
        "kind": audit.kind,
        "namespace": audit.namespace,
        "name": audit.name,
    }
    if uid := uids.get((audit.kind, audit.namespace, audit.name)):
        subject["uid"] = uid
    cause = {"cause": audit.cause.code, "remedy": audit.cause.remedy} if audit.cause is not None else {}
    findings = audit.findings
    if len(findings) > MAX_OBJECT_RESULTS:
        left_out = len(findings) - (MAX_OBJECT_RESULTS - 1)
        findings = findings[: MAX_OBJECT_RESULTS - 1]
        limit = [_limit_result(left_out, f"of {audit.kind} {audit.name}", subject, now)]
    else:
        limit = []
    return [
        _result(
            finding.family,
            finding.field,
            result=_RESULT[finding.severity],
            severity=_SEVERITY[finding.severity],
            message=finding.message,
            subject=subject,
            properties={"field": finding.field, **(cause if finding.family in (STUCK, FAILED) else {})},
            now=now,
        )
        for finding in findings
    ] + limit


def _limit_result(left_out: int, whose: str, subject: Json | None, now: int) -> Json:
    """The result standing for the `left_out` results a limit kept out of the report (of one object, or of the
    namespace: then it names no resource)."""
    return _result(
        LIMIT_POLICY,
        "results",
        result="warn",
        severity="info",
        message=f"{counted(left_out, 'more result')} {whose} not written: a report holds at most "
        f"{MAX_OBJECT_RESULTS} results per object and {MAX_RESULTS} per namespace; the audit command lists them all",
        subject=subject,
        properties={"notWritten": str(left_out)},
        now=now,
    )


def _result(
    policy: str,
    rule: str,
    *,
    result: str,
    severity: str,
    message: str,
    subject: Json | None,
    properties: Json,
    now: int,
) -> Json:
    out: Json = {
        "source": SOURCE,
        "policy": policy,
        "rule": rule,
        "result": result,
        "severity": severity,
        "scored": True,
        "message": message,
        **({"resources": [subject]} if subject is not None else {}),
        "properties": properties,
        "timestamp": {"seconds": now, "nanos": 0},
    }
    return out


def _report(kind: ReportKind, namespace: str, name: str, results: list[Json]) -> Json:
    counts = Counter(str(r["result"]) for r in results)
    report: Json = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY: SOURCE}},
    }
    if kind.top_level_source:
        report["source"] = SOURCE
    report["summary"] = {key: counts.get(key, 0) for key in ("pass", "fail", "warn", "error", "skip")}
    report["results"] = results
    return report


def _same_but_time(stored: object, result: Json) -> bool:
    if not isinstance(stored, dict) or stored.keys() != result.keys() or not stored.get("timestamp"):
        return False
    return all(stored[key] == value for key, value in result.items() if key != "timestamp")


def _identity(result: Mapping[str, object]) -> str:
    """A result without its timestamp, as one comparable string."""
    return json.dumps({k: v for k, v in result.items() if k != "timestamp"}, sort_keys=True)


def _result_order(result: Json) -> tuple[str, str, str, str, str, str]:
    subject = result["resources"][0]
    return (subject["kind"], subject["name"], result["policy"], result["rule"], result["message"], result["result"])
