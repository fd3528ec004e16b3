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
from types import TracebackType

from automask.errors import LimitExceeded

_local = threading.local()
_CHECK_EVERY = 32  # reading the thread's CPU clock costs ~0.5 µs; most checks only count
PROMPT_BELOW = 0.1  # budgets shorter than this (seconds) read the clock at their first check
# One countdown for all threads, so a check that only counts is a global decrement (the
# thread-local lookup showed in profiles). Threads racing on it only move a clock read.
_countdown = 1


class _Deadline:
    """A budget; its clock starts at its first clock read (``end`` is None until then),
    so work that never checks (a mask made of cached parts) never reads the clock."""

    __slots__ = ("end", "what", "seconds")
    end: float | None
    what: str
    seconds: float

    def __init__(self, what: str, seconds: float):
        self.end, self.what, self.seconds = None, what, seconds

    def started(self, now: float) -> float:
        """The deadline, starting the clock at ``now`` if it has not started yet."""
        if self.end is None:
            self.end = now + self.seconds
        return self.end


class time_budget:
    """Run the body with ``seconds`` of this thread's CPU time (None: no limit).

    A class rather than a generator context manager: it is entered on every
    uncached mask and token, where the generator machinery showed up in profiles.
    ``start_now``: the clock starts at entry, not at the first regular read (for a
    compile, entered once, whose first steps may do much work before any check).
    """

    __slots__ = ("seconds", "what", "outer", "mine", "start_now")

    def __init__(self, seconds: float | None, what: str, *, start_now: bool = False):
        self.seconds, self.what, self.start_now = seconds, what, start_now

    def __enter__(self) -> None:
        global _countdown
        self.outer = outer = getattr(_local, "deadline", None)
        self.mine = None
        if self.seconds is None:
            return
        if outer is not None:
            now = time.thread_time()
            if outer.started(now) <= now + self.seconds:
                return  # the outer budget is tighter
        self.mine = _local.deadline = _Deadline(self.what, self.seconds)
        if self.start_now:
            self.mine.started(time.thread_time())
        if self.seconds < PROMPT_BELOW:
            _countdown = 1  # a short budget's first check reads the clock
        # A longer one starts its clock at the next regular read, at most _CHECK_EVERY
        # checks in (microseconds of work against seconds of budget): entered on every
        # uncached mask and token, a read each (a system call) was 3% of mask time.

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.mine is not None:
            _local.deadline = self.outer
        if kind is RecursionError:
            # Automata are walked recursively (a derivative follows a nullable prefix of a
            # concatenation, part by part): input nested past Python's recursion limit is
            # an input too large, typed as one. Memos are written after their work, so
            # nothing half-done stays behind.
            raise LimitExceeded(f"{self.what}: the input is nested too deeply "
                                "(Python's recursion limit)") from None


def check_time() -> None:
    """Raise :class:`LimitExceeded` when the current budget is spent (the clock is
    read on every :data:`_CHECK_EVERY`-th call)."""
    global _countdown
    _countdown -= 1
    if _countdown > 0:  # not "!= 0": a lost update between threads may skip zero
        return
    _countdown = _CHECK_EVERY
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return
    now = time.thread_time()
    if now >= deadline.started(now):
        raise LimitExceeded(f"{deadline.what} took longer than {deadline.seconds:g} s "
                            "of CPU time (the time limit)")


def check_time_now() -> None:
    """:func:`check_time`, reading the clock at once: for coarse steps of a compile (a
    rule each), where 32 steps can take a second and the limit would be read that late."""
    global _countdown
    _countdown = 1
    check_time()
