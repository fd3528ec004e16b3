"""``if``/``then``/``else`` and the dependency keywords, rewritten as unions of disjoint
cases (the ``if`` holds or fails; the key is absent or present), which the conjunction
builder distributes like any ``anyOf``.
"""

from __future__ import annotations

from typing import Any

from automask.errors import GrammarError
from automask.schema.complement import expanded
from automask.schema.normalize import shape
from automask.schema.shapes import ObjectPart, Shape, embed_at, written
from automask.schema.subschema import (
    ANNOTATIONS,
    TYPES,
    Subschema,
    escape,
    json_key,
    json_type,
    pointer,
    type_set,
)

CONDITIONALS = frozenset({"if", "dependentRequired", "dependentSchemas", "dependencies"})


def conditionals(m: Subschema, tracks: bool) -> list[Subschema]:
    """Members equivalent to ``if``/``then``/``else`` and the dependency keywords of
    ``m``: unions of disjoint cases (the ``if`` holds or fails; the key is absent or
    present), which ``conj`` distributes like any ``anyOf``."""
    s = shape(m)
    if not s.keywords & CONDITIONALS:
        return []
    out: list[Subschema] = []

    def ref(kw: str, value, *key: str) -> Shape:
        return embed_at(m, value, kw, *key)

    if "if" in s.keywords and ("then" in s.keywords or "else" in s.keywords or tracks):
        yes = (ref("if", s.if_),) + ((ref("then", s.then),) if "then" in s.keywords else ())
        no = (written(not_=ref("if", s.if_)),) + (
            (ref("else", s.else_),) if "else" in s.keywords else ())
        out.append(Subschema(m.uri + "/~if", written(any_of=(written(all_of=yes),
                                                             written(all_of=no))), m.base))
    for kw, deps in (("dependentRequired", s.dependent_required),
                     ("dependentSchemas", s.dependent_schemas),
                     ("dependencies", s.dependencies)):
        if deps is None:
            continue
        if not isinstance(deps, dict):
            raise GrammarError(f"{kw} must be an object", pointer(m, kw))
        for k, v in deps.items():
            where = f"{pointer(m, kw)}/{escape(k)}"
            if kw != "dependentSchemas" and isinstance(v, list):
                if not all(isinstance(r, str) for r in v):
                    raise GrammarError(f"{kw} lists property names (strings)", where)
                if not v:
                    continue
                # Generated order: the dependents, then the key that needs them.
                then = written(type="object", object=ObjectPart(required=(*v, k)))
            elif kw == "dependentRequired":
                raise GrammarError("dependentRequired values are arrays of names", where)
            elif v is True:
                continue
            elif isinstance(v, (dict, bool)):
                then = written(all_of=(written(type="object", object=ObjectPart(
                    required=(k,))), ref(kw, v, k)))
            else:
                raise GrammarError(f"{kw} values are schemas", where)
            union = written(any_of=(written(object=ObjectPart(properties={k: False})), then))
            out.append(Subschema(f"{m.uri}/~{kw}/{escape(k)}", union, m.base))
    return out


class TagTest:
    """An ``if`` that only tests one key's value: ``{"properties": {K: {"const": v}}}``
    (or ``enum``, with the value's ``type`` beside it or not), with at most
    ``required: [K]`` and ``type: object`` beside it."""

    def __init__(self, key: str, values: list, requires: bool, object_only: bool):
        self.key = key
        self.values = {json_key(v): v for v in values}  # the values tested, by their key
        self.requires = requires  # fails where the key is absent
        self.object_only = object_only  # fails for other types

    @staticmethod
    def read(schema: Any) -> TagTest | None:
        if type(schema) is not dict or not set(schema) - ANNOTATIONS <= TAG_TEST:
            return None
        props = schema.get("properties")
        if type(props) is not dict or len(props) != 1:
            return None
        ((key, test),) = props.items()
        if type(test) is not dict or len(set(test) - ANNOTATIONS - {"type"}) != 1:
            return None
        values = [test["const"]] if "const" in test else test.get("enum")
        if type(values) is not list or not values or any(
                isinstance(v, (dict, list)) for v in values):
            return None
        if "type" in test:  # the test holds of the values of that type
            kinds = type_set(test["type"])
            if kinds is None:  # malformed
                return None
            values = [v for v in values if json_type(v) in kinds]
            if not values:
                return None
        required = schema.get("required", [])
        kind = schema.get("type", "object")
        if required not in ([], [key]) or kind not in ("object", ["object"]):
            return None
        return TagTest(key, values, bool(required), "type" in schema)


TAG_TEST = frozenset({"properties", "required", "type"})


def tag_cases(members: list[Subschema]) -> list[list[Subschema]] | None:
    """A conjunction whose ``if``s all test one key's value (an if-chain over a tag),
    split by that key: not an object, the key absent, each value tested, any other
    value. In each case every ``if`` is known to hold or fail, so each brings its
    ``then`` or its ``else`` alone: one conjunction per case, where distributing the
    ``if``s one by one made up to one per subset of them (the key optional, no two
    ``if``s are contradictory for the signatures: both hold where it is absent).
    None when fewer than two ``if``s test the same key."""
    chain: list[tuple[Subschema, Shape, TagTest]] = []
    for m in members:
        s = shape(m)
        if "if" in s.keywords and s.keywords & {"then", "else"}:
            test = TagTest.read(s.if_)
            if test is not None and (not chain or test.key == chain[0][2].key):
                chain.append((m, s, test))
    if len(chain) < 2:
        return None
    at = chain[0][0]
    key = chain[0][2].key
    rewritten = {m.uri + "/~if" for m, _, _ in chain}
    rest = [expanded(x) for x in members if x.uri not in rewritten]
    tested: dict[tuple, Any] = {}  # the values tested, by their json_key
    for _, _, test in chain:
        tested.update(test.values)

    def case(name: str, shape_: Shape, holds) -> list[Subschema]:
        out = rest + [Subschema(f"{at.uri}/~tag/{name}", shape_, at.base)]
        for m, s, test in chain:
            side = "then" if holds(test) else "else"
            if side in s.keywords:
                out.append(Subschema(f"{m.uri}/{side}", s.then if side == "then" else s.else_,
                                     m.base))
        return out

    others = [t for t in TYPES if t != "object"]
    cases = [case("other", written(type=others), lambda t: not t.object_only),
             case("absent", written(type="object", object=ObjectPart(
                 properties={key: False})), lambda t: not t.requires)]
    for i, (k, v) in enumerate(tested.items()):
        cases.append(case(str(i), written(type="object", object=ObjectPart(
            properties={key: {"const": v}}, required=(key,))), lambda t, k=k: k in t.values))
    cases.append(case("untested", written(type="object", object=ObjectPart(
        properties={key: {"not": {"enum": list(tested.values())}}}, required=(key,))),
        lambda t: False))
    return cases
