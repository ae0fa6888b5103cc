"""The audit inside `serve`: on the state the server holds, published as metrics, by one worker at a time."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from rules.audit import finding_families
from rules.causes import CODES, ENDED_CODES
from tests.rules.test_causes import INDEXED_CAUSES, cluster_of, indexed_cases, server_causes
from tests.state.conftest import eventually
from tests.support import DATA, EXAMPLES
from webhook import metrics
from webhook.audit.loop import WAIT_POLL, AuditLoop
from webhook.policy.file import load_policy_file
from webhook.runtime import Runtime
from webhook.state.static import load_static_state

CLUSTER = [EXAMPLES / "cluster.yaml", DATA / "audit" / "findings.yaml"]


def runtime(*paths: Path) -> Runtime:
    policy, source = load_policy_file(EXAMPLES / "policy-load-affinity.yaml")
    return Runtime(policy=policy, view=load_static_state(paths), namespace="saw", policy_source=source)


def sample(family: str, namespace: str) -> float | None:
    return REGISTRY.get_sample_value("storage_affinity_audit_findings", {"family": family, "namespace": namespace})


def test_the_index_is_audited_and_published_per_family_and_namespace() -> None:
    rt = runtime(*CLUSTER)
    counts = AuditLoop(rt, interval=60, by_namespace=True).run_once()
    # The index keeps pods that mount a claim, and their disk annotations, node affinity and nodeName.
    assert counts[("coScheduling", "shop")] == 1
    assert counts[("placementDrift", "velero")] == 2
    assert counts[("diskAnnotations", "storage")] == 1
    assert counts[("policy", "storage-affinity")] == 1
    assert counts[("loadAffinity", "storage-affinity-staging")] == 1
    for (family, namespace), count in counts.items():
        assert sample(family, namespace) == count
    assert (REGISTRY.get_sample_value("storage_affinity_audit_last_run_timestamp_seconds") or 0) > 0


def published() -> dict[tuple[str, str], float]:
    """Every series of the findings the scrape shows now."""
    return {
        (s.labels["family"], s.labels["namespace"]): s.value
        for metric in REGISTRY.collect()
        if metric.name == "storage_affinity_audit_findings"
        for s in metric.samples
    }


def test_by_default_the_findings_are_published_per_family_alone() -> None:
    """/metrics needs no certificate: the series name no namespace unless the operator asks (--metrics-namespaces),
    and every family has its series, 0 when it has no finding."""
    by_namespace = AuditLoop(runtime(*CLUSTER), interval=60, by_namespace=True).run_once()
    counts = AuditLoop(runtime(*CLUSTER), interval=60).run_once()
    summed: Counter[tuple[str, str]] = Counter()
    for (family, _), count in by_namespace.items():
        summed[(family, "")] += count
    assert counts == dict(summed) and counts[("coScheduling", "")] == 1
    series = published()
    assert {namespace for _, namespace in series} == {""}
    assert {family for family, _ in series} == set(finding_families())
    assert series == {(family, ""): counts.get((family, ""), 0) for family in finding_families()}


def test_the_series_of_a_namespace_without_findings_are_dropped() -> None:
    """A deleted namespace (or one whose findings were fixed) leaves no series behind, not even a 0: with
    per-namespace labels, a series each namespace that ever had a finding would otherwise stay until a restart."""
    rt = runtime(*CLUSTER)
    loop = AuditLoop(rt, interval=60, by_namespace=True)
    loop.run_once()
    assert sample("coScheduling", "shop") == 1
    rt.view = load_static_state([DATA / "audit" / "clean.yaml"])
    assert loop.run_once() == {}
    assert sample("coScheduling", "shop") is None
    assert published() == {(family, ""): 0 for family in finding_families()}


def test_the_scrape_of_every_worker_shows_the_auditing_worker_s_last_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In multiprocess mode (the server's), the audit's series are a file every worker's /metrics reads, replaced
    whole by each run: prometheus_client cannot remove a series from its files."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    rt = runtime(*CLUSTER)
    loop = AuditLoop(rt, interval=60, by_namespace=True)
    loop.run_once()
    text = metrics.render()[0].decode()
    assert 'storage_affinity_audit_findings{family="coScheduling",namespace="shop"} 1.0' in text
    rt.view = load_static_state([DATA / "audit" / "clean.yaml"])
    loop.run_once()
    text = metrics.render()[0].decode()
    assert 'namespace="shop"' not in text
    assert 'storage_affinity_audit_findings{family="coScheduling",namespace=""} 0.0' in text


def test_one_loop_per_lock_file_audits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = runtime(*CLUSTER)
    first = AuditLoop(rt, interval=0.01, lock_file=tmp_path / "audit.lock")
    second = AuditLoop(rt, interval=0.01, lock_file=tmp_path / "audit.lock")
    assert first._leader() and first._leader()
    assert not second._leader()
    assert first._lock is not None
    first._lock.close()  # the leading worker exits: its lock goes with it
    assert second._leader()
    assert second._lock is not None
    second._lock.close()  # a worker holds it until it exits; the test closes it rather than leave it to the collector


def stuck(cause: str) -> float | None:
    return REGISTRY.get_sample_value("storage_affinity_audit_stuck_pods", {"cause": cause})


def test_stuck_storage_pods_are_counted_by_cause(tmp_path: Path) -> None:
    cases = indexed_cases()
    assert {c["cause"] for c in cases} == INDEXED_CAUSES
    objects = cluster_of(cases)
    cluster = tmp_path / "stuck.yaml"
    # as JSON: objects the table shares between cases (YAML anchors) would be written as aliases, which are refused
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    rt = runtime(cluster)
    # the policy names Velero's namespace, where a backup pod's DataUpload is read (BackupSnapshotElsewhere)
    rt.policy = replace(rt.policy, node_agent_namespace="velero")
    loop = AuditLoop(rt, interval=60)
    loop.run_once()
    expected = server_causes(cases)
    assert {code: stuck(code) for code in CODES} == {code: expected[code] for code in CODES}
    rt.view = load_static_state([DATA / "audit" / "clean.yaml"])
    loop.run_once()
    assert {stuck(code) for code in CODES} == {0}


def test_the_line_a_run_logs_is_the_one_the_audit_bench_reads(caplog: pytest.LogCaptureFixture) -> None:
    """bench/audit.py times each audit by this log line; a new wording must not blind it."""
    from bench.audit import _FINISHED

    with caplog.at_level("INFO", logger="webhook.audit.loop"):
        AuditLoop(runtime(*CLUSTER), interval=60).run_once()
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("audit: ")]
    found = _FINISHED.search(line)
    assert found is not None, line
    assert int(found["objects"]) > 0


def last_run() -> float:
    return REGISTRY.get_sample_value("storage_affinity_audit_last_run_timestamp_seconds") or 0.0


def timed_runs(loop: AuditLoop, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each of the loop's audits started (time.monotonic)."""
    runs: list[float] = []
    audit = loop.run_once

    def timed() -> dict[tuple[str, str], int]:
        runs.append(time.monotonic())
        return audit()

    monkeypatch.setattr(loop, "run_once", timed)
    return runs


