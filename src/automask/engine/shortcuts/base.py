"""What every scan shortcut is: a named strategy that either computes a scan or declines.

:meth:`MaskComputer.shared_scan <automask.engine.masks.MaskComputer.shared_scan>`
asks the strategies in use, in the order of
:data:`automask.engine.shortcuts.STRATEGIES`, for each one-lexeme scan it does
not find cached; the first scan returned is kept, and with none the token trie
is walked. A strategy is exact where it answers (docs/masks.md), so which ones
are in use changes how fast a mask comes, never what it is.

The strategies are parts of the mask computer: they read its lexer, token set
and shared cache, and call back into its cached scan for the scans they are
read off. :class:`Computer` names those parts, so this package needs no import
of :mod:`automask.engine.masks` (which imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from automask.engine.state import StateTable
from automask.engine.tokens import RootTokens, TokenSet
from automask.regex import nodes as rx

#: a scan's crossing groups: (lexer state a lexeme ends in, the tokens' rest from there)
Crossing = Sequence[tuple[int, TokenSet]]


class SharedCache(Protocol):
    """The scans every grammar of one compiler shares (``masks.BoundedCache``)."""

    def recent(self, key: Any) -> Any: ...

    def __contains__(self, key: object) -> bool: ...

    def put(self, key: Any, value: Any, cost: int, anchor: object = None) -> Any: ...

    def made(self, key: Any, make: Callable[[], Any], cost: Callable[[Any], int]) -> Any: ...


class Computer(Protocol):
    """The parts of ``masks.MaskComputer`` a strategy uses."""

    @property
    def states(self) -> StateTable: ...

    @property
    def root(self) -> RootTokens: ...

    @property
    def shared_cache(self) -> SharedCache: ...

    def shared_scan(self, tokens: TokenSet, lexer_state: int, finish: Any,
                    borrow: bool = True, follow: int | None = None) -> tuple[Any, Crossing]: ...

    def inside_rows(self, inside_part: np.ndarray | tuple[np.ndarray, ...]) -> np.ndarray: ...

    def pack_inside(self, inside: np.ndarray) -> np.ndarray: ...


def shared_key(tokens: TokenSet, node: rx.Node, follow: int) -> tuple[int, int, int]:
    """The shared cache's key of a one-lexeme scan: its token set, its lexeme's node
    and the bytes that may follow the lexeme (see ``MaskComputer.shared_scan``)."""
    return (tokens.uid, node.uid, follow)


@dataclass(frozen=True, slots=True)
class ScanRequest:
    """One uncached scan of a one-lexeme lexer state, as ``shared_scan`` was asked for it.

    ``node`` is the lexeme's regex (clamped to the longest token for a root
    scan), ``state`` its one-lexeme lexer state, ``follow`` the bytes that may
    follow it (FOLLOW pruning; every byte for an unpruned scan), ``finish``
    what turns inside rows into the cached inside part, ``borrow`` whether the
    scan may borrow another state's walk, and ``root`` whether ``tokens`` is
    the whole vocabulary (the computer's root set) rather than a child set.
    """

    tokens: TokenSet
    lex: int
    state: int
    node: rx.Node
    follow: int
    finish: Callable[[np.ndarray], Any]
    borrow: bool
    root: bool

    @property
    def canonical_child(self) -> TokenSet | None:
        """``tokens`` when a child set is canonical (sorted, distinct: not rows picked
        from a parent's), which a bisection can search; else None."""
        return None if self.root or self.tokens.parent_rows is not None else self.tokens


class Scan(NamedTuple):
    """A strategy's answer: the finished inside part, the crossing groups, and whether
    the part is this scan's own (False: it is another cached scan's, counted there)."""

    inside_part: Any
    crossing: Crossing
    part_is_own: bool = True


class Strategy(Protocol):
    """A scan shortcut: ``scan`` returns the requested scan, or None to decline (the
    request is not of its shape, or a walk is cheaper there)."""

    name: str  # as in ``Compiler(shortcuts=...)`` and ``SharedScans.made``

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None: ...
