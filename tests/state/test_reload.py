"""Policy hot reload and onLookupFailure through the app, against the fake API over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from rules import registry
from rules.context import Context, PodTarget
from rules.policy import policy_from_document
from testkit.fakeapi import FakeKubeAPI
from testkit.reviews import admission_review
from tests.state.conftest import NAMESPACE, Live, eventually
from tests.state.objects import pod, policy_map, velero_map
from tests.support import app_client
from webhook.policy.lastgood import FILE_NAME, Kept, ReplicaPolicy
from webhook.state.lookups import review_lookups

SOURCE = f"ConfigMap {NAMESPACE}/storage-affinity-policy"
VELERO_SOURCE = {"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}}}
AFFINITY = [{"nodeSelector": {"matchLabels": {"disk": "ssd"}}}]


def policy_errors() -> float | None:
    return REGISTRY.get_sample_value("storage_affinity_policy_errors")


def test_policy_configmap_is_loaded_changed_refused_and_reverted(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.create(policy_map({"enforcement": "warn"}))
    fake_api.create(policy_map({"enforcement": "deny"}, name="stray"))  # labelled but not the named one
    _, runtime = live()
    eventually(runtime.ready)
    assert (runtime.policy.enforcement, runtime.policy_source) == ("warn", SOURCE)

    fake_api.update(policy_map({"enforcement": "warn", "onLookupFailure": "deny"}))
    eventually(lambda: runtime.policy.on_lookup_failure == "deny", what="valid change applied")

    fake_api.update(policy_map({"enforcement": "maybe", "onLookupFailure": "allow"}))
    eventually(lambda: runtime.policy_problems, what="invalid change refused")
    assert runtime.policy.on_lookup_failure == "deny"  # the last good policy stays
    assert runtime.policy_problems == [f'{SOURCE} data[policy.yaml].enforcement: "maybe" is not one of deny, warn']
    assert policy_errors() == 1
    states = runtime.readiness()
    assert states["policy"].startswith(f"ok ({SOURCE}); last change refused: {SOURCE} data[policy.yaml].enforcement")
    assert runtime.ready()  # the last good policy is in effect

    fake_api.update(policy_map({"coScheduling": {"placement": "nodeName"}}))
    eventually(lambda: runtime.policy.placement == "nodeName" and not runtime.policy_problems)
    assert policy_errors() == 0
    assert runtime.readiness()["policy"] == f"ok ({SOURCE})"

    fake_api.delete("ConfigMap", NAMESPACE, "storage-affinity-policy")
    eventually(lambda: runtime.policy_source == "embedded default", what="deleted → base policy")
    assert runtime.policy.placement == "requiredAffinity"


def test_unlabelling_the_policy_configmap_reverts_to_the_base_policy(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.create(policy_map({"enforcement": "warn"}))
    base = policy_from_document({"onLookupFailure": "deny"})
    _, runtime = live(base=base)
    eventually(lambda: runtime.ready() and runtime.policy.enforcement == "warn")
    fake_api.update(policy_map({"enforcement": "warn"}, labelled=False))
    eventually(lambda: runtime.policy is base, what="label removed → base policy")
    fake_api.update(policy_map({"enforcement": "warn"}))
    eventually(lambda: runtime.policy.enforcement == "warn" and runtime.policy_source == SOURCE)


def test_velero_configmap_named_by_the_policy_is_followed_and_kept_when_invalid(
    fake_api: FakeKubeAPI, live: Live
) -> None:
    fake_api.create(policy_map(VELERO_SOURCE))
    fake_api.create(velero_map({"loadAffinity": AFFINITY}))
    state, runtime = live()
    eventually(lambda: runtime.ready() and state.index.config_map("velero", "node-agent-config"))
    assert runtime.readiness()["velero-configmap"] == "ok"

    def affinity() -> object:
        cm = state.config_map("velero", "node-agent-config")
        return json.loads(cm["data"]["node-agent.json"])["loadAffinity"] if cm else None

    changed = [{"nodeSelector": {"matchLabels": {"disk": "nvme"}}}]
    fake_api.update(velero_map({"loadAffinity": changed}))
    eventually(lambda: affinity() == changed, what="valid Velero change applied")

    fake_api.update(velero_map({"loadAffinity": [{"nodeSelector": {}}]}))
    eventually(lambda: runtime.policy_problems, what="invalid Velero change refused")
    assert affinity() == changed
    assert runtime.policy_problems == [
        "ConfigMap velero/node-agent-config data[node-agent.json].loadAffinity[0].nodeSelector: "
        "must not be empty: an empty node selector term matches no node"
    ]
    # a policy change keeps showing the Velero problem (set_policy alone would clear it)
    fake_api.update(policy_map(VELERO_SOURCE | {"enforcement": "warn"}))
    eventually(lambda: runtime.policy.enforcement == "warn")
    assert len(runtime.policy_problems) == 1 and policy_errors() == 1

    fake_api.update(policy_map({"enforcement": "warn"}))  # the policy stops naming it
    eventually(lambda: state.index.config_map("velero", "node-agent-config") is None)
    assert runtime.policy_problems == [] and policy_errors() == 0
    assert state.config_map("velero", "node-agent-config") is None  # not followed: no GET either
    assert fake_api.count("GET", "ConfigMap", name=True) == 0


def test_velero_configmap_miss_is_fetched(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.create(policy_map(VELERO_SOURCE))
    state, runtime = live()
    eventually(runtime.ready)
    with fake_api.silently():
        fake_api.create(velero_map({"loadAffinity": AFFINITY}))
    with review_lookups():  # a review may fetch it: outside one, the synced watch is the answer
        assert state.config_map("velero", "node-agent-config") is not None
    assert fake_api.count("GET", "ConfigMap", name=True) == 1


# -- onLookupFailure through the app ----------------------------------------------------------------------


def reads_claims(ctx: Context, target: PodTarget) -> None:
    """A mover rule's first step: read each claim the pod mounts (what needs cluster state)."""
    for volume in target.spec.get("volumes") or ():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim and ctx.view.pvc(target.namespace, claim) is not None:
            target.patch.set("metadata", "annotations", "example", value="read")


