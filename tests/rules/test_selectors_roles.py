from __future__ import annotations

from typing import Any

import pytest

from rules.kube.selectors import selector_matches, selector_problems
from rules.roles import classify
from tests.support import DATA, policy, table_cases

SELECTORS_KEYS = {"labels", "match", "name", "selector"}
ROLES_KEYS = {"annotations", "exempt", "labels", "name", "namespace", "reason", "role"}


@pytest.mark.parametrize("case", table_cases(DATA / "selectors.yaml", SELECTORS_KEYS))
def test_label_selector_semantics(case: dict[str, Any]) -> None:
    assert selector_problems(case["selector"], "s") == []
    assert selector_matches(case["selector"], case["labels"]) is case["match"]


@pytest.mark.parametrize(
    ("selector", "problems"),
    [
        ({"matchLabels": {"a": 1}}, [("s.matchLabels[a]", "must be a string, not number")]),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            [("s.matchExpressions[0].values", "must be empty when operator is Exists")],
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            [("s.matchExpressions[0].operator", '"Gt" is not one of In, NotIn, Exists, DoesNotExist')],
        ),
        ({"matchExpressions": [{"operator": "Exists"}]}, [("s.matchExpressions[0].key", "required string")]),
        ({"matchLabel": {}}, [("s.matchLabel", "unknown field (expected matchLabels or matchExpressions)")]),
        ("app=x", [("s", "must be a label selector object, not string")]),
    ],
)
def test_selector_problems(selector: Any, problems: list[tuple[str, str]]) -> None:
    assert selector_problems(selector, "s") == problems


@pytest.mark.parametrize("case", table_cases(DATA / "roles.yaml", ROLES_KEYS))
def test_role_classification(case: dict[str, Any]) -> None:
    metadata = {"labels": case.get("labels") or {}, "annotations": case.get("annotations") or {}}
    decision = classify(metadata, case.get("namespace", "apps"), policy(), own_namespace="storage-affinity")
    assert decision.role == case["role"]
    assert decision.reason == case["reason"]
    assert decision.exempt is case.get("exempt", False)


def test_policy_selectors_are_ored_and_ordered() -> None:
    pol = policy({"roles": {"mover": {"selectors": [{"matchLabels": {"a": "1"}}, {"matchLabels": {"b": "2"}}]}}})
    assert classify({"labels": {"b": "2"}}, "x", pol).reason == "labels match roles.mover.selectors[1]"
    pol = policy({"roles": {"mover": {"selectors": []}}})
    assert classify({"labels": {"app.kubernetes.io/created-by": "volsync"}}, "x", pol).role is None
