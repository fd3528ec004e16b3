"""Pausing Python's cyclic garbage collector around bulk builds.

A schema compile allocates tens of thousands of long-lived objects (regex
nodes, rules, members). Each time the young generations overflow, CPython may
run a full collection over the whole heap, so a big compile pays for several
full collections that find nothing: its objects are all still in use. Pausing
the collector for the compile turns those into at most one, afterwards.
Reference counting still frees everything that is not in a cycle.

Nested and concurrent pauses share one counter: the collector comes back
when the last one ends, and only if it was on when the first one began.
"""

from __future__ import annotations

import gc
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
