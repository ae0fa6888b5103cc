"""The pod templates of workloads are checked when the workload is applied (tests/data/workloads/*.yaml)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from rules import pipeline, registry
from rules.context import Context
from rules.kube.workloads import TEMPLATE_PATHS, template_spec
from rules.model import Json
from tests.support import DATA, policy, subject, table_cases, validate_strict, view_from

KEYS = {
    "name", "source", "kind", "kinds", "namespace", "template", "spec", "operation", "old", "policy", "denied",
    "warned", "decisions",
}  # fmt: skip
CASES = table_cases(DATA / "workloads", KEYS)
API_VERSIONS = {"Job": "batch/v1", "CronJob": "batch/v1"}


def workload(kind: str, template: Json, spec: Json | None = None, namespace: str = "default") -> Json:
    """`template` in a workload of `kind`, with what its API requires: a selector of the template's labels for
    the apps kinds, a schedule for a CronJob, restartPolicy Never for a Job's pods."""
    template = copy.deepcopy(template)
    if kind in ("Job", "CronJob"):
        template["spec"].setdefault("restartPolicy", "Never")
    body: Json = {"template": template}
    if kind not in ("Job", "CronJob"):
        body["selector"] = {"matchLabels": (template.get("metadata") or {}).get("labels") or {}}
    if kind == "CronJob":
        body = {"schedule": "* * * * *", "jobTemplate": {"spec": body}}
    return {
        "apiVersion": API_VERSIONS.get(kind, "apps/v1"),
        "kind": kind,
        "metadata": {"name": "app", "namespace": namespace},
        "spec": {**body, **copy.deepcopy(spec or {})},
    }


def at(kind: str, field: str) -> str:
    """A field of the template, as a finding names it in a workload of `kind`."""
    return ".".join((*TEMPLATE_PATHS[kind], field))


def kinds(case: Json) -> list[str]:
    return list(case.get("kinds") or [case["kind"]])


def objects(case: Json, kind: str) -> tuple[Json, Json | None]:
    namespace = case.get("namespace", "shop")
    obj = workload(kind, case["template"], case.get("spec"), namespace)
    old = case.get("old")
    before = None if old is None else workload(kind, old.get("template", case["template"]), old.get("spec"), namespace)
    for built in (obj, before):
        if built is not None:
            validate_strict(built)
    return obj, before


@pytest.mark.parametrize("case", CASES)
def test_workload_template(case: Json) -> None:
    for kind in kinds(case):
        obj, old = objects(case, kind)
        operation = case.get("operation", "CREATE")
        decision = pipeline.validate(subject(obj, operation, old), view_from(), policy(case.get("policy")))
        assert [f.field for f in decision.denials] == [at(kind, f) for f in case["denied"]], (kind, decision)
        assert decision.allowed == (not case["denied"])
        if "warned" in case:
            fields = [w.partition(": ")[0] for w in decision.warnings]
            assert fields == [at(kind, f) for f in case["warned"]], (kind, decision.warnings)
        for expected in case.get("decisions", ()):
            assert any(expected in reason for reason in decision.reasons), (expected, decision.reasons)


def test_the_same_template_as_a_pod_gets_the_same_findings() -> None:
    """One rule, two places: every finding on a workload's template is the pod's finding, prefixed."""
    compared = 0
    for param in CASES:
        case = param.values[0]
        if case.get("operation", "CREATE") != "CREATE" or case.get("kind") in (None, "StatefulSet"):
            continue
        obj, _ = objects(case, case["kind"])
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(case["template"])}
        pod["metadata"] = {**pod["metadata"], "name": "app-0", "namespace": case.get("namespace", "shop")}
        pol = policy(case.get("policy"))
        as_pod = Context(subject(pod), view_from(), pol)
        for rule in registry.TEMPLATE_VALIDATORS:  # the pod's findings from the rules a template gets
            rule(as_pod, pipeline.pod_target(as_pod.subject, pol, ""))
        as_template = pipeline.validate(subject(obj), view_from(), pol)
        from_template_rules = {(f.field, f.message) for f in as_pod.decision.findings}
        # As enforced on the pod, and none where the pod is exempt.
        checked = pipeline.validate(subject(pod), view_from(), pol).findings
        own = [f for f in checked if (f.field, f.message) in from_template_rules]
        prefixed = [(at(case["kind"], f.field), f.message, f.severity) for f in own]
        assert [(f.field, f.message, f.severity) for f in as_template.findings] == prefixed, case["name"]
        compared += 1
    assert compared >= 5


