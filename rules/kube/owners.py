"""An object's controller: the owner reference marked `controller: true`, as the garbage collector and every
controller read it (k8s.io/apimachinery pkg/apis/meta/v1 `GetControllerOf`). API validation allows at most one;
before validation (a mutating review) an object may carry several, and only the first is read, as
`GetControllerOf` does.

One reading for the index's trimmed references (webhook/state/owners.py), a CDI worker's trust
(rules/datasource/scope.py) and the owner an audit Event goes to (rules/auditevents.py). An owner reference is the
object author's to write: what it names is a claim each caller checks against what it knows (the kind, the name,
the UID of an object the state holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def controller_reference(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first owner reference of `metadata` marked `controller: true` (the boolean, not a truthy value), or
    None; malformed entries are skipped."""
    owners = metadata.get("ownerReferences")
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return owner
    return None
