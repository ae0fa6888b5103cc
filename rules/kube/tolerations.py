"""Toleration identity and merging, shared by every rule that adds tolerations.

Duplicate tolerations are legal in a pod but break later updates in some tooling; comparing all five fields
(operator defaulting to Equal) is what makes "add what is missing" idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.model import Json


def toleration_key(toleration: Mapping[str, Any]) -> tuple[str, str, str, str, Any]:
    """Tolerations are the same when key, operator (default Equal), value, effect and tolerationSeconds are."""
    return (
        str(toleration.get("key") or ""),
        str(toleration.get("operator") or "Equal"),
        str(toleration.get("value") or ""),
        str(toleration.get("effect") or ""),
        toleration.get("tolerationSeconds"),
    )


def merge_tolerations(own: Sequence[Json], extra: Sequence[Json]) -> list[Json]:
    """`own` unchanged, then each toleration of `extra` that is not already there."""
    out = list(own)
    seen = {toleration_key(t) for t in own}
    for toleration in extra:
        key = toleration_key(toleration)
        if key not in seen:
            seen.add(key)
            out.append(dict(toleration))
    return out


#: Taint effects the scheduler filters on; PreferNoSchedule only scores.
FILTERING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether one of the tolerations tolerates the taint (k8s.io/api core/v1 `Toleration.ToleratesTaint`)."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if operator == "Exists" or (
            operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")
        ):
            return True
    return False


def node_tolerated(tolerations: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    """Whether a pod with these tolerations may be scheduled on the node, as far as its taints go."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return all(
        tolerates(tolerations, taint)
        for taint in taints
        if isinstance(taint, Mapping) and taint.get("effect") in FILTERING_EFFECTS
    )
