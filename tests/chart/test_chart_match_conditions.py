"""The webhooks are called only for the pods they can act on, and that narrowing never changes an answer.

The chart's `storage-pod` matchCondition (generated from the policy's role selectors) and the workloads webhook's
template conditions are evaluated with a CEL interpreter (cel-python) on every Pod and Job review of the test
corpora and workloads made of them (tests/chart/cel_corpus.py): wherever no webhook's rules and matchConditions
send a review, the in-process pipeline must answer allowed, with no patch, no warning and no finding, since the
API server will never ask it.

cel-python interprets an expression by walking its tree, some 10 ms per webhook and object, where the pipeline answers
a review in a fraction of one. So each review is answered first, and the conditions are evaluated only for the
reviews the pipeline acts on, which must be sent (the same property, read the other way round): about a sixth of the
corpus. Each verdict is computed once per distinct (webhook, operation, object, old object, roles) and shared by the
tests of this module, which therefore run on one pytest-xdist worker.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from rules import pipeline
from tests.chart.cel_corpus import Item, chart_roles, corpus, foreign_pod_creations, workload
from tests.chart.chart_helpers import render, webhooks
from tests.rules.test_workload_templates import workload as workload_of
from tests.support import subject

MUTATE = "mutate.storage-affinity.io"
VALIDATE = "validate.storage-affinity.io"
WORKLOADS = "workloads.validate.storage-affinity.io"
VALIDATING = (VALIDATE, WORKLOADS)
_ENV = celpy.Environment()


@functools.cache
def _programs(roles_json: str, only_storage_pods: bool = True) -> dict[str, list[tuple[str, Any]]]:
    values = {"policy": {"roles": json.loads(roles_json)}, "webhook": {"onlyStoragePods": only_storage_pods}}
    hooks = webhooks(render(values))
    return {
        name: [(c["name"], _ENV.program(_ENV.compile(c["expression"]))) for c in hooks[name].get("matchConditions", [])]
        for name in (MUTATE, *VALIDATING)
    }


@functools.cache
def _registered() -> dict[str, set[tuple[str, str]]]:
    """(resource, operation) pairs each webhook's rules name (the test corpus holds no other API group's kinds)."""
    hooks = webhooks(render())
    return {
        name: {(r, op) for rule in hooks[name]["rules"] for r in rule["resources"] for op in rule["operations"]}
        for name in (MUTATE, *VALIDATING)
    }


def sent(hook: str, operation: str, obj: Any, old: Any, roles: Any, *, only_storage_pods: bool = True) -> bool:
    """Whether the API server calls the webhook: its rules name the object's resource and operation, and every
    matchCondition is true (an error would fail the call)."""
    if (str(obj.get("kind")).lower() + "s", operation) not in _registered()[hook]:
        return False
    review = (operation, json.dumps(obj, sort_keys=True), json.dumps(old, sort_keys=True))
    return _evaluated(hook, review, json.dumps(roles, sort_keys=True), only_storage_pods)


@functools.cache
def _evaluated(hook: str, review: tuple[str, str, str], roles: str, only_storage_pods: bool) -> bool:
    """`sent` past the rules, for a review as (operation, object, old object) and the roles, in JSON."""
    operation, obj, old = review
    activation = {
        "object": json_to_cel(json.loads(obj)),
        "oldObject": json_to_cel(json.loads(old)),
        "request": json_to_cel({"operation": operation}),
    }
    results = []
    for name, program in _programs(roles, only_storage_pods)[hook]:
        result = program.evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), f"{name} gave {result!r}, not a bool"
        results.append(bool(result))
    return all(results)


ITEMS = corpus()


def acted_on(hook: str, item: Item) -> bool:
    """Whether the pipeline, as `hook` calls it, does something with the review: a patch or a warning from the
    mutating webhook, a denial, a warning or a finding from a validating one."""
    review = subject(item.obj, item.operation, item.old, item.user)
    if hook == MUTATE:
        mutated = pipeline.mutate(review, item.view, item.policy)
        return not (mutated.allowed and not mutated.patch and not mutated.warnings)
    validated = pipeline.validate(review, item.view, item.policy)
    return not (validated.allowed and not validated.warnings and not validated.findings)


@pytest.mark.parametrize("item", ITEMS, ids=[item.name for item in ITEMS])
def test_a_skipped_review_would_have_been_answered_with_nothing(item: Item) -> None:
    roles = chart_roles(item.policy)
    if item.operation == "CREATE" and acted_on(MUTATE, item):
        assert sent(MUTATE, item.operation, item.obj, item.old, roles)
    if acted_on(VALIDATE, item):
        assert any(sent(hook, item.operation, item.obj, item.old, roles) for hook in VALIDATING)


@pytest.mark.parametrize("hook", [MUTATE, *VALIDATING])
def test_the_corpus_exercises_both_answers(hook: str) -> None:
    """Enough reviews the pipeline acts on, each of which the property above requires sent, and enough the
    conditions skip, that the property says something. The skipped are counted in corpus order until there are
    enough: the verdicts cost the most of this module."""
    named = [item for item in ITEMS if (str(item.obj.get("kind")).lower() + "s", item.operation) in _registered()[hook]]
    acting = {index for index, item in enumerate(named) if acted_on(hook, item)}
    assert len(acting) > 100, len(acting)
    skipped = 0
    for index, item in enumerate(named):
        if index not in acting and not sent(hook, item.operation, item.obj, item.old, chart_roles(item.policy)):
            skipped += 1
            if skipped > 15:
                break
    assert skipped > 15, skipped


@functools.cache
def _read_fields() -> frozenset[str]:
    """Every name the conditions follow a dot to (fields, and harmlessly the methods they call), from the chart."""
    programs = webhooks(render())
    expressions = [c["expression"] for name in (MUTATE, *VALIDATING) for c in programs[name].get("matchConditions", [])]
    return frozenset(re.findall(r"\.([A-Za-z]+)", " ".join(expressions)))


def shape(value: Any, key: str = "") -> Any:
    """`value` cut to the fields the conditions read, each by its type: whether a condition errors depends on which
    of them are there, not on their values. Labels and annotations count only as empty or not: the conditions ask
    `in` before they read one."""
    if isinstance(value, dict):
        if key in ("labels", "annotations"):
            return bool(value)
        return tuple(sorted((k, shape(v, k)) for k, v in value.items() if k in _read_fields()))
    if isinstance(value, list):
        return frozenset(shape(v, key) for v in value)
    return type(value).__name__


@pytest.mark.parametrize("hook", [MUTATE, *VALIDATING])
def test_every_condition_answers_a_bool_for_every_shape_of_review(hook: str) -> None:
    """A condition that errors fails the call, which the webhook's failurePolicy Fail turns into a refusal of a pod
    it has nothing to say about. Each condition gives a bool (`_evaluated` checks) on one review of each shape the
    corpus holds, not only on the reviews the pipeline acts on."""
    shapes = set()
    for item in ITEMS:
        key = (item.obj.get("kind"), item.operation, shape(item.obj), shape(item.old))
        if key not in shapes:
            shapes.add(key)
            sent(hook, item.operation, item.obj, item.old, chart_roles(item.policy))
    assert len(shapes) > 200, len(shapes)


def test_workload_templates_are_sent_when_created_or_changed_with_annotations_the_rules_read() -> None:
    roles = chart_roles(pipeline_policy())
    template = {"metadata": {"labels": {"app": "web"}, "annotations": {"storage-affinity.io/rol": "none"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}  # fmt: skip
    plain = {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]}
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "CronJob"):
        created = workload_of(kind, template)
        assert sent(WORKLOADS, "CREATE", created, None, roles) is True, kind
        assert sent(WORKLOADS, "CREATE", workload_of(kind, plain), None, roles) is False, kind
        scaled = workload_of(kind, template, {"suspend": True} if kind == "CronJob" else {"replicas": 9})
        assert sent(WORKLOADS, "UPDATE", scaled, created, roles) is False, kind
        assert sent(WORKLOADS, "UPDATE", created, workload_of(kind, plain), roles) is True, kind
        assert sent(VALIDATE, "CREATE", created, None, roles) is False, kind
    job = workload_of("Job", template)
    assert sent(VALIDATE, "CREATE", job, None, roles) is True
    assert sent(WORKLOADS, "CREATE", job, None, roles) is False
    assert sent(WORKLOADS, "UPDATE", job, workload_of("Job", plain), roles) is True
    assert sent(WORKLOADS, "UPDATE", job, job, roles) is False


def test_role_selectors_follow_the_policy() -> None:
    """A pod that only a custom role selector makes a mover is sent; with the default roles it is not."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m", "labels": {"team": "movers", "tier": "x"}},
           "spec": {"containers": [{"name": "c"}]}}  # fmt: skip
    not_y = {"key": "tier", "operator": "NotIn", "values": ["y"]}
    custom = {"mover": {"selectors": [{"matchLabels": {"team": "movers"}, "matchExpressions": [not_y]}]}}
    default = chart_roles(pipeline_policy())
    assert sent(MUTATE, "CREATE", pod, None, custom) is True
    assert sent(MUTATE, "CREATE", pod, None, default) is False
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": pod}}
    assert sent(MUTATE, "CREATE", job, None, custom) is True
    negative = {"mover": {"selectors": [{"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}]}}
    assert sent(MUTATE, "CREATE", pod, None, negative) is False
    assert sent(MUTATE, "CREATE", {**pod, "metadata": {"name": "m"}}, None, negative) is True


def test_a_removed_disk_annotation_is_still_validated_on_update() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m"}, "spec": {"containers": [{"name": "c"}]}}
    old = {**pod, "metadata": {"name": "m", "annotations": {"affinity.volumes.csi-baremetal.dell.com/types": "x"}}}
    roles = chart_roles(pipeline_policy())
    assert sent(VALIDATE, "UPDATE", pod, old, roles) is True
    assert sent(VALIDATE, "UPDATE", pod, pod, roles) is False


def test_switched_off_every_pod_is_sent() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m"}, "spec": {"containers": [{"name": "c"}]}}
    roles = chart_roles(pipeline_policy())
    assert sent(MUTATE, "CREATE", pod, None, roles) is False
    assert sent(MUTATE, "CREATE", pod, None, roles, only_storage_pods=False) is True


def pipeline_policy() -> Any:
    from rules.policy import default_policy

    return default_policy()


def share(pods: list[tuple[str, Any]], hook: str, *, only_storage_pods: bool) -> float:
    roles = chart_roles(pipeline_policy())
    return sum(sent(hook, "CREATE", pod, None, roles, only_storage_pods=only_storage_pods) for _, pod in pods) / len(
        pods
    )


def test_share_of_pod_creations_sent_is_what_docs_performance_md_reports() -> None:
    """docs/performance.md, "Which pod creations reach the webhook": the numbers it shows, recomputed."""
    mix = foreign_pod_creations() + workload()
    measured = {
        (hook, only): round(100 * share(mix, hook, only_storage_pods=only))
        for hook in (MUTATE, VALIDATE)
        for only in (False, True)
    }
    assert measured == {
        (MUTATE, False): 100,
        (VALIDATE, False): 100,
        (MUTATE, True): MUTATE_SHARE,
        (VALIDATE, True): VALIDATE_SHARE,
    }, measured


#: docs/performance.md: 15 foreign fixtures and 100 creations of tests/chart/cel_corpus.py WORKLOAD.
MUTATE_SHARE = 22
VALIDATE_SHARE = 35
