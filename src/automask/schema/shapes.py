"""The schemas the compiler writes itself, and what they say that no JSON Schema keyword does.

Complements (:mod:`~automask.schema.complement`), the rewrites of the conditional
keywords (:mod:`~automask.schema.conditionals`), the members that enforce
``unevaluated*`` (:mod:`~automask.schema.annotations`) and negated subschemas are
written as :class:`Written` schemas: a dict of JSON Schema keywords, compiled like any
other, plus a :class:`Shape` of typed requirements:

* ``embedded``: a :class:`~automask.schema.subschema.Subschema` embedded at its own
  position (its URI and base are kept, so its rules and memo keys are its own);
* ``not_string`` (:class:`NotString`): string keywords that must *not* all hold;
* ``not_multiple_of`` (:class:`NotMultipleOf`): a number the value is not a multiple of;
* ``key_outside`` (:class:`KeyOutside`): some key of the object lies outside these
  names, patterns and the names a subschema admits (the complements of
  ``additionalProperties: false`` and of ``propertyNames``);
* ``open``: an absent ``additionalProperties`` stays open under ``strict`` (a written
  schema must mean exactly what it says).

A plain dict (a schema of the user's document) has the empty shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from automask.schema.subschema import Subschema


@dataclass(frozen=True)
class NotString:
    """String keywords (``minLength``, ``maxLength``, ``pattern``) that must not all hold."""

    keywords: Mapping[str, Any]


@dataclass(frozen=True)
class NotMultipleOf:
    """The value is not a multiple of ``divisor``."""

    divisor: int | float


@dataclass(frozen=True)
class KeyOutside:
    """Some key lies outside ``names``, the (unanchored) ``patterns``, and the names the
    schema ``admitted`` admits (when given)."""

    names: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    admitted: Written | None = None


@dataclass(frozen=True)
class Shape:
    """What a written schema requires beyond its keywords (see the module doc)."""

    embedded: Subschema | None = None
    not_string: NotString | None = None
    not_multiple_of: NotMultipleOf | None = None
    key_outside: KeyOutside | None = None
    open: bool = False

    def requirements(self) -> frozenset[str]:
        """The names of the requirements it has (``open`` is none: it only reads
        ``additionalProperties``), for the checks that ask which keywords a schema has."""
        return frozenset(name for name, value in (
            ("embedded", self.embedded), ("not_string", self.not_string),
            ("not_multiple_of", self.not_multiple_of), ("key_outside", self.key_outside))
            if value is not None)


PLAIN = Shape()


class Written(dict):
    """A schema the compiler wrote: its JSON Schema keywords (the dict) and its
    :class:`Shape`."""

    __slots__ = ("shape",)

    def __init__(self, keywords: Mapping[str, Any] | None = None, /, shape: Shape = PLAIN):
        super().__init__(keywords or {})
        self.shape = shape


def shape_of(schema: Any) -> Shape:
    """The shape of a schema (the empty one unless the compiler wrote it)."""
    return schema.shape if isinstance(schema, Written) else PLAIN


def keyword_names(schema: dict) -> set[str]:
    """The keywords of a schema object, with the names of its shape's requirements."""
    shape = shape_of(schema)
    return set(schema) if shape is PLAIN else set(schema) | shape.requirements()


def embed(m: Subschema) -> Written:
    """A schema that holds where ``m`` holds: ``m`` embedded at its own position."""
    return Written(shape=Shape(embedded=m))


def with_keywords(schema: dict, keywords: Mapping[str, Any]) -> dict:
    """``keywords`` with the shape of ``schema`` (a plain dict for a plain schema)."""
    if isinstance(schema, Written):
        return Written(keywords, shape=schema.shape)
    return dict(keywords)


def unembedded(schema: dict, keywords: Mapping[str, Any]) -> dict:
    """``keywords`` with the shape of ``schema`` less its embedded subschema (which
    expansion has followed)."""
    if isinstance(schema, Written):
        shape = schema.shape
        if shape.embedded is not None:
            shape = Shape(None, shape.not_string, shape.not_multiple_of, shape.key_outside,
                          shape.open)
        return Written(keywords, shape=shape)
    return dict(keywords)


def opened(x: Any) -> Any:
    """A schema the compiler wrote, marked open at every level (``strict`` leaves it)."""
    if not isinstance(x, dict):
        return x
    shape = shape_of(x)
    out = Written(x, shape=shape if shape.open else Shape(
        shape.embedded, shape.not_string, shape.not_multiple_of, shape.key_outside, True))
    for k, v in x.items():
        if k in ("not", "items", "contains"):
            out[k] = opened(v)
        elif k in ("allOf", "anyOf", "oneOf", "prefixItems"):
            out[k] = [opened(e) for e in v]
        elif k == "properties":
            out[k] = {name: opened(e) for name, e in v.items()}
    return out


def negated(m: Subschema) -> Subschema:
    """A subschema that holds where ``m`` fails."""
    return Subschema(m.uri + "/~!", Written({"not": embed(m)}, shape=Shape(open=True)), m.base)


def default_additional(s: dict, strict: bool) -> bool:
    """An absent ``additionalProperties``: false under ``strict``, except in the schemas
    the compiler writes itself (complements, rewrites), which must stay exact."""
    return not strict or shape_of(s).open
