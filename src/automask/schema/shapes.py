"""Shapes: the typed form of a schema object, which the lowering reads.

A :class:`Shape` holds what one schema object says, read family by family into typed
parts (:class:`StringPart`, :class:`NumberPart`, :class:`ObjectPart`,
:class:`ArrayPart`), with its combinators, conditionals and references beside them.
Subschemas inside a shape (property values, items, branches, the operand of ``not``)
stay what they are where they come from: a schema object of the user's document (a
dict or a boolean, normalized when a conjunction meets its position) or a shape the
compiler built.

Two sources make shapes:

* :func:`~automask.schema.normalize.normalize` reads the user's schema objects (their
  values are checked there);
* the compiler builds its own with :func:`written`: complements
  (:mod:`~automask.schema.complement`), the rewrites of the conditional keywords
  (:mod:`~automask.schema.conditionals`), the members that enforce ``unevaluated*``
  (:mod:`~automask.schema.annotations`), negated subschemas, and the type split of
  ``oneOf``. These say what no JSON Schema keyword does, as typed fields: a subschema
  embedded at its own position (``embedded``), string keywords that must *not* all
  hold (:attr:`StringPart.not_string`), a number the value is not a multiple of
  (:attr:`NumberPart.not_multiple_of`), and keys outside given names, patterns and
  admitted names (:class:`KeyOutside`). A written shape means exactly what it says: an
  absent ``additionalProperties`` is open there even under ``strict``.

:attr:`Shape.keywords` names what a shape holds (a document object's keys; a written
shape's keywords and requirements), for the checks that ask which keywords a schema has
(is it only annotations, only string keywords, only a reference).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from automask.schema.subschema import ANNOTATIONS, Subschema, escape, json_key, type_set

Limit = tuple[Decimal, bool]  # (value, strict)

_EMPTY_MAP: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class StringPart:
    """The string keywords of a schema object."""

    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    has_format: bool = False
    format: Any = None  # the ``format`` value (any JSON: an unknown one is reported)
    not_string: Shape | None = None  # (written) a shape of string keywords that must not all hold
    excluded: tuple[str, ...] | None = None  # strings a ``not: {enum/const}`` excludes

    @property
    def lengths(self) -> tuple[int, int | None] | None:
        """(minLength, maxLength); None: neither given."""
        if self.min_length is None and self.max_length is None:
            return None
        return (self.min_length or 0, self.max_length)

    def keywords(self) -> set[str]:
        return {kw for kw, given in (
            ("minLength", self.min_length is not None), ("maxLength", self.max_length is not None),
            ("pattern", self.pattern is not None), ("format", self.has_format),
            ("not_string", self.not_string is not None)) if given}


@dataclass(frozen=True, slots=True)
class NumberPart:
    """The number keywords of a schema object (draft-04 boolean exclusives read)."""

    lower: tuple[Limit, ...] = ()  # each bound holds: the tightest one counts
    upper: tuple[Limit, ...] = ()
    multiple_of: Decimal | None = None  # > 0
    not_multiple_of: Decimal | None = None  # (written) not a multiple of it
    integer: bool = False  # ``type`` is exactly ``"integer"``

    def keywords(self) -> set[str]:
        out = {"exclusiveMinimum" if strict else "minimum" for _, strict in self.lower}
        out |= {"exclusiveMaximum" if strict else "maximum" for _, strict in self.upper}
        if self.multiple_of is not None:
            out.add("multipleOf")
        if self.not_multiple_of is not None:
            out.add("not_multiple_of")
        return out


@dataclass(frozen=True, slots=True)
class KeyOutside:
    """Some key lies outside ``names``, the (unanchored) ``patterns``, and the names the
    shape ``admitted`` admits (when given)."""

    names: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    admitted: Shape | None = None


@dataclass(frozen=True, slots=True)
class ObjectPart:
    """The object keywords of a schema object."""

    properties: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_MAP)
    required: tuple[str, ...] | list[str] = ()
    pattern_properties: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_MAP)
    has_additional: bool = False
    additional: Any = None  # additionalProperties, when given
    has_property_names: bool = False
    property_names: Any = None
    min_properties: int | None = None
    max_properties: int | None = None
    key_outside: KeyOutside | None = None  # (written) some key outside these
    written: bool = True  # an absent additionalProperties is open whatever ``strict`` says

    def extra(self, strict: bool) -> Any:
        """What a key no property or pattern names must hold: ``additionalProperties``,
        or what its absence means (false under ``strict`` in the user's schemas)."""
        if self.has_additional:
            return self.additional
        return self.written or not strict

    def keywords(self) -> set[str]:
        return {kw for kw, given in (
            ("properties", bool(self.properties)), ("required", bool(self.required)),
            ("patternProperties", bool(self.pattern_properties)),
            ("additionalProperties", self.has_additional),
            ("propertyNames", self.has_property_names),
            ("minProperties", self.min_properties is not None),
            ("maxProperties", self.max_properties is not None),
            ("key_outside", self.key_outside is not None)) if given}


@dataclass(frozen=True, slots=True)
class ArrayPart:
    """The array keywords of a schema object (the draft-07 array form of ``items`` read)."""

    min_items: int | None = None
    max_items: int | None = None
    prefix: tuple | list = ()  # the schemas of the first items
    prefix_keyword: str = "prefixItems"  # where they are: prefixItems, or items (draft-07)
    has_rest: bool = False
    rest: Any = None  # the schema of the items past the prefix (None: unconstrained)
    rest_keyword: str = "items"  # where it is: items, or additionalItems (draft-07)
    has_contains: bool = False
    contains: Any = None
    min_contains: int = 1
    max_contains: int | None = None
    unique: bool = False  # uniqueItems: true

    def keywords(self) -> set[str]:
        out = {kw for kw, given in (
            ("minItems", self.min_items is not None), ("maxItems", self.max_items is not None),
            (self.prefix_keyword, bool(self.prefix)), (self.rest_keyword, self.has_rest),
            ("contains", self.has_contains), ("uniqueItems", self.unique)) if given}
        if self.has_contains and self.min_contains != 1:
            out.add("minContains")
        if self.has_contains and self.max_contains is not None:
            out.add("maxContains")
        return out


NO_STRING = StringPart()
NO_NUMBER = NumberPart()
NO_ARRAY = ArrayPart()
NO_OBJECT = ObjectPart()


@dataclass(frozen=True, eq=False, slots=True)
class Shape:
    """One schema object, typed (see the module doc). A field of a keyword that is
    absent holds None; whether a keyword is there at all is in :attr:`keywords`."""

    keywords: frozenset[str] = frozenset()
    type: Any = None  # the ``type`` value as given
    types: frozenset[str] | None = None  # the types it allows (``number`` admits integers)
    values: tuple[list, ...] = ()  # ``[const]`` and the ``enum``: a value is in each
    string: StringPart = NO_STRING
    number: NumberPart = NO_NUMBER
    object: ObjectPart = NO_OBJECT
    array: ArrayPart = NO_ARRAY
    any_of: Any = None  # the ``anyOf`` array
    one_of: Any = None
    all_of: Any = None
    not_: Any = None  # the operand of ``not``
    not_simple: bool = False  # the ``not`` is enforced in place (see simple_not)
    not_excludes: tuple = ()  # the values a ``not: {enum/const}`` excludes (see excluded)
    not_excluded_keys: frozenset = frozenset()  # their json_key()s
    ref: Any = None  # ``$ref``
    if_: Any = None
    then: Any = None
    else_: Any = None
    dependent_required: Any = None
    dependent_schemas: Any = None
    dependencies: Any = None
    unevaluated_properties: Any = None
    unevaluated_items: Any = None
    embedded: Subschema | None = None  # (written) a subschema holding at its own position

    def branches(self, kw: str) -> Any:
        """The ``anyOf`` or ``oneOf`` array."""
        return self.any_of if kw == "anyOf" else self.one_of

    def child(self, kw: str, key: Any = None) -> Any:
        """The subschema under keyword ``kw`` (and ``key``: a name or an index)."""
        return _CHILDREN[kw](self) if key is None else _CHILDREN[kw](self)[key]


_CHILDREN = {
    "not": lambda s: s.not_, "anyOf": lambda s: s.any_of, "oneOf": lambda s: s.one_of,
    "allOf": lambda s: s.all_of, "properties": lambda s: s.object.properties,
    "propertyNames": lambda s: s.object.property_names,
    "additionalProperties": lambda s: s.object.additional,
    "contains": lambda s: s.array.contains,
    "prefixItems": lambda s: s.array.prefix,
    "items": lambda s: s.array.prefix if s.array.prefix_keyword == "items" else s.array.rest,
    "additionalItems": lambda s: s.array.rest,
}


Schema = dict | bool | Shape  # what a subschema may be: the user's, or the compiler's


def keywords_of(schema: Any) -> frozenset[str] | set[str]:
    """What a schema object holds: a document object's keys, a shape's keywords."""
    return schema.keywords if type(schema) is Shape else set(schema)


def trivial(schema: Any) -> bool:
    """Whether a subschema accepts everything (``true`` or only annotations)."""
    return schema is True or (isinstance(schema, (dict, Shape)) and
                               not keywords_of(schema) - ANNOTATIONS)


def written(*, type: Any = None, values: tuple[list, ...] = (), enum: bool = False,
            string: StringPart = NO_STRING, number: NumberPart = NO_NUMBER,
            object: ObjectPart = NO_OBJECT, array: ArrayPart = NO_ARRAY,
            any_of: tuple | None = None, one_of: tuple | None = None,
            all_of: tuple | None = None, not_: Any = None, has_not: bool = False,
            embedded: Subschema | None = None) -> Shape:
    """A shape the compiler writes (``values`` are an ``enum``'s when ``enum``, else a
    ``const``'s; ``has_not``: ``not_`` is given, even as ``None``)."""
    keywords = string.keywords() | number.keywords() | object.keywords() | array.keywords()
    for kw, given in (("type", type is not None), ("enum" if enum else "const", bool(values)),
                      ("anyOf", any_of is not None), ("oneOf", one_of is not None),
                      ("allOf", all_of is not None), ("not", has_not or not_ is not None),
                      ("embedded", embedded is not None)):
        if given:
            keywords.add(kw)
    if "not" in keywords and string.excluded is None:
        gone = excluded_strings(not_)
        if gone:
            string = replace(string, excluded=gone)
    if type == "integer":
        number = replace(number, integer=True)
    types = None if type is None else frozenset(type_set(type) or ())
    return Shape(frozenset(keywords), type, types, values, string, number, object, array,
                 any_of, one_of, all_of, not_, *not_parts(not_, "not" in keywords),
                 embedded=embedded)


def embed(m: Subschema) -> Shape:
    """A shape that holds where ``m`` holds: ``m`` embedded at its own position."""
    return written(embedded=m)


def embed_at(m: Subschema, value: Any, *path: str | int) -> Shape:
    """``value``, the subschema of ``m`` at ``path``, embedded at its own position."""
    return embed(Subschema(m.uri + "".join(f"/{escape(str(p))}" for p in path), value, m.base))


def negated(m: Subschema) -> Subschema:
    """A subschema that holds where ``m`` fails."""
    return Subschema(m.uri + "/~!", written(not_=embed(m)), m.base)


def excluded(n: Any) -> list:
    """The values a ``not: {enum/const}`` (a document object or a shape) excludes."""
    if type(n) is Shape:
        has_const = "const" in n.keywords
        const = n.values[0][0] if has_const else None
        enum = n.values[-1] if "enum" in n.keywords else None
    else:
        has_const = "const" in n
        const = n.get("const")
        enum = n.get("enum") if "enum" in n else None
    values = list(enum or []) if enum is not None else None
    if has_const:  # with both, only values in both are excluded
        values = [const] if values is None else [
            v for v in values if json_key(v) == json_key(const)]
    return values or []


def not_parts(n: Any, given: bool) -> tuple[bool, tuple, frozenset]:
    """What a shape keeps of its ``not: n`` (``given``: there is one): whether it is
    enforced in place, the values it excludes, and their json_key()s."""
    if not given:
        return False, (), frozenset()
    gone = tuple(excluded(n)) if isinstance(n, (dict, Shape)) else ()
    return simple_not(n), gone, frozenset(json_key(v) for v in gone)


def excluded_strings(n: Any) -> tuple[str, ...] | None:
    """The strings a ``not: n`` of only ``enum``/``const`` excludes (None: another ``not``)."""
    if not isinstance(n, (dict, Shape)) or set(keywords_of(n)) - ANNOTATIONS - {"enum", "const"}:
        return None
    return tuple(v for v in excluded(n) if isinstance(v, str))


def simple_not(n: Any) -> bool:
    """Whether a ``not: n`` is enforced in place, where the conjunction is typed (types,
    scalar values, booleans), rather than distributed as a complement."""
    if isinstance(n, bool):
        return True
    if not isinstance(n, (dict, Shape)):
        return False
    kws = set(keywords_of(n)) - ANNOTATIONS
    if kws <= {"type"}:
        return True
    return kws <= {"enum", "const"} and not any(
        isinstance(v, (dict, list)) for v in excluded(n))
