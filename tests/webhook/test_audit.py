"""`storage-affinity-webhook audit` over manifest files and over the (fake) Kubernetes API."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import yamldocs
from testkit.fakeapi import FakeKubeAPI, running_fake_api
from testkit.sourceobjects import data_volume
from tests.rules.test_vm_audit import cluster as vm_disk_cluster
from tests.support import DATA, EXAMPLES, load_yaml
from webhook.audit.command import api_configuration, objects_from_api
from webhook.cli.main import main

CLUSTER = [str(EXAMPLES / "cluster.yaml"), str(DATA / "audit" / "findings.yaml")]
POLICY = str(EXAMPLES / "policy-load-affinity.yaml")
CAUSES = load_yaml(DATA / "audit" / "causes.yaml")
FAMILIES = {
    "annotations",
    "coScheduling",
    "diskAnnotations",
    "loadAffinity",
    "object",
    "placement",
    "placementDrift",
    "policy",
}


@pytest.fixture(autouse=True)
def _webhook_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live audit judges by the policy of the webhook's namespace: $POD_NAMESPACE, as in the webhook's pod (no
    policy ConfigMap there unless a test creates one: the embedded default)."""
    monkeypatch.setenv("POD_NAMESPACE", "storage-affinity-system")


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["audit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_family_is_found_and_the_multi_attach_mover_comes_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "json")
    assert code == 1
    report = json.loads(out)
    families = {f["family"] for o in report["objects"] for f in o["findings"]}
    assert families == FAMILIES
    first = report["objects"][0]
    assert (first["name"], first["multiAttach"], first["placement"]) == ("volsync-src-db-stuck", True, "misplaced")
    assert first["wanted"] == "node ip-10-0-1-17.ec2.internal (with pod db-0)"
    assert [o["name"] for o in report["objects"] if o["multiAttach"]] == ["volsync-src-db-stuck"]
    assert report["summary"] == {
        "audited": 10,
        "findings": 14,
        "objectsWithFindings": 9,
        "multiAttach": 1,
        "stuck": 0,  # no pod there says since when it waits (no creationTimestamp)
        "policy": POLICY,
        "failed": 0,
    }


def test_a_backup_pod_outside_its_load_affinity_is_misplaced_with_what_admission_would_add(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "json")
    (backup,) = [o for o in json.loads(out)["objects"] if o["name"] == "nightly-20261120-7hx2q"]
    assert (backup["role"], backup["node"], backup["placement"]) == ("backup", "ip-10-0-1-17.ec2.internal", "misplaced")
    added = {op["path"] for op in backup["wouldChange"]}
    assert "/spec/affinity" in added and "/spec/tolerations" in added


def test_outputs_agree_and_the_table_is_sorted_with_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    _, as_json, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "json")
    _, as_yaml, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "yaml")
    assert yamldocs.load(as_yaml) == json.loads(as_json)
    code, table, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "table")
    assert code == 1
    lines = table.splitlines()
    header = ["OBJECT", "ROLE", "NODE", "PLACEMENT", "CAUSE", "FAMILY", "SEVERITY", "FIELD", "MESSAGE"]
    assert lines[0].split() == header
    assert lines[1].startswith("pod/shop/volsync-src-db-stuck (MULTI-ATTACH)")
    assert lines[-1] == (
        "10 objects audited: 14 findings in 9 objects, 1 Multi-Attach (movers stuck on a claim held elsewhere), "
        f"0 stuck storage pods; policy: {POLICY}"
    )
    rows = [line.split()[0] for line in lines[1:-2]]
    rest = [r for r in rows if r != "pod/shop/volsync-src-db-stuck"]
    assert len(rows) == 14 and rows[:3] == ["pod/shop/volsync-src-db-stuck"] * 3
    namespaces = [r.split("/")[1] for r in rest]
    assert namespaces == sorted(namespaces)


