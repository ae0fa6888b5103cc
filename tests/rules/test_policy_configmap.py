"""Policy ConfigMap admission (docs/design.md#6-validation, #7-policy): a ConfigMap that would not load is denied
with every error."""

from __future__ import annotations

import pytest

from rules import pipeline
from rules.messages import denial_message
from rules.model import Json
from rules.policy import POLICY_LABEL, policy_from_config_map
from tests.support import DATA, policy, subject, table_cases, validate_strict, view_from

CONFIGMAPS_KEYS = {"data", "labels", "message", "name", "operation", "policy", "violations"}

GOOD: Json = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "storage-affinity-policy", "namespace": "storage-affinity", "labels": {POLICY_LABEL: "true"}},
    "data": {"policy.yaml": "enforcement: deny\n"},
}


CLUSTER = view_from(
    *(
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}, "provisioner": "x"}
        for name in ("gp3", "gp3-backup")
    )
)


def config_map(case: Json) -> Json:
    metadata = {**GOOD["metadata"], "labels": case.get("labels", {POLICY_LABEL: "true"})}
    cm: Json = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    data = case["data"] if "data" in case else {"policy.yaml": case["policy"]}
    if data is not None:
        cm["data"] = data
    return cm


@pytest.mark.parametrize(
    "case", table_cases(DATA / "policy_configmap" / "configmaps.yaml", CONFIGMAPS_KEYS, section="cases")
)
def test_policy_config_map_table(case: Json) -> None:
    cm = config_map(case)
    validate_strict(cm)
    operation = case.get("operation", "CREATE")
    old = GOOD if operation == "UPDATE" else None
    decision = pipeline.validate(subject(cm, operation, old), CLUSTER, policy())
    violations = case.get("violations", [])
    assert [f.text() for f in decision.denials] == violations
    assert all(f.family == "policy" for f in decision.denials)
    assert decision.allowed is not violations
    assert decision.warnings == []
    if "message" in case:
        assert denial_message(decision) == case["message"]
    if not violations and cm["metadata"]["labels"].get(POLICY_LABEL) == "true":
        policy_from_config_map(cm)  # what is admitted loads


@pytest.mark.parametrize("running", [{"enforcement": "warn"}, {"validation": {"placement": {"enforcement": "warn"}}}])
def test_a_broken_policy_is_denied_whatever_the_running_enforcement(running: Json) -> None:
    broken = config_map({"policy": "enforcement: block\n"})
    decision = pipeline.validate(subject(broken, "UPDATE", GOOD), CLUSTER, policy(running))
    assert not decision.allowed
    assert [f.text() for f in decision.denials] == ['data[policy.yaml].enforcement: "block" is not one of deny, warn']
    assert decision.warnings == []


def test_delete_of_a_policy_config_map_is_not_judged() -> None:
    broken = config_map({"policy": "enforcement: block\n"})
    decision = pipeline.validate(subject(broken, "DELETE"), view_from(), policy())
    assert decision.allowed and decision.findings == []
