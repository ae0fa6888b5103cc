"""One object in memory for each value that repeats across the index's objects (tolerations, access modes,
statuses, PV node affinity, namespaces, node and class names): at 100,000 pods that halves what the index holds.
Index objects are read-only to rules, so sharing is safe. Only values that do repeat belong here: a value unique
to its object (a controller's reference, say) costs a serialisation and a slot in the table, and shares nothing."""

from __future__ import annotations

import json
import sys
from typing import Any

#: canonical JSON → the one object of that value; emptied when full, in entries or in bytes
SHARED: dict[str, Any] = {}
SHARED_LIMIT = 50_000
#: Characters of canonical JSON the table may hold. The table keeps a value after its objects are gone, and its key
#: is a second copy: bounded in entries alone, a tenant that created and deleted pods with unique tolerations of
#: 1 MiB could keep 50,000 of them.
SHARED_BYTES = 8 * 1024 * 1024
#: A value whose JSON is longer is kept by its object alone: the values that repeat (labels, tolerations, a zone's
#: node affinity) are far shorter, and one this long is a tenant's to make unique.
LARGEST_SHARED = 8 * 1024
_held = [0]  # characters of the keys in SHARED (approximate when watch threads share at once: a bound, not a count)


def shared(value: Any) -> Any:
    """One object for every equal value seen (hash-consing); strings are interned."""
    if isinstance(value, str):
        return text(value)
    try:
        key = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return value
    if len(key) > LARGEST_SHARED:
        return value
    found = SHARED.get(key)
    if found is None:
        if len(SHARED) >= SHARED_LIMIT or _held[0] + len(key) > SHARED_BYTES:
            forget()
        found = SHARED[key] = value
        _held[0] += len(key)
    return found


def forget() -> None:
    """Empty the table."""
    SHARED.clear()
    _held[0] = 0


def text(value: Any) -> Any:
    """A string as one object for every equal one (interned); any other value as it is."""
    return sys.intern(value) if isinstance(value, str) else value
