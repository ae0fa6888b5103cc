"""`review` and `audit` see Velero's DataUploads (webhook/state/kinds.py): from `--cluster` files and, for the
audit, from the API in Velero's namespace alone (the policy names it); the backup pod of the exposer chain is
placed by its source volume, and the one held away from it gets its cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rules.model import Json
from testkit import yamldocs
from testkit.exposerchain import backup_pod
from testkit.fakeapi import running_fake_api
from tests.rules.test_exposer_property import NAME, SOURCE_TERMS, _cluster
from webhook.cli.main import main

POLICY = {"nodeAgent": {"namespace": "velero"}}


def _stuck_pod() -> Json:
    """The backup pod as a v1.17 exposer leaves it with load affinity for node-b: Pending, provisioning failed."""
    hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-b"]}
    pod = backup_pod(NAME, terms=[{"matchExpressions": [hostname]}])
    pod["metadata"]["creationTimestamp"] = "2026-11-20T10:00:00Z"
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulerError",
                "message": f'running PreBind plugin "VolumeBinding": provisioning failed for PVC "{NAME}"',
            }
        ],
    }
    return pod


def _files(tmp_path: Path, *extra: Json) -> tuple[str, str]:
    cluster, policy = tmp_path / "cluster.yaml", tmp_path / "policy.yaml"
    cluster.write_text(yaml.safe_dump_all([*_cluster([]), *extra]))
    policy.write_text(yaml.safe_dump(POLICY))
    return str(cluster), str(policy)


def test_review_places_the_backup_pod_from_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, policy = _files(tmp_path)
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(backup_pod(NAME)))
    code = main(["review", "-f", str(pod), "--cluster", cluster, "--policy", policy, "-o", "yaml"])
    out, err = capsys.readouterr()
    assert code == 0, err
    terms = yamldocs.load(out)["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    os = {"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [os, *SOURCE_TERMS[0]["matchExpressions"]]}]


def test_audit_names_the_cause_from_files_and_from_the_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, policy = _files(tmp_path, _stuck_pod())
    main(["audit", "--cluster", cluster, "--policy", policy, "-o", "json"])
    from_files = json.loads(capsys.readouterr().out)
    with running_fake_api(*_cluster([]), _stuck_pod()) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        main(["audit", "--kubeconfig", kubeconfig, "--policy", policy, "-o", "json"])
        from_api = json.loads(capsys.readouterr().out)
        uploads = [r.path for r in list(api.requests) if "/datauploads" in r.path]
    for report in (from_files, from_api):
        (stuck,) = [o for o in report["objects"] if o.get("cause")]
        assert stuck["cause"]["code"] == "BackupSnapshotElsewhere", stuck
        assert "DataUpload velero/" in stuck["cause"]["message"]
    assert uploads and all(path.startswith("/apis/velero.io/v2alpha1/namespaces/velero/") for path in uploads)
    (tmp_path / "policy.yaml").write_text("{}")  # without a Velero namespace, no DataUpload is read
    main(["audit", "--cluster", cluster, "--policy", policy, "-o", "json"])
    plain = json.loads(capsys.readouterr().out)
    assert "BackupSnapshotElsewhere" not in [o["cause"]["code"] for o in plain["objects"] if o.get("cause")]


def test_a_test_suite_sees_the_data_upload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`test`: the suite's cluster files hold the chain, its policy names Velero's namespace; the backup pod may
    only go to the node of the volume it backs up."""
    _files(tmp_path)  # cluster.yaml and policy.yaml, which the suite names
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(backup_pod(NAME)))
    suite = {
        "policy": "policy.yaml",
        "cluster": ["cluster.yaml"],
        "cases": [{"name": "exposer chain", "object": "pod.yaml", "expect": {"allowed": True, "nodes": ["node-a"]}}],
    }
    (tmp_path / "storage-affinity-test.yaml").write_text(yaml.safe_dump(suite))
    code = main(["test", str(tmp_path), "--root", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "exposer chain  pass" in out
