"""Typed views of a schema position's keywords, family by family.

A family module reads a position's keywords through its view, not through the raw
dict: the values are checked where the view is made (the messages and JSON pointers
of :func:`~automask.schema.keywords.check_values`), and the requirements of a schema
the compiler wrote (its :class:`~automask.schema.shapes.Shape`) are fields like the
keywords'. Views are made when a family first reads a position, so that errors come
in the order the family meets the positions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from automask.errors import GrammarError
from automask.schema.shapes import KeyOutside, default_additional, keyword_names, shape_of
from automask.schema.subschema import (
    ANNOTATIONS,
    Subschema,
    count,
    is_number,
    json_key,
    pattern_properties,
    pointer,
    prefix_items,
    prefix_keyword,
    rest_items,
    type_set,
)

Limit = tuple[Decimal, bool]  # (value, strict)


def decimal_of(v: int | float) -> Decimal:
    """A JSON number as an exact decimal (floats through ``repr``)."""
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)


@dataclass(frozen=True)
class StringView:
    """The string keywords of one position."""

    lengths: tuple[int, int | None] | None  # (minLength, maxLength); None: neither given
    pattern: str | None
    has_format: bool
    format: Any  # the ``format`` value (any JSON: an unknown one is reported)
    not_string: Mapping[str, Any] | None  # string keywords that must not all hold
    excluded: tuple[str, ...] | None  # strings a ``not: {enum/const}`` excludes


V = TypeVar("V")


_MISSING: Any = object()


def kept(m: Subschema, family: str, make: Callable[..., V], *args: Any) -> V:
    """The view of ``family`` kept with ``m``, made by ``make(m, *args)`` on first use
    (not kept when ``make`` raises: some callers read on past a malformed branch)."""
    view = m.views.get(family, _MISSING)
    if view is _MISSING:
        view = m.views[family] = make(m, *args)
    return view


def string_view(m: Subschema) -> StringView:
    """``m``'s string view (made on first use, then kept with ``m``)."""
    return kept(m, "string", _string_view)


def _string_view(m: Subschema) -> StringView:
    s = m.schema
    lo, hi = s.get("minLength"), s.get("maxLength")
    lengths = None
    if lo is not None or hi is not None:
        lengths = (count(lo, m, "minLength") if lo is not None else 0,
                   count(hi, m, "maxLength") if hi is not None else None)
    pattern = None
    if "pattern" in s:
        if not isinstance(s["pattern"], str):
            raise GrammarError("pattern must be a string", pointer(m, "pattern"))
        pattern = s["pattern"]
    not_string = shape_of(s).not_string
    n = s.get("not")
    gone = None
    if isinstance(n, dict) and keyword_names(n) - ANNOTATIONS <= {"enum", "const"}:
        gone = tuple(v for v in excluded(n) if isinstance(v, str))
    return StringView(lengths, pattern, "format" in s, s.get("format"),
                      None if not_string is None else not_string.keywords, gone)


@dataclass(frozen=True)
class NumberView:
    """The number keywords of one position (draft-04 boolean exclusives read)."""

    lower: tuple[Limit, ...]  # each bound holds: the tightest one counts
    upper: tuple[Limit, ...]
    multiple_of: Decimal | None  # > 0
    not_multiple_of: int | float | None  # a written schema's: not a multiple of it
    integer: bool  # ``type`` is exactly ``"integer"``


NUMBER_VALUES = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def number_view(m: Subschema) -> NumberView:
    """``m``'s number view (made on first use, then kept with ``m``)."""
    return kept(m, "number", _number_view)


def _number_view(m: Subschema) -> NumberView:
    s = m.schema
    for kw in NUMBER_VALUES:
        v = s.get(kw)
        if v is None or isinstance(v, bool):
            continue
        if not isinstance(v, (int, float)):
            raise GrammarError(f"{kw} must be a number", pointer(m, kw))
    lower = _limits(s, "minimum", "exclusiveMinimum")
    upper = _limits(s, "maximum", "exclusiveMaximum")
    multiple_of = None
    if is_number(s.get("multipleOf")):
        multiple_of = decimal_of(s["multipleOf"])
        if multiple_of <= 0:
            raise GrammarError("multipleOf must be > 0", pointer(m, "multipleOf"))
    not_multiple_of = shape_of(s).not_multiple_of
    return NumberView(lower, upper, multiple_of,
                      None if not_multiple_of is None else not_multiple_of.divisor,
                      s.get("type") == "integer")


def _limits(s: dict, inclusive: str, exclusive: str) -> tuple[Limit, ...]:
    if s.get(exclusive) is True and inclusive in s:  # draft-04
        return ((decimal_of(s[inclusive]), True),)
    out = [(decimal_of(s[inclusive]), False)] if is_number(s.get(inclusive)) else []
    if is_number(s.get(exclusive)):
        out.append((decimal_of(s[exclusive]), True))
    return tuple(out)


@dataclass(frozen=True)
class ObjectView:
    """The object keywords of one position."""

    properties: Mapping[str, Any]
    required: list[str]
    pattern_properties: Mapping[str, Any]
    additional: Any  # additionalProperties, or what its absence means (see default_additional)
    has_property_names: bool
    property_names: Any
    min_properties: int | None
    max_properties: int | None
    key_outside: KeyOutside | None  # a written schema's: some key outside these


def object_view(m: Subschema, strict: bool) -> ObjectView:
    """``m``'s object view (made on first use, then kept with ``m``: one compile has one
    ``strict``)."""
    return kept(m, "object", _object_view, strict)


