"""Running one piece of work in several threads at once, and collecting what they raised."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[int], None], count: int, *,
                   switch_every: float | None = None) -> list[BaseException]:
    """``work(0)`` ... ``work(count - 1)``, each in its own thread, all joined; the errors
    they raised (an assertion in a thread would otherwise only be printed).
    ``switch_every``: the interpreter's thread switch interval meanwhile (seconds; small
    to interleave the threads as finely as it can)."""
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            work(k)
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            errors.append(e)

    interval = sys.getswitchinterval()
    if switch_every is not None:
        sys.setswitchinterval(switch_every)
    try:
        threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    return errors
