"""`review --kubeconfig`: against the test API server (testkit/fakeapi/), the same answer as the real server
(gunicorn, TLS, live state) gives for the same object, under the cluster's policy ConfigMap, from only the reads
this one review needs: never the pods of every namespace (the fake API's request log says which calls it made)."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from rules.cluster import LookupFailed
from testkit.fakeapi import FakeKubeAPI, running_fake_api
from testkit.reviews import admission_review
from testkit.server import Server, running_server
from tests.support import EXAMPLES, load_yaml, manifest_objects
from tests.webhook.commands import run_command
from tests.webhook.review_checks import check_response, patch_of
from webhook.state.apisource import load_configuration
from webhook.state.ondemand import USER_AGENT, OnDemandView

pytestmark = pytest.mark.e2e

POLICY_FILE = EXAMPLES / "policy-load-affinity.yaml"
NAMESPACE = "saw-system"  # the server's own namespace (testkit/server.py), where its policy ConfigMap is
POLICY = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "storage-affinity-policy",
        "namespace": NAMESPACE,
        "labels": {"storage-affinity.io/policy": "true"},
    },
    "data": {"policy.yaml": POLICY_FILE.read_text()},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeKubeAPI, Server, Path]]:
    tmp = tmp_path_factory.mktemp("live-review")
    with running_fake_api(*manifest_objects(EXAMPLES / "cluster.yaml"), POLICY) as api:
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
        with running_server(tmp, "--kubeconfig", str(kubeconfig), workers=1) as server:
            yield api, server, kubeconfig


def server_answer(server: Server, obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server would get from both webhooks: mutate, apply the patch, validate the result."""
    with server.session() as session:
        body = admission_review("CREATE", obj, uid="m")
        mutated = session.post(server.url + "/mutate", json=body, timeout=10).json()
        patch = check_response(body, mutated, mutating=True)
        final = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
        body = admission_review("CREATE", final, uid="v")
        validated = session.post(server.url + "/validate", json=body, timeout=10).json()
        check_response(body, validated, mutating=False)
    warnings = mutated["response"].get("warnings", []) + validated["response"].get("warnings", [])
    return {
        "allowed": mutated["response"]["allowed"] and validated["response"]["allowed"],
        "patch": patch_of(mutated["response"]),
        "warnings": list(dict.fromkeys(warnings)),
    }


