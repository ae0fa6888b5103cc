"""The AdmissionReview codec: typed requests in, responses out, exactly as kube-apiserver requires.

`decode_review` turns bytes into an `AdmissionRequest` or raises `ReviewError` naming the problem;
`build_response` is pure: (request, decision, endpoint) → the response document.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rules.messages import counted, denial_message
from rules.model import Decision, Json, Subject
from rules.quoting import escaped
from rules.safeload import JsonError, NotTextError, dump_json, load_json
from rules.yamlstream import NESTED_TOO_DEEPLY

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
#: kube-apiserver keeps warnings whole up to 4096 runes in all; past that it cuts each to 256 runes
#: (k8s.io/apiserver/pkg/endpoints/filters/warning.go). The API asks for 120 "if possible".
WARNING_LIMIT = 256
WARNING_ADVISED = 120
WARNINGS_TOTAL_LIMIT = 4096
_NOTE_ROOM = 100  # the last warning that counts those left out
#: A warning about a field is `path.to.field: message`, the Kubernetes convention; a path has no whitespace.
_FIELD_WARNING = re.compile(r"^(?P<path>[^\s:]+): (?P<message>.+)$")
_AUDIT_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class ReviewError(Exception):
    """The body is not a usable AdmissionReview; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass
class AdmissionRequest:
    """A decoded review: what the answer must echo (apiVersion, uid) and the object under review. `Final` fields,
    not frozen, as `Subject`'s are (rules/model.py says why)."""

    api_version: Final[str]
    uid: Final[str]
    subject: Final[Subject]


def decode_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview body, or ReviewError (HTTP 400) naming what is wrong. Strict JSON only:
    the transport's half of the typed boundary (the object's fields are checked in rules/kube/shapes.py)."""
    try:
        doc = load_json(body)
    except UnicodeDecodeError as exc:
        raise ReviewError(f"request body is not UTF-8 (byte {exc.start})") from None
    except NotTextError as exc:
        raise ReviewError(str(exc)) from None
    except JsonError as exc:
        usable = "usable " if str(exc) == NESTED_TOO_DEEPLY else ""
        raise ReviewError(f"request body is not {usable}JSON: {exc}") from None
    return request_from_document(doc)


def request_from_document(doc: Any) -> AdmissionRequest:
    """The request of a decoded AdmissionReview, or ReviewError naming the first field that is wrong. Each field
    is read once (every review comes through here); a Mapping that is not a dict is copied into one."""
    if not isinstance(doc, (dict, Mapping)):  # dict first: the ABC check is far dearer
        raise ReviewError("request body is not an AdmissionReview: expected a JSON object")
    if doc.get("kind") != "AdmissionReview":
        raise ReviewError(f"request body is not an AdmissionReview: kind is {_shown(doc.get('kind'))}")
    api_version = doc.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise ReviewError(
            f"unsupported AdmissionReview apiVersion {_shown(api_version)} (expected {' or '.join(API_VERSIONS)})"
        )
    request = doc.get("request")
    if not isinstance(request, (dict, Mapping)):
        raise ReviewError("AdmissionReview has no request" if request is None else "request must be an object")
    get = request.get
    uid = get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is required (a non-empty string)")
    kind = get("kind")
    if not isinstance(kind, (dict, Mapping)) or not isinstance(kind.get("kind"), str):
        raise ReviewError("request.kind is required (an object with group, version and kind)")
    operation = get("operation")
    if not isinstance(operation, str) or not operation:
        raise ReviewError("request.operation is required (CREATE, UPDATE, DELETE or CONNECT)")
    obj = _object(get("object"), "object")
    old = _object(get("oldObject"), "oldObject")
    if obj is None and operation in ("CREATE", "UPDATE"):
        raise ReviewError(f"request.object is required for {operation}")
    namespace = get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise ReviewError("request.namespace must be a string")
    name = get("name")
    if name is not None and not isinstance(name, str):
        raise ReviewError("request.name must be a string")
    dry_run = get("dryRun", False)
    if dry_run is not None and not isinstance(dry_run, bool):
        raise ReviewError("request.dryRun must be true or false")
    group = str(kind.get("group") or "")
    user = _username(get("userInfo"))
    # Positional, in the order the fields are declared: keywords cost a dict per call, on every review.
    subject = Subject(kind["kind"], operation, namespace or "", name or "", obj, old, bool(dry_run), group, user)
    return AdmissionRequest(api_version, uid, subject)


def _object(value: Any, name: str) -> Json | None:
    """`request.object` or `request.oldObject`: absent, or a map (as a dict: the rules index dicts)."""
    if value is None or type(value) is dict:
        return value
    if not isinstance(value, Mapping):
        raise ReviewError(f"request.{name} must be an object")
    return dict(value)


def _username(user_info: Any) -> str | None:
    """`userInfo.username`, which the policy's `trust.requesters` and `cdi.requesters` match; None when absent."""
    if user_info is None:
        return None
    if not isinstance(user_info, (dict, Mapping)):
        raise ReviewError("request.userInfo must be an object")
    name = user_info.get("username")
    if name is not None and not isinstance(name, str):
        raise ReviewError("request.userInfo.username must be a string")
    return name or None


