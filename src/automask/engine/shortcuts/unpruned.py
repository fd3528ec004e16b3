"""``unpruned``: a FOLLOW-pruned root scan, filtered from the one unpruned walk.

A string body followed by ``,`` or ``}`` in one object and by ``}`` alone in
the next is one walk of the vocabulary, not two: each FOLLOW set's crossing
groups are pruned from the scan with every byte allowed to follow.
"""

from __future__ import annotations

from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import prune_crossing
from automask.regex import nodes as rx


class Unpruned:
    """Pruned root scans, read off the unpruned one (whose inside part they share)."""

    name = "unpruned"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        if not request.root or request.follow == rx.FULL_BITS:
            return None
        lexer = computer.states.lexer
        inside_part, unpruned = computer.shared_scan(request.tokens, request.state,
                                                     request.finish, request.borrow,
                                                     rx.FULL_BITS)
        kept = [(after, prune_crossing(child, lexer.next_ok(after)))
                for after, child in unpruned]
        crossing = [(after, child) for after, child in kept if child is not None]
        # The inside part is the unpruned scan's, counted in that entry's cost.
        return Scan(inside_part, crossing, part_is_own=False)
