"""The complement of one schema object, as a union of schemas.

``not``, ``if`` (its failing side), exact ``oneOf`` and the rewrites of the
conditional keywords all need the JSON values that a schema object rejects.
A schema object is a conjunction of keywords, so its complement is the union
of the keywords' complements; each keyword only constrains values of its own
type, so the complement of a keyword lies inside that type (``not
{minLength: 3}`` is the strings shorter than 3, never a number). Keywords read
together (``minimum`` with a draft-04 ``exclusiveMinimum``, ``prefixItems``
with ``items``, ``contains`` with its counts, ``if`` with ``then``/``else``)
are complemented as groups.

The result is a list of *branches*, each one schema (a dict the compiler
compiles like any other; where no JSON Schema keyword says it, a
:class:`~automask.schema.shapes.Written` schema with a typed requirement:
an embedded subschema at its own position, string keywords that must *not* all
hold (:class:`~automask.schema.shapes.NotString`), a number the value is not a
multiple of (:class:`~automask.schema.shapes.NotMultipleOf`), or names, patterns
and admitted names (a subschema) of which an object has some key outside
(:class:`~automask.schema.shapes.KeyOutside`: the complements of
``additionalProperties: false`` and of ``propertyNames``)).
A keyword whose complement is not expressible raises :class:`Inexpressible`
with the keyword: a complement that admits more than it should accepts invalid
values. One admits less: ``NotMultipleOf`` leaves out texts with an exponent
(see :func:`automask.schema.numbers.non_multiple_node`), which is sound, since
complements are taken of schemas only, never of what the compiler made of one.

``$ref``/``allOf``/an embedded subschema are not complemented here: the compiler expands
them first and unions the complements of every member of the expansion.
"""

from __future__ import annotations

from collections.abc import Callable

from automask.schema.lowering import Conjoin, Report
from automask.schema.shapes import (
    KeyOutside,
    NotMultipleOf,
    NotString,
    Shape,
    Written,
    embed,
    keyword_names,
    opened,
    shape_of,
    unembedded,
    with_keywords,
)
from automask.schema.subschema import ANNOTATIONS, Subschema, escape

STRING_KEYWORDS = ("minLength", "maxLength", "pattern")
NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# Keywords that expansion follows (their complement is that of what they bring in).
# (An embedded subschema, a written schema's, is followed too: see ``without``.)
EXPANDED = ("$ref", "$dynamicRef", "allOf", "if", "then", "else", "dependentRequired",
            "dependentSchemas", "dependencies")

Sub = Callable[..., Written]
"""``sub("properties", "a")``: the subschema at that path, embedded in place."""


def negation(conj: Conjoin, report: Report, operand: Subschema) -> list[list[Subschema]]:
    """The complement of ``operand`` as a union of conjunctions (see complement.py)."""
    members = conj.expand([operand])
    if members is None:
        return [[]]  # not false: anything
    out: list[list[Subschema]] = []
    for x in members:
        conj.check_keywords(x)

        def sub(*path, x=x) -> Written:
            node = x.schema
            for p in path:
                node = node[p]
            return embed(Subschema(x.uri + "".join(f"/{escape(str(p))}" for p in path),
                                   node, x.base))

        schema = without(x.schema)
        while True:
            try:
                branches = complement(schema, sub)
                break
            except Inexpressible as e:
                # lenient: drop the keyword from the operand (a smaller complement)
                report.unsupported(f"'not' of {e.keyword}", x, e.keyword)
                schema = with_keywords(schema, {k: v for k, v in schema.items()
                                                if k != e.keyword})
        for k, b in enumerate(branches):
            if b is True:
                out.append([])
            else:
                out.append([Subschema(f"{x.uri}/~neg{k}", opened(b), x.base)])
    return out


def without(schema: dict, kw: str | None = None) -> dict:
    """``schema`` less ``kw`` and the keywords that expansion has followed (``$ref``,
    ``allOf``, an embedded subschema, and the conditionals it rewrote into members of
    their own)."""
    return unembedded(schema, {k: v for k, v in schema.items()
                               if k != kw and k not in EXPANDED})


