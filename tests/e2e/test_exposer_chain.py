"""Velero's CSI data mover on node-local storage end to end (vmware-tanzu/velero#7044): the real server over TLS,
its state from the fake API, places the backup pod of the exposer chain where its source volume lives, reading
the DataUpload in Velero's namespace alone through the chart's Role."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from testkit.exposerchain import backup_chain, backup_pod, data_upload, source_volume
from testkit.fakeapi import running_fake_api
from testkit.fakeapi.resources import PATH
from testkit.reviews import admission_review
from testkit.server import running_server
from tests.support import validate_strict
from tests.webhook.review_checks import check_response, patch_of

pytestmark = pytest.mark.e2e

NAME = "nightly-20261120-7hx2q"
VELERO = "system:serviceaccount:velero:velero"


def _node(name: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "topology.topolvm.io/node": name}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def _cluster() -> list[dict[str, Any]]:
    """Two TopoLVM nodes, the source claim shop/db on node-a, and the exposer chain of its DataUpload."""
    # a DataUpload of another namespace: never listed, the server's Role is in Velero's namespace alone
    elsewhere = data_upload(NAME, "shop", "db", namespace="tenant-a")
    return [
        _node("node-a"),
        _node("node-b"),
        *source_volume("node-a"),
        data_upload(NAME, "shop", "db"),
        elsewhere,
        *backup_chain(NAME),
    ]


def test_a_backup_pod_of_the_exposer_chain_is_placed_by_its_source_volume_over_tls(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"nodeAgent": {"namespace": "velero"}}))
    pod = backup_pod(NAME)
    with running_fake_api(*_cluster()) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = ("--kubeconfig", str(kubeconfig), "--policy", str(tmp_path / "policy.yaml"))
        with running_server(tmp_path, *args) as live, live.session() as session:
            body = admission_review("CREATE", pod, uid="du-0", userInfo={"username": VELERO})
            deadline = time.monotonic() + 10
            while True:  # the optional groups are discovered and listed just after the core kinds
                answer = session.post(live.url + "/mutate", json=body, timeout=10).json()
                if patch_of(answer["response"]) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            check_response(body, answer, mutating=True)
            placed = jsonpatch.apply_patch(copy.deepcopy(pod), patch_of(answer["response"]))
            again = admission_review("CREATE", placed, uid="du-1", userInfo={"username": VELERO})
            second = session.post(live.url + "/mutate", json=again, timeout=10).json()
            validated = session.post(live.url + "/validate", json=again, timeout=10).json()
        listed = [PATH.match(r.path) for r in list(api.requests)]
    terms = placed["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]},
                {"key": "topology.topolvm.io/node", "operator": "In", "values": ["node-a"]},
            ]
        }
    ]
    validate_strict(placed)
    assert "warnings" not in answer["response"]
    assert patch_of(second["response"]) == []  # no second copy
    assert validated["response"]["allowed"] is True
    uploads = [m for m in listed if m and m["plural"] == "datauploads"]
    assert uploads and {m["ns"] for m in uploads} == {"velero"}
