"""Evaluate the rendered matchConditions (CEL) on real-shaped Pods and Jobs with a CEL interpreter (cel-python).

The API server evaluates them; a condition that errors or is false for a Job would silently turn the webhook off
for Jobs, so each one is run here on the objects it must let through and the ones it must skip.
"""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from tests.chart.chart_helpers import SCENARIOS, render, webhooks

MUTATE = "mutate.storage-affinity.io"
VALIDATE = "validate.storage-affinity.io"


def _pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "mover",
        "namespace": "apps",
        "labels": {"app.kubernetes.io/created-by": "volsync"},
    }
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [{"name": "c"}]}}


def _job(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "volsync-src-data", "namespace": "apps"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": _pod()}}


MIRROR = {"kubernetes.io/config.mirror": "3f1c"}
FIRST_CONSUMER = {"kubevirt.io/ephemeral-provisioning": "true"}

CASES = [
    ("pod without annotations", _pod(), True, True),
    ("pod with other annotations", _pod({"storage-affinity.io/role": "mover"}), True, True),
    ("mirror pod", _pod(MIRROR), False, False),
    ("KubeVirt first-consumer pod", _pod(FIRST_CONSUMER), False, True),
    ("KubeVirt annotation not true", _pod({"kubevirt.io/ephemeral-provisioning": "false"}), True, True),
    ("job without annotations", _job(), True, True),
    ("job with annotations", _job({"team": "storage"}), True, True),
]


def _matches(hook: dict[str, Any], obj: dict[str, Any]) -> bool:
    """The API server calls the webhook only when every matchCondition is true."""
    env = celpy.Environment()
    activation = {"object": json_to_cel(obj), "oldObject": json_to_cel(None)}
    results = []
    for condition in hook.get("matchConditions", []):
        result = env.program(env.compile(condition["expression"])).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), f"{condition['name']} gave {result!r}, not a bool"
        results.append(bool(result))
    return all(results)


@pytest.mark.parametrize(("case", "obj", "mutated", "validated"), CASES, ids=[c[0] for c in CASES])
def test_match_conditions(case: str, obj: dict[str, Any], mutated: bool, validated: bool) -> None:
    hooks = webhooks(render())
    assert _matches(hooks[MUTATE], obj) is mutated, case
    assert _matches(hooks[VALIDATE], obj) is validated, case


def test_velero_configmap_condition() -> None:
    hook = webhooks(render(SCENARIOS["velero-source"]))["velero-config.validate.storage-affinity.io"]
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "node-agent-config"}}
    assert _matches(hook, config_map) is True
    assert _matches(hook, config_map | {"metadata": {"name": "other"}}) is False
