"""``enum`` and ``const``: the values a conjunction enumerates, and the values a ``not``
excludes.
"""

from __future__ import annotations

from automask.errors import GrammarError
from automask.schema.shapes import keyword_names
from automask.schema.subschema import ANNOTATIONS, Subschema, json_key, pointer


def value_lists(m: Subschema) -> tuple[list, ...]:
    """The value lists ``m`` limits its values to: ``[const]`` and the ``enum`` (both hold
    when both are given)."""
    s = m.schema
    if "enum" in s and not isinstance(s["enum"], list):
        raise GrammarError("enum must be an array", pointer(m, "enum"))
    return tuple(cand for cand in ([s["const"]] if "const" in s else None,
                                   list(s["enum"]) if "enum" in s else None)
                 if cand is not None)


def enumerated(members: list[Subschema]) -> list | None:
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


def excluded(n: dict) -> list:
    """The values a ``not: {enum/const}`` excludes."""
    values = list(n.get("enum") or []) if "enum" in n else None
    if "const" in n:  # with both, only values in both are excluded
        values = [n["const"]] if values is None else [
            v for v in values if json_key(v) == json_key(n["const"])]
    return values or []



def simple_not(n) -> bool:
    """Whether typed() enforces ``not: n`` directly (types, scalar values, booleans)."""
    if isinstance(n, bool):
        return True
    if not isinstance(n, dict):
        return False
    kws = keyword_names(n) - ANNOTATIONS
    if kws <= {"type"}:
        return True
    return kws <= {"enum", "const"} and not any(
        isinstance(v, (dict, list)) for v in excluded(n))

