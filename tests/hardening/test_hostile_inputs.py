"""Hostile admission requests in process: each answered with a clear, bounded error or a proper review answer."""

from __future__ import annotations

import time

import pytest
from flask.testing import FlaskClient

from rules.policy import parse_policy_text
from tests.hardening.answers import RecordProperty, judge
from tests.hardening.hostile import CASES, OWN_NAMESPACE, Case
from tests.support import EXAMPLES, app_client, example_runtime

#: Far above any honest answer (milliseconds) and far below what the quadratic checks took (about a minute).
SLOW = 10.0


@pytest.fixture(scope="module")
def client() -> FlaskClient:
    policy = parse_policy_text((EXAMPLES / "policy-velero-source.yaml").read_text())  # so /validate reads Velero's
    return app_client(example_runtime(policy, OWN_NAMESPACE))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_request_gets_a_clear_bounded_answer(
    client: FlaskClient, case: Case, record_property: RecordProperty
) -> None:
    body = case.body()
    started = time.perf_counter()
    answer = client.post(f"/{case.endpoint}", data=body, content_type="application/json")
    elapsed = time.perf_counter() - started
    record_property("answer_ms", round(elapsed * 1000, 1))
    judge(case, answer.status_code, answer.content_type, answer.get_data(), body)
    assert elapsed < SLOW


def test_every_kind_of_hostile_input_is_covered() -> None:
    names = {c.name for c in CASES}
    for kind in ("non-utf8", "invalid-json", "not-a-review", "100k-nested-arrays", "10MB-body", "missing-uid"):
        assert kind in names
    assert {n for n in names if n.startswith("policy-")} == {
        "policy-billion-laughs",
        "policy-deep-flow-nesting",
        "policy-deep-block-nesting",
        "policy-huge-anchor",
        "policy-overlong-integer",
    }
