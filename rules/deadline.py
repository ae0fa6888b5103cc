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

A deadline alone would still let several slow reviews at once hold a worker for the sum of their deadlines. So the
server's worker also has every review hand the worker back every SLICE_SECONDS of its run (`share_worker`), at the
same checks: the probes and the other reviews are answered between its slices, and that time is not charged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from rules.budget import OverBudget

#: CPU seconds the rules of one webhook call may spend; the audit gives each audited object one per webhook and one
#: for its own work (rules/audit.py). Read at each `running()`, so a test may shorten it.
REVIEW_SECONDS = 0.1
#: Wall seconds a review runs between two hand-backs of the worker, where a server installed `share_worker`: the
#: probes and other reviews are answered between the slices of a long one, so several slow reviews at once cannot
#: hold them for the sum of their deadlines.
SLICE_SECONDS = 0.005

_share: Callable[[], None] | None = None


def share_worker(pause: Callable[[], None] | None) -> None:
    """Have every review run `pause` (which lets the worker serve others: a gevent worker's `sleep`) once per
    SLICE_SECONDS of its run, uncharged; None, the default, never pauses (the command line, in-process tests)."""
    global _share  # noqa: PLW0603 - one setting per process, made once by the worker that serves reviews
    _share = pause


class PastDeadline(OverBudget):
    """The rules ran past the review deadline; answered like any object past the budget."""


class Deadline:
    """One review's budget of CPU time. `_wall` is a gate: until the wall clock passes it, the CPU clock (which
    runs no faster than the wall clock on one thread) cannot have passed `_cpu` either. `_gate` is the earlier of
    `_wall` and the next hand-back of the worker (`share_worker`): the one comparison an honest check makes."""

    __slots__ = ("_cpu", "_gate", "_next_share", "_seconds", "_wall")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._cpu = time.thread_time() + seconds
        self._wall = time.perf_counter() + seconds
        self._next_share = time.perf_counter() + SLICE_SECONDS if _share is not None else float("inf")
        self._gate = min(self._wall, self._next_share)

    def check(self) -> None:
        now = time.perf_counter()
        if now < self._gate:
            return
        share = _share
        if share is not None and now >= self._next_share:
            cpu = time.thread_time()
            share()  # others run meanwhile: their CPU and wall time are not this review's
            self.extend(time.thread_time() - cpu, time.perf_counter() - now)
            self._next_share = time.perf_counter() + SLICE_SECONDS
        left = self._cpu - time.thread_time()
        if left <= 0:
            spent = f"{self._seconds * 1000:g} ms of CPU time"
            raise PastDeadline(f"past the review deadline: the rules spent {spent} on it")
        self._wall = time.perf_counter() + left  # the rest was spent waiting or preempted: not charged
        self._gate = min(self._wall, self._next_share)

    def extend(self, cpu: float, wall: float) -> None:
        """Give back time spent outside the rules (waiting on the API server, or for other requests)."""
        self._cpu += cpu
        self._wall += wall
        self._gate = min(self._wall, self._next_share)


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