def test_a_clean_cluster_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster", str(DATA / "audit" / "clean.yaml"), "-o", "table")
    assert (code, out) == (0, "2 objects audited: no findings; policy: embedded default\n")


def test_one_namespace_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-n", "velero", "-o", "json")
    assert code == 1
    assert {o["namespace"] for o in json.loads(out)["objects"]} == {"velero"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "missing.yaml"], "storage-affinity-webhook: missing.yaml: cannot read:"),
        (["--cluster", str(EXAMPLES / "cluster.yaml"), "--policy", "missing.yaml"], "missing.yaml"),
        (["--kubeconfig", "missing.yaml"], "--kubeconfig missing.yaml: cannot read: No such file or directory"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = audit(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith("storage-affinity-webhook: ") and message in err


def test_a_broken_manifest_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: {name: p, namespace: a}\nspec: {volumes: 1}\n")
    code, _, err = audit(capsys, "--cluster", str(broken))
    assert code == 2
    assert err == f"storage-affinity-webhook: {broken}: Pod a/p: spec.volumes: must be a list, not number\n"


def _live_cluster(api: FakeKubeAPI) -> None:
    for path in CLUSTER:
        for doc in yamldocs.load_all(Path(path).read_text()):
            for obj in doc["items"]:
                api.create(obj)


def test_the_live_audit_finds_what_the_files_hold(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with running_fake_api() as api:
        _live_cluster(api)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, out, err = audit(capsys, "--kubeconfig", kubeconfig, "--policy", POLICY, "-o", "json")
        files = json.loads(audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "json")[1])
        namespaced = audit(capsys, "--kubeconfig", kubeconfig, "--policy", POLICY, "-n", "shop", "-o", "json")
        assert api.count("GET", "Pod") >= 2
    assert code == 1, err
    live = json.loads(out)
    assert _names(live) == _names(files)
    assert live["summary"] == files["summary"]
    assert {o["namespace"] for o in json.loads(namespaced[1])["objects"]} == {"shop"}


def test_a_slow_api_shows_progress_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with running_fake_api() as api:
        _live_cluster(api)
        api.delay(0.25)
        code, _, err = audit(capsys, "--kubeconfig", str(api.write_kubeconfig(tmp_path / "k")), "-o", "json")
    assert code == 1, err
    assert "listed 8 Pods" in err, err


#: The policy ConfigMap the live audit reads first, without --policy (the webhook's namespace is $POD_NAMESPACE).
POLICY_READ = "cannot read the policy ConfigMap storage-affinity-system/storage-affinity-policy: GET ConfigMap"


@pytest.mark.parametrize("status", [403, 500])
def test_an_api_that_refuses_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, status: int) -> None:
    """Refused, the policy read (first) and, with a policy file, the first list are exit 2 naming the call."""
    with running_fake_api() as api:
        api.fail(status)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "k"))
        code, out, err = audit(capsys, "--kubeconfig", kubeconfig)
        listed = audit(capsys, "--kubeconfig", kubeconfig, "--policy", POLICY)
    assert (code, out) == (2, "")
    assert err.startswith(f"storage-affinity-webhook: {POLICY_READ} storage-affinity-system/"), err
    assert f"answered {status}" in err and f"(the Kubernetes API at {api.url})" in err, err
    assert listed[:2] == (2, "")
    assert listed[2].startswith(f"storage-affinity-webhook: the Kubernetes API refused a list: {status} ")


def test_an_unreachable_api_exits_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with running_fake_api() as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "k"))
        url = api.url
    code, out, err = audit(capsys, "--kubeconfig", kubeconfig)
    listed = audit(capsys, "--kubeconfig", kubeconfig, "--policy", POLICY)
    assert (code, out) == (2, "")
    assert err.startswith(f"storage-affinity-webhook: {POLICY_READ}") and f"(the Kubernetes API at {url})" in err, err
    assert listed[:2] == (2, "")
    assert listed[2].startswith(f"storage-affinity-webhook: the Kubernetes API cannot be reached at {url}: "), listed


