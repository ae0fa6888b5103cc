"""The index keeps what rules read, once: equal values repeated across objects are one object in memory."""

from __future__ import annotations

import gc

from rules.model import Json
from tests.state.objects import pod, pv, pvc
from webhook.state.index import ClusterIndex, bulk_ingest, trim

TOLERATIONS = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]


def replica(name: str) -> Json:
    obj = pod(name, claim=f"data-{name}", node="n1")
    obj["metadata"].update(
        uid=f"uid-{name}",
        resourceVersion="42",
        creationTimestamp="2026-11-21T08:00:00Z",
        labels={"app": "db"},
        annotations={"storage-affinity.io/placement": "nodeName", "kubectl.kubernetes.io/last-applied": "{...}"},
        managedFields=[{"manager": "kubectl"}],
    )
    obj["spec"]["tolerations"] = [dict(t) for t in TOLERATIONS]
    return obj


def test_a_pod_keeps_what_rules_read_and_nothing_else() -> None:
    kept = trim(replica("db-0"))
    assert kept["metadata"] == {
        "name": "db-0",
        "namespace": "apps",
        "uid": "uid-db-0",
        "creationTimestamp": "2026-11-21T08:00:00Z",
        "labels": {"app": "db"},
        "annotations": {"storage-affinity.io/placement": "nodeName"},
    }
    assert kept["spec"] == {
        "nodeName": "n1",
        "tolerations": TOLERATIONS,
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
    }
    assert kept["status"] == {"phase": "Running"}


def test_equal_values_of_different_objects_are_one_object() -> None:
    a, b = trim(replica("db-0")), trim(replica("db-1"))
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["status"] is b["status"]
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]
    c, d = trim(pvc("data-db-0")), trim(pvc("data-db-1"))
    assert c["spec"]["accessModes"] is d["spec"]["accessModes"]
    assert c["spec"]["volumeName"] != d["spec"]["volumeName"]


def test_pv_node_affinity_is_shared_and_claims_and_labels_are_not_kept_twice() -> None:
    def local(name: str) -> Json:
        obj = pv(name)
        obj["metadata"]["labels"] = {"topology.kubernetes.io/zone": "a"}
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}
        obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
        return obj

    a, b = trim(local("pv-a")), trim(local("pv-b"))
    assert a["spec"]["nodeAffinity"] is b["spec"]["nodeAffinity"]
    assert a["metadata"] == {"name": "pv-a"}


def test_a_shared_value_is_still_found_by_claim() -> None:
    index = ClusterIndex()
    for name in ("db-0", "db-1"):
        index.apply({**replica(name), "kind": "Pod"})
    assert [p["metadata"]["name"] for p in index.pods_using_claim("apps", "data-db-1")] == ["db-1"]


def test_bulk_ingest_pauses_the_collector_once_and_freezes_what_it_built() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with bulk_ingest():
        assert not gc.isenabled()
        with bulk_ingest():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner ingest must not re-enable the collector"
        built = [{"n": [i]} for i in range(1000)]  # containers the collector tracks (an int-only dict is not)
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(built)
    gc.unfreeze()
