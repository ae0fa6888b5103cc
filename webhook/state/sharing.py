"""One object in memory for each value that repeats across the index's objects (tolerations, access modes,
statuses, PV node affinity, namespaces, node and class names): at 100,000 pods that halves what the index holds.
Index objects are read-only to rules, so sharing is safe. Only values that do repeat belong here: a value unique
to its object (a controller's reference, say) costs a serialisation and a slot in the table, and shares nothing."""

from __future__ import annotations

import json
import sys
from typing import Any

#: canonical JSON → the one object of that value; emptied when full, never unbounded
SHARED: dict[str, Any] = {}
SHARED_LIMIT = 50_000


def shared(value: Any) -> Any:
    """One object for every equal value seen (hash-consing); strings are interned."""
    if isinstance(value, str):
        return text(value)
    try:
        key = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return value
    found = SHARED.get(key)
    if found is None:
        if len(SHARED) >= SHARED_LIMIT:
            SHARED.clear()
        found = SHARED[key] = value
    return found


def text(value: Any) -> Any:
    """A string as one object for every equal one (interned); any other value as it is."""
    return sys.intern(value) if isinstance(value, str) else value
