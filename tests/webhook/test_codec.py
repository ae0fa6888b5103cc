from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from rules.model import Decision, Finding, Severity
from webhook.app.codec import ReviewError, build_response, clip_warnings, decode_review

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}


def review(  # not testkit's builder: the codec is tested on minimal, hand-shaped requests, down to no object
    api_version: str = "admission.k8s.io/v1", operation: str = "CREATE", obj: Any = POD, **extra: Any
) -> dict[str, Any]:
    request = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": operation,
        "namespace": "ns",
        "name": "p",
        **extra,
    }
    if obj is not None:
        request["object"] = obj
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": request}


def encode(doc: Any) -> bytes:
    return json.dumps(doc).encode()


PATCH = [{"op": "add", "path": "/spec/nodeName", "value": "n1"}]


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_response_echoes_version_kind_and_uid(api_version: str) -> None:
    req = decode_review(encode(review(api_version)))
    answer = build_response(req, Decision(), mutating=True)
    assert answer == {"apiVersion": api_version, "kind": "AdmissionReview", "response": {"uid": "u-1", "allowed": True}}


def test_patch_only_from_mutate_on_create_with_a_change() -> None:
    req = decode_review(encode(review()))
    answer = build_response(req, Decision(patch=PATCH), mutating=True)
    assert answer["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["response"]["patch"])) == PATCH
    assert "patch" not in build_response(req, Decision(patch=PATCH), mutating=False)["response"]
    assert "patch" not in build_response(req, Decision(patch=[]), mutating=True)["response"]


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT", "UPDATE"])
def test_never_a_patch_outside_create(operation: str) -> None:
    obj = None if operation == "DELETE" else POD
    req = decode_review(encode(review(operation=operation, obj=obj)))
    assert "patch" not in build_response(req, Decision(patch=PATCH), mutating=True)["response"]


def test_denial_has_status_422_and_every_finding() -> None:
    req = decode_review(encode(review()))
    decision = Decision(
        findings=[Finding("a", "one", "x"), Finding("b", "two", "x"), Finding("c", "w", "x", Severity.WARN)]
    )
    response = build_response(req, decision, mutating=False)["response"]
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 422,
        "reason": "Invalid",
        "message": "storage-affinity-webhook denied: 2 problems: (1) a: one; (2) b: two",
    }
    assert (
        "patch" not in build_response(req, Decision(patch=PATCH, findings=decision.findings), mutating=True)["response"]
    )


def test_lookup_failure_denial_is_503() -> None:
    req = decode_review(encode(review()))
    decision = Decision(failure="cluster state unavailable: timeout", denied_by_failure=True)
    status = build_response(req, decision, mutating=True)["response"]["status"]
    assert status["code"] == 503
    assert "cluster state unavailable: timeout" in status["message"]


def test_warnings_are_clipped_and_audit_keys_have_no_slash() -> None:
    req = decode_review(encode(review()))
    decision = Decision(warnings=["x" * 300, "short"], audit={"co-scheduled-with": "a/b", "bad/key": "v"})
    response = build_response(req, decision, mutating=True)["response"]
    assert [len(w) for w in response["warnings"]] == [256, 46, 5]
    assert response["auditAnnotations"] == {"co-scheduled-with": "a/b"}


def test_warnings_total_stays_within_what_the_api_server_keeps() -> None:
    clipped = clip_warnings([f"{i:03d} " + "y" * 200 for i in range(100)])
    assert sum(len(w) for w in clipped) <= 4096
    assert len(clipped) == 20 and clipped[-1].startswith("81 more warnings not shown")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "request body is not JSON: Expecting value at line 1, column 1"),
        (b"\xff\xfe", "request body is not UTF-8 (byte 0)"),
        (b"[]", "request body is not an AdmissionReview: expected a JSON object"),
        (encode({"kind": "Pod"}), 'request body is not an AdmissionReview: kind is "Pod"'),
        (
            encode({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v2"}),
            (
                'unsupported AdmissionReview apiVersion "admission.k8s.io/v2" '
                "(expected admission.k8s.io/v1 or admission.k8s.io/v1beta1)"
            ),
        ),
        (encode({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}), "AdmissionReview has no request"),
        (
            encode({**review(), "request": {**review()["request"], "uid": ""}}),
            "request.uid is required (a non-empty string)",
        ),
        (encode(review(obj=None)), "request.object is required for CREATE"),
        (encode(review(obj=[1])), "request.object must be an object"),
        (encode(review(dryRun="yes")), "request.dryRun must be true or false"),
        (encode(review(userInfo="velero")), "request.userInfo must be an object"),
        (encode(review(userInfo={"username": 7})), "request.userInfo.username must be a string"),
        (b"[" * 100000 + b"]" * 100000, "request body is not usable JSON: nested too deeply"),
    ],
)
def test_bad_bodies_name_the_problem(body: bytes, message: str) -> None:
    with pytest.raises(ReviewError) as err:
        decode_review(body)
    assert err.value.status == 400
    assert err.value.message == message


@pytest.mark.parametrize(
    ("extra", "user"),
    [
        ({"userInfo": {"username": "system:serviceaccount:velero:velero", "groups": ["system:serviceaccounts"]}},
         "system:serviceaccount:velero:velero"),
        ({"userInfo": {"groups": ["system:authenticated"]}}, None),
        ({"userInfo": {"username": ""}}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_the_requester_is_the_user_name_the_api_server_sends(extra: dict[str, Any], user: str | None) -> None:
    """The policy's trust.requesters and cdi.requesters match `userInfo.username`; without one, only namespace
    (and for CDI workers, owner) trust applies."""
    assert decode_review(encode(review(**extra))).subject.user == user
