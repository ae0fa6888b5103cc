"""Every series an alert or a dashboard panel reads exists from the first scrape of a fresh server, in both modes.

A series born with its first event makes a panel show "No data" rather than 0, and `rate()` misses that first
event (it needs a sample before it). A real server (gunicorn, two workers, TLS) runs with its defaults (the audit
on) in each mode: live against the fake API, and static from `--cluster` manifests (what `make run` serves). Each
is scraped once, as soon as it is ready, before any review: every metric that any alert expression, dashboard
panel or dashboard variable names must have a sample in that scrape.

Metrics others export (`up`, kube-apiserver's fail-open count: `EXTERNAL_METRICS`) are not the server's to have.
The one other exception is a series per configured object: `storage_affinity_load_affinity_nodes` has a series per
loadAffinity entry in force, so with no entry it has none (its panel shows no row and its alert compares current
values, never a rate), and with entries the audit publishes them (tests/webhook/test_nodeagent_metrics.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rules.causes import CODES, ENDED_CODES
from rules.outcomes import STARTED
from testkit import ROOT
from testkit.fakeapi import running_fake_api
from testkit.server import running_server
from tests.chart.monitoring_helpers import (
    EXTERNAL_METRICS,
    Query,
    alert_queries,
    dashboard,
    dashboard_queries,
    metric_names,
    rule_groups,
    variable_queries,
)
from tests.state.objects import node, storage_class
from webhook.state.index import KINDS
from webhook.state.static import resource_name

pytestmark = pytest.mark.e2e

_BOARD = dashboard()
QUERIES = [*dashboard_queries(_BOARD, "saw"), *variable_queries(_BOARD), *alert_queries(rule_groups())]
#: Metrics with a series per configured object, none without one (see the module docstring).
PER_OBJECT = frozenset({"storage_affinity_load_affinity_nodes"})
DECIDED = "storage_affinity_admission_decisions_total"
#: The cluster `make run` serves (the Makefile's CLUSTER).
CLUSTER_EXAMPLE = ROOT / "examples" / "cluster.yaml"


def sampled(exposition: str) -> set[str]:
    """The name of every sample in the exposition (a family declared without samples has none)."""
    return {sample.name for family in text_string_to_metric_families(exposition) for sample in family.samples}


def first_scrape_of(tmp: Path, *args: str) -> str:
    """The exposition of the server's first scrape, taken as soon as it is ready."""
    with running_server(tmp, *args) as server, server.session() as session:
        return str(session.get(server.url + "/metrics", timeout=10).text)


@pytest.fixture(scope="module")
def live_exposition(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp: Path = tmp_path_factory.mktemp("first-scrape-live")
    with running_fake_api(node("n1"), storage_class("fast")) as api:
        return first_scrape_of(tmp, "--kubeconfig", str(api.write_kubeconfig(tmp / "kubeconfig")))


@pytest.fixture(scope="module")
def static_exposition(tmp_path_factory: pytest.TempPathFactory) -> str:
    return first_scrape_of(tmp_path_factory.mktemp("first-scrape-static"), "--cluster", str(CLUSTER_EXAMPLE))


@pytest.fixture(scope="module", params=["live", "static"])
def first_exposition(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_exposition"))


def samples(exposition: str, name: str) -> dict[str, float]:
    """The value of each sample of a metric labelled by `resource`."""
    return {
        sample.labels["resource"]: sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == name
    }


@pytest.fixture(scope="module")
def first_scrape(first_exposition: str) -> set[str]:
    return sampled(first_exposition)


def test_first_scrape_has_a_stuck_pod_series_for_every_cause(first_exposition: str) -> None:
    """The "Stuck storage pods by cause" panel shows each cause, 0 until a pod has it."""
    causes = {
        sample.labels["cause"]: sample.value
        for family in text_string_to_metric_families(first_exposition)
        for sample in family.samples
        if sample.name == "storage_affinity_audit_stuck_pods"
    }
    assert causes == dict.fromkeys(CODES, 0.0)


def test_first_scrape_has_a_failed_pod_series_for_every_cause_and_the_decisions_panel(first_exposition: str) -> None:
    """The "Storage pods that ended Failed, by cause" panel shows each cause at 0; the decisions panel has its
    series before the first storage pod."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(first_exposition):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    failed = {labels["cause"]: value for labels, value in found["storage_affinity_audit_failed_pods"]}
    assert failed == dict.fromkeys(ENDED_CODES, 0.0)
    decided = {(labels["family"], labels["decision"], labels["why"]): value for labels, value in found[DECIDED]}
    assert decided == dict.fromkeys(STARTED, 0.0)


@pytest.mark.parametrize("query", [pytest.param(q, id=q.where) for q in QUERIES])
def test_first_scrape_has_every_series_the_expression_reads(first_scrape: set[str], query: Query) -> None:
    missing = metric_names(query.expr) - first_scrape - PER_OBJECT - set(EXTERNAL_METRICS)
    assert not missing, f"{query.where}: no sample of {sorted(missing)} in the first scrape"


def test_the_check_covers_every_alert_and_the_stuck_pod_panel() -> None:
    named = set().union(*(metric_names(q.expr) for q in QUERIES))
    assert {"storage_affinity_audit_stuck_pods", "storage_affinity_lookup_failures_total"} <= named
    assert {"storage_affinity_cache_age_seconds", "storage_affinity_admission_duration_seconds_bucket"} <= named


def test_a_family_without_samples_is_not_counted() -> None:
    declared_only = "# HELP x_total X.\n# TYPE x_total counter\n"
    assert sampled(declared_only) == set()
    assert sampled(declared_only + "x_total 0.0\n") == {"x_total"}


def test_first_scrape_has_the_report_squatters_series_at_zero(first_exposition: str) -> None:
    """Read by no alert or panel of the chart, but an operator's own alert on it must see 0, not "No data"."""
    values = [
        sample.value
        for family in text_string_to_metric_families(first_exposition)
        for sample in family.samples
        if sample.name == "storage_affinity_report_squatters"
    ]
    assert values == [0.0]


def test_a_static_server_has_every_kind_synced_from_its_first_scrape(static_exposition: str) -> None:
    """The files are read whole before the first connection: StorageAffinityWebhookCacheNotSynced never fires, and
    the cache panels show each kind the index holds under the resource name the live watches use (the names:
    tests/state/test_static_cache.py)."""
    resources = {resource_name(kind) for kind in KINDS}
    assert {"pods", "persistentvolumeclaims", "storageclasses", "volumesnapshotcontents"} <= resources
    assert samples(static_exposition, "storage_affinity_cache_synced") == dict.fromkeys(resources, 1.0)
    ages = samples(static_exposition, "storage_affinity_cache_age_seconds")
    assert set(ages) == resources
    assert all(age >= 0 for age in ages.values())
