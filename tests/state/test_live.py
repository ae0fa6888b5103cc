"""LiveClusterState against a Kubernetes API over real HTTP: sync, events, expiry, breakage, misses, outages."""

from __future__ import annotations

import time

import pytest

from rules.cluster import LookupFailed
from rules.model import Json
from testkit.fakeapi import FakeKubeAPI
from tests.state.conftest import Live, eventually
from tests.state.objects import node, pod, pv, pvc, storage_class
from tests.support import dig
from webhook.state.lookups import review_lookups

RESOURCES = ("pods", "persistentvolumeclaims", "persistentvolumes", "storageclasses", "nodes", "policy-configmap")


def names(pods: list[Json]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


def seed(api: FakeKubeAPI) -> None:
    for obj in (
        pvc("data"),
        pv("pv-data"),
        storage_class("fast"),
        node("n1", zone="a"),
        node("n2", zone="b"),
        pod("db-0", node="n1"),
        pod("web", claim=None),
    ):
        api.create(obj)


def test_initial_sync_fills_every_index_and_makes_it_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    fake_api.delay(0.4, lambda r: r.method == "GET" and not r.watch and r.path.endswith("/pods"))
    state, runtime = live()

    pending = runtime.readiness()
    assert pending["pods"] == "not synced (initial list pending)"
    assert not runtime.ready()
    with pytest.raises(LookupFailed, match=r"^pods: not synced \(initial list pending\)$"):
        state.pods_using_claim("apps", "data")

    eventually(runtime.ready, what="ready after the initial lists")
    assert {name: runtime.readiness()[name] for name in RESOURCES} == dict.fromkeys(RESOURCES, "ok")
    assert names(state.pods_using_claim("apps", "data")) == {"db-0"}
    assert state.index.count("Pod") == 1  # "web" mounts no claim: not kept
    assert dig(state.pvc("apps", "data"), "spec", "volumeName") == "pv-data"
    assert state.pv("pv-data") is not None
    assert dig(state.storage_class("fast"), "volumeBindingMode") == "Immediate"
    assert {n["metadata"]["name"] for n in state.nodes()} == {"n1", "n2"}
    assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 0  # hits never GET


def test_paginated_list_is_read_to_the_end(fake_api: FakeKubeAPI, live: Live) -> None:
    for i in range(7):
        fake_api.create(pod(f"p{i}", claim="shared"))
    state, runtime = live(page_size=3)
    eventually(runtime.ready)
    assert names(state.pods_using_claim("apps", "shared")) == {f"p{i}" for i in range(7)}
    assert fake_api.count("GET", "Pod", watch=False) == 3


def test_added_modified_deleted_events_reach_the_indexes(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    state, runtime = live()
    eventually(runtime.ready)

    fake_api.create(pod("mover", claim="data", node=""))
    eventually(lambda: names(state.pods_using_claim("apps", "data")) == {"db-0", "mover"})

    fake_api.update(pod("db-0", node="n2", phase="Succeeded"))
    eventually(
        lambda: (
            {p["metadata"]["name"]: p["status"]["phase"] for p in state.pods_using_claim("apps", "data")}
            == {"db-0": "Succeeded", "mover": "Running"}
        )
    )

    fake_api.delete("Pod", "apps", "mover")
    eventually(lambda: names(state.pods_using_claim("apps", "data")) == {"db-0"})

    fake_api.update(node("n1", zone="c"))
    eventually(lambda: dig(state.node("n1"), "metadata", "labels") == {"zone": "c"})
    fake_api.delete("Node", "", "n2")
    eventually(lambda: {n["metadata"]["name"] for n in state.nodes()} == {"n1"})
    fake_api.delete("PersistentVolumeClaim", "apps", "data")
    eventually(lambda: state.index.pvc("apps", "data") is None)
    assert fake_api.count("GET", "Pod", watch=False) == 1  # events only: no re-list


def _changes_no_watch_sees(api: FakeKubeAPI) -> None:
    with api.silently():
        api.delete("Pod", "apps", "db-0")
        api.create(pod("db-1", node="n2"))
        api.update(node("n1", zone="moved"))


def _reflects_silent_changes(state: object) -> bool:
    from webhook.state.live import LiveClusterState

    assert isinstance(state, LiveClusterState)
    node_n1 = state.index.node("n1")
    return bool(
        names(state.index.pods_using_claim("apps", "data")) == {"db-1"}
        and node_n1
        and node_n1["metadata"]["labels"] == {"zone": "moved"}
    )


def test_a_relist_cut_between_pages_keeps_the_previous_state_whole(fake_api: FakeKubeAPI, live: Live) -> None:
    """Pages stream into a fresh index that replaces the old one only when the last page has arrived."""
    for i in range(7):
        fake_api.create(pod(f"p{i}", claim="shared"))
    state, runtime = live(page_size=3)
    eventually(runtime.ready)
    eventually(lambda: fake_api.watching("Pod"))
    lists_before = fake_api.count("GET", "Pod", watch=False)
    with fake_api.silently():
        fake_api.delete("Pod", "apps", "p0")
    fake_api.fail(500, when=lambda r: "continue" in r.query)
    fake_api.expire_watches("Pod")
    eventually(lambda: fake_api.count("GET", "Pod", watch=False) >= lists_before + 4, what="re-lists cut mid-way")
    assert names(state.pods_using_claim("apps", "shared")) == {f"p{i}" for i in range(7)}
    fake_api.fail(None)
    eventually(lambda: names(state.pods_using_claim("apps", "shared")) == {f"p{i}" for i in range(1, 7)})


@pytest.mark.parametrize("fault", ["expire", "break"])
def test_expired_or_broken_watch_relists_without_losing_an_update(
    fake_api: FakeKubeAPI, live: Live, fault: str
) -> None:
    seed(fake_api)
    state, runtime = live()

    # loaded(): ready() alone may come before discovery answers (`ok (discovery pending...)`), and the groups'
    # first lists would then be pending at the end
    eventually(lambda: runtime.loaded() and runtime.ready(), what="ready with the optional groups listed")
    eventually(lambda: fake_api.watching("Pod") and fake_api.watching("Node"))
    lists_before = fake_api.count("GET", "Pod", watch=False)

    _changes_no_watch_sees(fake_api)
    assert not _reflects_silent_changes(state)
    if fault == "expire":
        fake_api.expire_watches()
    else:
        fake_api.break_watches()

    eventually(lambda: _reflects_silent_changes(state), what="the re-list brought the missed changes")
    assert fake_api.count("GET", "Pod", watch=False) == lists_before + 1
    assert runtime.ready(), {k: v for k, v in runtime.readiness().items() if not v.startswith("ok")}
    # and the new watch works: it started from the re-list's resourceVersion
    fake_api.create(pod("db-2", node="n2"))
    eventually(lambda: names(state.pods_using_claim("apps", "data")) == {"db-1", "db-2"})


def test_watch_ended_by_the_server_resumes_from_its_version_without_a_relist(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    state, runtime = live()
    eventually(runtime.ready)
    eventually(lambda: fake_api.watching("Pod"))
    fake_api.end_watches("Pod")
    fake_api.create(pod("late", node="n1"))  # may land between two watches: the resumed watch replays it
    eventually(lambda: names(state.pods_using_claim("apps", "data")) == {"db-0", "late"})
    assert fake_api.count("GET", "Pod", watch=False) == 1
    assert fake_api.count("GET", "Pod", watch=True) >= 2


def test_cache_miss_is_served_by_one_get_and_cached(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    state, runtime = live()
    eventually(runtime.ready)
    with fake_api.silently():  # created a moment ago: the watch has not delivered it yet
        fake_api.create(pvc("fresh"))
        fake_api.create(node("n3"))
        fake_api.create(storage_class("slow"))
        fake_api.create(pv("pv-fresh"))

    with review_lookups():  # one review: a fresh claim, its PV, its class and a new node
        assert dig(state.pvc("apps", "fresh"), "spec", "volumeName") == "pv-fresh"
        assert state.pvc("apps", "fresh") is not None
        assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 1
        assert state.node("n3") is not None and state.node("n3") is not None
        assert state.storage_class("slow") is not None and state.pv("pv-fresh") is not None
    assert fake_api.count("GET", "Node", name=True) == 1
    assert fake_api.count("GET", "StorageClass", name=True) == 1
    assert fake_api.count("GET", "PersistentVolume", name=True) == 1

    with review_lookups():
        assert state.pvc("apps", "missing") is None  # a 404 is a plain miss
        assert state.pods_using_claim("apps", "missing") == []  # never a GET
    assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 2
    assert fake_api.count("GET", "Pod", name=True) == 0


def test_api_down_from_the_start_fails_lookups_and_readiness(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.stop()
    state, runtime = live()
    eventually(lambda: "initial list failing" in (runtime.readiness()["pods"]))
    assert runtime.readiness()["pods"] == "not synced (initial list failing: cannot connect to the API server)"
    assert not runtime.ready()
    with pytest.raises(LookupFailed, match=r"^GET PersistentVolumeClaim apps/data failed within 0.5s: cannot connect"):
        state.pvc("apps", "data")
    with pytest.raises(LookupFailed, match=r"^nodes: not synced"):
        list(state.nodes())

    fake_api.start()  # back on the same port: the backoff loop recovers on its own
    eventually(runtime.ready, what="recovered after the API came back")


def test_get_timeout_and_server_errors_raise_lookup_failed_within_budget(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    state, runtime = live(lookup_timeout=0.2)
    eventually(runtime.ready)

    fake_api.delay(0.8, lambda r: r.method == "GET" and r.path.endswith("/slow"))
    started = time.monotonic()
    with (
        review_lookups(),
        pytest.raises(LookupFailed, match=r"^GET PersistentVolumeClaim apps/slow failed within 0.2s: timed out$"),
    ):
        state.pvc("apps", "slow")
    assert time.monotonic() - started < 0.6
    fake_api.delay(None)

    fake_api.fail(503, lambda r: r.method == "GET" and r.path.endswith("/broken"))
    with review_lookups(), pytest.raises(LookupFailed, match=r"^GET Node broken: the API server answered 503"):
        state.node("broken")
    assert fake_api.count("GET", "Node", name=True) == 1  # one GET, no retries


def test_synced_state_outlives_an_outage_and_stays_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    state, runtime = live(stale_after=30.0)
    eventually(runtime.ready)
    fake_api.stop()
    eventually(lambda: not state.watches["pods"].connected)
    assert names(state.pods_using_claim("apps", "data")) == {"db-0"}  # served from the cache
    assert runtime.ready()  # a short outage does not take the webhook out of service
    with review_lookups(), pytest.raises(LookupFailed, match="cannot connect"):
        state.pvc("apps", "new")
    fake_api.start()
    fake_api.create(pod("after", node="n1"))
    eventually(lambda: names(state.pods_using_claim("apps", "data")) == {"db-0", "after"})


def test_a_long_outage_makes_a_synced_state_not_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    seed(fake_api)
    _, runtime = live(stale_after=0.2)
    eventually(runtime.ready)
    fake_api.stop()
    state_text = eventually(lambda: runtime.readiness()["pods"] != "ok" and runtime.readiness()["pods"])
    assert state_text.startswith("stale: cut off from the API for ")
    assert not runtime.ready()