def _names(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(o["kind"], o["namespace"], o["name"]) for o in report["objects"]]


def test_placement_drift_says_where_the_pod_runs_and_where_admission_would_put_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = audit(capsys, "--cluster", *CLUSTER, "--policy", POLICY, "-o", "json")
    drift = {
        o["name"]: (f["field"], f["message"], f["severity"])
        for o in json.loads(out)["objects"]
        for f in o["findings"]
        if f["family"] == "placementDrift"
    }
    assert drift == {
        "volsync-src-db-stuck": (
            "spec.nodeName",
            "runs on node ip-10-0-2-42.ec2.internal; admission would place it on node ip-10-0-1-17.ec2.internal "
            "(with pod db-0) now",
            "warn",
        ),
        "nightly-20261120-7hx2q": (
            "spec.nodeName",
            "runs on node ip-10-0-1-17.ec2.internal; admission would place it on a node matching its required node "
            "affinity now",
            "warn",
        ),
        "restore-db-20261121-kq8zm": (
            "spec",
            "not scheduled yet, and without the placement admission would give it now",
            "warn",
        ),
    }


def test_stuck_storage_pods_show_their_cause_in_every_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = load_yaml(DATA / "audit" / "causes.yaml")
    shown = ("ReadWriteOncePodInUse", "HostnameLabelMismatch", "DataSourcesApart", "VMPlacementConflict")
    cases = {c["cause"]: c for c in table["cases"] if c["cause"] in shown}
    objects = [*table["base"], *(o for c in cases.values() for o in [*c.get("state", ()), c["stuck"]])]
    cluster = tmp_path / "stuck.yaml"
    # as JSON: objects the table shares between cases (YAML anchors) would be written as aliases, which are refused
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    code, out, _ = audit(capsys, "--cluster", str(cluster), "-o", "json")
    assert code == 1
    report = json.loads(out)
    assert report["summary"]["stuck"] == len(shown)
    causes = {o["name"]: o["cause"] for o in report["objects"] if "cause" in o}
    assert {name: cause["code"] for name, cause in causes.items()} == {
        c["stuck"]["metadata"]["name"]: code for code, c in cases.items()
    }
    assert all(cause["message"] and cause["remedy"] for cause in causes.values())
    _, as_yaml, _ = audit(capsys, "--cluster", str(cluster), "-o", "yaml")
    assert yamldocs.load(as_yaml) == json.loads(out)
    _, rows, _ = audit(capsys, "--cluster", str(cluster), "-o", "table")
    stuck_rows = {line.split()[0]: line.split()[1:5:3] for line in rows.splitlines() if "stuckPod" in line}
    assert stuck_rows == {
        f"pod/{c['stuck']['metadata']['namespace']}/{c['stuck']['metadata']['name']}": [
            "cdi-worker" if code == "VMPlacementConflict" else "mover",
            code,
        ]
        for code, c in cases.items()
    }
    assert rows.splitlines()[-1].endswith(f", {len(shown)} stuck storage pods; policy: embedded default")


def test_a_node_whose_conditions_are_mistyped_is_refused_with_its_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cluster = tmp_path / "nodes.yaml"
    cluster.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {conditions: Ready}\n")
    code, out, err = audit(capsys, "--cluster", str(cluster))
    assert (code, out) == (2, "")
    assert err.strip() == f"storage-affinity-webhook: {cluster}: Node n1: status.conditions: must be a list, not string"


