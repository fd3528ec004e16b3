"""The engine's scan shortcuts, switched off, forced or watched by name (tests only).

A shortcut computes a token scan from another scan instead of walking the token trie
again. Each must give exactly the masks of the walk it replaces, so its tests compute
the masks twice: with the shortcut, and with it switched off. The engine has no option
for that yet: this module is the one place that knows which private functions and
constants to monkeypatch (when an engine option arrives, change the bodies here, not
the tests). Every change goes through pytest's ``monkeypatch``, so it ends with the test
(or at ``monkeypatch.undo()``).

The shortcuts, by name:

``"gap"``
    A lexeme that opens with a whitespace gap is scanned from the scan of its rest
    (``engine.gaps.leading_gap``; ``MaskComputer._gap_scan``).
``"excluded"``
    "Any key but the declared ones" is read off the plain key body's scan
    (``engine.excluded.except_body``; ``MaskComputer._except_scan``).
``"counted"``
    A length-bounded string body is read off the unbounded body's scan
    (``engine.counted.bounded_body``; ``MaskComputer._bounded_scan``).
``"reuse"``
    A root scan borrows another state's scan on shared first bytes
    (``engine.masks.REUSE_MIN_ROWS``; ``MaskComputer._reuse``).
``"dense"``
    A trie level is stepped whole while enough of it is live (``engine.tokens.DENSE_SHARE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from automask.engine import counted, excluded, gaps, masks, tokens

NEVER = 10**9  # a threshold no vocabulary reaches


def _off_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaps, "leading_gap", lambda node: None)


def _off_excluded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(excluded, "except_body", lambda node: None)


def _off_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counted, "bounded_body", lambda node: None)


def _off_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(masks, "REUSE_MIN_ROWS", NEVER)


def _off_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "DENSE_SHARE", NEVER)


_OFF: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "gap": _off_gap, "excluded": _off_excluded, "counted": _off_counted,
    "reuse": _off_reuse, "dense": _off_dense,
}
#: the MaskComputer method each watchable shortcut runs through
_METHODS = {"gap": "_gap_scan", "excluded": "_except_scan", "counted": "_bounded_scan",
            "reuse": "_reuse"}

SHORTCUTS = tuple(_OFF)


def shortcuts_off(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Switch the named shortcuts off: the engine walks the token trie instead."""
    for name in names:
        if name not in _OFF:
            raise ValueError(f"no scan shortcut {name!r} (known: {', '.join(SHORTCUTS)})")
        _OFF[name](monkeypatch)


def shortcuts_forced(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Never let the named shortcuts fall back to the walk where they may today.

    ``"counted"``: a bounded scan checks every row near the bound one by one, however
    many (it gives up past ``engine.masks.MAX_UNSURE_ROWS`` otherwise).
    """
    for name in names:
        if name != "counted":
            raise ValueError(f"scan shortcut {name!r} has no fallback to force off")
        monkeypatch.setattr(masks, "MAX_UNSURE_ROWS", 1 << 30)


def watch_shortcut(monkeypatch: pytest.MonkeyPatch, name: str,
                   watcher: Callable[..., Any]) -> None:
    """Run each use of the named shortcut through ``watcher(real, computer, *args)``.

    ``real`` is the engine's own method and ``computer`` the ``MaskComputer``; what the
    watcher returns is the shortcut's result (return ``real(computer, *args)`` to leave it
    unchanged, after checking it or counting the call).
    """
    if name not in _METHODS:
        raise ValueError(f"scan shortcut {name!r} cannot be watched "
                         f"(known: {', '.join(_METHODS)})")
    method = _METHODS[name]
    real = getattr(masks.MaskComputer, method)

    def watched(self, *args):
        return watcher(real, self, *args)

    monkeypatch.setattr(masks.MaskComputer, method, watched)