def expanded(m: Subschema) -> Subschema:
    """``m`` without the keywords that :meth:`expand` has already followed."""
    if not any(k in m.schema for k in EXPANDED) and shape_of(m.schema).embedded is None:
        return m
    return Subschema(m.uri + "/~", without(m.schema), m.base)



class Inexpressible(Exception):
    """The complement of ``keyword`` cannot be written exactly (the caller raises)."""

    def __init__(self, keyword: str):
        super().__init__(keyword)
        self.keyword = keyword


def complement(schema, sub: Sub) -> list[dict | bool]:
    """The branches whose union is every JSON value that ``schema`` rejects."""
    if schema is True:
        return []
    if schema is False:
        return [True]
    s = schema
    out: list[dict | bool] = []
    if "type" in s:
        out.append({"not": {"type": s["type"]}})
    for kw in ("enum", "const"):
        if kw not in s:
            continue
        values = s[kw] if kw == "enum" and isinstance(s[kw], list) else [s[kw]]
        if any(isinstance(v, (dict, list)) for v in values):
            raise Inexpressible(kw)  # only scalar values are excluded exactly
        out.append({"not": {kw: s[kw]}})
    out += _strings(s)
    out += _numbers(s)
    out += _objects(s, sub)
    out += _arrays(s, sub)
    out += _combinators(s, sub)
    for kw in ("unevaluatedProperties", "unevaluatedItems", "$recursiveRef"):
        if kw in s and s[kw] is not True:
            raise Inexpressible(kw)
    return out


def _strings(s: dict) -> list[dict]:
    if "format" in s:
        # Format nodes are sound, not complete (some valid spellings are left out),
        # so their complement would accept valid strings.
        raise Inexpressible("format")
    not_string = shape_of(s).not_string
    if not_string is not None:
        return [{"type": "string", **not_string.keywords}]
    kws = {k: s[k] for k in STRING_KEYWORDS if k in s}
    if not kws or kws == {"minLength": 0}:
        return []
    return [Written({"type": "string"}, shape=Shape(not_string=NotString(kws)))]


def _numbers(s: dict) -> list[dict]:
    out: list[dict] = []
    if _num(s.get("multipleOf")):
        out.append(Written({"type": "number"},
                           shape=Shape(not_multiple_of=NotMultipleOf(s["multipleOf"]))))
    not_multiple_of = shape_of(s).not_multiple_of
    if not_multiple_of is not None:
        out.append({"type": "number", "multipleOf": not_multiple_of.divisor})
    lows, highs = [], []
    if s.get("exclusiveMinimum") is True and _num(s.get("minimum")):  # draft-04
        lows.append((s["minimum"], True))
    else:
        if _num(s.get("minimum")):
            lows.append((s["minimum"], False))
        if _num(s.get("exclusiveMinimum")):
            lows.append((s["exclusiveMinimum"], True))
    if s.get("exclusiveMaximum") is True and _num(s.get("maximum")):
        highs.append((s["maximum"], True))
    else:
        if _num(s.get("maximum")):
            highs.append((s["maximum"], False))
        if _num(s.get("exclusiveMaximum")):
            highs.append((s["exclusiveMaximum"], True))
    for v, strict in lows:  # below the lower bound
        out.append({"type": "number", ("maximum" if strict else "exclusiveMaximum"): v})
    for v, strict in highs:
        out.append({"type": "number", ("minimum" if strict else "exclusiveMinimum"): v})
    return out


