"""``excluded``: the root scan of "any key but these", read off the plain key body's.

See :mod:`automask.engine.excluded`: the plain body's scan less the rows that
close a declared name, and the crossing groups less the words that do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from automask.engine import excluded
from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import TokenSet
from automask.regex import nodes as rx


class ExcludedKeys:
    """Root scans of an object's other keys (``additionalProperties`` beside ``properties``)."""

    name = "excluded"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        if not request.root:
            return None
        body = excluded.except_body(request.node)
        if body is None:
            return None
        return Scan(*except_scan(computer, request.lex, request.state, body, request.finish))


def except_scan(computer: Computer, lex: int, state: int, body: excluded.ExceptBody,
                finish: Any) -> tuple[np.ndarray, list[tuple[int, TokenSet]], bool]:
    """The root scan of "any key but the declared ones": the plain key body's, minus
    the rows that close a declared name. Returns the finished part, the crossing
    groups, and whether the part is a new array (not the plain one)."""
    lexer, root = computer.states.lexer, computer.root
    inside_part, crossing = computer.shared_scan(root, lexer.single(lex, body.plain), finish,
                                                 True, rx.FULL_BITS)
    holding = None if body.prefix else computer.shared_cache.made(
        ("rows holding", body.tail), lambda: excluded.rows_holding(root, body.tail),
        lambda found: found.nbytes)
    dead = excluded.dying_rows(root, lexer, state, body, holding)
    crossing = excluded.drop_closed_words(root, lexer, state, body, crossing)
    if not dead:
        return inside_part, crossing, False
    if inside_part.dtype == np.int32:
        inside_part = inside_part[~np.isin(inside_part, dead)]
    else:
        inside_part = root.packed_with(inside_part, dead, allowed=False)
    inside_part.setflags(write=False)
    return inside_part, crossing, True
