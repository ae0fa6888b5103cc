"""PATCH as the API server applies it (JSON Patch and JSON merge patch; a failed `test` is 422), and the
validation of what the server writes that the real API server checks: events.k8s.io/v1 Events
(kubernetes pkg/apis/core/validation/events.go: required fields and their limits on create, a series of at least
two on update, and every field but the series immutable)."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonpatch

from rules.model import Json

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
#: events.k8s.io/v1 limits (pkg/apis/core/validation/events.go).
NOTE_LIMIT = 1024
FIELD_LIMIT = 128
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: What an update may not change: everything but the series (and metadata).
_IMMUTABLE = (
    "regarding",
    "related",
    "reason",
    "note",
    "type",
    "action",
    "eventTime",
    "reportingController",
    "reportingInstance",
)


class PatchRefused(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


def patch_object(current: Json, patch: Any, content_type: str) -> Json:
    """`current` with `patch` applied, as the API server applies a patch of that content type."""
    kind = content_type.split(";", maxsplit=1)[0].strip()
    if kind == JSON_PATCH:
        if not isinstance(patch, list):
            raise PatchRefused(400, "BadRequest", "a JSON Patch is a list of operations")
        try:
            patched = jsonpatch.apply_patch(current, patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PatchRefused(422, "Invalid", str(exc)) from exc
    elif kind == MERGE_PATCH:
        patched = _merge(copy.deepcopy(current), patch)
    else:
        raise PatchRefused(415, "UnsupportedMediaType", f"the fake API applies no {kind!r} patch")
    if not isinstance(patched, dict):
        raise PatchRefused(422, "Invalid", "the patched object is not an object")
    metadata = patched.setdefault("metadata", {})
    for key in ("name", "namespace", "uid"):
        metadata[key] = (current.get("metadata") or {}).get(key)
    return patched


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def invalid_object(obj: Json, old: Json | None) -> str | None:
    """Why the API server would refuse to store `obj` (created when `old` is None, else updated); None when valid.
    Only Events are checked; every other kind is stored as sent."""
    if obj.get("kind") != "Event":
        return None
    problems = _event_problems(obj)
    if old is not None:
        problems += [f"{key}: field is immutable" for key in _IMMUTABLE if obj.get(key) != old.get(key)]
    return (
        f"Event.events.k8s.io {(obj.get('metadata') or {}).get('name')!r} is invalid: " + "; ".join(problems)
        if problems
        else None
    )


def _event_problems(event: Json) -> list[str]:
    problems = []
    metadata = event.get("metadata") or {}
    name = str(metadata.get("name") or "")
    if not _SUBDOMAIN.match(name) or len(name) > 253:
        problems.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain is required")
    if not event.get("eventTime"):
        problems.append("eventTime: Required value")
    controller = str(event.get("reportingController") or "")
    if not controller or not _QUALIFIED.match(controller):
        problems.append(f"reportingController: Invalid value: {controller!r}")
    for key in ("reportingInstance", "action", "reason"):
        value = str(event.get(key) or "")
        if not value:
            problems.append(f"{key}: Required value")
        elif len(value) > FIELD_LIMIT:
            problems.append(f"{key}: Too long: may not be more than {FIELD_LIMIT} bytes")
    if len(str(event.get("note") or "").encode()) > NOTE_LIMIT:
        problems.append(f"note: Too long: may not be more than {NOTE_LIMIT} bytes")
    if event.get("type") not in ("Normal", "Warning"):
        problems.append(f"type: Unsupported value: {event.get('type')!r}")
    regarding = event.get("regarding") or {}
    if regarding.get("namespace") and regarding.get("namespace") != metadata.get("namespace"):
        problems.append("regarding.namespace: Invalid value: does not match event.namespace")
    series = event.get("series")
    if series is not None:
        if not isinstance(series, dict) or int(series.get("count") or 0) < 2:
            problems.append("series.count: should be at least 2")
        if not isinstance(series, dict) or not series.get("lastObservedTime"):
            problems.append("series.lastObservedTime: Required value")
    return problems
