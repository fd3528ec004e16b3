"""Wall-clock budgets: a thread-local deadline that hot loops check.

Compiles and masks are bounded in states and items, but a pathological
input can still stay inside those bounds and take minutes. Work runs under
``time_budget(seconds, what)``; the loops that build automata (new regex
nodes, lexer rows, liveness searches, Earley sets, mask recursion) call
:func:`check_time`, which raises :class:`LimitExceeded` once the deadline has
passed. Nested budgets keep the tighter deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from automask.errors import LimitExceeded

_local = threading.local()


@contextmanager
def time_budget(seconds: float | None, what: str) -> Iterator[None]:
    """Run the body under a deadline ``seconds`` from now (None: no deadline)."""
    outer = getattr(_local, "deadline", None)
    if seconds is None:
        yield
        return
    end = time.monotonic() + seconds
    if outer is not None and outer[0] <= end:
        yield
        return
    _local.deadline = (end, what, seconds)
    try:
        yield
    finally:
        _local.deadline = outer


def check_time() -> None:
    """Raise :class:`LimitExceeded` when the current budget is spent."""
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline[0]:
        _, what, seconds = deadline
        raise LimitExceeded(f"{what} took longer than {seconds:g} s (the time limit)")
