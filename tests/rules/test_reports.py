"""The audit's results as policy reports: what each report holds, pure (no API).

The shapes checked are the CRDs' (openreports/reports-api config/crd/openreports.io_reports.yaml and
kubernetes-sigs/wg-policy-prototypes policy-report/crd/v1alpha2/wgpolicyk8s.io_policyreports.yaml): `policy`
required in every result, `result` and `severity` from their enums, `properties` a map of strings, `resources` a
list of ObjectReferences, `timestamp` with `seconds` and `nanos`.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from rules.audit import STUCK, AuditFinding, ObjectAudit, audit_objects
from rules.causes import StuckCause
from rules.checks.disk import AFFINITY_TYPES as DISK_TYPES
from rules.reports import (
    LIMIT_POLICY,
    MANAGED_BY,
    MAX_OBJECT_RESULTS,
    MAX_RESULTS,
    OPENREPORTS,
    REPORT_NAME,
    SOURCE,
    WGPOLICY,
    ReportKind,
    build_reports,
    keep_timestamps,
    same_content,
)
from tests.support import DATA, EXAMPLES, load_yaml, policy, view_from
from webhook.policy.file import load_policy_file
from webhook.state.static import load_static_state

RESULTS = {"pass", "fail", "warn", "error", "skip"}
CAUSES_TABLE = load_yaml(DATA / "audit" / "causes.yaml")
SEVERITIES = {"critical", "high", "medium", "low", "info"}
REFERENCE_FIELDS = {"apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath"}
MULTI_ATTACH = StuckCause(
    "MultiAttach",
    "claim shop/data-db-0 is attached to node ip-10-0-1-17.ec2.internal (pod db-0)",
    "delete the pod so that it is placed on ip-10-0-1-17.ec2.internal",
)


def audited() -> list[ObjectAudit]:
    """tests/data/audit/findings.yaml: at least one finding of every family."""
    policy, _ = load_policy_file(EXAMPLES / "policy-load-affinity.yaml")
    view = load_static_state([EXAMPLES / "cluster.yaml", DATA / "audit" / "findings.yaml"])
    return audit_objects(view.objects("Pod") + view.objects("ConfigMap"), view, policy, "saw")


def check_shape(report: dict[str, Any], kind: ReportKind) -> None:
    assert report["apiVersion"] == kind.api_version and report["kind"] == kind.kind
    assert report["metadata"]["labels"] == {MANAGED_BY: SOURCE}
    assert ("source" in report) == kind.top_level_source
    assert 0 < len(report["results"]) <= MAX_RESULTS
    for result in report["results"]:
        assert result["policy"] and result["rule"]
        assert result["result"] in RESULTS and result["severity"] in SEVERITIES
        assert all(isinstance(v, str) for v in result["properties"].values())
        assert set(result["timestamp"]) == {"seconds", "nanos"}
        for subject in result.get("resources", ()):  # optional: a namespace's limit result names none
            assert set(subject) <= REFERENCE_FIELDS
            assert subject["namespace"] == report["metadata"]["namespace"]
    # The summary counts exactly the results.
    assert report["summary"] == {key: Counter(r["result"] for r in report["results"])[key] for key in RESULTS}


@pytest.mark.parametrize("kind", [OPENREPORTS, WGPOLICY], ids=["openreports", "wgpolicyk8s"])
def test_one_report_per_namespace_with_findings(kind: ReportKind) -> None:
    audits = audited()
    reports = build_reports(audits, kind, now=1_800_000_000)
    with_findings = {a.namespace for a in audits if a.findings}
    assert set(reports) == {(ns, REPORT_NAME) for ns in with_findings}
    for report in reports.values():
        check_shape(report, kind)
    findings = sum(len(a.findings) for a in audits)
    assert sum(len(r["results"]) for r in reports.values()) == findings


def test_a_result_says_what_the_finding_says() -> None:
    audits = audited()
    reports = build_reports(
        audits, OPENREPORTS, now=1_800_000_000, uids={("Pod", "shop", "volsync-src-db-stuck"): "u1"}
    )
    shop = reports[("shop", REPORT_NAME)]["results"]
    mover = [r for r in shop if r["resources"][0]["name"] == "volsync-src-db-stuck"]
    finding = next(a for a in audits if a.name == "volsync-src-db-stuck").findings[0]
    assert mover[0]["policy"] == finding.family == "coScheduling"
    assert mover[0]["rule"] == finding.field and mover[0]["properties"] == {"field": finding.field}
    assert mover[0]["message"] == finding.message
    assert (mover[0]["result"], mover[0]["severity"]) == ("fail", "high")  # a denial
    assert mover[0]["resources"] == [
        {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "volsync-src-db-stuck", "uid": "u1"}
    ]
    assert mover[0]["timestamp"] == {"seconds": 1_800_000_000, "nanos": 0}
    drift = [r for r in reports[("velero", REPORT_NAME)]["results"] if r["policy"] == "placementDrift"]
    assert drift and all((r["result"], r["severity"]) == ("warn", "medium") for r in drift)  # warnings


def test_only_the_stuck_pod_result_carries_the_cause_and_its_remedy() -> None:
    finding = AuditFinding("coScheduling", "spec.nodeName", "claim data-db-0 is in use on another node", "deny")
    why = AuditFinding(STUCK, "status", f"stuck for 30 min: {MULTI_ATTACH.message}", "warn")
    stuck = ObjectAudit("Pod", "shop", "volsync-src-db", role="mover", findings=[finding, why], cause=MULTI_ATTACH)
    result = build_reports([stuck], OPENREPORTS, now=1)[("shop", REPORT_NAME)]["results"]
    assert {r["policy"]: r["properties"] for r in result} == {
        "coScheduling": {"field": "spec.nodeName"},
        STUCK: {"field": "status", "cause": "MultiAttach", "remedy": MULTI_ATTACH.remedy},
    }


@pytest.mark.parametrize("code", ["MultiAttach", "DataSourceElsewhere", "VMPlacementConflict"])
def test_a_stuck_pod_is_reported_with_its_cause_and_remedy(code: str) -> None:
    """The audit's own stuck-pod finding (tests/data/audit/causes.yaml: a VolSync mover, a CDI importer) becomes a
    result that carries the cause code and the remedy."""
    case = next(c for c in CAUSES_TABLE["cases"] if c["cause"] == code)
    state = [*CAUSES_TABLE["base"], *case.get("state", ()), case["stuck"]]
    reader = dataclasses.replace(policy(), nodes_readable=True)  # each cause as the `audit` command finds it
    audits = audit_objects([case["stuck"]], view_from(*state), reader, now=datetime.fromisoformat(CAUSES_TABLE["now"]))
    namespace = case["stuck"]["metadata"]["namespace"]
    report = build_reports(audits, WGPOLICY, now=1)[(namespace, REPORT_NAME)]
    check_shape(report, WGPOLICY)
    [result] = [r for r in report["results"] if r["policy"] == STUCK]
    (cause,) = [a.cause for a in audits]
    assert cause is not None and (result["rule"], result["result"]) == ("status", "warn")
    assert result["properties"] == {"field": "status", "cause": code, "remedy": cause.remedy}


def test_no_findings_no_report() -> None:
    assert build_reports([ObjectAudit("Pod", "shop", "db-0")], OPENREPORTS, now=1) == {}


def test_a_namespace_beyond_max_results_gets_one_report_that_says_how_many_were_left_out() -> None:
    finding = AuditFinding("placementDrift", "spec", "not scheduled yet", "warn")
    audits = [ObjectAudit("Pod", "big", f"p-{i:05d}", findings=[finding]) for i in range(2 * MAX_RESULTS + 1)]
    reports = build_reports(audits, OPENREPORTS, now=1)
    assert list(reports) == [("big", REPORT_NAME)]
    results = reports[("big", REPORT_NAME)]["results"]
    assert len(results) == MAX_RESULTS
    assert [r["resources"][0]["name"] for r in results[:-1]] == [f"p-{i:05d}" for i in range(MAX_RESULTS - 1)]
    limit = results[-1]
    assert (limit["policy"], limit["result"], limit["severity"]) == (LIMIT_POLICY, "warn", "info")
    assert "resources" not in limit  # the namespace's limit names no object
    assert limit["properties"] == {"notWritten": str(MAX_RESULTS + 2)}
    assert limit["message"].startswith(f"{MAX_RESULTS + 2} more results in namespace big not written: ")
    check_shape(reports[("big", REPORT_NAME)], OPENREPORTS)


def test_one_object_adds_at_most_max_object_results_and_says_how_many_it_left_out() -> None:
    many = [AuditFinding("diskAnnotations", "metadata.annotations", f"unknown type t{i}", "deny") for i in range(50)]
    few = [AuditFinding("placementDrift", "spec", "not scheduled yet", "warn")]
    audits = [ObjectAudit("Pod", "ns", "hostile", findings=many), ObjectAudit("Pod", "ns", "plain", findings=few)]
    results = build_reports(audits, WGPOLICY, now=1)[("ns", REPORT_NAME)]["results"]
    hostile = [r for r in results if r["resources"][0]["name"] == "hostile"]
    assert len(hostile) == MAX_OBJECT_RESULTS
    [limit] = [r for r in hostile if r["policy"] == LIMIT_POLICY]
    assert limit["properties"] == {"notWritten": str(50 - MAX_OBJECT_RESULTS + 1)}
    assert limit["message"].startswith(f"{50 - MAX_OBJECT_RESULTS + 1} more results of Pod hostile not written: ")
    assert [r["message"] for r in results if r["resources"][0]["name"] == "plain"] == ["not scheduled yet"]


def test_a_stored_pod_with_25_000_unknown_disk_types_costs_one_small_report() -> None:
    """One hostile stored pod: a 200 KB annotation of 25,000 unknown disk types made 25 reports and 13 MB of
    writes; capped, it is one report of a few kilobytes."""
    types = ",".join(f"t{i:06d}" for i in range(25_000))
    assert len(types) > 190_000
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hostile", "namespace": "tenant", "annotations": {DISK_TYPES: types}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }
    audits = audit_objects([pod], view_from(), policy(), "saw")
    reports = build_reports(audits, OPENREPORTS, now=1)
    assert list(reports) == [("tenant", REPORT_NAME)]
    report = reports[("tenant", REPORT_NAME)]
    assert len(report["results"]) <= MAX_OBJECT_RESULTS
    assert len(json.dumps(report)) < 20_000
    check_shape(report, OPENREPORTS)


def test_unchanged_results_keep_their_first_timestamp_and_compare_equal() -> None:
    audits = audited()
    first = build_reports(audits, OPENREPORTS, now=100)
    # What the API server gives back: its metadata added, the same content.
    stored = {key: {**r, "metadata": {**r["metadata"], "resourceVersion": "7", "uid": "x"}} for key, r in first.items()}
    again = build_reports(audits, OPENREPORTS, now=200)
    for key, report in again.items():
        assert not same_content(stored[key], report)  # only the timestamps differ
        kept = keep_timestamps(report, stored[key])
        assert same_content(stored[key], kept)
        assert {r["timestamp"]["seconds"] for r in kept["results"]} == {100}


def test_a_changed_result_is_new_content_with_its_own_timestamp() -> None:
    finding = AuditFinding("placementDrift", "spec", "not scheduled yet", "warn")
    before = build_reports([ObjectAudit("Pod", "ns", "a", findings=[finding])], OPENREPORTS, now=100)
    moved = AuditFinding("placementDrift", "spec.nodeName", "runs on node n1; admission would place it on n2", "warn")
    after = build_reports(
        [ObjectAudit("Pod", "ns", "a", findings=[finding]), ObjectAudit("Pod", "ns", "b", findings=[moved])],
        OPENREPORTS,
        now=200,
    )
    key = ("ns", REPORT_NAME)
    kept = keep_timestamps(after[key], before[key])
    assert not same_content(before[key], kept)
    assert [r["timestamp"]["seconds"] for r in kept["results"]] == [100, 200]


def test_a_stored_report_that_lost_our_label_is_rewritten() -> None:
    report = build_reports(audited(), OPENREPORTS, now=1)[("shop", REPORT_NAME)]
    relabelled = {**report, "metadata": {**report["metadata"], "labels": {}}}
    assert not same_content(relabelled, report)


def test_a_pods_load_affinity_annotation_is_reported_under_load_affinity() -> None:
    """The report's `policy` is the family `validation.<family>.enforcement` switches (docs/validation.md)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "restore-1",
            "namespace": "velero",
            "annotations": {
                "storage-affinity.io/load-affinity": '[{"nodeSelector": {}}]',
                "storage-affinity.io/storage-class": "Not_A_Name",
                "storage-affinity.io/placment": "nodeName",
            },
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    (audit,) = audit_objects([pod], view_from(), policy())
    results = build_reports([audit], OPENREPORTS, now=1)[("velero", REPORT_NAME)]["results"]
    families = {r["rule"].removeprefix("metadata.annotations[").split("]")[0]: r["policy"] for r in results}
    assert families == {
        "storage-affinity.io/load-affinity": "loadAffinity",
        "storage-affinity.io/storage-class": "loadAffinity",
        "storage-affinity.io/placment": "annotations",
    }


def test_a_virtual_machine_result_names_the_kubevirt_api() -> None:
    """VMs are audited for their disks (family vmDisk): a report result must name the VM as the API serves it."""
    finding = AuditFinding("vmDisk", "spec.template.spec.nodeSelector", "disk fedora-root is bound on node n1", "deny")
    vm = ObjectAudit("VirtualMachine", "vms", "fedora", findings=[finding])
    [result] = build_reports([vm], OPENREPORTS, now=1)[("vms", REPORT_NAME)]["results"]
    assert result["resources"] == [
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "namespace": "vms", "name": "fedora"}
    ]
