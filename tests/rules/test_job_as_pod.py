"""A Job is judged as the pod it will create: every Pod case of every rule table (tests/rules/table_objects.py),
wrapped in a Job, gets the same outcome, findings (their fields under `spec.template`) and placement; wrapped in
the other workloads `/validate` checks, the findings of the rules that need no cluster."""

from __future__ import annotations

import copy

import pytest

from rules import pipeline, registry
from rules.cluster import ClusterView
from rules.context import Context
from rules.kube.nodeaffinity import pod_fits_node
from rules.kube.workloads import TEMPLATE_PATHS
from rules.model import Decision, Json, Severity
from rules.policy import Policy
from tests.rules.table_objects import TableObject, table_objects
from tests.rules.test_workload_templates import workload
from tests.support import EXAMPLES, example_runtime, load_yaml, mutate_checked, policy, subject, view_from

FELL_BACK = "; used requiredAffinity"
#: The kinds whose pods come later, on whatever nodes and claims exist then: only the rules that need no cluster.
LATER = [kind for kind in TEMPLATE_PATHS if kind != "Job"]
POD_OBJECTS = [case for case in table_objects() if case.obj.get("kind") == "Pod" and case.operation == "CREATE"]
POD_CASES = [pytest.param(case, id=case.name) for case in POD_OBJECTS]


def wrapped(pod: Json, kind: str) -> Json:
    """The pod's template in a workload of `kind`: its metadata but the name, namespace and owners the controller
    sets, its spec (restartPolicy Never where a Job needs it)."""
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in ("name", "namespace", "generateName")}
    spec = copy.deepcopy(pod.get("spec") or {})
    if kind in ("Job", "CronJob") and spec.get("restartPolicy", "Always") == "Always":
        spec.pop("restartPolicy", None)
    obj = workload(kind, {"metadata": meta, "spec": spec}, namespace=str(pod["metadata"].get("namespace") or "default"))
    obj["metadata"]["name"] = str(pod["metadata"].get("name") or "app")
    return obj


def made_by(pod: Json, workload: Json) -> Json:
    """The pod as a controller creates it from the workload's template: controlled by its workload (the Job
    controller sets the Job as controller, kubernetes/kubernetes pkg/controller/job), never by whatever owner the
    case's pod named."""
    made = copy.deepcopy(pod)
    meta = workload["metadata"]
    owner = {"apiVersion": workload["apiVersion"], "kind": workload["kind"], "name": meta["name"], "uid": "3c1d"}
    owner["controller"] = True
    made["metadata"]["ownerReferences"] = [owner]
    return made


def findings(decision: Decision, base: str = "") -> list[tuple[str, str, str, str]]:
    return [
        (f"{base}.{f.field}" if base and f.field else f.field or base, f.message, f.family, f.severity.value)
        for f in decision.findings
    ]


def prefixed(warning: str) -> str:
    """A warning about a field of the pod, as it names that field of a Job's template."""
    field, sep, rest = warning.partition(": ")
    return f"spec.template.{field}{sep}{rest}" if sep and field.startswith(("spec", "metadata")) else warning


def fitting(spec: Json, nodes: list[Json]) -> list[str]:
    """The nodes of the case's cluster the pod may run on: its placement, whatever mode wrote it."""
    pinned = spec.get("nodeName")
    names = [str(n["metadata"]["name"]) for n in nodes if pod_fits_node(spec, n)]
    return [n for n in names if not pinned or n == pinned]


@pytest.mark.parametrize("case", POD_CASES)
def test_a_job_gets_what_its_pod_gets(case: TableObject) -> None:
    view, pol = view_from(*case.state), policy(case.policy)
    nodes = [o for o in case.state if o.get("kind") == "Node"]
    job_mutation, job = mutate_checked(wrapped(case.obj, "Job"), view, pol)
    pod_mutation, pod = mutate_checked(made_by(case.obj, job), view, pol)
    pod_validation = pipeline.validate(subject(pod), view, pol)
    job_validation = pipeline.validate(subject(job), view, pol)
    assert findings(job_validation) == findings(pod_validation, "spec.template")
    assert job_validation.allowed == pod_validation.allowed
    # Where the pod's placement mode fell back to requiredAffinity, which co-scheduling and data-source placement
    # always give a Job's template, the Job needs no word about it.
    told = [prefixed(w) for w in pod_mutation.warnings]
    assert [w for w in told if w in job_mutation.warnings or not w.endswith(FELL_BACK)] == job_mutation.warnings
    assert fitting(job["spec"]["template"]["spec"], nodes) == fitting(pod["spec"], nodes)


def template_rule_findings(pod: Json, view: ClusterView, pol: Policy) -> list[tuple[str, str, str, Severity]]:
    """The pod's findings, enforced as on the pod, from the rules a workload's template gets
    (registry.TEMPLATE_VALIDATORS): what the template of a workload that makes this pod later must be told."""
    as_pod = Context(subject(pod), view, pol)
    for rule in registry.TEMPLATE_VALIDATORS:
        rule(as_pod, pipeline.pod_target(as_pod.subject, pol, ""))
    own = {(f.field, f.message) for f in as_pod.decision.findings}
    checked = pipeline.validate(subject(pod), view, pol).findings
    return [(f.field, f.message, f.family, f.severity) for f in checked if (f.field, f.message) in own]


@pytest.mark.parametrize("case", POD_CASES)
def test_a_later_workload_gets_the_findings_that_need_no_cluster(case: TableObject) -> None:
    view, pol = view_from(*case.state), policy(case.policy)
    for kind in LATER:
        obj = wrapped(case.obj, kind)
        expected = template_rule_findings(made_by(case.obj, obj), view, pol)
        base = ".".join(TEMPLATE_PATHS[kind])
        got = pipeline.validate(subject(obj), view, pol)
        assert [(f.field, f.message, f.family, f.severity) for f in got.findings] == [
            (f"{base}.{field}", message, family, severity) for field, message, family, severity in expected
        ], kind


def test_the_pinned_away_example_is_denied_as_a_job_as_it_is_as_a_pod() -> None:
    """examples/pinned-away-pod.yaml (the KubeVirt failure: pinned away from its local PV) in a Job."""
    pod = load_yaml(EXAMPLES / "pinned-away-pod.yaml")
    view = example_runtime().view
    as_pod = pipeline.validate(subject(pod), view, policy())
    as_job = pipeline.validate(subject(wrapped(pod, "Job")), view, policy())
    assert [(f.field, f.message) for f in as_pod.denials] != []
    assert [(f.field, f.message) for f in as_job.denials] == [
        (f"spec.template.{f.field}", f.message) for f in as_pod.denials
    ]


def test_the_later_workloads_are_compared_on_cases_that_have_findings() -> None:
    """The comparison above holds trivially where the template rules find nothing: most of the 65 cases that find
    something (an annotation typo, a disk contradiction) must stay, so that it checks what later workloads are told."""
    with_findings = [
        case
        for case in POD_OBJECTS
        if template_rule_findings(
            made_by(case.obj, wrapped(case.obj, LATER[0])), view_from(*case.state), policy(case.policy)
        )
    ]
    assert len(with_findings) >= 50, len(with_findings)
