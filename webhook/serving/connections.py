"""A worker's open connections by state, for choosing which to close: at shutdown the idle ones, and when the
worker runs short of connections the idlest one.

A connection is new (accepted, TLS handshake or first request under way), busy (a request read and not yet
answered) or kept (answered, waiting for its next request). New and kept connections are kept in the order they
started to wait (a dict keeps insertion order; a connection that is answered again moves to the end), so the
idlest comes first without a sort. Busy connections are never offered: closing one would fail a review.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Connections:
    def __init__(self) -> None:
        self._new: dict[Any, float] = {}  # connection -> when it was accepted
        self._kept: dict[Any, float] = {}  # connection -> when its last answer was written
        self._busy: set[Any] = set()

    def __len__(self) -> int:
        return len(self._new) + len(self._kept) + len(self._busy)

    def accepted(self, conn: Any, now: float) -> None:
        self._new[conn] = now

    def requested(self, conn: Any) -> None:
        self._new.pop(conn, None)
        self._kept.pop(conn, None)
        self._busy.add(conn)

    def answered(self, conn: Any, now: float) -> None:
        if conn in self._busy:  # not when it was closed meanwhile
            self._busy.discard(conn)
            self._kept[conn] = now

    def closed(self, conn: Any) -> None:
        self._new.pop(conn, None)
        self._kept.pop(conn, None)
        self._busy.discard(conn)

    def waiting(self) -> Iterator[tuple[Any, float, bool]]:
        """(connection, since when it waits, whether it is new), the idlest first: connections that have not sent
        a request yet, oldest first, before kept-alive ones, which have proven to be clients (kube-apiserver
        parks its spare connections), longest silent first. A snapshot: the caller may close as it goes."""
        for conn, since in list(self._new.items()):
            yield conn, since, True
        for conn, since in list(self._kept.items()):
            yield conn, since, False
