"""Policy reports written to the fake API over HTTP: which API, what is written, and only when it changed."""

from __future__ import annotations

import json
import logging
import math
import time
import tracemalloc
from pathlib import Path

import pytest
from kubernetes.client import ApiException
from prometheus_client import REGISTRY

from rules.audit import STUCK, AuditFinding
from rules.model import Json
from rules.reports import MANAGED_BY, REPORT_NAME, SOURCE
from testkit.fakeapi import REPORT_GROUPS, FakeKubeAPI
from testkit.reports import create_tenant_reports, findings, runs_beside_tenants, tenant_report
from tests.rules.test_reports import MULTI_ATTACH, audited
from tests.state.conftest import NAMESPACE, eventually, report_writes
from tests.state.test_lease import TIMING, api_client
from tests.webhook.test_auditloop import CLUSTER, runtime
from webhook.audit.lease import LeaseElector, NotLeader
from webhook.audit.loop import AuditLoop
from webhook.audit.reports import LIST_PAGE, ReportWriter

FOREVER = lambda: math.inf  # noqa: E731 - a replica alone: no lease to ask


def writer(fake: FakeKubeAPI, tmp_path: Path, mode: str = "auto") -> ReportWriter:
    return ReportWriter(api_client(fake, tmp_path, "writer"), mode, FOREVER)


def stored(fake: FakeKubeAPI, kind: str = "Report") -> dict[tuple[str, str], Json]:
    plural = {"Report": "reports", "PolicyReport": "policyreports"}[kind]
    return {(ns, name): obj for (p, ns, name), obj in fake._objects.items() if p == plural}


def install_report_crds(fake_api: FakeKubeAPI, groups: set[str]) -> None:
    """The cluster serves exactly these of the policy report groups (the other CRDs stay as they are)."""
    fake_api.served_groups = (fake_api.served_groups - REPORT_GROUPS) | groups


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        ({"openreports.io", "wgpolicyk8s.io"}, "Report"),
        ({"wgpolicyk8s.io"}, "PolicyReport"),
        (set(), None),
    ],
    ids=["both-served-openreports", "only-wgpolicyk8s", "none-off"],
)
def test_auto_writes_whichever_api_is_served(
    fake_api: FakeKubeAPI, tmp_path: Path, installed: set[str], expected: str | None
) -> None:
    install_report_crds(fake_api, installed)
    w = writer(fake_api, tmp_path)
    counts = w.write(audited())
    kind = w.kind()
    assert (kind.kind if kind else None) == expected
    if expected is None:
        assert counts.writes == 0 and report_writes(fake_api) == report_writes(fake_api, "PolicyReport") == 0
    else:
        assert counts.created == len(stored(fake_api, expected)) > 0