def test_the_live_audit_finds_a_vm_disk_bound_where_the_vm_cannot_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """kubevirt/containerized-data-importer#4275: the importer bound the VM's disk on a node outside its selector;
    the finding names the disk's DataVolume with its phase (listed from cdi.kubevirt.io)."""
    objects = vm_disk_cluster("infra-1")  # the disk bound on a TopoLVM PV of infra-1
    source = {"http": {"url": "https://download.fedoraproject.org/fedora.qcow2"}}
    objects.append(data_volume("fedora-root", "vms", source=source, storage={}, phase="Succeeded", progress="100.0%"))
    with running_fake_api() as api:
        for obj in objects:
            api.create(obj)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, out, err = audit(capsys, "--kubeconfig", kubeconfig, "-o", "json")
        api.served_groups.clear()  # a cluster without KubeVirt: nothing to audit there, and no error
        without = audit(capsys, "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 1, err
    (vm,) = [o for o in json.loads(out)["objects"] if o["kind"] == "VirtualMachine"]
    assert vm["findings"] == [
        {
            "family": "vmDisk",
            "field": "spec.template.spec",
            "message": (
                "VM fedora: DataVolume fedora-root (Succeeded) is bound on node infra-1, which fails the VM's "
                'nodeSelector kubevirt.io/schedulable="true": the VM can never start'
            ),
            "severity": "deny",
        }
    ]
    assert without[0] == 0, without[2]


def test_the_live_audit_lists_snapshots_and_their_contents(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The audit against the API follows every optional group the server follows (webhook/state/optional.py): a
    mover whose claim is restored from a VolumeSnapshot not ready to use (tests/data/audit/causes.yaml) is said to
    wait for it, not for a snapshot that "does not exist"; the cluster-scoped VolumeSnapshotContents are listed
    with the audit of one namespace too."""
    (case,) = [
        c
        for c in CAUSES["cases"]
        if c["cause"] == "DataSourceNotReady" and any(o["kind"] == "VolumeSnapshot" for o in c.get("state", ()))
    ]
    content = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotContent",
        "metadata": {"name": "snapcontent-erp-db"},
        "spec": {
            "driver": "topolvm.io",
            "source": {"volumeHandle": "3c1d9e2a-erp-db"},
            "deletionPolicy": "Delete",
            "volumeSnapshotRef": {"namespace": "shop", "name": "volsync-erp-db-src"},
        },
    }
    with running_fake_api() as api:
        for obj in [*CAUSES["base"], *case["state"], case["stuck"], content]:
            api.create(copy.deepcopy(obj))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = audit(capsys, "--kubeconfig", str(kubeconfig), "-n", "shop", "-o", "json")
        _, index = objects_from_api(api_configuration(kubeconfig), "shop", lambda _: None)
    assert code == 1, err
    (stuck,) = [o for o in json.loads(out)["objects"] if o["name"] == case["stuck"]["metadata"]["name"]]
    assert stuck["cause"]["code"] == case["cause"]
    assert all(words in stuck["cause"]["message"] for words in case["says"]), stuck["cause"]["message"]
    assert index.volume_snapshot_content("snapcontent-erp-db") is not None


def test_the_live_audit_of_one_namespace_reads_the_grants_of_another(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ReferenceGrant lives in the namespace of the source, not of the pod: the audit of tenant-a lists them
    cluster-wide. A clone source in hr that a grant opens is followed, and once the grant is gone it is not
    (tests/data/disclosure/cases.yaml)."""
    table = load_yaml(DATA / "disclosure" / "cases.yaml")
    objects = [table["objects"][n] for n in ("node-a", "node-b", "topolvm", "payroll-pv", "payroll", "payroll-copy")]
    pod = copy.deepcopy(table["pod"])
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "payroll-copy"}}]
    with running_fake_api() as api:
        for obj in [*objects, pod, table["objects"]["grant-payroll"]]:
            api.create(copy.deepcopy(obj))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        _, granted, err = audit(capsys, "--kubeconfig", str(kubeconfig), "-o", "json")
        _, index = objects_from_api(api_configuration(kubeconfig), "tenant-a", lambda _: None)
        api.delete("ReferenceGrant", "hr", "payroll-for-tenant-a")
        _, revoked, _ = audit(capsys, "--kubeconfig", str(kubeconfig), "-n", "tenant-a", "-o", "json")
    assert [g["metadata"]["name"] for g in index.reference_grants("hr")] == ["payroll-for-tenant-a"]
    (with_grant,) = [o for o in json.loads(granted)["objects"] if o["kind"] == "Pod"]
    assert with_grant["cause"]["code"] != "DataSourceNotReady", err
    (without,) = [o for o in json.loads(revoked)["objects"] if o["kind"] == "Pod"]
    assert without["cause"] == {
        "code": "DataSourceNotReady",
        "message": (
            "claim payroll-copy is cloned from claim hr/payroll, which is not followed: no ReferenceGrant in "
            "namespace hr lets claims of tenant-a use it"
        ),
        "remedy": without["cause"]["remedy"],
    }


