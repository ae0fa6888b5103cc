"""Decisions end to end: the HTTPS server (static and live state) and `review` agree."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from rules.policy import default_policy
from testkit.fakeapi import running_fake_api
from testkit.reviews import admission_review
from testkit.server import Server, running_server
from tests.support import EXAMPLES, load_yaml, manifest_objects, validate_strict
from tests.webhook.review_checks import check_response, patch_of
from webhook.app.codec import fit_warning
from webhook.cli.review import as_request, review
from webhook.state.static import load_static_state

pytestmark = pytest.mark.e2e

NODE = "ip-10-0-1-17.ec2.internal"


#: The requester of CDI's worker pods: its controller's service account (the embedded policy's cdi.requesters).
CDI_CONTROLLER = "system:serviceaccount:cdi:cdi-sa"
VELERO = "system:serviceaccount:velero:velero"
TENANT = "system:serviceaccount:tenant-a:default"


def as_review(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    return admission_review("CREATE", obj, uid=uid)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("scenarios"), "--cluster", str(EXAMPLES / "cluster.yaml")) as srv:
        yield srv


@pytest.mark.parametrize("example", ["mover-pod.yaml", "plain-pod.yaml", "backup-pod.yaml", "restore-pod.yaml"])
def test_server_and_review_give_the_same_decision(server: Server, example: str) -> None:
    pod = load_yaml(EXAMPLES / example)
    offline = review(as_request(pod), default_policy(), load_static_state([EXAMPLES / "cluster.yaml"]))
    with server.session() as session:
        body = as_review(pod, "same-1")
        mutated = session.post(server.url + "/mutate", json=body, timeout=10).json()
        patch = check_response(body, mutated, mutating=True)
        assert patch == offline.patch
        result = jsonpatch.apply_patch(copy.deepcopy(pod), patch)
        validate_strict(result)
        validated = session.post(server.url + "/validate", json=as_review(result, "same-2"), timeout=10).json()
        check_response(as_review(result, "same-2"), validated, mutating=False)
        assert validated["response"]["allowed"] is offline.allowed
    if example == "mover-pod.yaml":
        terms = result["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
        ]


def test_live_state_places_a_mover_next_to_an_anchor_created_a_moment_before(tmp_path: Path) -> None:
    cluster = manifest_objects(EXAMPLES / "cluster.yaml")
    state = [obj for obj in cluster if not (obj["kind"] == "Pod" and obj["metadata"]["name"] == "db-0")]
    anchor = next(obj for obj in cluster if obj["kind"] == "Pod" and obj["metadata"]["name"] == "db-0")
    mover = load_yaml(EXAMPLES / "mover-pod.yaml")
    with running_fake_api(*state) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig), workers=2) as live, live.session() as session:
            server = live
            before = session.post(server.url + "/mutate", json=as_review(mover, "live-0"), timeout=10).json()
            assert patch_of(before["response"]) == [], "nothing holds the claim yet"
            api.create(anchor)
            deadline = time.monotonic() + 10
            while True:  # each worker's watch delivers the new pod within moments
                answers = [
                    session.post(server.url + "/mutate", json=as_review(mover, f"live-{i}"), timeout=10).json()
                    for i in range(4)
                ]
                if all(patch_of(a["response"]) for a in answers) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            for answer in answers:
                patch = patch_of(answer["response"])
                result = jsonpatch.apply_patch(copy.deepcopy(mover), patch)
                assert result["metadata"]["annotations"]["storage-affinity.io/co-scheduled-with"] == f"db-0/{NODE}"
                assert result["spec"]["tolerations"] == anchor["spec"]["tolerations"]
        # our own info lines reach the log, formatted like gunicorn's (time, pid, level, logger)
        assert re.search(
            r"^\[[-\d :+]+\] \[\d+\] \[INFO\] webhook\.state\.watch: pods: listed 0$", live.log.read_text(), re.M
        )


def _datasource_cluster() -> list[dict[str, Any]]:
    return manifest_objects(EXAMPLES / "cluster-datasources.yaml")


@pytest.mark.parametrize("served", [True, False], ids=["groups served", "groups absent"])
def test_live_state_places_a_snapshot_mover_and_absent_crds_change_nothing(tmp_path: Path, served: bool) -> None:
    """backube/volsync#1019 end to end: the snapshot and the VM come from watches of their API groups; on a
    cluster without those groups the server starts, is ready, and admits the pods unchanged with a warning."""
    mover = load_yaml(EXAMPLES / "snapshot-mover-pod.yaml")
    importer = load_yaml(EXAMPLES / "cdi-importer-pod.yaml")
    with running_fake_api(*_datasource_cluster()) as api:
        if not served:
            api.served_groups.clear()
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig)) as live, live.session() as session:
            deadline = time.monotonic() + 10
            while True:  # the optional groups are discovered and listed just after the core kinds
                answer = session.post(live.url + "/mutate", json=as_review(mover, "ds-0"), timeout=10).json()
                if patch_of(answer["response"]) or not served or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            check_response(as_review(mover, "ds-0"), answer, mutating=True)
            by_cdi = admission_review("CREATE", importer, uid="ds-1", userInfo={"username": CDI_CONTROLLER})
            followed = session.post(live.url + "/mutate", json=by_cdi, timeout=10).json()
            readiness = session.get(live.url + "/readyz?verbose", timeout=10)
    placed = jsonpatch.apply_patch(copy.deepcopy(mover), patch_of(answer["response"]))
    worker = jsonpatch.apply_patch(copy.deepcopy(importer), patch_of(followed["response"]))
    assert readiness.status_code == 200, readiness.text
    if served:
        assert placed["metadata"]["annotations"] == {
            "storage-affinity.io/data-source-placed": "volsync-db-backup-src=node-a"
        }
        validate_strict(placed)
        assert worker["spec"]["nodeSelector"] == {"kubevirt.io/schedulable": "true"}
    else:
        assert placed == mover
        assert worker == importer
        assert answer["response"]["warnings"] == [
            "claim volsync-db-backup-src not placed by its data source: "
            "VolumeSnapshot shop/volsync-db-backup-src does not exist"
        ]


def test_a_backup_role_is_granted_only_where_trusted_over_tls(tmp_path: Path) -> None:
    """The issue's tenant, through the real server: Velero's backup pod copied into a tenant's namespace gets no
    toleration, a warning naming the role, the namespace, the requester and the setting, and the validating webhook
    refuses it (family roleTrust); in Velero's namespace, or from a requester the policy trusts, it gets them."""
    policy = {**load_yaml(EXAMPLES / "policy-load-affinity.yaml"), "trust": {"requesters": [VELERO]}}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    backup = load_yaml(EXAMPLES / "backup-pod.yaml")
    tenant = copy.deepcopy(backup)
    tenant["metadata"]["namespace"] = "tenant-a"
    toleration = policy["tolerations"][0]
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--policy", str(tmp_path / "policy.yaml"))
    with running_server(tmp_path, *args) as srv, srv.session() as session:

        def ask(path: str, pod: dict[str, Any], user: str) -> dict[str, Any]:
            body = admission_review("CREATE", pod, userInfo={"username": user})
            answer: dict[str, Any] = session.post(srv.url + path, json=body, timeout=10).json()
            check_response(body, answer, mutating=path == "/mutate")
            response: dict[str, Any] = answer["response"]
            return response

        own = ask("/mutate", backup, "system:serviceaccount:velero:velero-node-agent")
        spoofed = ask("/mutate", tenant, TENANT)
        refused = ask("/validate", tenant, TENANT)
        trusted = ask("/mutate", tenant, VELERO)
    assert toleration in jsonpatch.apply_patch(copy.deepcopy(backup), patch_of(own))["spec"]["tolerations"]
    assert patch_of(spoofed) == []
    warning = (
        f"role backup (labels match roles.backup.selectors[0]) is not trusted in namespace tenant-a for requester "
        f"{TENANT}: none of its tolerations or placement applied (the policy's trust.namespaces or trust.requesters "
        "trusts it)"
    )
    assert spoofed["warnings"] == fit_warning(warning)
    assert (refused["allowed"], refused["status"]["code"]) == (False, 422)
    assert f"metadata.labels: {warning}" in refused["status"]["message"]
    assert toleration in jsonpatch.apply_patch(copy.deepcopy(tenant), patch_of(trusted))["spec"]["tolerations"]
