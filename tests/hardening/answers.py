"""One judgement of an answer to a hostile case, shared by the in-process and the over-TLS tests."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from tests.hardening.hostile import ECHO_BOUND, Case
from tests.support import check_patch
from tests.webhook.review_checks import check_response

RecordProperty = Callable[[str, object], None]  # pytest's record_property fixture


def judge(case: Case, status: int, content_type: str, body: bytes, sent: bytes) -> None:
    """Assert the answer is the clear, bounded one the case expects."""
    assert status == case.status, body[:500]
    if status != 200:
        text = body.decode()
        assert content_type.startswith("text/plain")
        assert case.text in text
        assert len(body) <= ECHO_BOUND, f"{len(body)} bytes: the error echoes the input"
        return
    review = json.loads(sent)
    answer: dict[str, Any] = json.loads(body)
    patch = check_response(review, answer, mutating=case.endpoint == "mutate")
    response = answer["response"]
    assert response["allowed"] is case.allowed, response.get("status")
    message = (response.get("status") or {}).get("message", "")
    assert len(message) <= ECHO_BOUND, f"{len(message)} characters: the denial echoes the input"
    if case.text:
        assert case.text in message or any(case.text in w for w in response.get("warnings", [])), message[:500]
    if case.patched:
        assert patch, "the mover must still be placed next to its anchor"
        result = check_patch(review["request"]["object"], patch)
        assert result["metadata"]["annotations"]["storage-affinity.io/co-scheduled-with"].startswith("db-0/")
    else:
        assert "patch" not in response or base64.b64decode(response["patch"])
