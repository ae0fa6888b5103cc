"""The API calls a review makes for objects the live index lacks, counted at the fake API: at most REVIEW_GETS per
review whatever the object names, a 404 remembered for MISS_TTL seconds, none outside a review once synced."""

from __future__ import annotations

import pytest

from rules.cluster import LookupFailed
from testkit.fakeapi import FakeKubeAPI, Request
from testkit.hostile import claims_pod
from testkit.reviews import admission_review
from tests.state.conftest import Live, eventually
from tests.state.objects import node, pod, pv, pvc, storage_class
from tests.support import app_client
from tests.webhook.review_checks import check_response
from webhook.runtime import Runtime
from webhook.state import lookups
from webhook.state.lookups import REVIEW_GETS, review_lookups


def calls(api: FakeKubeAPI) -> list[Request]:
    """The requests that are not watches: every GET, list and write the state made."""
    return [r for r in api.requests if not r.watch]


def listed(runtime: Runtime) -> bool:
    """Ready, and the optional groups discovered and listed: their first lists are no review's calls."""
    return runtime.loaded() and runtime.ready()


def seeded(api: FakeKubeAPI) -> None:
    for obj in (node("n1"), storage_class("fast"), pvc("data"), pv("pv-data"), pod("db-0", node="n1")):
        api.create(obj)


def test_a_review_naming_1000_missing_claims_makes_at_most_review_gets_calls(fake_api: FakeKubeAPI, live: Live) -> None:
    seeded(fake_api)
    _, runtime = live()
    eventually(lambda: listed(runtime))
    client = app_client(runtime)
    counts = []
    for attempt in range(2):  # the same pod again, as a controller retrying it would send it
        claims = [f"missing-{i:04d}" for i in range(1_000)]  # the review budget's most volumes
        sent = admission_review("CREATE", claims_pod(f"hostile-{attempt}", claims, namespace="apps"))
        before = len(calls(fake_api))
        answer = client.post("/mutate", json=sent).get_json()
        counts.append(len(calls(fake_api)) - before)
        check_response(sent, answer, mutating=True)
        assert answer["response"]["allowed"] is True
    print(f"\nAPI calls of two reviews naming 1,000 missing claims: {counts}")
    assert all(count <= REVIEW_GETS for count in counts), counts
    assert counts[0] == REVIEW_GETS  # the first claims were looked up: an object created a moment ago is found

    # A mover of a claim that exists is still placed by the same worker.
    placed = client.post("/mutate", json=admission_review("CREATE", claims_pod("mover", ["data"], namespace="apps")))
    assert "patch" in placed.get_json()["response"]


def test_a_claim_created_a_moment_ago_is_fetched_within_the_review(fake_api: FakeKubeAPI, live: Live) -> None:
    seeded(fake_api)
    state, runtime = live()
    eventually(runtime.ready)
    with fake_api.silently():  # the watch has not delivered it yet
        fake_api.create(pvc("fresh"))
    with review_lookups():
        assert state.pvc("apps", "fresh") is not None
    assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 1


def test_a_404_is_remembered_for_miss_ttl_then_asked_again(
    fake_api: FakeKubeAPI, live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded(fake_api)
    state, runtime = live()
    eventually(runtime.ready)
    for _ in range(3):
        with review_lookups():
            assert state.pvc("apps", "missing") is None
    assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 1
    monkeypatch.setattr(lookups, "MISS_TTL", 0.0)
    with review_lookups():
        assert state.pvc("apps", "other") is None  # remembered for no time at all
    with review_lookups():
        assert state.pvc("apps", "other") is None
    assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 3


def test_the_remembered_misses_are_bounded(fake_api: FakeKubeAPI, live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded(fake_api)
    monkeypatch.setattr(lookups, "MISSES_KEPT", 3)
    state, runtime = live()
    eventually(runtime.ready)
    for i in range(5):
        with review_lookups():
            assert state.pvc("apps", f"gone-{i}") is None
    assert len(state._misses) == 3
    with review_lookups():
        state.pvc("apps", "gone-0")  # dropped first: asked again
        state.pvc("apps", "gone-4")  # still remembered
    assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 6


def test_outside_a_review_a_synced_index_is_the_answer(fake_api: FakeKubeAPI, live: Live) -> None:
    """The audit reads the index: a stored pod's missing claims, PVs, classes and nodes cost no API call."""
    seeded(fake_api)
    state, runtime = live()
    eventually(lambda: listed(runtime))
    before = len(calls(fake_api))
    for i in range(100):
        assert state.pvc("apps", f"c{i}") is None
        assert state.pv(f"pv{i}") is None and state.storage_class(f"sc{i}") is None and state.node(f"gone-{i}") is None
    assert len(calls(fake_api)) == before


def test_before_the_first_list_a_review_past_its_gets_fails_the_lookup(fake_api: FakeKubeAPI, live: Live) -> None:
    seeded(fake_api)
    with fake_api.holding(lambda r: r.method == "GET" and r.path.endswith("/persistentvolumeclaims")):
        state, _ = live()
        eventually(lambda: fake_api.held() > 0, what="the claims' first list held")
        with review_lookups(gets=1):
            assert state.pvc("apps", "data") is not None  # its one GET
            with pytest.raises(
                LookupFailed,
                match=r"^PersistentVolumeClaim apps/other: not listed yet, and this review has made its 1 GETs$",
            ):
                state.pvc("apps", "other")
        assert fake_api.count("GET", "PersistentVolumeClaim", name=True) == 1


def test_no_get_for_the_volume_name_of_a_claim_that_is_not_bound(fake_api: FakeKubeAPI, live: Live) -> None:
    """A claim's `spec.volumeName` is its author's to write: a GET of a PV the index lacks, made for it, would
    answer sooner when that PV exists (an existing one is indexed) than when it does not. The PV of a claim the
    binder made Bound is still fetched when the index lacks it."""
    seeded(fake_api)
    pending = {**pvc("guess"), "status": {"phase": "Pending"}}
    pending["spec"] = {**pending["spec"], "volumeName": "pv-nowhere"}
    fake_api.create(pending)
    _, runtime = live()
    eventually(lambda: listed(runtime))
    client = app_client(runtime)
    with fake_api.silently():  # created a moment ago: the index lacks it, a GET would find it
        fake_api.create({**pvc("fresh"), "spec": {**pvc("fresh")["spec"], "volumeName": "pv-fresh"}})
        fake_api.create(pv("pv-fresh"))
    for endpoint in ("mutate", "validate"):
        sent = admission_review("CREATE", claims_pod(f"guess-{endpoint}", ["guess"], namespace="apps"))
        check_response(sent, client.post(f"/{endpoint}", json=sent).get_json(), mutating=endpoint == "mutate")
    assert fake_api.count("GET", "PersistentVolume", name=True) == 0
    sent = admission_review("CREATE", claims_pod("bound", ["fresh"], namespace="apps"))
    check_response(sent, client.post("/mutate", json=sent).get_json(), mutating=True)
    assert fake_api.count("GET", "PersistentVolume", name=True) == 1
