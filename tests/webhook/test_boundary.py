"""The typed boundary, strict JSON and escaped echoes: structural changes to real reviews, answered exactly.

Each case in tests/data/boundary/reviews.yaml once crashed a rule, became a 5xx, admitted a pod unchecked, let a
broken policy land or echoed a control character; the table says what both endpoints answer instead.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from testkit.reviews import admission_review
from tests.support import DATA, EXAMPLES, app_client, example_runtime, load_yaml, table_cases
from tests.webhook.review_checks import check_response
from webhook.policy.file import load_policy_file

REVIEWS_KEYS = {"base", "expect", "name", "raw", "set"}

TABLE = load_yaml(DATA / "boundary" / "reviews.yaml")


@pytest.fixture(scope="module")
def client() -> FlaskClient:
    policy, source = load_policy_file(EXAMPLES / "policy-load-affinity.yaml")
    runtime = example_runtime(policy)
    runtime.policy_source = source
    return app_client(runtime)


def value(spec: Any) -> Any:
    if isinstance(spec, dict) and "repeat" in spec:
        return str(spec["repeat"]) * int(spec["times"])
    if isinstance(spec, dict) and "join" in spec:
        return "".join(value(part) for part in spec["join"])
    if isinstance(spec, dict):
        return {k: value(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [value(v) for v in spec]
    return spec


def body(case: dict[str, Any]) -> bytes:
    base = case["base"]
    obj = copy.deepcopy(TABLE["configmaps"].get(base) or load_yaml(EXAMPLES / f"{base}.yaml"))
    review = admission_review("CREATE", obj, uid="boundary")
    for path, new in case.get("set", ()):
        parent = review
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value(new)
    text = json.dumps(review)
    if "raw" in case:
        old, new = case["raw"]
        assert old in text, f"{old!r} is not in the body"
        text = text.replace(old, new)
    return text.encode()


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
@pytest.mark.parametrize("case", table_cases(DATA / "boundary" / "reviews.yaml", REVIEWS_KEYS, section="cases"))
def test_structural_change_gets_its_exact_answer(client: FlaskClient, case: dict[str, Any], endpoint: str) -> None:
    sent = body(case)
    answer = client.post(f"/{endpoint}", data=sent, content_type="application/json")
    expected = case["expect"][endpoint]
    if "status" in expected:
        assert (answer.status_code, answer.text) == (expected["status"], expected["body"] + "\n")
        return
    assert answer.status_code == 200, answer.text
    document = json.loads(answer.text, parse_constant=_no_constant)
    check_response(json.loads(sent), document, mutating=endpoint == "mutate")
    response = document["response"]
    assert response["allowed"] is expected["allowed"], response
    assert "internal error" not in answer.text
    if "message" in expected:
        assert response["status"]["message"] == expected["message"]
    if "warnings" in expected:
        assert response.get("warnings", []) == expected["warnings"]
    for text in [*response.get("warnings", []), response.get("status", {}).get("message", "")]:
        assert text.isprintable(), text


def _no_constant(name: str) -> Any:
    raise AssertionError(f"the answer carries {name}")
