"""Did-you-mean suggestions for unknown field and annotation names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown_field(name: str, known: Iterable[str]) -> str:
    """`unknown field` plus the closest known name, if one is close enough to be a likely typo."""
    candidates = list(known)
    lowered = {c.lower(): c for c in candidates}
    match = lowered.get(name.lower()) or next(iter(difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)), None)
    return f'unknown field (did you mean "{match}"?)' if match else f"unknown field (known: {', '.join(candidates)})"
