"""The scan shortcuts: named strategies that compute a one-lexeme scan without a plain
walk of the token trie, or read it off another scan (docs/masks.md states each and why
it is exact). The interface is :mod:`automask.engine.shortcuts.base`."""

from __future__ import annotations

from automask.engine.shortcuts.base import Strategy
from automask.engine.shortcuts.bounded import Bounded
from automask.engine.shortcuts.excluded_keys import ExcludedKeys
from automask.engine.shortcuts.finite import Finite
from automask.engine.shortcuts.gap import Gap
from automask.engine.shortcuts.literal import Literal
from automask.engine.shortcuts.prefixed import Prefixed
from automask.engine.shortcuts.reuse import Borrowed
from automask.engine.shortcuts.unpruned import Unpruned

#: The strategies in the order they are tried: the first scan returned is kept, so where
#: two apply the earlier one answers (a gap lexeme's pruned scan is the gap's, not read
#: off an unpruned walk); reuse, still a walk, is the last resort.
STRATEGIES: tuple[Strategy, ...] = (
    Bounded(),       # a length-bounded string body: the unbounded body's scan, filtered
    Gap(),           # a lexeme opening with whitespace: the rest's scan, shifted
    Literal(),       # a lexeme that must read a literal first: found by bisection
    Unpruned(),      # a FOLLOW-pruned root scan: filtered from the one unpruned walk
    ExcludedKeys(),  # "any key but these": the plain key body's scan, less the names
    Finite(),        # a child set and a finite language: its strings looked up
    Prefixed(),      # a child set and a forced prefix: the rows with that prefix
    Borrowed(),      # a root scan borrowing another state's walk on most first bytes
)

#: Not a strategy (those make the scan of one lexeme): where several lexemes of a root
#: lexer state would each be walked (no strategy makes their scans, none is cached), they
#: are walked together, as one state (``MaskComputer.root_parts``).
UNION = "union"

#: The shortcuts' names: ``Compiler(shortcuts=…)`` turns them off one by one.
SHORTCUTS = frozenset(strategy.name for strategy in STRATEGIES) | {UNION}

__all__ = ["SHORTCUTS", "STRATEGIES", "UNION", "Strategy"]
