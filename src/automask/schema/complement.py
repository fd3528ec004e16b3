"""The complement of one schema object, as a union of shapes.

``not``, ``if`` (its failing side), exact ``oneOf`` and the rewrites of the
conditional keywords all need the JSON values that a schema object rejects.
A schema object is a conjunction of keywords, so its complement is the union
of the keywords' complements; each keyword only constrains values of its own
type, so the complement of a keyword lies inside that type (``not
{minLength: 3}`` is the strings shorter than 3, never a number). Keywords read
together (``minimum`` with a draft-04 ``exclusiveMinimum``, ``prefixItems``
with ``items``, ``contains`` with its counts, ``if`` with ``then``/``else``)
are complemented as groups.

The result is a list of *branches*, each a :class:`~automask.schema.shapes.Shape`
the compiler compiles like any other, read off the typed shape of the operand. Where no
JSON Schema keyword says what a branch requires, its shape says it in a typed field:
an embedded subschema at its own position, string keywords that must *not* all hold
(:attr:`~automask.schema.shapes.StringPart.not_string`), a number the value is not a
multiple of (:attr:`~automask.schema.shapes.NumberPart.not_multiple_of`), or names,
patterns and admitted names of which an object has some key outside
(:class:`~automask.schema.shapes.KeyOutside`: the complements of
``additionalProperties: false`` and of ``propertyNames``).
A keyword whose complement is not expressible raises :class:`Inexpressible`
with the keyword: a complement that admits more than it should accepts invalid
values. One admits less: ``NotMultipleOf`` leaves out texts with an exponent
(see :func:`automask.schema.numbers.non_multiple_node`), which is sound, since
complements are taken of schemas only, never of what the compiler made of one.

``$ref``/``allOf``/an embedded subschema are not complemented here: the compiler expands
them first and unions the complements of every member of the expansion.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import replace
from typing import Any

from automask.schema.lowering import Conjoin, Report
from automask.schema.normalize import shape
from automask.schema.shapes import (
    ArrayPart,
    KeyOutside,
    NumberPart,
    ObjectPart,
    Shape,
    StringPart,
    embed_at,
    trivial,
    written,
)
from automask.schema.subschema import Subschema

# Keywords that expansion follows (their complement is that of what they bring in).
# (An embedded subschema, a written shape's, is followed too: see ``without``.)
EXPANDED = ("$ref", "$dynamicRef", "allOf", "if", "then", "else", "dependentRequired",
            "dependentSchemas", "dependencies")

Sub = Callable[..., Shape]
"""``sub("properties", "a")``: the subschema at that path, embedded in place."""


#: The complement of an operand, by member of its expansion: each member's position and
#: its complement's branches (a position of None: the operand is ``false``, whose
#: complement is anything). The union of all the branches is the complement.
Negation = list[tuple[str | None, list[list[Subschema]]]]


def negation(conj: Conjoin, report: Report, operand: Subschema) -> Negation:
    """The complement of ``operand`` as a union of conjunctions (see complement.py), by
    member of its expansion: ``not (M and R)`` is ``not M or not R``, so where ``M``
    holds beside the ``not``, only ``not R`` is left (see :func:`branches_beside`)."""
    members = conj.expand([operand])
    if members is None:
        return [(None, [[]])]  # not false: anything
    out: Negation = []
    for x in members:
        conj.check_keywords(x)

        def sub(*path, x=x) -> Shape:
            node = x.schema
            for p in path:
                node = node.child(p) if type(node) is Shape else node[p]
            return embed_at(x, node, *path)

        schema = without(x.schema)
        while True:
            try:
                branches = complement(shape(Subschema(x.uri, schema, x.base)), sub)
                break
            except Inexpressible as e:
                # lenient: drop the keyword from the operand (a smaller complement)
                report.unsupported(f"'not' of {e.keyword}", x, e.keyword)
                schema = without(schema, e.keyword)
        out.append((x.uri, [[] if b is True else [Subschema(f"{x.uri}/~neg{k}", b, x.base)]
                            for k, b in enumerate(branches)]))
    return out


def branches_beside(parts: Negation, held: Container[str]) -> list[list[Subschema]]:
    """The branches of a complement (:func:`negation`) where the schema objects at the
    positions ``held`` hold: a held member of the operand's expansion adds none. (Each
    ``oneOf`` branch of ``{"allOf": [{"$ref": "#/$defs/base"}, …]}`` is conjoined with
    the negations of the others, which hold ``base`` too: its complement's branches,
    one per property of ``base``, multiplied the rules made per branch.)"""
    return [branch for at, branches in parts if at not in held for branch in branches]


def without(schema: Any, kw: str | None = None) -> Any:
    """``schema`` less ``kw`` and the keywords that expansion has followed (``$ref``,
    ``allOf``, an embedded subschema, and the conditionals it rewrote into members of
    their own): a document object stays one (its keywords are the user's), a shape
    stays a shape. The copy of a document object has no ``$id`` either: it stands at its
    object's position, whose base URI its member already has (kept, the ``$id`` would
    be applied a second time, and a relative one would move the base)."""
    if type(schema) is Shape:
        return _shape_without(schema, kw)
    return {k: v for k, v in schema.items() if k not in EXPANDED and k not in (kw, "$id")}


def expanded(m: Subschema) -> Subschema:
    """``m`` without the keywords that :meth:`expand` has already followed."""
    s = m.schema
    if type(s) is Shape:
        if s.embedded is None and s.all_of is None:
            return m
    elif not any(k in s for k in EXPANDED):
        return m
    return Subschema(m.uri + "/~", without(s), m.base)


# What dropping a keyword of a part resets (lenient complements of written shapes).
_PART_RESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "format": ("string", {"has_format": False, "format": None}),
    "patternProperties": ("object", {"pattern_properties": {}}),
    "additionalProperties": ("object", {"has_additional": False, "additional": None}),
    "contains": ("array", {"has_contains": False, "contains": None, "min_contains": 1,
                           "max_contains": None}),
    "uniqueItems": ("array", {"unique": False}),
    "items": ("array", {"has_rest": False, "rest": None}),
    "additionalItems": ("array", {"has_rest": False, "rest": None}),
}


def _shape_without(s: Shape, kw: str | None) -> Shape:
    parts: dict[str, Any] = {"string": replace(s.string, excluded=None),
                             "number": replace(s.number, integer=False),
                             "object": s.object, "array": s.array}
    if kw in _PART_RESETS:
        part, reset = _PART_RESETS[kw]
        parts[part] = replace(parts[part], **reset)
    values = s.values
    if kw == "enum":
        values = values[:1] if "const" in s.keywords else ()
    elif kw == "const" and "const" in s.keywords:
        values = values[1:]
    has_not = "not" in s.keywords and kw != "not"
    return written(type=None if kw == "type" else s.type, values=values,
                   enum="enum" in s.keywords and kw != "enum",
                   any_of=None if kw == "anyOf" else s.any_of,
                   one_of=None if kw == "oneOf" else s.one_of,
                   not_=s.not_ if has_not else None, has_not=has_not, **parts)


class Inexpressible(Exception):
    """The complement of ``keyword`` cannot be written exactly (the caller raises)."""

    def __init__(self, keyword: str):
        super().__init__(keyword)
        self.keyword = keyword


def complement(s: Shape, sub: Sub) -> list[Shape | bool]:
    """The branches whose union is every JSON value that ``s`` rejects."""
    out: list[Shape | bool] = []
    if "type" in s.keywords:
        out.append(written(not_=written(type=s.type)))
    for kw in ("enum", "const"):
        if kw not in s.keywords:
            continue
        values = s.values[-1] if kw == "enum" else s.values[0]
        if any(isinstance(v, (dict, list)) for v in values):
            raise Inexpressible(kw)  # only scalar values are excluded exactly
        out.append(written(not_=written(values=(values,), enum=kw == "enum")))
    out += _strings(s)
    out += _numbers(s.number)
    out += _objects(s, sub)
    out += _arrays(s.array, sub)
    out += _combinators(s, sub)
    for kw, value in (("unevaluatedProperties", s.unevaluated_properties),
                      ("unevaluatedItems", s.unevaluated_items), ("$recursiveRef", None)):
        if kw in s.keywords and value is not True:
            raise Inexpressible(kw)
    return out


def _strings(s: Shape) -> list[Shape]:
    if "format" in s.keywords:
        # Format nodes are sound, not complete (some valid spellings are left out),
        # so their complement would accept valid strings.
        raise Inexpressible("format")
    part = s.string
    if part.not_string is not None:
        return [written(type="string", string=part.not_string.string)]
    lo, hi, pattern = part.min_length, part.max_length, part.pattern
    if pattern is None and hi is None and lo in (None, 0):  # no keyword, or minLength 0
        return []
    return [written(type="string", string=StringPart(not_string=written(
        string=StringPart(lo, hi, pattern))))]


def _numbers(n: NumberPart) -> list[Shape]:
    out: list[Shape] = []
    if n.multiple_of is not None:
        out.append(written(type="number", number=NumberPart(not_multiple_of=n.multiple_of)))
    if n.not_multiple_of is not None:
        out.append(written(type="number", number=NumberPart(multiple_of=n.not_multiple_of)))
    for v, strict in n.lower:  # below the lower bound
        out.append(written(type="number", number=NumberPart(upper=((v, not strict),))))
    for v, strict in n.upper:
        out.append(written(type="number", number=NumberPart(lower=((v, not strict),))))
    return out


def _objects(s: Shape, sub: Sub) -> list[Shape]:
    o = s.object
    out: list[Shape] = []
    for k in o.required if "required" in s.keywords else ():
        out.append(written(type="object", object=ObjectPart(properties={k: False})))
    for k, v in o.properties.items():
        if not trivial(v):
            out.append(written(type="object", object=ObjectPart(
                required=(k,), properties={k: written(not_=sub("properties", k))})))
    if any(not trivial(v) for v in o.pattern_properties.values()):
        raise Inexpressible("patternProperties")
    if o.has_additional and not trivial(o.additional):
        if o.additional is not False:
            raise Inexpressible("additionalProperties")
        # Some key that neither a property nor a pattern names (the patterns' values
        # are trivial here, or the line above raised).
        out.append(written(type="object", object=ObjectPart(key_outside=KeyOutside(
            names=tuple(o.properties), patterns=tuple(o.pattern_properties)))))
    if o.has_property_names and not trivial(o.property_names):
        # Some key the names schema rejects (the compiler raises where that schema holds
        # more than string keywords, or a format: not exact to complement).
        out.append(written(type="object", object=ObjectPart(key_outside=KeyOutside(
            admitted=sub("propertyNames")))))
    if o.min_properties:
        out.append(written(type="object",
                           object=ObjectPart(max_properties=o.min_properties - 1)))
    if o.max_properties is not None:
        out.append(written(type="object",
                           object=ObjectPart(min_properties=o.max_properties + 1)))
    return out


def _arrays(a: ArrayPart, sub: Sub) -> list[Shape]:
    out: list[Shape] = []
    if a.min_items:
        out.append(written(type="array", array=ArrayPart(max_items=a.min_items - 1)))
    if a.max_items is not None:
        out.append(written(type="array", array=ArrayPart(min_items=a.max_items + 1)))
    for i, v in enumerate(a.prefix):
        if not trivial(v):
            out.append(written(type="array", array=ArrayPart(
                min_items=i + 1, prefix=(True,) * i + (written(not_=sub(a.prefix_keyword, i)),))))
    if a.has_rest and not trivial(a.rest):
        if a.prefix:
            raise Inexpressible(a.rest_keyword)
        out.append(written(type="array", array=ArrayPart(
            has_contains=True, contains=written(not_=sub(a.rest_keyword)))))
    if a.has_contains:
        lo, hi = a.min_contains, a.max_contains
        if lo == 1:
            out.append(written(type="array", array=ArrayPart(
                has_rest=True, rest=written(not_=sub("contains")))))
        elif lo > 1:
            out.append(written(type="array", array=ArrayPart(
                has_contains=True, contains=sub("contains"), min_contains=0,
                max_contains=lo - 1)))
        if hi is not None:
            out.append(written(type="array", array=ArrayPart(
                has_contains=True, contains=sub("contains"), min_contains=hi + 1)))
    if a.unique:
        raise Inexpressible("uniqueItems")
    return out


def _combinators(s: Shape, sub: Sub) -> list[Shape | bool]:
    out: list[Shape | bool] = []
    if isinstance(s.any_of, (list, tuple)):
        out.append(written(all_of=tuple(written(not_=sub("anyOf", i))
                                        for i in range(len(s.any_of)))))
    if isinstance(s.one_of, (list, tuple)):
        n = len(s.one_of)
        out.append(written(all_of=tuple(written(not_=sub("oneOf", i)) for i in range(n))))
        out += [written(all_of=(sub("oneOf", i), sub("oneOf", j)))
                for i in range(n) for j in range(i + 1, n)]
    if "not" in s.keywords:
        out.append(sub("not"))
    return out
