"""The validation examples: `review` exits 1 on each and lists every problem with its field path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import EXAMPLES, load_yaml, validate_strict
from webhook.cli.main import main

DISK = "metadata.annotations[{}]"
EXPECTED = {
    "disk-contradiction-pod.yaml": [
        (
            DISK.format("antiaffinity.volumes.csi-baremetal.dell.com/labels"),
            '"app=db" is not key=value:namespace (no ":namespace")',
        ),
        (
            DISK.format("affinity.volumes.csi-baremetal.dell.com/dedicated"),
            '"true" and affinity.volumes.csi-baremetal.dell.com/tolerations are the two alternative ways to '
            "dedicate disks: use one",
        ),
        (
            DISK.format("antiaffinity.volumes.csi-baremetal.dell.com/labels"),
            '"app=cache:shop" matches this pod itself: with pod-label-required its volumes must avoid the disk '
            "pod-bound-required puts them on; drop the item or use pod-label-preferred",
        ),
    ],
    "pinned-away-pod.yaml": [
        (
            "spec.nodeName",
            'pins the pod to node "ip-10-0-1-17.ec2.internal", but volume "data" (claim cache-data) is bound to '
            "PV local-pv-cache-0, usable only on nodes with kubernetes.io/hostname In [ip-10-0-2-42]: "
            "the pod could never mount it",
        ),
    ],
    "policy-configmap-broken.yaml": [
        ("data[policy.yaml].coScheduling.copyTolerations", "must be true or false, not string"),
        (
            "data[policy.yaml].coScheduling.placement",
            '"hostname" is not one of requiredAffinity, nodeSelector, nodeName',
        ),
        ("data[policy.yaml].enforcement", '"warm" is not one of deny, warn'),
        (
            "data[policy.yaml].excludedNamespaces[1]",
            "'Monitoring' is not a DNS-1123 label (lower case alphanumerics and '-', alphanumeric at both ends)",
        ),
        (
            "data[policy.yaml].loadAffinity[0].nodeSelector",
            "must not be empty: an empty node selector term matches no node",
        ),
        ("data[policy.yaml].validation.diskAnnotation", 'unknown field (did you mean "diskAnnotations"?)'),
    ],
    "bad-annotations-deployment.yaml": [
        ("spec.template.metadata.annotations[storage-affinity.io/rol]", 'unknown annotation (did you mean "role"?)'),
        (
            "spec.template." + DISK.format("affinity.volumes.csi-baremetal.dell.com/types"),
            'dedicated-required needs affinity.volumes.csi-baremetal.dell.com/dedicated: "true" (disks dedicated '
            "automatically) or affinity.volumes.csi-baremetal.dell.com/tolerations (disks tainted by hand)",
        ),
    ],
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_review_denies_with_every_problem(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / name
    validate_strict(load_yaml(path))
    code = main(["review", "-f", str(path), "--cluster", str(EXAMPLES / "cluster.yaml"), "-o", "json"])
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 1
    assert result["allowed"] is False
    assert [(v["field"], v["message"]) for v in result["violations"]] == EXPECTED[name]
    problems = "; ".join(f"({i}) {f}: {m}" for i, (f, m) in enumerate(EXPECTED[name], 1))
    noun = "problem" if len(EXPECTED[name]) == 1 else "problems"
    assert err.strip().endswith(f"Error: storage-affinity-webhook denied: {len(EXPECTED[name])} {noun}: {problems}")


def test_the_other_examples_still_pass_with_the_extended_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = str(EXAMPLES / "cluster.yaml")
    for name in ("plain-pod.yaml", "mover-pod.yaml"):
        assert main(["review", "-f", str(EXAMPLES / name), "--cluster", cluster, "-o", "json"]) == 0, name
        assert json.loads(capsys.readouterr().out)["violations"] == []


def test_the_pinned_pod_on_the_volume_node_is_allowed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = load_yaml(EXAMPLES / "pinned-away-pod.yaml")
    pod["spec"]["nodeName"] = "ip-10-0-2-42.ec2.internal"
    moved = tmp_path / "pod.yaml"
    moved.write_text(json.dumps(pod))
    assert main(["review", "-f", str(moved), "--cluster", str(EXAMPLES / "cluster.yaml")]) == 0
    assert json.loads(capsys.readouterr().out)["violations"] == []
