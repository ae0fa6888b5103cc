"""Status conditions of Pods and Nodes, read one way everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The status condition of type `kind` of a Pod or Node, if it has one."""
    for found in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(found, Mapping) and found.get("type") == kind:
            return found
    return None
