"""Keeping Python's cyclic garbage collector's work down: pauses, and untracked objects.

A schema compile allocates tens of thousands of long-lived objects (regex
nodes, rules, members). Each time the young generations overflow, CPython may
run a full collection over the whole heap, so a big compile pays for several
full collections that find nothing: its objects are all still in use. Pausing
the collector for the compile turns those into at most one, afterwards.
Reference counting still frees everything that is not in a cycle.

Nested and concurrent pauses share one counter: the collector comes back
when the last one ends, and only if it was on when the first one began.

The collector exists for reference cycles. An object in none (an Earley set,
which refers only to older sets; a regex node, which refers only to older
nodes; a tuple of them) is freed by reference counting alone, and needs no
collector; yet every collection walks each tracked object, and CPython runs a
full collection each time the old generation has taken in a quarter of its size
again, so every long-lived object tracked costs about four walks of itself.
:func:`untrack` takes such objects out of the collector's sight.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from collections.abc import Callable

_lock = threading.Lock()
_depth = 0
_was_enabled = False


class paused_gc:
    """Context manager: the collector is off inside (a class: it is entered per uncached mask)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _was_enabled
        with _lock:
            if _depth == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(self, *exc) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0:
                for upkeep in _on_resume:
                    upkeep()
                if _was_enabled:
                    gc.enable()


_on_resume: list[Callable[[], None]] = []


def on_resume(upkeep: Callable[[], None]) -> None:
    """Run ``upkeep`` whenever the last pause ends: untracking that may wait while the
    collector is off (a table that each insert tracks again, untracked once instead of
    once per insert)."""
    _on_resume.append(upkeep)


def _untrack_function():
    """CPython's ``PyObject_GC_UnTrack``, called directly (it runs hundreds of
    thousands of times per MaskBench run): from ``automask._untrack``, a C function
    the compiled engine's build adds (setup.py), else through ctypes, at ten times the
    cost of a call; a function doing nothing elsewhere."""
    try:
        from automask._untrack import untrack as compiled
    except ImportError:
        pass
    else:
        return compiled
    if sys.implementation.name == "cpython":
        try:
            found = ctypes.pythonapi.PyObject_GC_UnTrack
        except AttributeError:
            pass
        else:
            found.argtypes = [ctypes.py_object]
            found.restype = None
            return found
    return lambda obj: None


#: ``untrack(obj)``: stop the collector tracking ``obj``, which must be in no reference
#: cycle (now or later) or be kept for good, or a cycle through it would never be freed.
#: Whatever ``obj`` refers to stays alive by reference counts, and ``obj`` itself is
#: freed as usual when the last reference to it goes.
untrack = _untrack_function()

#: What running out of Python's recursion limit raises, for an ``except`` around deep
#: work: a RecursionError met while :func:`untrack` converts its argument comes out of
#: that ctypes call as an ArgumentError (converting a Python object fails for no other
#: reason).
RECURSION_ERRORS = (RecursionError, ctypes.ArgumentError)


def freeze_startup() -> None:
    """Collect once, then put every object alive now out of the collector's sight for good
    (``gc.freeze``): for a process of ours (``automask serve``, a pool worker), once it
    has built what it keeps for its life (the model, the vocabulary's token index, the
    warm-up's caches).

    Every full collection would otherwise walk all of it again: in ``automask serve``
    after start, ~105k tracked objects and 54 ms a full collection, a whole batched
    step's worth, wherever it lands. A frozen object caught later in a garbage cycle
    stays, so this is for startup only, never for a library caller's process.
    """
    gc.collect()
    gc.freeze()