def build_response(request: AdmissionRequest, decision: Decision, *, mutating: bool) -> Json:
    """The AdmissionReview answer, in the request's apiVersion, obeying every rule kube-apiserver checks."""
    allowed = decision.allowed
    response: Json = {"uid": request.uid, "allowed": allowed}
    if not allowed:
        code, reason = (503, "ServiceUnavailable") if decision.denied_by_failure else (422, "Invalid")
        response["status"] = {"code": code, "reason": reason, "message": denial_message(decision)}
    elif mutating and decision.patch and request.subject.operation == "CREATE" and request.subject.obj is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(dump_json(decision.patch)).decode()
    if decision.warnings and (warnings := clip_warnings(decision.warnings)):
        response["warnings"] = warnings
    if decision.audit and (audit := _audit_annotations(decision.audit)):
        response["auditAnnotations"] = audit
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}


def _audit_annotations(audit: Mapping[str, str]) -> dict[str, str]:
    """The audit values under the keys the API server accepts (a qualified name's syntax, at most 63 long)."""
    return {k: escaped(str(v)) for k, v in audit.items() if _AUDIT_KEY.match(k) and len(k) <= 63}


def clip_warnings(warnings: list[str]) -> list[str]:
    """Each warning printable and fitted (`fit_warning`), and no more in total than the API server keeps whole
    (4096 runes); what does not fit is counted in a last warning rather than dropped silently."""
    out: list[str] = []
    total = 0
    for i, warning in enumerate(warnings):
        parts = fit_warning(escaped(" ".join(warning.split())))
        size = sum(len(part) for part in parts)
        last = i == len(warnings) - 1
        if total + size > WARNINGS_TOTAL_LIMIT - (0 if last else _NOTE_ROOM):
            rest = len(warnings) - i
            out.append(f"{counted(rest, 'more warning')} not shown (storage-affinity-webhook review shows all)")
            break
        total += size
        out += parts
    return out


def fit_warning(text: str) -> list[str]:
    """The warning in parts of at most WARNING_LIMIT runes, nothing dropped. One within the advised 120 keeps the
    Kubernetes layout `path: message`; a longer one puts the message (cause, node names, remedy) first and its
    whole field path after it, `message (at path)`, which continues in further warnings when over the limit (see
    `_split`): the path names the item (an annotation key, a volume), so it is never shortened."""
    if len(text) <= WARNING_ADVISED:
        return [text]
    field = _FIELD_WARNING.match(text)
    return _split(text if field is None else f"{field['message']} (at {field['path']})")


def _split(text: str) -> list[str]:
    """`text` in parts of at most WARNING_LIMIT runes, each but the first opening with `… `, split after the last
    clause end (`: `, `; `, `, `, else a space) in the second half of what fits; a word longer than half the limit
    is cut, so that every part makes progress."""
    parts: list[str] = []
    while len(text) > WARNING_LIMIT:
        head = text[: WARNING_LIMIT + 1]
        half = WARNING_LIMIT // 2
        at = max(head.rfind(": "), head.rfind("; "), head.rfind(", "))
        at = at + 1 if at > half else head.rfind(" ")
        at = at if at > half else WARNING_LIMIT
        parts.append(text[:at].rstrip())
        text = "… " + text[at:].lstrip()
    return [*parts, text]


def _shown(value: Any) -> str:
    return "missing" if value is None else json.dumps(value)[:60]
