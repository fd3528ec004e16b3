"""``enum`` and ``const``: the values a conjunction enumerates (each member's lists are
its shape's :attr:`~automask.schema.shapes.Shape.values`; what a ``not`` excludes is in
its :attr:`~automask.schema.shapes.Shape.not_excludes`).
"""

from __future__ import annotations

from automask.schema.normalize import shape
from automask.schema.subschema import Subschema, json_key


def enumerated(members: list[Subschema]) -> list | None:
    """The values every member's ``const`` and ``enum`` allow, in the first list's order
    without repeats (JSON equality); None when no member enumerates."""
    values = None
    for m in members:
        for cand in shape(m).values:  # const and enum side by side both hold
            if values is None:
                values = cand
            else:
                keys = {json_key(c) for c in cand}
                values = [v for v in values if json_key(v) in keys]
    if values is None:
        return None
    unique: dict = {}
    for v in values:
        unique.setdefault(json_key(v), v)
    return list(unique.values())
