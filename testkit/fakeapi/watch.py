"""One open watch and the events it sees: what the store fans out and the handler streams."""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rules.model import Json
from testkit.fakeapi.resources import RESOURCES, with_kind

#: What the store puts on a watcher's queue to end its stream: 410 Gone, a cut connection, a clean end.
EXPIRE, BREAK, END = object(), object(), object()


@dataclass
class Watcher:
    plural: str
    namespace: str | None
    matches: Callable[[Json], bool]
    events: queue.Queue[Any] = field(default_factory=queue.Queue)


def event_for(watcher: Watcher, old: Json | None, new: Json | None, deleted: Json | None) -> Json | None:
    """The event a selector-scoped watch sees, as kube-apiserver translates it."""

    def visible(obj: Json | None) -> bool:
        if obj is None:
            return False
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        return (watcher.namespace is None or ns == watcher.namespace) and watcher.matches(obj)

    kind = RESOURCES[watcher.plural][0]
    if new is None:
        return {"type": "DELETED", "object": with_kind(deleted, kind)} if visible(old) else None
    was, now = visible(old), visible(new)
    if now:
        return {"type": "MODIFIED" if was else "ADDED", "object": with_kind(new, kind)}
    if was:
        return {"type": "DELETED", "object": with_kind(new, kind)}
    return None
