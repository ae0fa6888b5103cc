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


def ended_status(status: Mapping[str, Any], conditions: list[Json]) -> Json:
    """The fields of a Failed pod's trimmed status that say how it ended: its status reason and message, its
    DisruptionTarget condition (added to the trimmed `conditions`), and each container's `terminated` state."""
    out: Json = {key: status[key][:_MESSAGE_LIMIT] for key in ("reason", "message") if isinstance(status.get(key), str)}
    disruption = [
        {
            k: c[k][:_MESSAGE_LIMIT] if k == "message" and isinstance(c[k], str) else c[k]
            for k in CONDITION_FIELDS
            if k in c
        }
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
        kept["message"] = state["message"][:_MESSAGE_LIMIT]
    return kept
