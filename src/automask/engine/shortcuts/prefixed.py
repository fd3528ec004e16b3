"""``prefixed``: a child set's scan for a lexeme that must read a literal first (a key,
its colon): the rows holding that prefix, found by bisection of the sorted set."""

from __future__ import annotations

from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import scan_prefixed
from automask.regex import nodes as rx


class Prefixed:
    """Scans of a canonical child set (sorted, distinct) for a forced prefix."""

    name = "prefixed"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        tokens = request.canonical_child
        if tokens is None:
            return None
        text = rx.forced_prefix(request.node)[:tokens.maxlen]
        if not text:
            return None
        inside, crossing = scan_prefixed(tokens, computer.states.lexer, request.state, text)
        return Scan(request.finish(inside), crossing)
