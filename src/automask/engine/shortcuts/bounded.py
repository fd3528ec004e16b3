"""``bounded``: a length-bounded string body's root scan, read off the unbounded body's.

The same tokens, filtered by their code point counts (see
:mod:`automask.engine.counted`); declines where a pattern leaves too many rows
near the bound to check one by one.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from automask.engine import counted
from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import TokenSet

MAX_UNSURE_ROWS = 256  # a bounded scan checks at most this many rows near the bound one by one


class Bounded:
    """Root scans of a string body with minLength/maxLength."""

    name = "bounded"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        if not request.root:
            return None
        body = counted.bounded_body(request.node)
        if body is None:
            return None
        found = bounded_scan(computer, request.lex, request.state, body, request.follow)
        if found is None:
            return None
        inside, crossing = found
        return Scan(request.finish(inside), crossing)


def bounded_scan(computer: Computer, lex: int, state: int, body: counted.BoundedBody,
                 follow: int) -> tuple[np.ndarray, list[tuple[int, TokenSet]]] | None:
    """The root scan of a length-bounded string body (lexer ``state``), from the
    unbounded body's: same tokens, filtered by code points. The inside rows are a
    bool per row (not finished). None when a pattern leaves too many rows near the
    bound to check one by one (a walk is cheaper)."""
    lexer, root = computer.states.lexer, computer.root
    inside_part, crossing = computer.shared_scan(root, lexer.single(lex, body.unbounded),
                                                 computer.pack_inside, True, follow)
    shared = computer.shared_cache
    counts, ended = shared.made(("body counts", body.code.uid),
                                lambda: counted.body_counts(root, body.code),
                                lambda found: found[0].nbytes + found[1].nbytes)
    # (a bool per row, unpacked once per unbounded body: a copy is ~40x cheaper)
    inside = shared.made(("inside rows", body.unbounded.uid),
                         partial(computer.inside_rows, inside_part),
                         lambda found: found.nbytes).copy()
    inside &= counted.in_bounds(counts, 0, body.hi) & (~ended | (counts >= body.lo))
    if body.slack and body.hi is not None:
        # Near the bound a pattern may still need code points the bound leaves no room for.
        unsure = np.flatnonzero(inside & ~ended & (counts > body.hi - body.slack))
        if len(unsure) > MAX_UNSURE_ROWS:
            return None
        texts = root.texts()
        for r in unsure.tolist():
            inside[r] = lexer.walk(state, texts[r]) != 0
    out = []
    for after, child in crossing:
        mine = counts[child.root_rows]
        lo, hi = counted.effective_bounds(mine, body.lo, body.hi)
        if (lo, hi) == (0, None):
            out.append((after, child))  # the same object: its decisions are shared
            continue
        keep = counted.in_bounds(mine, lo, hi)
        if keep.any():
            sub = shared.made(("bounded child", child.uid, lo, hi),
                              partial(child.subset, keep), lambda found: found.nbytes)
            out.append((after, sub))
    return inside, out
