"""The review deadline: the most CPU time the rules of one review, or of one audited object, may spend.

The review budget (rules/budget.py) counts what an object may ask for; the deadline bounds what nobody counted.
It is defence in depth, not a policy setting: a review that would run past it is answered as an object past the
budget is (`PastDeadline` is an `OverBudget`), so one tenant's object cannot hold a worker, and with it every
other review and the probes, for seconds.

Rules call `check()` in every loop over nodes, terms, volumes or pods. It costs a context-variable read and a
monotonic clock read (about 0.1 µs); only once the wall clock says the budget may be spent does it read the
thread's CPU clock (about 0.7 µs), so an honest review pays nothing measurable. Time spent waiting on the API
server (`paused()`, around every lookup) is not charged: a slow API server must not turn into refusals. Each
greenlet (each request of a gevent worker) has its own context, so its own deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from rules.budget import OverBudget

#: CPU seconds the rules of one webhook call may spend; the audit gives each audited object one per webhook and one
#: for its own work (rules/audit.py). Read at each `running()`, so a test may shorten it.
REVIEW_SECONDS = 0.1


class PastDeadline(OverBudget):
    """The rules ran past the review deadline; answered like any object past the budget."""


class Deadline:
    """One review's budget of CPU time. `_wall` is a gate: until the wall clock passes it, the CPU clock (which
    runs no faster than the wall clock on one thread) cannot have passed `_cpu` either."""

    __slots__ = ("_cpu", "_seconds", "_wall")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._cpu = time.thread_time() + seconds
        self._wall = time.perf_counter() + seconds

    def check(self) -> None:
        if time.perf_counter() < self._wall:
            return
        left = self._cpu - time.thread_time()
        if left <= 0:
            spent = f"{self._seconds * 1000:g} ms of CPU time"
            raise PastDeadline(f"past the review deadline: the rules spent {spent} on it")
        self._wall = time.perf_counter() + left  # the rest was spent waiting or preempted: not charged

    def extend(self, cpu: float, wall: float) -> None:
        """Give back time spent outside the rules (waiting on the API server)."""
        self._cpu += cpu
        self._wall += wall


_CURRENT: ContextVar[Deadline | None] = ContextVar("storage_affinity_review_deadline", default=None)


def check() -> None:
    """Raise PastDeadline if the current review has spent its CPU budget; nothing outside a review."""
    current = _CURRENT.get()
    if current is not None:
        current.check()


@contextmanager
def running(seconds: float | None = None) -> Iterator[Deadline]:
    """Run the enclosed rules under a fresh deadline of `seconds` (default REVIEW_SECONDS, read at each call);
    nested, the inner one holds until it ends."""
    deadline = Deadline(REVIEW_SECONDS if seconds is None else seconds)
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


@contextmanager
def paused() -> Iterator[None]:
    """Charge nothing of the enclosed block (a call to the API server) to the current review's deadline."""
    current = _CURRENT.get()
    if current is None:
        yield
        return
    cpu, wall = time.thread_time(), time.perf_counter()
    try:
        yield
    finally:
        current.extend(time.thread_time() - cpu, time.perf_counter() - wall)
