"""Did-you-mean suggestions for unknown field and annotation names.

A suggestion compares the name with every known one (difflib), so a list of unknown names gets suggestions for its
first SUGGESTED only and the rest are counted: a tenant's 256 KiB of unknown annotation keys or disk types must not
cost a second of comparisons, nor make a finding each.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from rules.quoting import listed

#: Unknown names of one list (annotation keys, disk types) given a did-you-mean; the rest are counted.
SUGGESTED = 10
#: Known names an unknown one without a close match lists (every fixed vocabulary here is shorter).
KNOWN_SHOWN = 10


def unknown_field(name: str, known: Iterable[str], shown: int = KNOWN_SHOWN) -> str:
    """`unknown field` plus the closest known name, if one is close enough to be a likely typo, else the first
    `shown` known names."""
    candidates = list(known)
    lowered = {c.lower(): c for c in candidates}
    match = lowered.get(name.lower()) or next(iter(difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)), None)
    if match:
        return f'unknown field (did you mean "{match}"?)'
    return f"unknown field (known: {listed(candidates, limit=shown)})"


def more_unknown(count: int, what: str) -> str:
    """The finding that counts the unknown names past the first SUGGESTED: `and 12 more unknown types`."""
    return f"and {count:,} more unknown {what} (the first {SUGGESTED} are named)"
