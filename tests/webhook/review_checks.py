"""The checks kube-apiserver applies to a webhook's AdmissionReview response, as one reusable assertion."""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

import jsonpatch

from webhook.app.codec import WARNING_LIMIT

AUDIT_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def check_response(review: dict[str, Any], answer: dict[str, Any], *, mutating: bool) -> list[dict[str, Any]]:
    """Assert the answer is one kube-apiserver accepts; return the decoded patch (empty when none)."""
    request = review["request"]
    assert answer["apiVersion"] == review["apiVersion"]
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == request["uid"]
    assert isinstance(response["allowed"], bool)
    assert ("patch" in response) == ("patchType" in response), "patch and patchType go together"
    patch: list[dict[str, Any]] = []
    if "patch" in response:
        assert mutating, "a validating webhook must not return a patch"
        assert response["allowed"], "no patch on a denial"
        assert response["patchType"] == "JSONPatch"
        assert request["operation"] == "CREATE", "mutation only on CREATE"
        assert request.get("object") is not None, "no patch without an object"
        patch = patch_of(response)
        assert patch, "an empty patch must be omitted"
        jsonpatch.apply_patch(copy.deepcopy(request["object"]), patch)
    if not response["allowed"]:
        status = response["status"]
        assert status["code"] >= 400 and status["message"]
    for warning in response.get("warnings", []):
        assert isinstance(warning, str) and 0 < len(warning) <= WARNING_LIMIT
    for key, value in (response.get("auditAnnotations") or {}).items():
        assert "/" not in key and AUDIT_KEY.match(key) and isinstance(value, str)
    return patch


def patch_of(response: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The JSON Patch of an AdmissionReview response, decoded (empty when it has none)."""
    if not response or "patch" not in response:
        return []
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"], validate=True))
    return patch
