"""``if``/``then``/``else`` and the dependency keywords, rewritten as unions of disjoint
cases (the ``if`` holds or fails; the key is absent or present), which the conjunction
builder distributes like any ``anyOf``.
"""

from __future__ import annotations

from automask.errors import GrammarError
from automask.schema.shapes import Written, embed, opened
from automask.schema.subschema import Subschema, escape, pointer


def conditionals(m: Subschema, tracks: bool) -> list[Subschema]:
    """Members equivalent to ``if``/``then``/``else`` and the dependency keywords of
    ``m``: unions of disjoint cases (the ``if`` holds or fails; the key is absent or
    present), which ``conj`` distributes like any ``anyOf``."""
    s = m.schema
    out: list[Subschema] = []

    def ref(*path) -> Written:
        node = s
        for p in path:
            node = node[p]
        return embed(Subschema(m.uri + "".join(f"/{escape(str(p))}" for p in path),
                               node, m.base))

    if "if" in s and ("then" in s or "else" in s or tracks):
        yes = [ref("if")] + ([ref("then")] if "then" in s else [])
        no = [{"not": ref("if")}] + ([ref("else")] if "else" in s else [])
        out.append(Subschema(m.uri + "/~if", opened({"anyOf": [{"allOf": yes},
                                                               {"allOf": no}]}), m.base))
    for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
        deps = s.get(kw)
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
                then: dict = {"type": "object", "required": [*v, k]}
            elif kw == "dependentRequired":
                raise GrammarError("dependentRequired values are arrays of names", where)
            elif v is True:
                continue
            elif isinstance(v, (dict, bool)):
                then = {"allOf": [{"type": "object", "required": [k]}, ref(kw, k)]}
            else:
                raise GrammarError(f"{kw} values are schemas", where)
            union = {"anyOf": [{"properties": {k: False}}, then]}
            out.append(Subschema(f"{m.uri}/~{kw}/{escape(k)}", opened(union), m.base))
    return out
