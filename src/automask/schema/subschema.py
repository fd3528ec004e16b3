"""Schema positions and the small helpers every part of the schema compiler shares.

A :class:`Subschema` is one schema object at one position (its URI: base URI plus
JSON pointer, which identifies it in the compiler's memo) with the base URI its
``$ref``s resolve against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from automask.errors import GrammarError

ANNOTATIONS = frozenset({
    "$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "$vocabulary",
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    "contentEncoding", "contentMediaType", "contentSchema", "$dynamicAnchor",
})


@dataclass(frozen=True)
class Subschema:
    """One schema object of a conjunction, with where it is and how its refs resolve."""

    uri: str  # base URI + "#" + JSON pointer: identifies the position
    schema: Any
    base: str = field(compare=False)
    # What has been read of it, made once: its shape (normalize.py) and, once the
    # conjunction builder has interned it, its expansion and checks.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def pointer(m: Subschema, kw: str | None = None) -> str:
    frag = m.uri.rsplit("#", 1)[-1]
    ptr = "#" + frag
    return ptr if kw is None else f"{ptr}/{kw}"


def count(value, m: Subschema, kw: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
            isinstance(value, float) and not value.is_integer()):
        raise GrammarError(f"{kw} must be a non-negative integer", pointer(m, kw))
    return int(value)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def json_key(v):
    """JSON equality as a hashable key: equal keys for exactly the equal JSON values
    (numbers by value, 1 and 1.0 alike; booleans apart from numbers; objects whatever
    their key order), so enums are deduplicated and met in linear time."""
    if isinstance(v, bool) or v is None:
        return ("literal", v)
    if isinstance(v, (int, float)):
        return ("number", v)  # 1 and 1.0: equal, and equal hashes
    if isinstance(v, list):
        return ("array", tuple(json_key(x) for x in v))
    if isinstance(v, dict):
        return ("object", frozenset((k, json_key(x)) for k, x in v.items()))
    return (type(v).__name__, v)


TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")


def type_set(t) -> set | None:
    """The types a ``type`` value names (``number`` admits integers); None if malformed."""
    ts = {t} if isinstance(t, str) else set(t) if isinstance(t, list) and all(
        isinstance(x, str) for x in t) else None
    if ts is None or not ts <= set(TYPES):
        return None
    if "number" in ts:
        ts.add("integer")
    return ts
