"""The cache series a server on static state publishes: what the live watches publish, for the same alert and
panels (their presence on the first scrape is tests/chart/test_monitoring_first_scrape.py)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from webhook.state.index import KINDS
from webhook.state.live import _WATCH_OF
from webhook.state.optional import OPTIONAL_GROUPS
from webhook.state.static import StaticCacheGauges, resource_name


def test_each_kind_is_named_as_its_live_watch() -> None:
    watched = dict(_WATCH_OF) | {kind: plural for group in OPTIONAL_GROUPS for plural, kind in group.resources}
    assert {kind: resource_name(kind) for kind in watched} == watched
    assert resource_name("Pod") == "pods"
    assert resource_name("ConfigMap") == "configmaps"


def test_every_kind_is_synced_and_aged_from_when_the_files_were_read() -> None:
    now = [100.0]
    gauges = StaticCacheGauges(read_at=100.0, clock=lambda: now[0])
    gauges.publish()
    now[0] = 142.5
    gauges.publish()
    for kind in KINDS:
        labels = {"resource": resource_name(kind)}
        assert REGISTRY.get_sample_value("storage_affinity_cache_synced", labels) == 1.0, kind
        assert REGISTRY.get_sample_value("storage_affinity_cache_age_seconds", labels) == 42.5, kind
