"""``enum`` and ``const``: the values a conjunction enumerates (each member's lists are
its :func:`~automask.schema.views.value_lists`; what a ``not`` excludes is in its
:class:`~automask.schema.views.CombinatorView`).
"""

from __future__ import annotations

from automask.schema.subschema import Subschema, json_key
from automask.schema.views import value_lists


def enumerated(members: list[Subschema]) -> list | None:
    """The values every member's ``const`` and ``enum`` allow, in the first list's order
    without repeats (JSON equality); None when no member enumerates."""
    values = None
    for m in members:
        for cand in value_lists(m):  # const and enum side by side both hold
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
