"""Annotations for ``unevaluatedProperties`` and ``unevaluatedItems``.

A member's unevaluated* sees the properties/items that its in-place
subschemas evaluated, and only those that *hold*. After the compiler's
distribution every conjunction lists what holds, so the evaluated set is read
off the conjunction; to make it exact, anyOf is distributed over the subsets of
its branches (each subset holds, the others fail) and a lone ``if`` is
distributed too.
"""

from __future__ import annotations

import re

from automask.budget import check_time
from automask.grammar.ir import Choice, Expr
from automask.schema.members import Member, _escape, _negated, _opened, _prefix
from automask.schema.refs import _changes_base


class Annotations:
    """Which members annotate, and the members that enforce unevaluated*."""

    def any_of_subsets(self, rest: list[Member], subs: list[Member], m: Member) -> Expr:
        """anyOf as the disjoint union over which branches hold (every valid branch
        annotates, so ``unevaluated*`` sees exactly the ones that hold)."""
        if len(subs) > 6:
            self.unsupported("anyOf with more than 6 branches under unevaluated*", m, "anyOf")
            # lenient: one branch at a time (fewer annotations: stricter, still sound)
            return Choice(tuple(self.conj_ref(rest + [sub]) for sub in subs))
        alternatives = []
        for mask in range(1, 1 << len(subs)):
            chosen = [b if mask >> j & 1 else _negated(b) for j, b in enumerate(subs)]
            alternatives.append(self.conj_ref(rest + chosen))
        return Choice(tuple(alternatives))

    def annotators(self, m: Member, members: list[Member]) -> set[str]:
        """The positions whose annotations ``m``'s unevaluated* sees: reached from ``m``
        in place (allOf, anyOf, oneOf, if/then/else, dependentSchemas, $ref; never
        through ``not``) through positions that all hold here, i.e. are ``members``."""
        present = {_position(x.uri) for x in members}
        start = _position(m.uri)
        out: set[str] = set()
        todo = [self.positions.get(start, m)]
        while todo:
            x = todo.pop()
            if x.uri in out:
                continue
            out.add(x.uri)
            s = x.schema
            if not isinstance(s, dict):
                continue
            if _changes_base(s):
                x = Member(x.uri, s, self.rebase(x.base, s))
            children = []
            if isinstance(s.get("$ref"), str):
                children.append(self.resolve(s["$ref"], x))
            if isinstance(s.get("$dynamicRef"), str):
                children.append(self.dynamic_target(x))
            for kw in ("allOf", "anyOf", "oneOf"):
                children += [Member(f"{x.uri}/{kw}/{i}", b, x.base)
                             for i, b in enumerate(s.get(kw) or ())]
            if "if" in s:
                children += [Member(f"{x.uri}/{kw}", s[kw], x.base)
                             for kw in ("if", "then", "else") if kw in s]
            for kw in ("dependentSchemas", "dependencies"):
                for k, b in (s.get(kw) or {}).items():
                    if isinstance(b, (dict, bool)):
                        children.append(Member(f"{x.uri}/{kw}/{_escape(k)}", b, x.base))
            todo += [self.positions.get(c.uri, c) for c in children if c.uri in present]
        return out

    def evaluated(self, members: list[Member], kw: str) -> list[Member]:
        """For each member with ``kw`` (unevaluatedProperties/Items): a member that holds
        it as additionalProperties/items past what its in-place subschemas evaluate."""
        out = []
        for m in members:
            u = m.schema.get(kw)
            if kw not in m.schema or u is True:
                continue
            reach = self.annotators(m, members)
            mine = _position(m.uri)
            helpers = [x for x in members if _position(x.uri) in reach]
            u_ref = {"~ref": Member(f"{m.uri}/{kw}", u, m.base)}
            if kw == "unevaluatedProperties":
                if any("additionalProperties" in x.schema or not self.default_additional(
                        x.schema) or (kw in x.schema and _position(x.uri) != mine)
                        for x in helpers):
                    continue  # every property is evaluated
                names = {k: True for x in helpers for k in x.schema.get("properties") or {}}
                patterns = {p: True for x in helpers
                            for p in self.pattern_properties(x)}
                schema = {"properties": names, "patternProperties": patterns,
                          "additionalProperties": u_ref}
            else:
                if any(("items" in x.schema and not isinstance(x.schema["items"], list))
                       or "additionalItems" in x.schema and isinstance(x.schema.get("items"),
                                                                        list)
                       or (kw in x.schema and _position(x.uri) != mine) for x in helpers):
                    continue  # every item is evaluated
                prefix = max((len(_prefix(x.schema)) for x in helpers), default=0)
                contains = [{"~ref": Member(f"{x.uri}/contains", x.schema["contains"], x.base)}
                            for x in helpers if "contains" in x.schema]
                rest = {"anyOf": contains + [u_ref]} if contains else u_ref
                schema = {"prefixItems": [True] * prefix, "items": rest}
            out.append(Member(f"{m.uri}/~{kw}", _opened(schema), m.base))
        return out


def _mentions_unevaluated(schema) -> bool:
    """Whether the document has an ``unevaluated*`` keyword other than ``true``."""
    todo = [schema]
    while todo:
        check_time()
        s = todo.pop()
        if isinstance(s, dict):
            for k, v in s.items():
                if k in ("unevaluatedProperties", "unevaluatedItems") and v is not True:
                    return True
                if k not in ("enum", "const", "default", "examples"):
                    todo.append(v)
        elif isinstance(s, list):
            todo += s
    return False


def _pending(m: Member) -> bool:
    return any(k in m.schema and m.schema[k] is not True
               for k in ("unevaluatedProperties", "unevaluatedItems"))


REST_SUFFIX = re.compile(r"(/~|/~anyOf|/~oneOf|/~not)+$")


def _position(uri: str) -> str:
    """The schema position of a member: rest variants (a member less the keywords that
    were distributed or expanded) stand for the member itself."""
    return REST_SUFFIX.sub("", uri)
