"""The validating rule for the project's own `storage-affinity.io/*` annotations on Pods and Job templates."""

from __future__ import annotations

from rules import deadline
from rules.annotations import CHECKS, LOAD_AFFINITY, STORAGE_CLASS, key_problems
from rules.context import Context, PodTarget
from rules.loadaffinity.validation import FAMILY as LOAD_AFFINITY_FAMILY
from rules.model import PREFIX
from rules.suggest import SUGGESTED, more_unknown

FAMILY = "annotations"

#: Annotations that are another feature's settings report under that feature's family, so they follow its
#: `validation.<family>.enforcement`: a pod's `load-affinity` list and `storage-class` are load-affinity settings,
#: like the policy's and Velero's lists, and relax with them during a gradual rollout (docs/validation.md).
FAMILIES = {LOAD_AFFINITY: LOAD_AFFINITY_FAMILY, STORAGE_CLASS: LOAD_AFFINITY_FAMILY}


def own_annotations(ctx: Context, target: PodTarget) -> None:
    """Unknown `storage-affinity.io/*` keys and bad values; on UPDATE only when they changed. The first unknown keys
    get a did-you-mean each, the rest one finding that counts them (rules/suggest.py)."""
    annotations = target.metadata.get("annotations") or {}
    if ctx.subject.operation == "UPDATE":
        old = ((ctx.subject.old or {}).get("metadata") or {}).get("annotations") or {}
        annotations = {k: v for k, v in annotations.items() if old.get(k) != v}
    base = target.field("metadata.annotations")
    unknown = 0
    for key, value in annotations.items():
        deadline.check()
        if isinstance(key, str) and key.startswith(PREFIX) and key not in CHECKS:
            unknown += 1
            if unknown > SUGGESTED:
                continue
        for path, message in key_problems(key, value, base):
            ctx.report(path, message, FAMILIES.get(key, FAMILY))
    if unknown > SUGGESTED:
        ctx.report(base, more_unknown(unknown - SUGGESTED, f"{PREFIX} annotations"), FAMILY)
