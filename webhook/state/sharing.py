"""One object in memory for each value that repeats across the index's objects (tolerations, access modes,
statuses, PV node affinity, namespaces, node and class names): at 100,000 pods that halves what the index holds.
Index objects are read-only to rules, so sharing is safe. Only values that do repeat belong here: a value unique
to its object (a controller's reference, say) costs a serialisation and a slot in the table, and shares nothing."""

from __future__ import annotations

import sys
from typing import Any

import orjson

from rules.memo import Memo, json_weight

SHARED_LIMIT = 50_000
#: What the shared values may weigh together (`json_weight`). The table keeps a value after its objects are gone:
#: bounded in entries alone, a tenant that created and deleted pods with unique toleration lists of 1 MiB could
#: leave 50,000 of them behind.
SHARED_BYTES = 16 * 1024 * 1024
#: A value whose JSON is longer is kept by its object alone: the values that repeat (labels, tolerations, a zone's
#: node affinity) are far shorter, and one this long is a tenant's to make unique.
LARGEST_SHARED = 8 * 1024
#: canonical JSON → the one object of that value, by digest (rules/memo.py); emptied when full
SHARED: Memo[Any] = Memo(SHARED_LIMIT, budget=SHARED_BYTES, weigh=json_weight)


def shared(value: Any) -> Any:
    """One object for every equal value seen (hash-consing); strings are interned."""
    if isinstance(value, str):
        return text(value)
    try:
        key = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return value
    if len(key) > LARGEST_SHARED:
        return value
    return SHARED.get(key.decode(), lambda: value)


def forget() -> None:
    """Empty the table."""
    SHARED.clear()


def text(value: Any) -> Any:
    """A string as one object for every equal one (interned); any other value as it is."""
    return sys.intern(value) if isinstance(value, str) else value
