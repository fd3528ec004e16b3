"""Watching the engine's scan shortcuts at work (tests only).

Switching a shortcut off is the engine's own option, ``Compiler(vocab,
shortcuts=...)`` (the names are ``engine/shortcuts:SHORTCUTS``; see
:func:`support.walks.masks_along`), and ``scan(..., whole_levels=False)`` for
the trie walk's whole-level steps. What the engine has no option for lives
here: running each use of a shortcut through a watcher (to check that it was
used, and on what), and forcing the bounded scan never to give up. Every change
goes through pytest's ``monkeypatch``, so it ends with the test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from automask.engine import COMPILED
from automask.engine.shortcuts import bounded, excluded_keys, gap, reuse

#: the module function each watchable shortcut's strategy runs through (looked up in its
#: module at each call, so replacing it there is seen), with the computer first
_FUNCTIONS = {"gap": (gap, "gap_scan"), "excluded": (excluded_keys, "except_scan"),
              "bounded": (bounded, "bounded_scan"), "reuse": (reuse, "borrowed")}


def shortcuts_forced(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Never let the named shortcuts fall back to the walk where they may today.

    ``"bounded"``: a bounded scan checks every row near the bound one by one, however
    many (it gives up past ``engine.shortcuts.bounded.MAX_UNSURE_ROWS`` otherwise).
    """
    for name in names:
        if name != "bounded":
            raise ValueError(f"scan shortcut {name!r} has no fallback to force off")
        monkeypatch.setattr(bounded, "MAX_UNSURE_ROWS", 1 << 30)


def watch_shortcut(monkeypatch: pytest.MonkeyPatch, name: str,
                   watcher: Callable[..., Any]) -> None:
    """Run each use of the named shortcut through ``watcher(real, computer, *args)``.

    ``real`` is the engine's own function (``gap.gap_scan``, ``excluded_keys.except_scan``,
    ``bounded.bounded_scan``, ``reuse.borrowed``: what the strategy computes once its guard
    has let the request through) and ``computer`` the ``MaskComputer``; what the watcher
    returns is the shortcut's result (return ``real(computer, *args)`` to leave it
    unchanged, after checking it or counting the call).
    """
    if name not in _FUNCTIONS:
        raise ValueError(f"scan shortcut {name!r} cannot be watched "
                         f"(known: {', '.join(_FUNCTIONS)})")
    if COMPILED:  # compiled code calls the function directly: a replacement is never seen
        pytest.skip("watches a shortcut by replacing its function: the Python engine only")
    module, function = _FUNCTIONS[name]
    real = getattr(module, function)

    def watched(computer, *args):
        return watcher(real, computer, *args)

    monkeypatch.setattr(module, function, watched)
