"""``literal``: the root scan of a lexeme that must read a literal first (a key's name,
a keyword), found by bisection of the sorted vocabulary instead of a walk of its trie."""

from __future__ import annotations

from automask.engine.shortcuts.base import Computer, Scan, ScanRequest, shared_key
from automask.engine.tokens import prune_groups, scan_string
from automask.regex import nodes as rx


class Literal:
    """Root scans of lexemes with a forced prefix; declines where too many tokens go on
    past it (see :func:`~automask.engine.tokens.scan_string`)."""

    name = "literal"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        if not request.root:
            return None
        root = computer.root  # (request.tokens, as a root set)
        pruned = request.follow != rx.FULL_BITS
        if pruned and shared_key(root, request.node, rx.FULL_BITS) in computer.shared_cache:
            return None  # `unpruned` prunes the scan made for another FOLLOW set
        lexer = computer.states.lexer
        found = scan_string(root, lexer, request.state,
                            rx.forced_prefix(request.node)[:root.maxlen])
        if found is None:
            return None
        inside, crossing = found
        return Scan(request.finish(inside), prune_groups(crossing, lexer) if pruned else crossing)
