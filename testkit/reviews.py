"""AdmissionReviews as kube-apiserver sends them: one builder for the tests, the fuzzers and the benchmark."""

from __future__ import annotations

import uuid
from typing import Any

from rules.model import Json


def admission_review(
    operation: str,
    obj: Json | None,
    old: Json | None = None,
    *,
    api_version: str = "admission.k8s.io/v1",
    uid: str | None = None,
    **extra: Any,
) -> Json:
    """An AdmissionReview as kube-apiserver sends it: kind and resource from the object's apiVersion and kind,
    namespace and name from its metadata; `extra` adds request fields (userInfo, dryRun, options...)."""
    source = obj if obj is not None else old
    assert source is not None
    group, _, version = str(source.get("apiVersion", "v1")).rpartition("/")
    metadata = source.get("metadata") or {}
    request: Json = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": source["kind"]},
        "resource": {"group": group, "version": version, "resource": source["kind"].lower() + "s"},
        "operation": operation,
        "namespace": metadata.get("namespace", ""),
        "name": metadata.get("name", ""),
        "object": obj,
        "oldObject": old,
        "userInfo": {"username": "test"},
        **extra,
    }
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": request}