def review(obj: dict[str, object]) -> dict[str, object]:
    return admission_review("CREATE", obj)


def lookup_failures(action: str) -> float:
    return (
        REGISTRY.get_sample_value("storage_affinity_lookup_failures_total", {"endpoint": "mutate", "action": action})
        or 0.0
    )


@pytest.mark.parametrize("action", ["allow", "deny"])
def test_api_down_follows_on_lookup_failure_and_fails_readiness(
    fake_api: FakeKubeAPI, live: Live, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    monkeypatch.setitem(registry.MUTATORS, "mover", reads_claims)
    fake_api.stop()
    # no policy ConfigMap to read: the base policy is in effect from the start (with one, there would be no policy
    # until it is read, and reviews would get 503)
    _, runtime = live(base=policy_from_document({"onLookupFailure": action}), policy_configmap="")
    client = app_client(runtime)
    mover = pod("mover", claim="data")
    mover["metadata"]["annotations"] = {"storage-affinity.io/role": "mover"}
    before = lookup_failures(action)

    response = client.post("/mutate", json=review(mover)).get_json()["response"]

    reason = "cluster state unavailable: GET PersistentVolumeClaim apps/data failed within 0.5s: cannot connect"
    if action == "allow":
        assert response["allowed"] is True and "patch" not in response
        assert response["warnings"][0].startswith("storage-affinity-webhook admitted this unchanged: ")
    else:
        assert response["allowed"] is False
        assert response["status"]["message"].startswith(f"storage-affinity-webhook denied: {reason}")
    assert lookup_failures(action) == before + 1
    ready = eventually(lambda: client.get("/readyz"))
    assert ready.status_code == 503
    assert "[-] pods: not synced (initial list" in ready.get_data(as_text=True)

    fake_api.start()  # and with the API back, the same review reads the claim
    fake_api.create({"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "apps"}, "spec": {}})
    eventually(lambda: client.get("/readyz").status_code == 200, what="ready once the API is back")
    response = client.post("/mutate", json=review(mover)).get_json()["response"]
    assert response["allowed"] is True and "patch" in response


# -- the policy in effect in a replica (its workers share a directory) -------------------------------------


def test_a_worker_started_while_the_configmap_is_invalid_applies_what_its_siblings_apply(
    fake_api: FakeKubeAPI, live: Live, tmp_path: Path
) -> None:
    fake_api.create(policy_map({"enforcement": "warn"}))
    _, first = live(replica=tmp_path)
    eventually(lambda: first.ready() and first.policy.enforcement == "warn")
    fake_api.update(policy_map({"enforcement": "maybe"}))
    eventually(lambda: first.policy_problems, what="refused by the running worker")

    _, second = live(replica=tmp_path)
    eventually(second.loaded)
    assert (second.policy.enforcement, second.policy_source) == ("warn", SOURCE)
    assert second.readiness()["policy"] == first.readiness()["policy"]
    assert second.ready() and second.unavailable() is None

    fake_api.update(policy_map({"enforcement": "warn", "onLookupFailure": "deny"}))
    eventually(lambda: first.policy.on_lookup_failure == second.policy.on_lookup_failure == "deny")


def test_a_worker_that_started_before_its_sibling_recorded_a_policy_adopts_it_when_the_configmap_is_invalid(
    fake_api: FakeKubeAPI, live: Live, tmp_path: Path
) -> None:
    """Both workers boot together; the sibling accepts the policy and records it after this one looked, and the
    ConfigMap turns invalid before this one reads it: it must apply the sibling's policy, not have none."""
    with fake_api.holding(lambda r: "configmaps" in r.path and not r.watch):
        _, late = live(replica=tmp_path)  # looked at the record: nothing yet
        eventually(lambda: fake_api.held() >= 1, what="its ConfigMap list on its way")
        assert late.unavailable() is not None
        ReplicaPolicy(tmp_path).save({"policy.yaml": "enforcement: warn\n"})  # the sibling's acceptance
        fake_api.create(policy_map({"enforcement": "maybe"}))
    eventually(late.loaded)
    assert (late.policy.enforcement, late.policy_source, late.unavailable()) == ("warn", SOURCE, None)


def test_the_base_policy_is_what_the_replica_keeps_once_the_configmap_was_deleted(
    fake_api: FakeKubeAPI, live: Live, tmp_path: Path
) -> None:
    fake_api.create(policy_map({"enforcement": "warn"}))
    base = policy_from_document({"onLookupFailure": "deny"})
    _, first = live(base=base, replica=tmp_path)
    eventually(lambda: first.ready() and first.policy.enforcement == "warn")
    fake_api.delete("ConfigMap", NAMESPACE, "storage-affinity-policy")
    eventually(lambda: first.policy is base)
    fake_api.create(policy_map({"enforcement": "maybe"}))
    eventually(lambda: first.policy_problems, what="refused by the running worker")

    _, second = live(base=base, replica=tmp_path)
    eventually(second.loaded)
    assert second.policy is base and second.ready()


def test_with_no_valid_policy_ever_a_worker_has_none_and_refuses_reviews(
    fake_api: FakeKubeAPI, live: Live, tmp_path: Path
) -> None:
    fake_api.create(policy_map({"enforcement": "maybe"}))
    _, runtime = live(replica=tmp_path)
    eventually(runtime.loaded)
    why = f"{SOURCE} is invalid and this replica has had no valid policy from it"
    assert runtime.unavailable() == f"storage-affinity-webhook has no valid policy: {why}"
    assert runtime.readiness()["policy"] == (
        f'no valid policy: {why}; refused: {SOURCE} data[policy.yaml].enforcement: "maybe" is not one of deny, warn'
    )
    assert not runtime.ready()
    response = app_client(runtime).post("/mutate", json=review(pod("mover")))
    assert (response.status_code, response.get_data(as_text=True)) == (503, f"{runtime.unavailable()}\n")

    fake_api.update(policy_map({"enforcement": "warn"}))
    eventually(lambda: runtime.ready() and runtime.policy.enforcement == "warn")
    assert runtime.unavailable() is None
    _, second = live(replica=tmp_path)  # what it accepted is now the replica's
    assert second.policy.enforcement == "warn" and second.policy_source == SOURCE


def test_until_the_configmap_is_read_a_worker_is_not_loaded_and_applies_only_its_replicas_policy(
    fake_api: FakeKubeAPI, live: Live, tmp_path: Path
) -> None:
    fake_api.create(policy_map({"enforcement": "warn"}))
    with fake_api.holding(lambda r: r.method == "GET" and not r.watch and "configmaps" in r.path):
        _, runtime = live(replica=tmp_path)
        assert not runtime.loaded()
        assert runtime.unavailable() == f"storage-affinity-webhook has no valid policy: {SOURCE} not read yet"
    eventually(lambda: runtime.loaded() and runtime.ready())
    with fake_api.holding(lambda r: r.method == "GET" and not r.watch and "configmaps" in r.path):
        _, second = live(replica=tmp_path)
        assert not second.loaded()
        assert (second.policy.enforcement, second.unavailable()) == ("warn", None)


def test_a_damaged_record_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    shared = ReplicaPolicy(tmp_path)
    assert shared.load() is None
    shared.save({"policy.yaml": "enforcement: warn\n"})
    assert shared.load() == Kept({"policy.yaml": "enforcement: warn\n"})
    shared.save(None)
    assert shared.load() == Kept(None)
    for text in ("{", '{"configMapData": 3}', "[]"):
        shared.path.write_text(text)
        assert shared.load() is None
    assert [r.levelname for r in caplog.records] == ["ERROR"] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]  # nothing left aside
