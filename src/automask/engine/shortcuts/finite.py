"""``finite``: a child set's scan for a lexeme of finitely many strings (an enum value,
a key): its strings looked up in the sorted set, not a walk."""

from __future__ import annotations

from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import scan_finite
from automask.regex import nodes as rx


class Finite:
    """Scans of a canonical child set (sorted, distinct) for a finite language."""

    name = "finite"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        tokens = request.canonical_child
        if tokens is None:
            return None
        strings = rx.finite_strings(request.node)
        if strings is None:
            return None
        inside, crossing = scan_finite(tokens, computer.states.lexer, request.state, strings)
        return Scan(request.finish(inside), crossing)