def test_rules_that_need_the_cluster_are_skipped_for_templates() -> None:
    """A pod pinned to a Node its nodeSelector excludes, naming a StorageClass the cluster lacks, is denied and
    warned as a pod; as a Deployment's template it is not: its pods come later, on whatever nodes exist then."""
    case = next(p.values[0] for p in CASES if p.values[0]["name"].startswith("a template's node pin"))
    cluster = view_from({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {}}})
    pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(case["template"])}
    pod["metadata"] = {**pod["metadata"], "name": "app-0", "namespace": "velero"}  # where a backup is trusted
    reader = dataclasses.replace(policy(), nodes_readable=True)  # the `audit` command's: every label counts
    as_pod = pipeline.validate(subject(pod), cluster, reader)
    assert {f.family for f in as_pod.findings} == {"placement", "loadAffinity"}, as_pod.findings
    obj, _ = objects(case, "Deployment")
    assert pipeline.validate(subject(obj), cluster, reader).findings == []


def test_no_template_at_all_is_no_finding() -> None:
    """A workload the API server would refuse for its missing template is not this webhook's to refuse."""
    bare: Any = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app", "namespace": "shop"}}
    assert pipeline.validate(subject(bare), view_from(), policy()).findings == []


def _mistyped(kind: str) -> Json:
    obj = workload(kind, {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}})
    template = obj["spec"]["jobTemplate"]["spec"]["template"] if kind == "CronJob" else obj["spec"]["template"]
    if kind == "Deployment":
        template["metadata"]["annotations"] = "x"
    elif kind == "CronJob":
        template["spec"]["volumes"] = "x"
    else:
        obj["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": 7}}]
    return obj


@pytest.mark.parametrize(
    ("kind", "field", "message"),
    [
        ("Deployment", "spec.template.metadata.annotations", "must be"),
        ("CronJob", "spec.jobTemplate.spec.template.spec.volumes", "must be a list"),
        ("StatefulSet", "spec.volumeClaimTemplates[0].metadata.name", "must be a string"),
    ],
)
def test_a_mistyped_template_is_bad_input_naming_the_field(kind: str, field: str, message: str) -> None:
    with pytest.raises(pipeline.BadObject) as info:
        pipeline.validate(subject(_mistyped(kind)), view_from(), policy())
    assert [(path, text[: len(message)]) for path, text in info.value.problems] == [(field, message)]


class _Name(str):
    """A volume or claim template name that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Name.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize("size", [10, 100, 1_000])
def test_a_stateful_set_s_claim_templates_replace_its_volumes_in_linear_work(size: int) -> None:
    """storage-affinity-webhook issue 'Bounded by construction': 20,000 volumes × 15,000 claim templates took 5 s,
    each volume compared with every template name. Counted: at most a comparison a volume (a set lookup that hits)."""
    volumes = [{"name": _Name(f"v{i}"), "emptyDir": {}} for i in range(size)]
    claims = [{"metadata": {"name": _Name(f"v{i}")}} for i in range(0, 2 * size, 2)]  # every other one replaces
    sts = {"metadata": {"name": "s"}, "spec": {"volumeClaimTemplates": claims}}
    _Name.compared = 0
    spec = template_spec("StatefulSet", sts, {"spec": {"volumes": volumes}})
    assert _Name.compared <= size
    names = [volume["name"] for volume in spec["volumes"]]
    assert names == [f"v{i}" for i in range(1, size, 2)] + [f"v{i}" for i in range(0, 2 * size, 2)]
    assert spec["volumes"][-1]["persistentVolumeClaim"] == {"claimName": f"v{2 * size - 2}-s-0"}
