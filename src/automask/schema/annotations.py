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
from automask.schema.lowering import Conjoin, Report
from automask.schema.refs import References, changes_base
from automask.schema.shapes import default_additional, embed, negated, opened
from automask.schema.subschema import Subschema, escape, pattern_properties, prefix_items


class Annotations:
    """Which subschemas annotate, and the subschemas that enforce unevaluated*."""

    def __init__(self, conj: Conjoin, refs: References, positions: dict[str, Subschema],
                 report: Report, strict: bool):
        self.conj = conj
        self.refs = refs
        self.positions = positions  # uri -> the subschema as the schema has it
        self.report = report
        self.strict = strict

    def any_of_subsets(self, rest: list[Subschema], subs: list[Subschema], m: Subschema) -> Expr:
        """anyOf as the disjoint union over which branches hold (every valid branch
        annotates, so ``unevaluated*`` sees exactly the ones that hold)."""
        if len(subs) > 6:
            self.report.unsupported("anyOf with more than 6 branches under unevaluated*", m,
                                    "anyOf")
            # lenient: one branch at a time (fewer annotations: stricter, still sound)
            return Choice(tuple(self.conj.conj_ref(rest + [sub]) for sub in subs))
        alternatives = []
        for mask in range(1, 1 << len(subs)):
            chosen = [b if mask >> j & 1 else negated(b) for j, b in enumerate(subs)]
            alternatives.append(self.conj.conj_ref(rest + chosen))
        return Choice(tuple(alternatives))

    def annotators(self, m: Subschema, members: list[Subschema]) -> set[str]:
        """The positions whose annotations ``m``'s unevaluated* sees: reached from ``m``
        in place (allOf, anyOf, oneOf, if/then/else, dependentSchemas, $ref; never
        through ``not``) through positions that all hold here, i.e. are ``members``."""
        present = {position(x.uri) for x in members}
        start = position(m.uri)
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
            if changes_base(s):
                x = Subschema(x.uri, s, self.refs.rebase(x.base, s))
            children = []
            if isinstance(s.get("$ref"), str):
                children.append(self.refs.resolve(s["$ref"], x))
            if isinstance(s.get("$dynamicRef"), str):
                children.append(self.refs.dynamic_target(x))
            for kw in ("allOf", "anyOf", "oneOf"):
                children += [Subschema(f"{x.uri}/{kw}/{i}", b, x.base)
                             for i, b in enumerate(s.get(kw) or ())]
            if "if" in s:
                children += [Subschema(f"{x.uri}/{kw}", s[kw], x.base)
                             for kw in ("if", "then", "else") if kw in s]
            for kw in ("dependentSchemas", "dependencies"):
                for k, b in (s.get(kw) or {}).items():
                    if isinstance(b, (dict, bool)):
                        children.append(Subschema(f"{x.uri}/{kw}/{escape(k)}", b, x.base))
            todo += [self.positions.get(c.uri, c) for c in children if c.uri in present]
        return out

    def evaluated(self, members: list[Subschema], kw: str) -> list[Subschema]:
        """For each member with ``kw`` (unevaluatedProperties/Items): a member that holds
        it as additionalProperties/items past what its in-place subschemas evaluate."""
        out = []
        for m in members:
            u = m.schema.get(kw)
            if kw not in m.schema or u is True:
                continue
            reach = self.annotators(m, members)
            mine = position(m.uri)
            helpers = [x for x in members if position(x.uri) in reach]
            u_ref = embed(Subschema(f"{m.uri}/{kw}", u, m.base))
            if kw == "unevaluatedProperties":
                if any("additionalProperties" in x.schema or not default_additional(
                        x.schema, self.strict) or (kw in x.schema and position(x.uri) != mine)
                        for x in helpers):
                    continue  # every property is evaluated
                names = {k: True for x in helpers for k in x.schema.get("properties") or {}}
                patterns = {p: True for x in helpers
                            for p in pattern_properties(x)}
                schema: dict = {"properties": names, "patternProperties": patterns,
                                "additionalProperties": u_ref}
            else:
                if any(("items" in x.schema and not isinstance(x.schema["items"], list))
                       or "additionalItems" in x.schema and isinstance(x.schema.get("items"),
                                                                        list)
                       or (kw in x.schema and position(x.uri) != mine) for x in helpers):
                    continue  # every item is evaluated
                prefix = max((len(prefix_items(x.schema)) for x in helpers), default=0)
                contains = [embed(Subschema(f"{x.uri}/contains", x.schema["contains"], x.base))
                            for x in helpers if "contains" in x.schema]
                rest: dict = {"anyOf": contains + [u_ref]} if contains else u_ref
                schema = {"prefixItems": [True] * prefix, "items": rest}
            out.append(Subschema(f"{m.uri}/~{kw}", opened(schema), m.base))
        return out


def mentions_unevaluated(schema) -> bool:
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


def pending(m: Subschema) -> bool:
    return any(k in m.schema and m.schema[k] is not True
               for k in ("unevaluatedProperties", "unevaluatedItems"))


REST_SUFFIX = re.compile(r"(/~|/~anyOf|/~oneOf|/~not)+$")


def position(uri: str) -> str:
    """The schema position of a member: rest variants (a member less the keywords that
    were distributed or expanded) stand for the member itself."""
    return REST_SUFFIX.sub("", uri)
