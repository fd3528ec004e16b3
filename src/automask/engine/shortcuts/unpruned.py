"""``unpruned``: a FOLLOW-pruned root scan, filtered from the one unpruned walk.

A string body followed by ``,`` or ``}`` in one object and by ``}`` alone in
the next is one walk of the vocabulary, not two: each FOLLOW set's crossing
groups are pruned from the scan with every byte allowed to follow.
"""

from __future__ import annotations

from automask.engine.shortcuts.base import Computer, Scan, ScanRequest
from automask.engine.tokens import prune_groups
from automask.regex import nodes as rx


class Unpruned:
    """Pruned root scans, read off the unpruned one (whose inside part they share)."""

    name = "unpruned"

    def scan(self, computer: Computer, request: ScanRequest) -> Scan | None:
        if not request.root or request.follow == rx.FULL_BITS:
            return None
        inside_part, unpruned = computer.shared_scan(request.tokens, request.state,
                                                     request.finish, request.borrow,
                                                     rx.FULL_BITS)
        # The inside part is the unpruned scan's, counted in that entry's cost.
        return Scan(inside_part, prune_groups(unpruned, computer.states.lexer),
                    part_is_own=False)
