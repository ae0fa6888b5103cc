"""The `review` command: input forms, output forms and exit codes, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from testkit import yamldocs
from testkit.reviews import admission_review
from tests.support import EXAMPLES
from tests.webhook.commands import run_command


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_command("review", *args, stdin=stdin)


CLUSTER = ("--cluster", str(EXAMPLES / "cluster.yaml"))


def test_plain_pod_is_allowed_unchanged_as_json() -> None:
    result = run("-f", str(EXAMPLES / "plain-pod.yaml"), *CLUSTER)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"allowed", "patch", "object", "warnings", "violations", "decisions"}
    assert out["allowed"] is True
    assert out["patch"] == []
    assert out["object"] == yamldocs.load((EXAMPLES / "plain-pod.yaml").read_text())
    assert out["decisions"] == ["policy: embedded default", "role: none (no role matches)"]


def test_denied_pod_exits_1_and_lists_every_problem() -> None:
    result = run("-f", str(EXAMPLES / "bad-annotations-pod.yaml"), *CLUSTER)
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert [v["field"] for v in out["violations"]] == [
        "metadata.annotations[storage-affinity.io/placment]",
        "metadata.annotations[storage-affinity.io/load-affinity][0].nodeSelector",
    ]
    assert result.stderr.startswith("Error: storage-affinity-webhook denied: 2 problems: (1) ")


def test_output_forms(tmp_path: Path) -> None:
    pod = EXAMPLES / "plain-pod.yaml"
    assert json.loads(run("-f", str(pod), "-o", "patch").stdout) == []
    assert yamldocs.load(run("-f", str(pod), "-o", "yaml").stdout) == yamldocs.load(pod.read_text())


def test_stdin_and_admission_review_input() -> None:
    pod = yamldocs.load((EXAMPLES / "plain-pod.yaml").read_text())
    review = admission_review("CREATE", pod, api_version="admission.k8s.io/v1beta1", uid="x")
    result = run("-f", "-", stdin=json.dumps(review))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["allowed"] is True


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: Pod\nmetadata: {name: [\n", "storage-affinity-webhook: <stdin>: YAML syntax error at line 3"),
        ("a: 1\n---\nb: 2\n", "storage-affinity-webhook: <stdin>#1: input is neither an AdmissionReview nor a"),
        ("---\n---\n", "storage-affinity-webhook: -: no object to review"),
        (
            "just text\n",
            "storage-affinity-webhook: <stdin>: input is neither an AdmissionReview nor a Kubernetes manifest",
        ),
        (
            "kind: Pod\nmetadata: {name: p}\nspec: {volumes: x}\n",
            "storage-affinity-webhook: <stdin>: spec.volumes: must be a list, not string",
        ),
        (
            '{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}',
            "storage-affinity-webhook: <stdin>: AdmissionReview has no request",
        ),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(content: str, message: str) -> None:
    result = run("-f", "-", stdin=content)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message), result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_and_bad_policy_exit_2(tmp_path: Path) -> None:
    assert run("-f", str(tmp_path / "nope.yaml")).returncode == 2
    policy = tmp_path / "policy.yaml"
    policy.write_text("coScheduling: {placement: nodename}\n")
    result = run("-f", str(EXAMPLES / "plain-pod.yaml"), "--policy", str(policy))
    assert result.returncode == 2
    assert result.stderr == (
        f'storage-affinity-webhook: {policy}: coScheduling.placement: "nodename" is not one of requiredAffinity, '
        "nodeSelector, nodeName\n"
    )


def test_usage_error_exits_2() -> None:
    assert run().returncode == 2


def test_cluster_files_hold_data_volumes(tmp_path: Path) -> None:
    """A CDI importer reviewed offline names the DataVolume of its disk with its phase; a DataVolume of the wrong
    shape is refused naming the field (staging/src/kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1
    types.go DataVolumeStatus)."""
    importer = str(EXAMPLES / "cdi-importer-pod.yaml")
    result = run("-f", importer, "--cluster", str(EXAMPLES / "cluster-datasources.yaml"))
    assert result.returncode == 0, result.stderr
    assert (
        "cdi: DataVolume fedora-root (ImportScheduled) will be used by VM fedora: the worker follows its constraints"
        in json.loads(result.stdout)["decisions"]
    )
    broken = tmp_path / "dv.yaml"
    broken.write_text(
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata: {name: fedora-root, namespace: vms}\n"
        "status: {phase: [Succeeded]}\n"
    )
    result = run("-f", importer, "--cluster", str(broken))
    assert result.returncode == 2
    assert result.stderr == (
        f"storage-affinity-webhook: {broken}: DataVolume vms/fedora-root: status.phase: must be a string, not list\n"
    )


def test_workloads_are_reviewed_at_their_template_fields() -> None:
    """A Deployment as a manifest and as an AdmissionReview UPDATE: its template is checked, a scale is not."""
    deployment = yamldocs.load((EXAMPLES / "bad-annotations-deployment.yaml").read_text())
    result = run("-f", str(EXAMPLES / "bad-annotations-deployment.yaml"), "-o", "json")
    assert result.returncode == 1, result.stderr
    fields = [v["field"] for v in json.loads(result.stdout)["violations"]]
    assert fields[0] == "spec.template.metadata.annotations[storage-affinity.io/rol]"
    scaled = {**deployment, "spec": {**deployment["spec"], "replicas": 5}}
    result = run("-f", "-", "-o", "json", stdin=json.dumps(admission_review("UPDATE", scaled, deployment)))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["decisions"] == ["policy: embedded default", "pod template unchanged"]


@pytest.mark.parametrize("manifest", ["apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "kind: ''\n"])
def test_a_kind_review_does_not_check_exits_2_and_says_so(manifest: str) -> None:
    result = run("-f", "-", stdin=manifest)
    assert result.returncode == 2
    assert result.stdout == ""
    kind = yamldocs.load(manifest)["kind"]
    assert result.stderr == (
        f'storage-affinity-webhook: <stdin>: kind "{kind}" is not reviewed: no rule checks it '
        "(review checks Pod, ConfigMap, Job, Deployment, StatefulSet, DaemonSet, ReplicaSet, CronJob)\n"
    )


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_an_operation_no_rule_checks_is_allowed_saying_so(operation: str) -> None:
    """An empty `decisions` would read as a pass of every rule: the answer says none ran, and why."""
    pod = yamldocs.load((EXAMPLES / "plain-pod.yaml").read_text())
    review = admission_review(operation, pod if operation == "CONNECT" else None, pod)
    result = run("-f", "-", "-o", "json", stdin=json.dumps(review))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["allowed"] is True
    assert out["decisions"] == [
        "policy: embedded default",
        f"operation {operation} is not mutated: only CREATE is",
        f"operation {operation} is not checked: only CREATE and UPDATE are",
    ]


def test_a_config_map_no_rule_checks_is_allowed_saying_so() -> None:
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-settings, namespace: shop}\ndata: {a: b}\n"
    result = run("-f", "-", "-o", "json", stdin=config_map)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["decisions"] == [
        "policy: embedded default",
        "not a policy or Velero node-agent ConfigMap: no rule checks it",
    ]


@pytest.mark.parametrize(
    ("manifest", "policy", "decision"),
    [
        ("policy-configmap-broken.yaml", None, "policy ConfigMap (label storage-affinity.io/policy=true)"),
        ("velero-node-agent-config-broken.yaml", "policy-velero-source.yaml", "Velero node-agent ConfigMap"),
    ],
)
def test_a_config_map_a_rule_checks_says_as_what(manifest: str, policy: str | None, decision: str) -> None:
    policy_args = ("--policy", str(EXAMPLES / policy)) if policy else ()
    result = run("-f", str(EXAMPLES / manifest), *policy_args, *CLUSTER, "-o", "json")
    judged_by, *decisions = json.loads(result.stdout)["decisions"]
    assert judged_by == f"policy: {EXAMPLES / policy if policy else 'embedded default'}"
    assert len(decisions) == 1 and decisions[0].startswith(decision), decisions


def test_every_object_given_is_reviewed_one_result_each_and_the_exit_is_the_worst(tmp_path: Path) -> None:
    """`-f` repeats, a file holds several documents or a List: each object gets its result, named by its source,
    and the exit code is the worst of them (bad input over denied over allowed)."""
    mover, plain, bad = (EXAMPLES / n for n in ("mover-pod.yaml", "plain-pod.yaml", "bad-annotations-pod.yaml"))
    both = tmp_path / "both.yaml"
    both.write_text(f"{plain.read_text()}\n---\n{bad.read_text()}")
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [yamldocs.load(mover.read_text())]}))
    result = run("-f", str(mover), "-f", str(both), "-f", str(listed), *CLUSTER, "-o", "json")
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    assert [(r["source"], r["allowed"]) for r in out] == [
        (str(mover), True),
        (f"{both}#1", True),
        (f"{both}#2", False),
        (str(listed), True),
    ]
    assert out[0]["patch"] == out[3]["patch"] != []  # the List's item is the mover itself
    assert result.stderr.startswith(f"Error: {both}#2: storage-affinity-webhook denied: 2 problems:"), result.stderr
    patches = json.loads(run("-f", str(mover), "-f", str(plain), *CLUSTER, "-o", "patch").stdout)
    assert [(p["source"], bool(p["patch"])) for p in patches] == [(str(mover), True), (str(plain), False)]
    documents = list(yamldocs.load_all(run("-f", str(mover), "-f", str(plain), *CLUSTER, "-o", "yaml").stdout))
    assert [d["metadata"]["name"] for d in documents] == ["volsync-rsync-tls-src-db", "web-7d9c"]
    service = tmp_path / "service.yaml"
    service.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: apps}\n")
    worst = run("-f", str(mover), "-f", str(service), *CLUSTER)
    assert worst.returncode == 2  # the Service is not reviewed; the mover still is
    assert [(r["source"], r["allowed"]) for r in json.loads(worst.stdout)] == [(str(mover), True)]
    assert f'storage-affinity-webhook: {service}: kind "Service" is not reviewed' in worst.stderr


def test_the_summary_says_what_a_person_reads_first() -> None:
    """`-o summary` (the default on a terminal): the verdict, the decisions, the warnings and violations, and the
    patch as a diff, one block per object."""
    result = run("-f", str(EXAMPLES / "mover-pod.yaml"), *CLUSTER, "-o", "summary")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{EXAMPLES / 'mover-pod.yaml'}: Pod shop/volsync-rsync-tls-src-db: allowed"
    assert "  decision: policy: embedded default" in lines
    assert any(line.startswith("  decision: co-scheduled with pod db-0 on node ip-10-0-1-17") for line in lines)
    assert "  patch:" in lines
    assert any(line.startswith("    + /spec/affinity: {") for line in lines)
    denied = run("-f", str(EXAMPLES / "bad-annotations-pod.yaml"), *CLUSTER, "-o", "summary")
    assert denied.returncode == 1
    assert any(
        line.startswith("  violation: annotations metadata.annotations[storage-affinity.io/placment]: unknown")
        for line in denied.stdout.splitlines()
    ), denied.stdout
