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
from automask.schema.normalize import shape
from automask.schema.refs import References, changes_base
from automask.schema.shapes import ArrayPart, ObjectPart, Shape, embed_at, negated, written
from automask.schema.subschema import Subschema, escape


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
            if not isinstance(x.schema, (dict, Shape)):
                continue
            if changes_base(x.schema):
                x = Subschema(x.uri, x.schema, self.refs.rebase(x.base, x.schema))
            s = shape(x)
            children = []
            if isinstance(s.ref, str):
                children.append(self.refs.resolve(s.ref, x))
            if isinstance(x.schema, dict) and isinstance(x.schema.get("$dynamicRef"), str):
                children.append(self.refs.dynamic_target(x))
            for kw in ("allOf", "anyOf", "oneOf"):
                children += [Subschema(f"{x.uri}/{kw}/{i}", b, x.base)
                             for i, b in enumerate(s.child(kw) or ())]
            if "if" in s.keywords:
                children += [Subschema(f"{x.uri}/{kw}", value, x.base)
                             for kw, value in (("if", s.if_), ("then", s.then), ("else", s.else_))
                             if kw in s.keywords]
            for kw, deps in (("dependentSchemas", s.dependent_schemas),
                             ("dependencies", s.dependencies)):
                for k, b in (deps or {}).items():
                    if isinstance(b, (dict, bool)):
                        children.append(Subschema(f"{x.uri}/{kw}/{escape(k)}", b, x.base))
            todo += [self.positions.get(c.uri, c) for c in children if c.uri in present]
        return out

    def evaluated(self, members: list[Subschema], kw: str) -> list[Subschema]:
        """For each member with ``kw`` (unevaluatedProperties/Items): a member that holds
        it as additionalProperties/items past what its in-place subschemas evaluate."""
        out = []
        for m in members:
            s = shape(m)
            u = s.unevaluated_properties if kw == "unevaluatedProperties" else s.unevaluated_items
            if kw not in s.keywords or u is True:
                continue
            reach = self.annotators(m, members)
            mine = position(m.uri)
            helpers = [(x, shape(x)) for x in members if position(x.uri) in reach]
            u_ref = embed_at(m, u, kw)
            if kw == "unevaluatedProperties":
                if any(x.object.has_additional or x.object.extra(self.strict) is False or (
                        kw in x.keywords and position(h.uri) != mine) for h, x in helpers):
                    continue  # every property is evaluated (additionalProperties says)
                names = {k: True for _, x in helpers for k in x.object.properties}
                patterns = {p: True for _, x in helpers for p in x.object.pattern_properties}
                schema = written(object=ObjectPart(
                    properties=names, pattern_properties=patterns, has_additional=True,
                    additional=u_ref))
            else:
                if any(x.array.has_rest  # items past the prefix, or additionalItems
                       or (kw in x.keywords and position(h.uri) != mine) for h, x in helpers):
                    continue  # every item is evaluated
                prefix = max((len(x.array.prefix) for _, x in helpers), default=0)
                contains = tuple(embed_at(h, x.array.contains, "contains")
                                 for h, x in helpers if x.array.has_contains)
                rest = written(any_of=(*contains, u_ref)) if contains else u_ref
                schema = written(array=ArrayPart(prefix=(True,) * prefix, has_rest=True,
                                                 rest=rest))
            out.append(Subschema(f"{m.uri}/~{kw}", schema, m.base))
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
    s = shape(m)
    return ("unevaluatedProperties" in s.keywords and s.unevaluated_properties is not True) or (
        "unevaluatedItems" in s.keywords and s.unevaluated_items is not True)


REST_SUFFIX = re.compile(r"(/~|/~anyOf|/~oneOf|/~not)+$")


def position(uri: str) -> str:
    """The schema position of a member: rest variants (a member less the keywords that
    were distributed or expanded) stand for the member itself."""
    return REST_SUFFIX.sub("", uri)
