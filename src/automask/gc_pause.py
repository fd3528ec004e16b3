"""Keeping Python's cyclic garbage collector's work down: pauses, and immortal objects.

A schema compile allocates tens of thousands of long-lived objects (regex
nodes, rules, members). Each time the young generations overflow, CPython may
run a full collection over the whole heap, so a big compile pays for several
full collections that find nothing: its objects are all still in use. Pausing
the collector for the compile turns those into at most one, afterwards.
Reference counting still frees everything that is not in a cycle.

Nested and concurrent pauses share one counter: the collector comes back
when the last one ends, and only if it was on when the first one began.

Objects kept until the process ends (the interned regex nodes, millions in a
long-lived server) can never be garbage, yet every full collection would walk
them: :func:`immortal` takes them out of the collector's sight.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading

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
            if _depth == 0 and _was_enabled:
                gc.enable()


def _untrack_function():
    if sys.implementation.name != "cpython":
        return None
    try:
        untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    except AttributeError:
        return None
    untrack.argtypes = [ctypes.py_object]
    untrack.restype = None
    return untrack


_untrack = _untrack_function()


def immortal(obj: object) -> None:
    """Stop the collector tracking ``obj``, which must stay referenced for good.

    The collector only looks for garbage among the objects it tracks; one that
    is never freed has no garbage to find through it, so walking it is pure
    cost. Whatever ``obj`` refers to is still kept alive by reference counts.
    (CPython's ``PyObject_GC_UnTrack``; elsewhere this does nothing.)
    """
    if _untrack is not None:
        _untrack(obj)
