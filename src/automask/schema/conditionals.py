"""``if``/``then``/``else`` and the dependency keywords, rewritten as unions of disjoint
cases (the ``if`` holds or fails; the key is absent or present), which the conjunction
builder distributes like any ``anyOf``.
"""

from __future__ import annotations

from automask.errors import GrammarError
from automask.schema.normalize import shape
from automask.schema.shapes import ObjectPart, Shape, embed_at, written
from automask.schema.subschema import Subschema, escape, pointer

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
