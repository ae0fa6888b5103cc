"""Offline review: the admission pipeline as the API server runs it — mutate, apply the patch, validate.

The same codec and rules as the server, so `review` and a server-side dry run give the same decision.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rules import pipeline
from rules.cluster import ClusterView
from rules.messages import denial_message
from rules.model import Json
from rules.policy import Policy
from webhook.app.codec import AdmissionRequest, ReviewError, request_from_document

OFFLINE_UID = "offline-review"


@dataclass
class ReviewResult:
    allowed: bool
    patch: list[Json]
    object: Json | None
    warnings: list[str] = field(default_factory=list)
    violations: list[Json] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    status_message: str = ""

    def as_json(self) -> Json:
        return {
            "allowed": self.allowed,
            "patch": self.patch,
            "object": self.object,
            "warnings": self.warnings,
            "violations": self.violations,
            "decisions": self.decisions,
        }


def as_request(doc: Any) -> AdmissionRequest:
    """An AdmissionReview as it is, or a bare manifest wrapped as CREATE (what `kubectl create` would send)."""
    if isinstance(doc, dict) and doc.get("kind") == "AdmissionReview":
        return request_from_document(doc)
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        raise ReviewError("input is neither an AdmissionReview nor a Kubernetes manifest with a kind")
    api_version = str(doc.get("apiVersion") or "v1")
    group = api_version.rpartition("/")[0]
    meta = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    return request_from_document(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": OFFLINE_UID,
                "kind": {"group": group, "version": api_version.rpartition("/")[2], "kind": doc["kind"]},
                "operation": "CREATE",
                "namespace": str(meta.get("namespace") or "default"),
                "name": str(meta.get("name") or ""),
                "object": doc,
            },
        }
    )


def review(request: AdmissionRequest, policy: Policy, view: ClusterView, own_namespace: str = "") -> ReviewResult:
    """Mutate, apply the patch (as the API server would), then validate the result. A kind no rule checks is
    ReviewError: an empty answer would read as a pass."""
    if request.subject.kind not in pipeline.VALIDATED_KINDS:
        checked = ", ".join(pipeline.VALIDATED_KINDS)
        raise ReviewError(
            f"kind {json.dumps(request.subject.kind)} is not reviewed: no rule checks it (review checks {checked})"
        )
    chain = pipeline.mutate_then_validate(request.subject, view, policy, own_namespace)
    mutation, validation = chain.mutation, chain.validation
    warnings = list(dict.fromkeys(mutation.warnings + validation.warnings))  # escaped when made (rules/context.py)
    allowed = mutation.allowed and validation.allowed
    denying = next((d for d in (validation, mutation) if not d.allowed), None)
    message = denial_message(denying) if denying is not None else ""
    return ReviewResult(
        allowed=allowed,
        patch=mutation.patch if mutation.allowed else [],
        object=chain.final,
        warnings=warnings,
        violations=[{"family": f.family, "field": f.field, "message": f.message} for f in validation.denials],
        decisions=mutation.reasons + [r for r in validation.reasons if r not in mutation.reasons],
        status_message=message,
    )