def _objects(s: dict, sub: Sub) -> list[dict]:
    out: list[dict] = []
    for k in _list(s.get("required")):
        out.append({"type": "object", "properties": {k: False}})
    props = s.get("properties")
    if isinstance(props, dict):
        for k, v in props.items():
            if _trivial(v):
                continue
            out.append({"type": "object", "required": [k],
                        "properties": {k: {"not": sub("properties", k)}}})
    pattern = s.get("patternProperties")
    if isinstance(pattern, dict) and any(not _trivial(v) for v in pattern.values()):
        raise Inexpressible("patternProperties")
    if "additionalProperties" in s and not _trivial(s["additionalProperties"]):
        if s["additionalProperties"] is not False:
            raise Inexpressible("additionalProperties")
        # Some key that neither a property nor a pattern names (the patterns' values
        # are trivial here, or the line above raised).
        out.append(Written({"type": "object"}, shape=Shape(key_outside=KeyOutside(
            names=tuple(props) if isinstance(props, dict) else (),
            patterns=tuple(pattern) if isinstance(pattern, dict) else ()))))
    if "propertyNames" in s and not _trivial(s["propertyNames"]):
        # Some key the names schema rejects (the compiler raises where that schema holds
        # more than string keywords, or a format: not exact to complement).
        out.append(Written({"type": "object"}, shape=Shape(key_outside=KeyOutside(
            admitted=sub("propertyNames")))))
    least, most = _count(s.get("minProperties")), _count(s.get("maxProperties"))
    if least:
        out.append({"type": "object", "maxProperties": least - 1})
    if most is not None:
        out.append({"type": "object", "minProperties": most + 1})
    for kw in ("dependentRequired", "dependencies"):
        deps = s.get(kw)
        if not isinstance(deps, dict):
            continue
        for k, v in deps.items():
            if isinstance(v, list):
                out += [{"type": "object", "required": [k], "properties": {r: False}}
                        for r in v]
            elif not _trivial(v):
                out.append({"type": "object", "required": [k], "not": sub(kw, k)})
    deps = s.get("dependentSchemas")
    if isinstance(deps, dict):
        for k, v in deps.items():
            if not _trivial(v):
                out.append({"type": "object", "required": [k],
                            "not": sub("dependentSchemas", k)})
    return out


def _arrays(s: dict, sub: Sub) -> list[dict]:
    out: list[dict] = []
    least, most = _count(s.get("minItems")), _count(s.get("maxItems"))
    if least:
        out.append({"type": "array", "maxItems": least - 1})
    if most is not None:
        out.append({"type": "array", "minItems": most + 1})
    if isinstance(s.get("prefixItems"), list):
        prefix, kw, rest_kw = s["prefixItems"], "prefixItems", "items"
    elif isinstance(s.get("items"), list):
        prefix, kw, rest_kw = s["items"], "items", "additionalItems"
    else:
        prefix, kw, rest_kw = [], "", "items"
    for i, v in enumerate(prefix):
        if not _trivial(v):
            out.append({"type": "array", "minItems": i + 1,
                        "prefixItems": [True] * i + [{"not": sub(kw, i)}]})
    rest = s.get(rest_kw)
    if rest_kw in s and not _trivial(rest):
        if prefix:
            raise Inexpressible(rest_kw)
        out.append({"type": "array", "contains": {"not": sub(rest_kw)}})
    if "contains" in s:
        lo = _count(s.get("minContains", 1))
        hi = _count(s["maxContains"]) if "maxContains" in s else None
        if lo is None or ("maxContains" in s and hi is None):
            raise Inexpressible("contains")
        if lo == 1:
            out.append({"type": "array", "items": {"not": sub("contains")}})
        elif lo > 1:
            out.append({"type": "array", "contains": sub("contains"), "minContains": 0,
                        "maxContains": lo - 1})
        if hi is not None:
            out.append({"type": "array", "contains": sub("contains"),
                        "minContains": hi + 1})
    if s.get("uniqueItems") is True:
        raise Inexpressible("uniqueItems")
    return out


def _combinators(s: dict, sub: Sub) -> list[dict | bool]:
    out: list[dict | bool] = []
    if isinstance(s.get("anyOf"), list):
        out.append({"allOf": [{"not": sub("anyOf", i)} for i in range(len(s["anyOf"]))]})
    if isinstance(s.get("oneOf"), list):
        n = len(s["oneOf"])
        out.append({"allOf": [{"not": sub("oneOf", i)} for i in range(n)]})
        out += [{"allOf": [sub("oneOf", i), sub("oneOf", j)]}
                for i in range(n) for j in range(i + 1, n)]
    if "not" in s:
        out.append(sub("not"))
    return out


def _trivial(v) -> bool:
    """Whether a subschema accepts everything (``true`` or only annotations)."""
    return v is True or (isinstance(v, dict) and not keyword_names(v) - ANNOTATIONS)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _count(v) -> int | None:
    if _num(v) and v >= 0 and float(v).is_integer():
        return int(v)
    return None


def _list(v) -> list:
    return v if isinstance(v, list) else []