def live_review(kubeconfig: Path, path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = ["review", "-f", str(path), "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, *extra]
    return run_command(*command)


def reads(api: FakeKubeAPI, since: int) -> list[str]:
    """The calls `review` made since `since`, as `METHOD path?labelSelector`."""
    return [
        f"{r.method} {r.path}" + (f"?labelSelector={r.query['labelSelector']}" if "labelSelector" in r.query else "")
        for r in api.requests[since:]
        if r.agent.startswith(USER_AGENT)
    ]


@pytest.mark.parametrize("example", ["mover-pod.yaml", "backup-pod.yaml", "plain-pod.yaml"])
def test_a_live_review_answers_as_the_server_does(cluster: tuple[FakeKubeAPI, Server, Path], example: str) -> None:
    api, server, kubeconfig = cluster
    obj = load_yaml(EXAMPLES / example)
    expected = server_answer(server, obj)
    assert bool(expected["patch"]) is (example != "plain-pod.yaml"), "the mover and the backup pod are placed"
    since = len(api.requests)
    result = live_review(kubeconfig, EXAMPLES / example)
    assert result.returncode == (0 if expected["allowed"] else 1), result.stderr
    out = json.loads(result.stdout)
    assert {k: out[k] for k in expected} == expected
    assert out["decisions"], "the reasons the server does not show"
    calls = reads(api, since)
    assert f"GET /api/v1/namespaces/{NAMESPACE}/configmaps/storage-affinity-policy" in calls
    assert "GET /api/v1/pods" not in calls, "never the pods of every namespace"
    namespace = obj["metadata"]["namespace"]
    pod_reads = [c for c in calls if "/pods" in c]
    assert all(c.startswith(f"GET /api/v1/namespaces/{namespace}/pods") for c in pod_reads), pod_reads
    assert len(calls) <= 12, calls


def test_what_each_review_reads(cluster: tuple[FakeKubeAPI, Server, Path]) -> None:
    api, _, kubeconfig = cluster
    since = len(api.requests)
    assert live_review(kubeconfig, EXAMPLES / "mover-pod.yaml").returncode == 0
    mover = reads(api, since)
    # the claim's holder is found among the pods of the mover's namespace; no node-agent list for a mover
    assert [c for c in mover if "/pods" in c] == ["GET /api/v1/namespaces/shop/pods"]
    assert "GET /api/v1/namespaces/shop/persistentvolumeclaims/data-db-0" in mover
    since = len(api.requests)
    assert live_review(kubeconfig, EXAMPLES / "backup-pod.yaml").returncode == 0
    backup = reads(api, since)
    # a backup pod asks only where Velero's node-agents run: pods by their label, not every pod
    assert [c for c in backup if "/pods" in c] == ["GET /api/v1/namespaces/velero/pods?labelSelector=role=node-agent"]
    since = len(api.requests)
    assert live_review(kubeconfig, EXAMPLES / "plain-pod.yaml").returncode == 0
    assert [c for c in reads(api, since) if "/pods" in c] == [], "a pod without claims needs no pod"


def test_without_a_policy_configmap_the_embedded_policy_applies_and_policy_overrides(
    cluster: tuple[FakeKubeAPI, Server, Path],
) -> None:
    _, _, kubeconfig = cluster
    with_cluster_policy = json.loads(live_review(kubeconfig, EXAMPLES / "backup-pod.yaml").stdout)
    assert with_cluster_policy["object"]["spec"]["tolerations"] == [
        {"key": "node-role.example.com/backup", "operator": "Exists", "effect": "NoSchedule"}
    ]
    elsewhere = json.loads(live_review(kubeconfig, EXAMPLES / "backup-pod.yaml", "--policy-configmap", "absent").stdout)
    assert "tolerations" not in elsewhere["object"]["spec"]  # the embedded default has no loadAffinity
    # the first decision says which policy judged
    assert with_cluster_policy["decisions"][0] == f"policy: ConfigMap {NAMESPACE}/storage-affinity-policy"
    assert elsewhere["decisions"][0] == f"policy: embedded default (no ConfigMap {NAMESPACE}/absent)"
    given = live_review(
        kubeconfig, EXAMPLES / "backup-pod.yaml", "--policy-configmap", "absent", "--policy", str(POLICY_FILE)
    )
    assert (
        json.loads(given.stdout)["object"]["spec"]["tolerations"]
        == with_cluster_policy["object"]["spec"]["tolerations"]
    )
    assert json.loads(given.stdout)["decisions"][0] == f"policy: {POLICY_FILE}"


def test_an_api_that_fails_is_exit_2_not_the_fail_open_answer(tmp_path: Path) -> None:
    with running_fake_api(*manifest_objects(EXAMPLES / "cluster.yaml")) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        api.fail(503, lambda r: r.path.endswith("/persistentvolumeclaims/data-db-0"))
        result = live_review(kubeconfig, EXAMPLES / "mover-pod.yaml")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "storage-affinity-webhook: the Kubernetes API failed, so this is not what the server would answer: "
        "GET PersistentVolumeClaim shop/data-db-0: the API server answered 503 Service Unavailable\n"
    )


def test_live_usage_errors_are_exit_2(tmp_path: Path) -> None:
    both = live_review(
        tmp_path / "kubeconfig", EXAMPLES / "plain-pod.yaml", "--cluster", str(EXAMPLES / "cluster.yaml")
    )
    assert both.returncode == 2
    assert "--cluster reads manifests, --live and --kubeconfig the API" in both.stderr
    missing = live_review(tmp_path / "kubeconfig", EXAMPLES / "plain-pod.yaml")
    assert missing.returncode == 2
    assert f"{tmp_path / 'kubeconfig'}: cannot read: No such file or directory" in missing.stderr


def test_a_list_longer_than_one_review_reads_stops_at_its_bound(tmp_path: Path) -> None:
    pods = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "big"}, "spec": {}}
        for i in range(7)
    ]
    with running_fake_api(*pods) as api:
        configuration, _ = load_configuration(api.write_kubeconfig(tmp_path / "kubeconfig"))
        view = OnDemandView(configuration, page_size=2, max_pages=2)
        try:
            with pytest.raises(LookupFailed, match="list pods in big: more than 4 objects"):
                view.pods_using_claim("big", "data")
        finally:
            view.close()
        assert api.count("GET", "Pod") == 3  # two pages kept, the third seen to hold more: never the rest
    assert view.failures == ["list pods in big: more than 4 objects, more than one review reads"]


def test_a_cross_namespace_source_without_a_grant_is_reviewed_live_as_the_server_does(
    cluster: tuple[FakeKubeAPI, Server, Path], tmp_path: Path
) -> None:
    """The on-demand view reads ReferenceGrants like every other kind the rules ask for: a mover whose claim is
    cloned from another namespace's claim gets the server's answer, the source not followed for want of a grant."""
    api, server, kubeconfig = cluster
    api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "topolvm-provisioner"},
            "provisioner": "topolvm.io",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "payroll-copy", "namespace": "tenant-a"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "topolvm-provisioner",
                "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "payroll", "namespace": "hr"},
            },
            "status": {"phase": "Pending"},
        }
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "volsync-copy",
            "namespace": "tenant-a",
            "labels": {"app.kubernetes.io/created-by": "volsync"},
        },
        "spec": {
            "containers": [{"name": "mover", "image": "quay.io/backube/volsync:0.11"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "payroll-copy"}}],
        },
    }
    expected = server_answer(server, pod)
    warning = (
        "claim payroll-copy not placed by its data source: claim hr/payroll is not followed: no ReferenceGrant in "
        "namespace hr lets claims of tenant-a use it"
    )
    assert warning in expected["warnings"], expected
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    since = len(api.requests)
    result = live_review(kubeconfig, path)
    assert result.returncode == 0, result.stderr
    assert {k: json.loads(result.stdout)[k] for k in expected} == expected
    assert "GET /apis/gateway.networking.k8s.io/v1beta1/namespaces/hr/referencegrants" in reads(api, since)
