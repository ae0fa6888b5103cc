"""Bounded memos for what rules derive from inputs that repeat across reviews (policy lists, PV terms).

Rules stay pure functions of their inputs: a memo only skips recomputing a result from equal inputs. The key
must say everything the result depends on. Three kinds of key:

- a structural key (`get`): a value equal exactly when the inputs are, e.g. `terms_key` of a term list, made of
  strings, numbers, booleans, None, bytes and tuples of them;
- object identity (`by_identity`): for inputs nobody mutates after they are built (the policy's lists, the
  index's objects, which are replaced, never changed). The memo holds the objects, so an id is never reused
  while its entry lives: an entry found under the ids of live objects was made from those very objects;
- snapshot identity (`by_snapshot`): the same for big objects replaced whole (a node set): the entry holds weak
  references, so a replaced snapshot is freed at once rather than when the memo next empties.

A structural key is stored as its `digest` (at most 65 bytes), never as itself: a key built from a review's own
strings (a pod's 8,000 requirements) would otherwise keep them for as long as the entry lives. So an entry costs
the same whatever the review, and what a value costs is weighed (`weigh`, given when a value can hold data from
a review or a node-sized set): each memo is bounded in entries and in bytes (`budget`), and is emptied when full.
A value heavier than the whole budget is computed and not kept.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")
K = TypeVar("K")

#: What an entry costs besides its value, at most: the dict slot, the entry, the digest and the key tuple of ids.
ENTRY_BYTES = 320
#: The default byte budget of a memo: its entries alone (values weighed as nothing unless `weigh` says).
DEFAULT_BUDGET = 4096 * ENTRY_BYTES

_blake2b = hashlib.blake2b
_dumps = orjson.dumps
#: Keys whose encoding is at most this long are kept as the encoding (a copy), not hashed: hashing costs more than
#: the rest of a lookup, and the keys an honest review asks under are shorter (a class, a digest and a tag).
_SHORT = 64


def digest(key: Hashable) -> bytes:
    """A stand-in for a structural key of at most 65 bytes, equal for equal keys and, short of a blake2b
    collision, distinct for distinct ones; a new bytes object, so it keeps nothing of the key alive.

    The encoding is unambiguous: JSON (a string is quoted, a tuple is an array, `1`, `1.0`, `true` and `"1"` differ)
    and bytes as a tagged map, which no key holds; what JSON cannot say (an integer past 64 bits, a lone
    surrogate) goes through `repr`, under another prefix. Numbers are finite, as every loader of this project
    makes them (JSON would write a non-finite one as null). A short JSON encoding is its own digest (prefix "="),
    others are hashed (prefix "#"): the two never meet.
    """
    try:
        encoded = _dumps(key, default=_tagged)
    except orjson.JSONEncodeError:
        return b"#" + _blake2b(b"r" + _repr(key).encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if len(encoded) <= _SHORT:
        return b"=" + encoded
    return b"#" + _blake2b(b"j" + encoded, digest_size=16).digest()


def _tagged(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b": value.hex()}
    raise TypeError(f"not a memo key part: {type(value).__name__}")


def _repr(key: Any) -> str:
    """`repr` of a key, refusing what has no faithful `repr` (an object's default one names its address)."""
    if isinstance(key, tuple):
        return "(" + ",".join(_repr(part) for part in key) + ",)"
    if key is None or isinstance(key, str | int | float | bytes):  # bool is an int
        return repr(key)
    raise TypeError(f"not a memo key part: {type(key).__name__}")


def json_weight(value: Any) -> int:
    """About the bytes a JSON value (dicts, lists, strings, scalars) takes in memory, shared strings counted each
    time they appear: a bound, in one walk, for weighing what a memo keeps."""
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        for key, item in value.items():
            size += sys.getsizeof(key) + json_weight(item)
    elif isinstance(value, list | tuple):
        for item in value:
            size += json_weight(item)
    return size


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    """A result, what it weighs, and the objects it was computed from (held, so that their ids stay theirs; weak
    references for a snapshot; empty for a structural key)."""

    objects: tuple[Any, ...]
    value: T
    weight: int


class Memo(Generic[T]):
    def __init__(
        self, maxsize: int = 1024, *, budget: int = DEFAULT_BUDGET, weigh: Callable[[T], int] | None = None
    ) -> None:
        self._maxsize = maxsize
        self._budget = budget
        self._weigh = weigh
        self._entries: dict[Hashable, _Entry[T]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        """The bytes its entries are counted as (never more than its budget)."""
        return self._bytes

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result for `key`, computed once."""
        code = digest(key)
        found = self._entries.get(code)
        if found is not None:
            return found.value
        return self._store(code, (), compute())

    def by_identity(self, objects: tuple[object, ...], extra: Hashable, compute: Callable[[], T]) -> T:
        """The result for these very objects (and `extra`, a structural part of the key), computed once."""
        key = (tuple(map(id, objects)), None if extra is None else digest(extra))
        found = self._entries.get(key)
        if found is not None:  # its objects are held, alive, so they are these (no `is` check: half the cost)
            return found.value
        return self._store(key, objects, compute())

    def by_snapshot(self, objects: tuple[object, ...], extra: Hashable, compute: Callable[[], T]) -> T:
        """`by_identity` for objects it must not keep alive: the entry holds weak references to them, and is
        found only while they are these very objects (an id is reused once its object is freed)."""
        key = (tuple(map(id, objects)), None if extra is None else digest(extra))
        found = self._entries.get(key)
        if found is not None and all(ref() is obj for ref, obj in zip(found.objects, objects, strict=True)):
            return found.value
        refs = tuple(weakref.ref(obj) for obj in objects)
        return self._store(key, refs, compute())

    def clear(self) -> None:
        with self._lock:
            self._empty()

    def _empty(self) -> None:  # under the lock
        self._entries.clear()
        self._bytes = 0

    def _store(self, key: Hashable, objects: tuple[object, ...], value: T) -> T:
        weight = ENTRY_BYTES + (0 if self._weigh is None else self._weigh(value))
        if weight > self._budget:
            return value  # heavier than the whole memo: computed, not kept
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:  # a stale snapshot entry under reused ids
                self._bytes -= old.weight
            if len(self._entries) >= self._maxsize or self._bytes + weight > self._budget:
                self._empty()
            self._entries[key] = _Entry(objects, value, weight)
            self._bytes += weight
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
