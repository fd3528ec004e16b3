"""``gap``: the root scan of a lexeme opening with whitespace, read off the rest's.

See :mod:`automask.engine.gaps`: the tokens that start with gap bytes are the
rest's scan of their remainders, mapped back; the whitespace-only tokens are one
part every such lexeme shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from automask.engine import gaps
from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import RootTokens, TokenSet, prefix_rows
from automask.regex import nodes as rx


class Gap:
    """Root scans of ``ws X``, pruned for the lexeme's own FOLLOW set."""

    name = "gap"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        # Only under the lexeme's own follow key (see gap_scan), never the unpruned one.
        if not request.root or request.follow != computer.states.lexer.follow_bytes(request.lex):
            return None
        gap = gaps.leading_gap(request.node)
        if gap is None:
            return None
        inside_part, crossing = gap_scan(computer, request.lex, gap, request.finish,
                                         request.follow)
        return Scan(inside_part, crossing)


def gap_scan(computer: Computer, lex: int, gap: gaps.Gap, finish: Any, follow: int
             ) -> tuple[Any, list[tuple[int, TokenSet]]]:
    """The root scan of a lexeme opening with a whitespace gap: the rest's, plus the
    rest's scan of the remainders of the tokens that start with gap bytes, mapped back.
    The inside part is finished.

    Pruned for the lexeme's own ``follow`` (a scan of a set other than the
    root prunes as it walks), so only asked for under that key: never for
    the unpruned root scan that other grammars' pruned ones are read off.
    """
    lexer, root = computer.states.lexer, computer.root
    after = lexer.single(lex, gap.rest)
    inside_part, crossing = computer.shared_scan(root, after, finish, True, follow)
    shared = computer.shared_cache
    key = ("spaced", gap.bits)
    spaced = shared.recent(key)  # (kept as the most recent: every gap lexeme uses it)
    if spaced is None:
        spaced = gaps.SpacedTokens.of(root, gap.bits)
        shared.put(key, spaced, spaced.nbytes)
    inside, groups = few_remainders(spaced.rest, gap.rest)
    if inside is None:
        inside, groups = computer.shared_scan(spaced.rest, after, _rows_of, False, follow)
    out = list(crossing)
    for state, child in groups:
        moved = spaced.crossing(root, child, gap.most)
        if moved is not None:
            _add_group(root, out, state, moved)
    if len(inside):
        extra = spaced.expand(inside, gap.most)[0]
        if inside_part.dtype == np.int32:  # (first bytes differ: no row is in both)
            inside_part = finish(np.concatenate([inside_part, extra]))
        else:  # packed: the extra rows' bits set in a copy (still over SPARSE_INSIDE rows)
            inside_part = root.packed_with(inside_part, extra)
            inside_part.setflags(write=False)
    # Whitespace-only tokens are inside every gap of this bound: one shared part
    # (hundreds of rows), not copied into each key's.
    blanks = shared.made(("blank part", gap.bits, gap.most),
                         lambda: finish(spaced.blanks(gap.most)),
                         lambda found: found.nbytes)
    if len(blanks):
        if blanks.dtype == np.int32 and inside_part.dtype == np.int32:
            inside_part = finish(np.concatenate([inside_part, blanks]))
        else:
            inside_part = (inside_part, blanks)
    return inside_part, out


def few_remainders(rest: TokenSet, node: rx.Node
                   ) -> tuple[np.ndarray | None, Sequence[tuple[int, TokenSet]]]:
    """The scan of the sorted set ``rest`` for a lexeme that must read a literal first
    (a key's name) when no row goes on past it: the rows that are its prefixes,
    found by bisection (a key's few). (None, ()) otherwise."""
    text = rx.forced_prefix(node)[:rest.maxlen]
    if not text:
        return None, ()
    texts = rest.texts()
    prefixes, longer = prefix_rows(texts, text)
    if any(len(texts[r]) > len(text) for r in longer):
        return None, ()
    return np.array(prefixes, dtype=np.int32), ()


def _add_group(root: RootTokens, groups: list, state: int, child: TokenSet) -> None:
    """Add a crossing group of the root (rows no group holds), joined to the group of
    the same lexeme end if there is one: ``{"`` and `` {"`` are decided together."""
    at = next((i for i, (s, _) in enumerate(groups) if s == state), None)
    if at is None:
        groups.append((state, child))
        return
    other = groups[at][1]
    rows = np.concatenate([other.parent_rows, child.parent_rows])
    skips = np.concatenate([other.offsets - root.offsets[other.parent_rows],
                            child.offsets - root.offsets[child.parent_rows]])
    groups[at] = (state, root.child(rows, skips))


def _rows_of(inside: np.ndarray) -> np.ndarray:
    """A child scan's inside rows as indices (int32), for a scan kept only to be mapped
    onto other rows: a handful of rows, not a bool per row of a large set."""
    rows = np.flatnonzero(inside).astype(np.int32)
    rows.setflags(write=False)
    return rows