def test_a_reader_that_goes_away_stops_the_audit_quietly(tmp_path: Path) -> None:
    """`audit | head`: once the reader has closed the pipe, the rest of the output has nowhere to go. The command
    stops with the status a shell gives a tool killed by SIGPIPE, and no traceback."""
    import signal
    import subprocess
    import sys

    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"app-{i}", "namespace": "shop", "annotations": {"storage-affinity.io/placment": "x"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }
        for i in range(2000)
    ]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": pods}))
    command = [sys.executable, "-m", "webhook", "audit", "--cluster", str(cluster)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as audit:
        assert audit.stdout is not None and audit.stderr is not None
        assert audit.stdout.readline()  # the header: the audit is writing
        audit.stdout.close()
        stderr = audit.stderr.read().decode()
        code = audit.wait(timeout=60)
    assert "Traceback" not in stderr, stderr
    assert code == 128 + signal.SIGPIPE, (code, stderr)


def test_an_object_given_twice_is_audited_once_as_the_last_one_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The same file twice audits nothing twice; a Pod given again (same kind, namespace and name) is audited as the
    last one given, the one the index keeps (tests/data/audit/findings.yaml's minio-0, its contradiction fixed)."""
    once = json.loads(audit(capsys, "--cluster", *CLUSTER, "-o", "json")[1])
    twice = json.loads(audit(capsys, "--cluster", *CLUSTER, "--cluster", CLUSTER[1], "-o", "json")[1])
    assert twice == once
    fixed = tmp_path / "minio-fixed.yaml"
    fixed.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: minio-0, namespace: storage}\n"
        "spec: {containers: [{name: minio, image: minio/minio}]}\n"
    )
    minio = [("storage", "minio-0")]
    last_fixed = json.loads(audit(capsys, "--cluster", *CLUSTER, str(fixed), "-o", "json")[1])
    assert [(o["namespace"], o["name"]) for o in last_fixed["objects"] if o["name"] == "minio-0"] == []
    assert last_fixed["summary"]["audited"] == once["summary"]["audited"]
    first_fixed = json.loads(audit(capsys, "--cluster", CLUSTER[0], str(fixed), CLUSTER[1], "-o", "json")[1])
    assert [(o["namespace"], o["name"]) for o in first_fixed["objects"] if o["name"] == "minio-0"] == minio
    assert first_fixed == once


