"""``reuse``: a root scan that borrows another one-lexeme state's walk on most first bytes.

Still a walk of the token trie, but only of the tokens whose first byte the
two states disagree on; the "any other key" of an object is the case that pays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import Reuse, scan
from automask.regex import nodes as rx

REUSE_MIN_ROWS = 2048  # a root scan borrows another's first bytes only when they cover this many


class Borrowed:
    """Root scans walked with another state's scan standing in on shared first bytes;
    declines (a plain walk) where no state covers enough of them."""

    name = "reuse"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        if not (request.borrow and request.root):
            return None
        reuse = borrowed(computer, request.state, request.finish)
        if reuse is None:
            return None
        inside, crossing = scan(request.tokens, computer.states.lexer, request.state, reuse)
        return Scan(request.finish(inside), crossing)


def borrowed(computer: Computer, state: int, finish: Any) -> Reuse | None:
    """Another one-lexeme state whose root scan can stand in for most of ``state``'s.

    Where ``state`` goes to the same state ``d`` on most first bytes and
    ``d`` itself agrees with ``state`` on them (``d`` loops on those bytes),
    the tokens starting with those bytes scan the same from both. The
    "any other key" of an object is the case that pays: it becomes the
    shared string body on every byte but the declared names' first ones,
    so each new object walks only the tokens starting with those.
    """
    lexer, trie = computer.states.lexer, computer.root.trie
    sizes = trie.end[1] - trie.start[1]
    lexer.row(state)
    after = lexer.table[state][trie.byte[1]]
    weight = np.bincount(after, weights=np.where(after != state, sizes, 0))
    weight[0] = 0
    d = int(np.argmax(weight))
    if weight[d] < REUSE_MIN_ROWS:
        return None
    lexer.row(d)
    same = (lexer.table[d][trie.byte[1]] == after) & (after != 0)
    walked = int(sizes[(after != 0) & ~same].sum())
    if int(sizes[same].sum()) <= 2 * walked:
        return None
    inside_part, crossing = computer.shared_scan(computer.root, d, finish, False, rx.FULL_BITS)
    return Reuse(same, computer.inside_rows(inside_part), crossing)
