"""What the index keeps of a Failed pod's status: what says how it ended (rules/causes/ended.py), so that the
in-server audit names the cause `audit` names from the full object. Failed storage pods are few: their controllers
delete or replace them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.causes.scheduler import MESSAGE_LIMIT
from rules.model import Json

#: The fields of a condition that say why a pod is stuck or ended (rules/causes/).
CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")
#: What of a container's `terminated` state says why a Failed pod ended. Messages are cut one character past what a
#: cause quotes (the quote is then the same, with its ellipsis): a container writes its own termination message,
#: up to 4 KiB, and a tenant's Failed pods must not make the index grow by what they write.
_TERMINATED_FIELDS = ("reason", "exitCode", "startedAt", "finishedAt")
_MESSAGE_LIMIT = MESSAGE_LIMIT + 1


def clipped(value: Any) -> Any:
    """A message as the index keeps it: cut one character past what a cause quotes (the quote is then the same);
    any other value as it is. What a pod's status says is written by its containers and controllers, so the index
    must not grow by it."""
    return value[:_MESSAGE_LIMIT] if isinstance(value, str) else value


def kept_condition(condition: Mapping[str, Any]) -> Json:
    """The fields of a condition that say why (`CONDITION_FIELDS`), its message clipped."""
    return {k: clipped(condition[k]) if k == "message" else condition[k] for k in CONDITION_FIELDS if k in condition}


def ended_status(status: Mapping[str, Any], conditions: list[Json]) -> Json:
    """The fields of a Failed pod's trimmed status that say how it ended: its status reason and message, its
    DisruptionTarget condition (added to the trimmed `conditions`), and each container's `terminated` state."""
    out: Json = {key: clipped(status[key]) for key in ("reason", "message") if isinstance(status.get(key), str)}
    disruption = [
        kept_condition(c)
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type") == "DisruptionTarget"
    ]
    if disruption:
        out["conditions"] = [*conditions, *disruption]
    for key in ("initContainerStatuses", "containerStatuses"):
        ended = [
            {"name": c.get("name"), "state": {"terminated": _terminated(t)}}
            for c in status.get(key) or ()
            if isinstance(c, Mapping) and isinstance(t := (c.get("state") or {}).get("terminated"), Mapping)
        ]
        if ended:
            out[key] = ended
    return out


def _terminated(state: Mapping[str, Any]) -> Json:
    kept: Json = {k: state[k] for k in _TERMINATED_FIELDS if k in state}
    if isinstance(state.get("message"), str):
        kept["message"] = clipped(state["message"])
    return kept