def test_the_first_audit_runs_at_start_not_an_interval_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Static state is synced from the start: the loop audits at once, then waits its interval."""
    loop = AuditLoop(runtime(*CLUSTER), interval=60)
    runs = timed_runs(loop, monkeypatch)
    started = time.monotonic()
    loop.start()
    try:
        eventually(lambda: runs, timeout=2.0, what="the first audit")
        assert runs[0] - started < 1.0
        assert last_run() >= time.time() - 2.0
        time.sleep(0.3)
        assert len(runs) == 1  # the next one waits its interval
    finally:
        loop.stop()


def test_no_audit_before_the_first_sync_and_one_right_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the state's first lists land there is nothing to audit; once they have, the audit follows within
    the loop's wait poll, an hour-long interval notwithstanding."""
    synced = threading.Event()
    rt = runtime(*CLUSTER)
    rt.loaded_check = synced.is_set
    loop = AuditLoop(rt, interval=3600)
    runs = timed_runs(loop, monkeypatch)
    loop.start()
    try:
        time.sleep(WAIT_POLL * 1.5)
        assert runs == []
        synced.set()
        at = time.monotonic()
        eventually(lambda: runs, timeout=WAIT_POLL * 3, what="the audit after the first sync")
        assert runs[0] - at <= WAIT_POLL + 0.5
    finally:
        loop.stop()


