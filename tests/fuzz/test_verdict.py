"""The structural fuzz's harness catches what it is there to catch: each broken answer is named, sound ones pass,
and the mutations write what they claim to (NaN tokens, tags inside carried YAML)."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from rules.annotations import LOAD_AFFINITY
from testkit import yamldocs
from testkit.reviews import admission_review
from tests.fuzz import mutations as m
from tests.fuzz.verdict import ErrorLog, FuzzFailure, judge

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {"uid": "u1", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": {"kind": "Pod"}},
}
SENT = json.dumps(REVIEW).encode()


def _answer(**response: Any) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}).encode()


def _patch(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
SOUND = [
    (200, JSON, _answer(uid="u1", allowed=True)),
    (200, JSON, _answer(uid="u1", allowed=True, warnings=["claim data not found"])),
    (400, TEXT, b"request.object.spec.volumes: must be a list, not bool\n"),
    (400, TEXT, b"request body is not JSON: Expecting value at line 1, column 1\n"),
]
BROKEN = [
    (500, TEXT, b"Internal Server Error", "HTTP 500"),
    (502, TEXT, b"", "HTTP 502"),
    (
        200,
        JSON,
        _answer(uid="u1", allowed=True, warnings=["admitted this unchanged: internal error in rules.x: TypeError"]),
        "rule exception",
    ),
    (
        200,
        JSON,
        _answer(uid="u1", allowed=False, status={"code": 503, "message": "denied: internal error in rules.x: E"}),
        "rule exception",
    ),
    (200, JSON, b'{"apiVersion": "admission.k8s.io/v1", "response": {"x": NaN}}', "response is not strict JSON"),
    (
        200,
        JSON,
        _answer(uid="u1", allowed=True, patchType="JSONPatch", patch=_patch('[{"op":"add","path":"/a","value":NaN}]')),
        "patch is not strict JSON",
    ),
    (200, JSON, _answer(uid="u2", allowed=True), "answer kube-apiserver refuses"),
    (200, JSON, _answer(uid="u1", allowed=True, warnings=["node \x1b[31m is not known"]), "raw '\\x1b' in warning"),
    (
        200,
        JSON,
        _answer(uid="u1", allowed=False, status={"code": 422, "message": "label a\u202eb"}),
        "raw '\\u202e' in status.message",
    ),
    (200, TEXT, b"ok", "200 not JSON"),
    (400, JSON, b'{"error": "request"}', "400 not plain text"),
    (400, TEXT, b"bad\n", "400 names no field"),
    (400, TEXT, b"request.uid: x\nmore\n", "400 not one line"),
    (400, TEXT, b"request.object.metadata.name: \x00 is not a name\n", "raw '\\x00' in a 400"),
    (404, TEXT, b"request not found\n", "HTTP 404"),
    (413, TEXT, b"request body is larger than the limit\n", "413 under the limit"),
]


@pytest.mark.parametrize(("status", "content_type", "body"), SOUND)
def test_sound_answers_pass(status: int, content_type: str, body: bytes) -> None:
    judge(SENT, "mutate", status, content_type, body, max_body=1 << 20)


@pytest.mark.parametrize(("status", "content_type", "body", "kind"), BROKEN, ids=[b[3] for b in BROKEN])
def test_broken_answers_are_named(status: int, content_type: str, body: bytes, kind: str) -> None:
    with pytest.raises(FuzzFailure) as caught:
        judge(SENT, "mutate", status, content_type, body, max_body=1 << 20)
    assert caught.value.kind == kind


def test_a_logged_crash_is_reported_with_where_it_was_raised() -> None:
    errors = ErrorLog()
    log = logging.getLogger("rules.pipeline")
    log.addHandler(errors)
    try:
        try:
            raise KeyError("x")
        except KeyError:
            log.exception("rule %s failed", "r")
        log.warning("not an error")
    finally:
        log.removeHandler(errors)
    found = errors.take()
    assert found is not None
    assert found.startswith("rules.pipeline: rule r failed (KeyError at tests/fuzz/test_verdict.py:")
    assert errors.take() is None


def test_raw_tokens_are_written_verbatim() -> None:
    body = m.encode({"a": m.Raw("NaN"), "b": [m.Raw(m.LONG_DIGITS)], "c": "zq"})
    assert body == b'{"a": NaN, "b": [' + m.LONG_DIGITS.encode() + b'], "c": "zq"}'


@pytest.mark.parametrize("tagged", ["!!binary aGk=", "!!set {a, b}", "!!timestamp 2001-12-14t21:59:43.10-05:00"])
def test_tags_land_inside_the_carried_document(tagged: str) -> None:
    policy = m.tag_text("enforcement: warn\nexcludedNamespaces: [a]\n", lambda options: ("enforcement",), tagged, False)
    assert policy == f"enforcement: {tagged}\nexcludedNamespaces:\n- a\n"
    assert yamldocs.load(policy)["enforcement"] != "warn"
    entries = m.tag_text('[{"storageClass": "gp3"}]', lambda options: (0, "storageClass"), tagged, True)
    assert entries == f'[{{"storageClass": {tagged}}}]'


def test_a_tag_mutation_adds_the_carrier_a_pod_lacks() -> None:
    review = admission_review("CREATE", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, uid="u")
    path = m._carrier_target(review)
    assert path == ("request", "object", "metadata", "annotations", LOAD_AFFINITY)
    added = m._ensure(review, path, "x")
    assert added is not None
    assert added["request"]["object"]["metadata"] == {"name": "p", "annotations": {LOAD_AFFINITY: "x"}}
    assert "annotations" not in review["request"]["object"]["metadata"], "the seed is never changed in place"
