"""What the live state may ask the API for objects its index lacks: a budget of GETs per review, and the 404s it
remembers.

A review runs inside `review_lookups()` (the endpoints enter it through `Runtime.review_scope`): a context variable,
so each review's greenlet holds its own budget, and code outside any review (the audit) holds none.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar

#: The GETs one review may make for objects the index misses: a pod's fresh claims, their PVs, a new node.
REVIEW_GETS = 4
#: How long a 404 stands for the object's absence, and how many such answers are remembered (oldest dropped).
MISS_TTL = 5.0
MISSES_KEPT = 4096


class ReviewGets:
    """What is left of one review's GETs."""

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


_review_gets: ContextVar[ReviewGets | None] = ContextVar("review_gets", default=None)


@contextlib.contextmanager
def review_lookups(gets: int = REVIEW_GETS) -> Iterator[None]:
    """One review: inside, the index's misses may be fetched with at most `gets` GETs."""
    token = _review_gets.set(ReviewGets(gets))
    try:
        yield
    finally:
        _review_gets.reset(token)


def current_review() -> ReviewGets | None:
    """The GETs left to the review running here, or None outside any review."""
    return _review_gets.get()


class Misses:
    """The 404 answers of the last MISS_TTL seconds, at most MISSES_KEPT: a name asked for again and again
    (a controller retrying a pod whose claim does not exist) costs one GET per MISS_TTL."""

    def __init__(self) -> None:
        self._until: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, key: tuple[str, str, str]) -> bool:
        with self._lock:
            until = self._until.get(key)
            if until is None:
                return False
            if until > time.monotonic():
                return True
            del self._until[key]
            return False

    def add(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            self._until[key] = time.monotonic() + MISS_TTL
            self._until.move_to_end(key)
            while len(self._until) > MISSES_KEPT:
                self._until.popitem(last=False)

    def __len__(self) -> int:
        return len(self._until)