def test_auto_finds_the_crds_installed_later(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    install_report_crds(fake_api, set())
    w = writer(fake_api, tmp_path)
    assert w.write(audited()).writes == 0
    install_report_crds(fake_api, {"openreports.io"})
    assert w.write(audited()).created > 0


def test_a_chosen_api_is_never_swapped_for_another(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    install_report_crds(fake_api, {"openreports.io"})
    w = writer(fake_api, tmp_path, "wgpolicyk8s")
    assert w.write(audited()).writes == 0 and w.kind() is None
    assert writer(fake_api, tmp_path, "off").write(audited()).writes == 0
    assert report_writes(fake_api) == 0


def test_nothing_changed_nothing_written(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    w = writer(fake_api, tmp_path)
    audits = audited()
    first = w.write(audits)
    assert first.created == len(stored(fake_api)) == len({a.namespace for a in audits if a.findings})
    before = report_writes(fake_api)
    time.sleep(1.1)  # a later second: results keep their first timestamp
    again = w.write(audited())
    assert again.writes == 0 and again.unchanged == first.created
    assert report_writes(fake_api) == before


def test_changes_are_written_in_place_and_clean_namespaces_lose_their_report(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    w = writer(fake_api, tmp_path)
    audits = audited()
    w.write(audits)
    shop = stored(fake_api)[("shop", REPORT_NAME)]
    foreign = {"kind": "Report", "metadata": {"name": "kyverno-x", "namespace": "shop"}, "results": []}
    fake_api.create(foreign)  # another tool's report in the same namespace
    # The shop mover is now stuck with a cause; storage is clean.
    changed = [a for a in audits if a.namespace != "storage"]
    mover = next(a for a in changed if a.name == "volsync-src-db-stuck")
    mover.cause = MULTI_ATTACH
    mover.findings.append(AuditFinding(STUCK, "status", f"stuck for 30 min: {MULTI_ATTACH.message}", "warn"))
    counts = w.write(changed)
    assert (counts.created, counts.replaced, counts.deleted) == (0, 1, 1)
    after = stored(fake_api)
    assert ("storage", REPORT_NAME) not in after
    assert after[("shop", REPORT_NAME)]["metadata"]["uid"] == shop["metadata"]["uid"]  # replaced, not recreated
    results = after[("shop", REPORT_NAME)]["results"]
    assert [r["properties"].get("cause") for r in results if r["policy"] == STUCK] == ["MultiAttach"]
    assert ("shop", "kyverno-x") in after  # not ours: never touched
    assert all(obj["metadata"]["labels"] == {MANAGED_BY: SOURCE} for key, obj in after.items() if key[1] != "kyverno-x")


def test_no_lease_no_write(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    w = ReportWriter(api_client(fake_api, tmp_path, "follower"), "auto", lambda: 0.0)
    with pytest.raises(NotLeader):
        w.write(audited())
    assert report_writes(fake_api) == 0


def test_the_audit_loop_writes_reports_with_uids(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    rt = runtime(*CLUSTER)
    loop = AuditLoop(rt, interval=60, reports=writer(fake_api, tmp_path), by_namespace=True)
    counts = loop.run_once()
    assert loop.last_write is not None and loop.last_write.created == len({ns for _, ns in counts})
    assert {ns for ns, _ in stored(fake_api)} == {ns for _, ns in counts}
    loop.run_once()
    assert loop.last_write.writes == 0


def test_only_the_worker_with_the_audit_lock_competes_and_only_the_holder_writes(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    rt = runtime(*CLUSTER)
    loops = []
    for name in ("first", "second"):  # two workers of one replica
        api = api_client(fake_api, tmp_path, name)
        lease = LeaseElector(api, NAMESPACE, "storage-affinity-webhook", TIMING, holder=name)
        loops.append(AuditLoop(rt, 60, tmp_path / "audit.lock", ReportWriter(api, "auto", lease.remaining), lease))
    first, second = loops
    assert first.lease is not None and second.lease is not None
    try:
        second.run_once()  # not the lock holder: never competed, writes nothing
        assert second.last_write is None and report_writes(fake_api) == 0
        assert first._leader() and not second._leader()
        eventually(first.lease.holds, what="the lock holder takes the lease")
        first.run_once()
        assert first.last_write is not None and first.last_write.created > 0
        assert fake_api.get("Lease", NAMESPACE, "storage-affinity-webhook") is not None
        assert second.lease.holds() is False and fake_api.count("GET", "Lease") > 0
        assert not [r for r in fake_api.requests if r.agent == "second" and "leases" in r.path]
    finally:
        first.lease.release()
        if first._lock is not None:  # a worker holds it until it exits; the test closes it
            first._lock.close()


def test_ten_thousand_findings_writes_per_run(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    """The measurement the docs quote: API writes per audit run, against the fake API over HTTP."""
    w = writer(fake_api, tmp_path)
    audits = findings(namespaces=20, per_namespace=500)
    assert sum(len(a.findings) for a in audits) == 10_000
    started = time.monotonic()
    first = w.write(audits)
    first_seconds = time.monotonic() - started
    started = time.monotonic()
    same = w.write(audits)
    same_seconds = time.monotonic() - started
    audits[0].findings = []  # one finding gone: one report rewritten
    one = w.write(audits)
    print(
        f"\n10,000 findings in 20 namespaces: first run {first.writes} writes ({first_seconds:.2f} s), "
        f"nothing changed {same.writes} writes ({same_seconds:.2f} s), one finding gone {one.writes} write"
    )
    assert (first.created, first.writes) == (20, 20)
    assert same.writes == 0 and same.unchanged == 20
    assert (one.replaced, one.writes) == (1, 1)


def test_more_reports_than_a_list_page_are_read_whole_and_each_page_asks_the_lease(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    audits = findings(namespaces=2 * LIST_PAGE + 50, per_namespace=1)
    w = writer(fake_api, tmp_path)
    assert w.write(audits).created == 2 * LIST_PAGE + 50
    pages = fake_api.count("GET", "Report")
    again = w.write(audits)
    assert again.writes == 0 and again.unchanged == 2 * LIST_PAGE + 50  # every page read: none created twice
    assert fake_api.count("GET", "Report") - pages == math.ceil((2 * LIST_PAGE + 50) / LIST_PAGE)
    asked = 0

    def runs_out_after_the_first_page() -> float:
        nonlocal asked
        asked += 1
        return math.inf if asked <= 2 else 0.0  # before the run, before the first page; then gone

    before = report_writes(fake_api)
    audits[0].findings = []
    with pytest.raises(NotLeader):
        ReportWriter(api_client(fake_api, tmp_path, "short"), "auto", runs_out_after_the_first_page).write(audits)
    assert asked == 3 and report_writes(fake_api) == before


def squatters_metric() -> float | None:
    return REGISTRY.get_sample_value("storage_affinity_report_squatters")


def test_twenty_1mb_tenant_reports_are_never_read_or_deleted_and_the_writer_holds_no_page_of_them(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    """Tenant reports carrying the writer's label, other names: it lists reports of its own name only (a field
    selector), so their bodies never reach it, and it deletes none of them."""
    tenant = create_tenant_reports(fake_api)
    assert len(json.dumps(fake_api.get("Report", "tenant-0", "big-00"))) > 1000 * 1000
    w = writer(fake_api, tmp_path)
    w.kind()  # discovery before the measurement
    runs = runs_beside_tenants(w)
    first, second, first_peak, second_peak = runs.first, runs.second, runs.first_peak, runs.second_peak
    print(
        f"\nwriter with twenty 1 MB tenant reports present: peak {first_peak / 2**20:.1f} MiB on the first run "
        f"({first.created} created), {second_peak / 2**20:.1f} MiB on the next ({second.deleted} deleted)"
    )
    assert tenant <= set(stored(fake_api))  # every tenant report is still there
    assert (first.created, first.squatters, second.deleted, second.replaced) == (21, 0, 1, 0)
    assert max(first_peak, second_peak) < 8 * 2**20  # the bound: bytes allocated at once, fake API included
    assert fake_api.listed["reports"] == second.unchanged + second.deleted  # its own only: no tenant body


def test_a_report_at_its_name_that_it_did_not_create_is_a_squatter_counted_logged_and_left_alone(
    fake_api: FakeKubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    foreign = tenant_report("shop", REPORT_NAME, 2000, labels={})  # another tool's, or a tenant's, unlabelled
    fake_api.create(foreign)
    w = writer(fake_api, tmp_path)
    with caplog.at_level(logging.WARNING, logger="webhook.audit.reports"):
        first = w.write(audited())
        again = w.write(audited())
    assert first.squatters == again.squatters == 1 and squatters_metric() == 1
    assert stored(fake_api)[("shop", REPORT_NAME)]["results"] == foreign["results"]  # left alone
    lines = [r.getMessage() for r in caplog.records if "did not create" in r.getMessage()]
    assert lines == [
        "policy reports: a Report named storage-affinity-webhook that this writer did not create holds the name in "
        "namespace shop; their findings are not published until it is deleted"
    ]  # once, not at every run

    fake_api.delete("Report", "shop", REPORT_NAME)
    after = w.write(audited())
    assert (after.created, after.squatters, squatters_metric()) == (1, 0, 0)
    assert stored(fake_api)[("shop", REPORT_NAME)]["metadata"]["labels"] == {MANAGED_BY: SOURCE}


def test_a_copy_of_its_label_on_a_report_it_did_not_create_earns_no_write(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    """A tenant deletes the writer's report and creates its own with the same name and label: the UID differs,
    so it is a squatter, neither replaced nor deleted, also once the namespace is clean."""
    w = writer(fake_api, tmp_path)
    audits = audited()
    w.write(audits)
    fake_api.delete("Report", "shop", REPORT_NAME)
    forged = fake_api.create(tenant_report("shop", REPORT_NAME, 2000))
    counts = w.write(audits)
    assert (counts.squatters, counts.writes) == (1, 0)
    clean = [a for a in audits if a.namespace != "shop"]
    counts = w.write(clean)
    assert (counts.squatters, counts.writes) == (0, 0)
    assert stored(fake_api)[("shop", REPORT_NAME)] == forged  # untouched throughout


def test_a_new_writer_adopts_the_labelled_reports_of_its_name_and_forgets_after_losing_the_lease(
    fake_api: FakeKubeAPI, tmp_path: Path
) -> None:
    """After a restart (or a lost lease) no process remembers which reports it created: the labelled ones of its
    name are taken as its own, replaced in place rather than left as squatters."""
    audits = audited()
    writer(fake_api, tmp_path).write(audits)
    shop = stored(fake_api)[("shop", REPORT_NAME)]
    restarted = writer(fake_api, tmp_path)
    changed = [a for a in audits if a.namespace != "storage"]
    changed[0].findings = [*changed[0].findings[1:], AuditFinding("placementDrift", "spec", "moved", "warn")]
    counts = restarted.write(changed)
    assert (counts.squatters, counts.deleted) == (0, 1) and counts.replaced >= 1
    assert stored(fake_api)[("shop", REPORT_NAME)]["metadata"]["uid"] == shop["metadata"]["uid"]
    restarted.forget()
    fake_api.delete("Report", "shop", REPORT_NAME)
    fake_api.create(tenant_report("shop", REPORT_NAME, 2000))  # written by the other replica meanwhile, say
    assert restarted.write(changed).squatters == 0


def test_a_run_cut_by_an_api_error_remembers_what_it_created(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    w = writer(fake_api, tmp_path)
    w.write(findings(namespaces=1, per_namespace=1))  # a first run: from now on it adopts nothing
    audits = findings(namespaces=3, per_namespace=1)
    fake_api.fail(500, lambda r: r.method == "POST" and "/ns-002/" in r.path)
    with pytest.raises(ApiException):
        w.write(audits)
    fake_api.fail(None)
    counts = w.write(audits)
    assert (counts.created, counts.unchanged, counts.squatters) == (1, 2, 0)


def test_bodies_at_its_name_are_held_one_page_at_a_time(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    """The worst a tenant can make it read: copies of its label at its name, in many namespaces. The peak of a
    run does not grow with their number: one page of bodies at a time."""
    w = writer(fake_api, tmp_path)
    w.write(findings(namespaces=1, per_namespace=1))  # a first run: from now on it adopts nothing
    peaks = []
    for pages in (2, 4):
        namespaces = [f"ns-{n:03d}" for n in range(1, pages * LIST_PAGE + 1)]
        for namespace in namespaces:
            if fake_api.get("Report", namespace, REPORT_NAME) is None:
                fake_api.create(tenant_report(namespace, REPORT_NAME, 200_000))
        audits = findings(namespaces=len(namespaces) + 1, per_namespace=1)
        tracemalloc.start()
        try:
            counts = w.write(audits)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert (counts.squatters, counts.writes) == (len(namespaces), 0)
    print(
        f"\npeak with {2 * LIST_PAGE} and {4 * LIST_PAGE} 200 KB squatters: {[f'{p / 2**20:.1f} MiB' for p in peaks]}"
    )
    assert peaks[1] < 1.25 * peaks[0]
