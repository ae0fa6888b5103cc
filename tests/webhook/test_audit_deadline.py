"""The in-server audit under the review deadline, and the workloads it lists: an object whose review runs past the
deadline is reported once as not audited and skipped until it changes (a pod: until the index replaces it; a
workload, listed anew each run: until its resourceVersion changes); workloads come in small pages, trimmed to what
their audit reads, and their audit is the same trimmed as whole."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from rules import budget, deadline, registry
from rules.audit import audit_object, audit_objects
from rules.kube.workloads import TEMPLATE_PATHS
from rules.model import Json
from testkit import slowrule
from testkit.fakeapi import running_fake_api
from tests.rules.test_workload_templates import CASES, kinds, objects
from tests.support import EXAMPLES, load_yaml, manifest_objects, policy, view_from
from webhook.audit import workloads
from webhook.audit.loop import AuditLoop
from webhook.runtime import Runtime
from webhook.state.static import load_static_state
from webhook.state.watch import PageSizes

NOT_AUDITED = "not audited: past the review deadline: the rules spent 1 ms of CPU time on it"


@pytest.fixture(autouse=True)
def spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    """testkit/slowrule.py's rule in the pod and template rules, and a deadline of 1 ms."""
    monkeypatch.setattr(deadline, "REVIEW_SECONDS", 0.001)
    monkeypatch.setattr(registry, "POD_VALIDATORS", [*registry.POD_VALIDATORS, slowrule.spin])
    monkeypatch.setattr(registry, "TEMPLATE_VALIDATORS", [*registry.TEMPLATE_VALIDATORS, slowrule.spin])


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the objects each run audits (not those it reports from memory)."""
    audited: list[str] = []

    def counted(objects: Iterable[Any], *args: Any, **options: Any) -> Any:
        held = list(objects)
        audited.extend(str(o["metadata"]["name"]) for o in held if o.get("kind") != "ConfigMap")
        return audit_objects(held, *args, **options)

    monkeypatch.setattr("webhook.audit.loop.audit_objects", counted)
    return audited


def spinning_pod() -> Json:
    pod: Json = copy.deepcopy(load_yaml(EXAMPLES / "stuck-mover-pod.yaml"))
    pod["metadata"]["name"] = "spinning"
    pod["metadata"]["labels"][slowrule.SPIN_LABEL] = slowrule.FOREVER
    return pod


def test_a_stored_pod_past_the_deadline_is_reported_once_and_skipped_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = tmp_path / "cluster.json"
    objects = [*manifest_objects(EXAMPLES / "cluster.yaml"), spinning_pod()]
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    rt = Runtime(policy=policy(), view=load_static_state([cluster]), namespace="saw")
    audited = counting(monkeypatch)
    loop = AuditLoop(rt, interval=60, by_namespace=True)
    with caplog.at_level("WARNING", logger="webhook.audit.loop"):
        first = loop.run_once()
        audited_first = audited.count("spinning")
        second = loop.run_once()
    assert first == second
    assert first[(budget.FAMILY, "shop")] == 1
    assert audited_first == 1 and audited.count("spinning") == 1  # the second run reported it from memory
    (logged,) = [r.getMessage() for r in caplog.records if "not audited again" in r.getMessage()]
    assert "Pod shop/spinning" in logged and NOT_AUDITED in logged
    rt.view = load_static_state([cluster])  # the index replaced the object (a change): audited again
    assert loop.run_once() == first and audited.count("spinning") == 2


def deployment(version: str, *, spin: bool) -> Json:
    labels = {"app": "web", **({slowrule.SPIN_LABEL: slowrule.FOREVER} if spin else {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": version},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx", "env": [{"name": "A", "value": "x" * 100}]}]},
            },
        },
    }


def test_a_listed_workload_past_the_deadline_is_skipped_until_its_version_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workload is listed anew every run, a new object each time: unchanged is the same resourceVersion."""
    rt = Runtime(policy=policy(), view=load_static_state([EXAMPLES / "cluster.yaml"]), namespace="saw")
    version = ["1"]
    loop = AuditLoop(
        rt,
        interval=60,
        workloads=lambda: [workloads.trim_workload(deployment(version[0], spin=True), "Deployment")],
        by_namespace=True,
    )
    audited = counting(monkeypatch)
    first = loop.run_once()
    assert first[(budget.FAMILY, "shop")] == 1
    assert loop.run_once() == first and audited.count("web") == 1
    version[0] = "2"
    assert loop.run_once() == first and audited.count("web") == 2


def test_workloads_are_listed_in_pages_of_at_most_50_that_follow_their_bytes_and_trimmed(tmp_path: Path) -> None:
    """A first page of 10, then as many as fit the page budget at the last page's average size, never above 50."""
    from kubernetes import client

    from webhook.state.apisource import load_configuration

    with running_fake_api() as api:
        for i in range(120):
            obj = deployment("1", spin=False)
            obj["metadata"] = {"name": f"web-{i}", "namespace": "shop"}
            api.create(obj)
        configuration, _ = load_configuration(api.write_kubeconfig(tmp_path / "kubeconfig"))
        lister = client.ApiClient(configuration)
        listed = list(workloads.list_workloads(lister))
        pages = api.count("GET", "Deployment")
    assert len(listed) == 120 and pages == 4  # 10, 50, 50, 10
    for obj in listed:
        template = obj["spec"]["template"]
        assert obj["kind"] == "Deployment" and "containers" not in template["spec"]
        assert template["metadata"]["labels"] == {"app": "web"}


def test_page_sizes_follow_the_bytes_of_the_last_page() -> None:
    sizes = PageSizes(budget=1_000, first=10, most=50)
    assert sizes.limit == 10
    sizes.saw(100, 10)  # 10 bytes an object: 100 would fit
    assert sizes.limit == 50
    sizes.saw(50 * 300, 50)  # 300 bytes an object
    assert sizes.limit == 3
    sizes.saw(5_000, 3)  # one object past the budget alone: still one a page
    assert sizes.limit == 1
    sizes.saw(0, 0)  # an empty page says nothing
    assert sizes.limit == 1
    assert workloads.page_sizes().limit == workloads.FIRST_PAGE <= workloads.PAGE_SIZE <= 50


def test_a_trimmed_workload_is_audited_as_the_whole_one() -> None:
    """Every workload of the template table, in every kind, as it is written: the same findings trimmed. A
    mistyped field (a finding of family `object`) cannot come from the API server, which validates what it
    stores; such cases are left out."""
    compared = 0
    for param in CASES:
        case = param.values[0]
        pol = policy(case.get("policy"))
        for kind in kinds(case):
            obj, _ = objects(case, kind)
            whole = audit_object(obj, view_from(), pol)
            if any(f.family == "object" for f in whole.findings):
                continue
            trimmed = audit_object(workloads.trim_workload(copy.deepcopy(obj), kind), view_from(), pol)
            assert trimmed.as_json() == whole.as_json(), (case["name"], kind)
            compared += 1
    assert compared >= 2 * len(TEMPLATE_PATHS)
