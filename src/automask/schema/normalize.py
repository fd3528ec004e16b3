"""Normalization: the user's schema objects read into typed :class:`~automask.schema.shapes.Shape`s.

The compile normalizes, then lowers. The whole document is checked first
(:func:`~automask.schema.keywords.check_document`: every keyword value at every position,
reached or not); then each schema object a conjunction meets is read, once, into its
shape (:func:`shape`), and from there on the lowering reads shapes only: the families'
parts, the combinators, the conditionals and the references. The shapes the compiler
writes itself (complements, rewrites) are built typed and never pass through here.

Subschemas are normalized when a conjunction first meets their position, not up front:
a document's definitions are often a library of which a schema uses a few (a
Kubernetes schema holds hundreds), and what the lowering never reaches costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from automask.errors import GrammarError
from automask.schema.shapes import (
    NO_ARRAY,
    NO_NUMBER,
    NO_STRING,
    ArrayPart,
    NumberPart,
    ObjectPart,
    Shape,
    StringPart,
    excluded_strings,
    not_parts,
)
from automask.schema.subschema import (
    TYPES,
    Subschema,
    count,
    is_number,
    pointer,
    type_set,
)


def decimal_of(v: int | float) -> Decimal:
    """A JSON number as an exact decimal (floats through ``repr``)."""
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)


def shape(m: Subschema) -> Shape:
    """The shape of ``m``: its own, when the compiler wrote it; else its schema object
    normalized on first use and kept with ``m`` (read inline: every conjunction asks it
    of every member, millions of times on a large schema)."""
    found = m.memo.get("shape")
    if found is None:
        s = m.schema
        found = m.memo["shape"] = s if type(s) is Shape else normalize(m)
    return found


STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format", "not"})
NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                             "multipleOf"})
OBJECT_KEYWORDS = frozenset({"properties", "required", "patternProperties",
                             "additionalProperties", "propertyNames", "minProperties",
                             "maxProperties"})
ARRAY_KEYWORDS = frozenset({"minItems", "maxItems", "prefixItems", "items", "additionalItems",
                            "contains", "uniqueItems"})
DOCUMENT_OBJECT = ObjectPart(written=False)


def normalize(m: Subschema) -> Shape:
    """The shape of the document's schema object at ``m`` (its values are checked by
    :func:`~automask.schema.keywords.check_document`; ``type`` here)."""
    s = m.schema
    if not isinstance(s, dict):
        raise GrammarError("a schema is an object or a boolean", pointer(m))
    keys = s.keys()
    n = s.get("not")
    return Shape(
        frozenset(keys), s.get("type"), _declared_types(m), _value_lists(s),
        _string(m, n) if not keys.isdisjoint(STRING_KEYWORDS) else NO_STRING,
        _number(s) if not keys.isdisjoint(NUMBER_KEYWORDS) or s.get("type") == "integer"
        else NO_NUMBER,
        _object(m) if not keys.isdisjoint(OBJECT_KEYWORDS) else DOCUMENT_OBJECT,
        _array(m) if not keys.isdisjoint(ARRAY_KEYWORDS) else NO_ARRAY,
        s.get("anyOf"), s.get("oneOf"), s.get("allOf"), n, *not_parts(n, "not" in s),
        s.get("$ref"),
        s.get("if"), s.get("then"), s.get("else"), s.get("dependentRequired"),
        s.get("dependentSchemas"), s.get("dependencies"), s.get("unevaluatedProperties"),
        s.get("unevaluatedItems"))


def _string(m: Subschema, n: Any) -> StringPart:
    s = m.schema
    lo, hi = s.get("minLength"), s.get("maxLength")
    pattern = None
    if "pattern" in s:
        if not isinstance(s["pattern"], str):
            raise GrammarError("pattern must be a string", pointer(m, "pattern"))
        pattern = s["pattern"]
    return StringPart(None if lo is None else count(lo, m, "minLength"),
                      None if hi is None else count(hi, m, "maxLength"),
                      pattern, "format" in s, s.get("format"), None, excluded_strings(n))


def _number(s: dict) -> NumberPart:
    multiple_of = decimal_of(s["multipleOf"]) if is_number(s.get("multipleOf")) else None
    return NumberPart(_limits(s, "minimum", "exclusiveMinimum"),
                      _limits(s, "maximum", "exclusiveMaximum"), multiple_of, None,
                      s.get("type") == "integer")


def _limits(s: dict, inclusive: str, exclusive: str) -> tuple[tuple[Decimal, bool], ...]:
    if s.get(exclusive) is True and inclusive in s:  # draft-04
        return ((decimal_of(s[inclusive]), True),)
    out = [(decimal_of(s[inclusive]), False)] if is_number(s.get(inclusive)) else []
    if is_number(s.get(exclusive)):
        out.append((decimal_of(s[exclusive]), True))
    return tuple(out)


def _object(m: Subschema) -> ObjectPart:
    s = m.schema
    least = count(s["minProperties"], m, "minProperties") if "minProperties" in s else None
    most = count(s["maxProperties"], m, "maxProperties") if "maxProperties" in s else None
    return ObjectPart(s.get("properties", {}), s.get("required", []), _pattern_properties(m),
                      "additionalProperties" in s, s.get("additionalProperties"),
                      "propertyNames" in s, s.get("propertyNames"), least, most, None,
                      written=False)


def _array(m: Subschema) -> ArrayPart:
    s = m.schema
    least = count(s["minItems"], m, "minItems") if "minItems" in s else None
    most = count(s["maxItems"], m, "maxItems") if "maxItems" in s else None
    rest, rest_kw = _rest_items(s)
    has_contains = "contains" in s
    lo, hi = 1, None
    if has_contains:
        lo = count(s.get("minContains", 1), m, "minContains")
        if "maxContains" in s:
            hi = count(s["maxContains"], m, "maxContains")
    return ArrayPart(least, most, _prefix_items(s), _prefix_keyword(s), rest_kw in s, rest,
                     rest_kw, has_contains, s.get("contains"), lo, hi,
                     s.get("uniqueItems") is True)


def _declared_types(m: Subschema) -> frozenset[str] | None:
    t = m.schema.get("type")
    if t is None:
        return None
    ts = type_set(t)
    if ts is None:
        raise GrammarError(f"invalid type {t!r}", pointer(m, "type"))
    return frozenset(ts)


def _value_lists(s: dict) -> tuple[list, ...]:
    """``[const]`` and the ``enum`` (both hold when both are given)."""
    if "enum" not in s and "const" not in s:
        return ()
    return tuple(cand for cand in ([s["const"]] if "const" in s else None,
                                   list(s["enum"]) if "enum" in s else None)
                 if cand is not None)


def types_of(members: Iterable[Subschema], types: set | None = None) -> set:
    """The JSON types every member's ``type`` allows (of ``types``: all by default)."""
    types = set(TYPES) if types is None else types
    for m in members:
        ts = shape(m).types
        if ts is not None:
            types &= ts
    return types


def negated_types_of(n: Any) -> frozenset[str]:
    """The types a ``not: n`` with only ``type`` excludes."""
    if type(n) is Shape:
        return n.types or frozenset()
    return frozenset(type_set(n["type"]) or ())


def _prefix_items(s: dict) -> list:
    if isinstance(s.get("prefixItems"), list):
        return s["prefixItems"]
    if isinstance(s.get("items"), list):  # draft-07 array form
        return s["items"]
    return []


def _prefix_keyword(s: dict) -> str:
    return "prefixItems" if isinstance(s.get("prefixItems"), list) else "items"


def _rest_items(s: dict):
    """The schema of items past the prefix (None: unconstrained) and its keyword."""
    if isinstance(s.get("items"), list):
        return s.get("additionalItems"), "additionalItems"
    if "items" in s:
        return s["items"], "items"
    return None, "items"


def _pattern_properties(m: Subschema) -> dict:
    """``m``'s ``patternProperties`` (an empty dict when absent)."""
    pp = m.schema.get("patternProperties") or {}
    if not isinstance(pp, dict):
        raise GrammarError("patternProperties must be an object",
                           pointer(m, "patternProperties"))
    return pp