def _object_view(m: Subschema, strict: bool) -> ObjectView:
    s = m.schema
    props = s.get("properties", {})
    if not isinstance(props, dict):
        raise GrammarError("properties must be an object", pointer(m, "properties"))
    req = s.get("required", [])
    if not isinstance(req, list):
        raise GrammarError("required must be an array", pointer(m, "required"))
    least = count(s["minProperties"], m, "minProperties") if "minProperties" in s else None
    most = count(s["maxProperties"], m, "maxProperties") if "maxProperties" in s else None
    return ObjectView(props, req, pattern_properties(m),
                      s.get("additionalProperties", default_additional(s, strict)),
                      "propertyNames" in s, s.get("propertyNames"), least, most,
                      shape_of(s).key_outside)


@dataclass(frozen=True)
class ArrayView:
    """The array keywords of one position (the draft-07 array form of ``items`` read)."""

    min_items: int | None
    max_items: int | None
    prefix: list  # the schemas of the first items
    prefix_keyword: str  # where they are: prefixItems, or items (draft-07)
    rest: Any  # the schema of the items past the prefix (None: unconstrained)
    rest_keyword: str  # where it is: items, or additionalItems (draft-07)
    has_contains: bool
    contains: Any
    min_contains: int  # 1 when absent
    max_contains: int | None
    unique: bool  # uniqueItems: true


def array_view(m: Subschema) -> ArrayView:
    """``m``'s array view (made on first use, then kept with ``m``)."""
    return kept(m, "array", _array_view)


def _array_view(m: Subschema) -> ArrayView:
    s = m.schema
    least = count(s["minItems"], m, "minItems") if "minItems" in s else None
    most = count(s["maxItems"], m, "maxItems") if "maxItems" in s else None
    rest, rest_kw = rest_items(s)
    has_contains = "contains" in s
    lo, hi = 1, None
    if has_contains:
        lo = count(s.get("minContains", 1), m, "minContains")
        if "maxContains" in s:
            hi = count(s["maxContains"], m, "maxContains")
    return ArrayView(least, most, prefix_items(s), prefix_keyword(s), rest, rest_kw,
                     has_contains, s.get("contains"), lo, hi, s.get("uniqueItems") is True)


def declared_types(m: Subschema) -> frozenset[str] | None:
    """The types ``m``'s ``type`` allows (``number`` admits integers); None: no ``type``
    (made on first use, then kept with ``m``)."""
    return kept(m, "types", _declared_types)


def _declared_types(m: Subschema) -> frozenset[str] | None:
    t = m.schema.get("type")
    if t is None:
        return None
    ts = type_set(t)
    if ts is None:
        raise GrammarError(f"invalid type {t!r}", pointer(m, "type"))
    return frozenset(ts)


def value_lists(m: Subschema) -> tuple[list, ...]:
    """The value lists ``m`` limits its values to: ``[const]`` and the ``enum`` (both hold
    when both are given; made on first use, then kept with ``m``)."""
    return kept(m, "values", _value_lists)


def _value_lists(m: Subschema) -> tuple[list, ...]:
    s = m.schema
    if "enum" in s and not isinstance(s["enum"], list):
        raise GrammarError("enum must be an array", pointer(m, "enum"))
    return tuple(cand for cand in ([s["const"]] if "const" in s else None,
                                   list(s["enum"]) if "enum" in s else None)
                 if cand is not None)



@dataclass(frozen=True)
class CombinatorView:
    """The in-place combinators of one position (their arrays checked where distributed)."""

    any_of: Any  # the anyOf array, or None
    one_of: Any
    has_not: bool
    not_schema: Any
    not_simple: bool  # the ``not`` is enforced in place (see simple_not)
    not_excludes: tuple  # the values a ``not: {enum/const}`` excludes (see excluded)
    not_excluded_keys: frozenset  # their json_key()s

    def branches(self, kw: str) -> Any:
        return self.any_of if kw == "anyOf" else self.one_of


def combinator_view(m: Subschema) -> CombinatorView:
    """``m``'s combinators view (made on first use, then kept with ``m``). Read inline,
    not through :func:`kept`: every conjunction asks it of every member (millions of
    calls on a large schema)."""
    view = m.views.get("combinators")
    if view is None:
        view = m.views["combinators"] = _combinator_view(m)
    return view


def _combinator_view(m: Subschema) -> CombinatorView:
    s = m.schema
    n = s.get("not")
    gone = tuple(excluded(n)) if isinstance(n, dict) else ()
    return CombinatorView(s.get("anyOf"), s.get("oneOf"), "not" in s, n, simple_not(n), gone,
                          frozenset(json_key(v) for v in gone))


def excluded(n: dict) -> list:
    """The values a ``not: {enum/const}`` excludes."""
    values = list(n.get("enum") or []) if "enum" in n else None
    if "const" in n:  # with both, only values in both are excluded
        values = [n["const"]] if values is None else [
            v for v in values if json_key(v) == json_key(n["const"])]
    return values or []


def simple_not(n: Any) -> bool:
    """Whether a ``not: n`` is enforced in place, where the conjunction is typed (types,
    scalar values, booleans), rather than distributed as a complement."""
    if isinstance(n, bool):
        return True
    if not isinstance(n, dict):
        return False
    kws = keyword_names(n) - ANNOTATIONS
    if kws <= {"type"}:
        return True
    return kws <= {"enum", "const"} and not any(
        isinstance(v, (dict, list)) for v in excluded(n))
