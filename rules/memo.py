"""Bounded memos for what rules derive from inputs that repeat across reviews (policy lists, PV terms).

Rules stay pure functions of their inputs: a memo only skips recomputing a result from equal inputs. The key
must say everything the result depends on. Two kinds of key:

- a structural key (`get`): a hashable value equal exactly when the inputs are, e.g. `terms_key` of a term list;
- object identity (`by_identity`): for inputs nobody mutates after they are built (the policy's lists, the
  index's objects, which are replaced, never changed). The memo holds the objects, so an id is never reused
  while its entry lives: an entry found under the ids of live objects was made from those very objects.

Both are bounded (emptied when full): memory never grows with the variety of reviews. `Latest` keeps one result,
for the one input every review reads (the policy in effect).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    """A result, and the objects it was computed from (held, so that their ids stay theirs; empty for a
    structural key)."""

    objects: tuple[object, ...]
    value: T


class Memo(Generic[T]):
    def __init__(self, maxsize: int = 1024) -> None:
        self._maxsize = maxsize
        self._entries: dict[Hashable, _Entry[T]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result for `key`, computed once."""
        found = self._entries.get(key)
        if found is not None:
            return found.value
        return self._store(key, (), compute())

    def by_identity(self, objects: tuple[object, ...], extra: Hashable, compute: Callable[[], T]) -> T:
        """The result for these very objects (and `extra`, a structural part of the key), computed once."""
        key = (tuple(map(id, objects)), extra)
        found = self._entries.get(key)
        if found is not None:  # its objects are held, alive, so they are these (no `is` check: half the cost)
            return found.value
        return self._store(key, objects, compute())

    def _store(self, key: Hashable, objects: tuple[object, ...], value: T) -> T:
        with self._lock:
            if len(self._entries) >= self._maxsize:
                self._entries.clear()
            self._entries[key] = _Entry(objects, value)
        return value


class Latest(Generic[K, T]):
    """`compute` of the one input it was last given, by identity: for an input nobody mutates, replaced whole and
    rarely (the policy in effect, which every review reads). One `is` test a call, where `Memo.by_identity` builds
    and hashes a key; the input is held, so its id stays its own."""

    def __init__(self, compute: Callable[[K], T]) -> None:
        self._compute = compute
        self._last: tuple[K, T] | None = None

    def __call__(self, source: K) -> T:
        last = self._last
        if last is not None and last[0] is source:
            return last[1]
        value = self._compute(source)
        self._last = (source, value)  # one assignment: a concurrent reader sees the old pair or the new one
        return value