def test_a_stored_object_past_the_budget_is_reported_once_and_not_audited_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Pending pod with a claim and 10,000 terms held the worker 51 s at every run: it is refused at the typed
    boundary, reported under the budget family, logged once, and not audited again until the index replaces it."""
    from rules.audit import audit_objects
    from testkit import hostile

    pod = hostile.pod("hostile", hostile.unnarrowable_terms(10_000), claim=hostile.CLAIM)
    pod["status"] = {"phase": "Pending"}
    cluster = tmp_path / "hostile.json"
    objects = [*hostile.nodes(3), hostile.storage_class(), hostile.claim_object(hostile.CLAIM), pod]
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    rt = runtime(cluster)
    audited: list[str] = []

    def counted(objects: Iterable[Any], *args: Any, **options: Any) -> Any:
        held = list(objects)
        audited.extend(str(o["metadata"]["name"]) for o in held if o.get("kind") == "Pod")
        return audit_objects(held, *args, **options)

    monkeypatch.setattr("webhook.audit.loop.audit_objects", counted)
    loop = AuditLoop(rt, interval=60, by_namespace=True)
    with caplog.at_level("WARNING", logger="webhook.audit.loop"):
        first = loop.run_once()
        second = loop.run_once()
    assert first == second == {("budget", hostile.NAMESPACE): 1}
    assert audited == ["hostile"]  # the second run reported it without auditing it
    (logged,) = [r.getMessage() for r in caplog.records if "past the review budget" in r.getMessage()]
    assert "Pod tenant/hostile" in logged and "10,000 node selector terms, over the limit of 1,000" in logged
    rt.view = load_static_state([cluster])  # the index replaced the object (a change): audited again
    assert loop.run_once() == first and audited == ["hostile", "hostile"]


def failed(cause: str) -> float | None:
    return REGISTRY.get_sample_value("storage_affinity_audit_failed_pods", {"cause": cause})


def test_storage_pods_that_ended_failed_are_counted_by_cause(tmp_path: Path) -> None:
    """The index keeps what says how a Failed pod ended (tests/data/audit/failed.yaml); the window is widened to
    reach the table's day, since the loop audits at the current time."""
    from tests.rules.test_ended_causes import TABLE as FAILED_TABLE

    cases = [c for c in FAILED_TABLE["cases"] if c["cause"] and "policy" not in c]
    cluster = tmp_path / "failed.yaml"
    objects = [*FAILED_TABLE["base"], *(c["ended"] for c in cases)]
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    rt = runtime(cluster)
    rt.policy = dataclasses.replace(rt.policy, failed_within=10 * 365 * 86400)
    loop = AuditLoop(rt, interval=60)
    loop.run_once()
    expected = Counter(c["cause"] for c in cases)
    assert {code: failed(code) for code in ENDED_CODES} == {code: expected[code] for code in ENDED_CODES}
    assert {stuck(code) for code in CODES} == {0}, "an ended pod is not stuck"
    rt.policy = dataclasses.replace(rt.policy, failed_within=3600)
    loop.run_once()
    assert {failed(code) for code in ENDED_CODES} == {0}