def _oadp_cluster(api: FakeKubeAPI) -> None:
    """OADP: Velero in openshift-adp, a backup pod of its CSI data mover there (labels as Velero's exposer sets
    them, vmware-tanzu/velero pkg/exposer/csi_snapshot.go), and the cluster's policy, which trusts that namespace."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "worker-1", "labels": {"kubernetes.io/os": "linux"}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "backup-1-xk2p9",
            "namespace": "openshift-adp",
            "labels": {"velero.io/exposer-pod-group": "snapshot-exposer", "velero.io/data-upload": "backup-1-xk2p9"},
        },
        "spec": {"nodeName": "worker-1", "containers": [{"name": "backup-1-xk2p9", "image": "velero/velero:v1.18.0"}]},
        "status": {"phase": "Running"},
    }
    policy = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "storage-affinity-policy",
            "namespace": "storage-affinity-system",
            "labels": {"storage-affinity.io/policy": "true"},
        },
        "data": {"policy.yaml": "trust:\n  namespaces: [openshift-adp]\n"},
    }
    for obj in (node, pod, policy):
        api.create(obj)


def test_the_live_audit_judges_by_the_cluster_policy_configmap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The command on-call runs (docs/runbooks.md) judges as the server does: the policy ConfigMap of the webhook's
    namespace ($POD_NAMESPACE, or --policy-namespace), not the embedded default that trusts Velero's namespace only."""
    with running_fake_api() as api:
        _oadp_cluster(api)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, out, err = audit(capsys, "--kubeconfig", kubeconfig, "-o", "json")
        _, other, _ = audit(capsys, "--kubeconfig", kubeconfig, "--policy-namespace", "elsewhere", "-o", "json")
        _, table, _ = audit(capsys, "--kubeconfig", kubeconfig, "--policy-namespace", "elsewhere", "-o", "wide")
    assert code == 0, (out, err)
    assert json.loads(out)["summary"]["policy"] == "ConfigMap storage-affinity-system/storage-affinity-policy"
    judged_by_default = json.loads(other)
    assert judged_by_default["summary"]["policy"] == "embedded default (no ConfigMap elsewhere/storage-affinity-policy)"
    (pod,) = judged_by_default["objects"]
    assert [(f["family"], f["severity"]) for f in pod["findings"]] == [("roleTrust", "deny")]
    # the pod runs where it may, but the deny finding says it would be refused: the table says so, not `ok`
    (row,) = [line for line in table.splitlines() if line.startswith("pod/openshift-adp/")]
    assert row.split()[4] == "blocked", table
    assert table.rstrip().endswith("; policy: embedded default (no ConfigMap elsewhere/storage-affinity-policy)")


def test_the_live_audit_without_the_webhook_namespace_says_what_to_give(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_NAMESPACE")
    with running_fake_api() as api:
        code, out, err = audit(capsys, "--kubeconfig", str(api.write_kubeconfig(tmp_path / "k")))
        listed = api.count("GET", "Pod")
    assert (code, out, listed) == (2, "", 0)  # said before anything is listed
    assert "give --policy-namespace" in err and "or --policy FILE" in err, err


#: An exec credential plugin (client.authentication.k8s.io/v1), as a cloud's `get-token` is: it notes each run.
CREDENTIAL_PLUGIN = """
import json, sys
with open(sys.argv[1], "a") as runs:
    runs.write("run\\n")
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "fake-token"}}))
"""


def test_the_live_audit_runs_an_exec_credential_plugin_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The policy read and the lists share one loading of the kubeconfig: a credential plugin that asks a cloud
    for a token (and may prompt, or be rate-limited) runs once per audit, not once per step."""
    plugin, runs = tmp_path / "get_token.py", tmp_path / "runs"
    plugin.write_text(CREDENTIAL_PLUGIN)
    with running_fake_api() as api:
        _live_cluster(api)
        kubeconfig = json.loads(api.write_kubeconfig(tmp_path / "kubeconfig").read_text())
        plugin_run = {"command": sys.executable, "args": [str(plugin), str(runs)], "interactiveMode": "Never"}
        kubeconfig["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", **plugin_run}}
        (tmp_path / "kubeconfig").write_text(json.dumps(kubeconfig))
        code, out, err = audit(capsys, "--kubeconfig", str(tmp_path / "kubeconfig"), "-o", "json")
        listed = api.count("GET", "Pod")
    assert code == 1 and listed >= 1, err
    assert json.loads(out)["summary"]["policy"].startswith("embedded default (no ConfigMap storage-affinity-system/")
    assert runs.read_text().splitlines() == ["run"]
