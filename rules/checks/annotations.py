"""The validating rule for the project's own `storage-affinity.io/*` annotations on Pods and Job templates."""

from __future__ import annotations

from rules.annotations import annotation_problems
from rules.context import Context, PodTarget

FAMILY = "annotations"


def own_annotations(ctx: Context, target: PodTarget) -> None:
    """Unknown `storage-affinity.io/*` keys and bad values; on UPDATE only when they changed."""
    annotations = target.metadata.get("annotations") or {}
    if ctx.subject.operation == "UPDATE":
        old = ((ctx.subject.old or {}).get("metadata") or {}).get("annotations") or {}
        annotations = {k: v for k, v in annotations.items() if old.get(k) != v}
    for path, message in annotation_problems(annotations, target.field("metadata.annotations")):
        ctx.report(path, message, FAMILY)
