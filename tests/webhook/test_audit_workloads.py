"""`audit` reads the workloads whose templates make pods (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs,
CronJobs), over manifest files and over the (fake) Kubernetes API, and checks them with the rules `/validate`
applies to their templates: a workload admitted while the webhook was down, or before a policy change, is looked
at again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rules import pipeline
from rules.audit import audit_objects
from rules.kube.workloads import TEMPLATE_PATHS
from rules.model import Json
from rules.reports import OPENREPORTS, build_reports
from testkit import yamldocs
from testkit.fakeapi import running_fake_api
from tests.rules.test_workload_templates import CASES, kinds, objects
from tests.support import EXAMPLES, policy, subject
from webhook.audit.loop import AuditLoop
from webhook.audit.workloads import list_workloads
from webhook.cli.main import main
from webhook.runtime import Runtime
from webhook.state.static import load_static_state

#: The workload table's case of a misspelled key in every controller kind, and the one that passes in every kind.
MISSPELLED, CLEAN = (
    next(p.values[0] for p in CASES if p.values[0]["name"].startswith(prefix))
    for prefix in ("Kyverno autogen, a misspelled", "Kyverno autogen, a template that passes")
)


@pytest.fixture(autouse=True)
def _webhook_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live audit judges by the policy of the webhook's namespace: $POD_NAMESPACE, as in the webhook's pod (no
    policy ConfigMap there unless a test creates one: the embedded default)."""
    monkeypatch.setenv("POD_NAMESPACE", "storage-affinity-system")


def workloads() -> list[Json]:
    """Each kind once with the misspelled key (named after its kind) and once clean (`<kind>-clean`)."""
    out = []
    for case, suffix in ((MISSPELLED, ""), (CLEAN, "-clean")):
        for kind in kinds(case):
            obj, _ = objects(case, kind)
            obj["metadata"]["name"] = f"{kind.lower()}{suffix}"
            out.append(obj)
    return out


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(["audit", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(out)


def written(tmp_path: Path) -> str:
    path = tmp_path / "workloads.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": workloads()}))  # JSON is YAML
    return str(path)


def expected() -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """What `/validate` says of each workload applied now: the audit must say the same."""
    view = load_static_state([EXAMPLES / "cluster.yaml"])
    out = {}
    for obj in workloads():
        decision = pipeline.validate(subject(obj), view, policy())
        found = [(f.family, f.field, f.message) for f in decision.findings]
        if found:
            out[(obj["kind"], obj["metadata"]["name"])] = found
    return out


def test_every_workload_kind_is_audited_from_files_as_validate_checks_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, report = audit(capsys, "--cluster", str(EXAMPLES / "cluster.yaml"), written(tmp_path))
    assert code == 1
    got = {
        (o["kind"], o["name"]): [(f["family"], f["field"], f["message"]) for f in o["findings"]]
        for o in report["objects"]
    }
    want = expected()
    assert got == want
    assert {kind for kind, _ in got} == set(TEMPLATE_PATHS)
    for (kind, _), found in got.items():
        assert [field for _, field, _ in found] == [
            ".".join((*TEMPLATE_PATHS[kind], "metadata.annotations[storage-affinity.io/rol]"))
        ]
    alone = audit(capsys, "--cluster", str(EXAMPLES / "cluster.yaml"))[1]
    assert report["summary"]["audited"] == alone["summary"]["audited"] + 2 * len(TEMPLATE_PATHS)  # clean ones too


def test_the_live_audit_lists_every_workload_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    files = audit(capsys, "--cluster", str(EXAMPLES / "cluster.yaml"), written(tmp_path))[1]
    with running_fake_api() as api:
        for doc in yamldocs.load_all((EXAMPLES / "cluster.yaml").read_text()):
            for obj in doc["items"]:
                api.create(obj)
        for obj in workloads():
            api.create(obj)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, live = audit(capsys, "--kubeconfig", kubeconfig)
        _, shop = audit(capsys, "--kubeconfig", kubeconfig, "-n", "shop")
        listed = {kind: api.count("GET", kind) for kind in TEMPLATE_PATHS}
    assert code == 1
    assert (
        live["summary"].pop("policy")
        == "embedded default (no ConfigMap storage-affinity-system/storage-affinity-policy)"
    )
    assert files["summary"].pop("policy") == "embedded default"
    assert live == files
    assert shop["summary"]["audited"] == files["summary"]["audited"]  # the workloads are all in shop
    assert listed == dict.fromkeys(TEMPLATE_PATHS, 2)  # one list per audit, page by page


def test_the_reports_reference_each_workload_by_its_api() -> None:
    view = load_static_state([EXAMPLES / "cluster.yaml"])
    audits = audit_objects(workloads(), view, policy())
    [(_, report)] = build_reports(audits, OPENREPORTS, now=0).items()
    resources = {(r["kind"], r["apiVersion"]) for result in report["results"] for r in result["resources"]}
    assert resources == {
        (obj["kind"], obj["apiVersion"]) for obj in workloads() if not obj["metadata"]["name"].endswith("-clean")
    }


def _api_client(kubeconfig: Path) -> Any:
    from kubernetes import client

    from webhook.state.apisource import load_configuration

    configuration, _ = load_configuration(kubeconfig)
    configuration.retries = 0
    return client.ApiClient(configuration)


def test_the_in_server_audit_lists_each_workload_kind_once_a_run(tmp_path: Path) -> None:
    """The server's audit (webhook/audit/loop.py) lists the workloads as `audit` does, one paged list per kind per
    run, and counts their findings with the pods'; an API that refuses the list leaves the run to the state it
    holds, not a failed run."""
    rt = Runtime(policy=policy(), view=load_static_state([EXAMPLES / "cluster.yaml"]), namespace="saw")
    base = AuditLoop(rt, interval=60, by_namespace=True).run_once()
    with running_fake_api() as api:
        for obj in workloads():
            api.create(obj)
        lister = _api_client(api.write_kubeconfig(tmp_path / "kubeconfig"))
        loop = AuditLoop(rt, interval=60, workloads=lambda: list_workloads(lister), by_namespace=True)
        counts = loop.run_once()
        listed = {kind: api.count("GET", kind) for kind in TEMPLATE_PATHS}
        api.fail(403)
        refused = loop.run_once()
    assert listed == dict.fromkeys(TEMPLATE_PATHS, 1)
    misspelled = len(kinds(MISSPELLED))
    assert counts.get(("annotations", "shop"), 0) == base.get(("annotations", "shop"), 0) + misspelled
    assert refused == base
