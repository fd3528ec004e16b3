"""Time budgets: a thread-local deadline, in this thread's CPU time, that hot loops check.

Compiles and masks are bounded in states and items, but a pathological
input can still stay inside those bounds and take minutes. Work runs under
``time_budget(seconds, what)``; the loops that build automata (new regex
nodes, lexer rows, liveness searches, Earley sets, mask recursion) call
:func:`check_time`, which raises :class:`LimitExceeded` once the budget is
spent. The clock is the calling thread's CPU time, so the limit measures the
work itself: a busy machine (or other threads) does not make a compile fail
that would pass on an idle one. Nested budgets keep the tighter deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from automask.errors import LimitExceeded

_local = threading.local()
_CHECK_EVERY = 32  # reading the thread's CPU clock costs ~1 µs; most checks only count


class _Deadline:
    __slots__ = ("end", "what", "seconds", "calls")

    def __init__(self, end: float, what: str, seconds: float):
        self.end, self.what, self.seconds, self.calls = end, what, seconds, 0


@contextmanager
def time_budget(seconds: float | None, what: str) -> Iterator[None]:
    """Run the body with ``seconds`` of this thread's CPU time (None: no limit)."""
    outer = getattr(_local, "deadline", None)
    if seconds is None:
        yield
        return
    end = time.thread_time() + seconds
    if outer is not None and outer.end <= end:
        yield
        return
    _local.deadline = _Deadline(end, what, seconds)
    try:
        yield
    finally:
        _local.deadline = outer


def check_time() -> None:
    """Raise :class:`LimitExceeded` when the current budget is spent."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return
    deadline.calls += 1
    if deadline.calls % _CHECK_EVERY != 1:
        return
    if time.thread_time() >= deadline.end:
        raise LimitExceeded(f"{deadline.what} took longer than {deadline.seconds:g} s "
                            "of CPU time (the time limit)")
