"""Concrete JSON values against a conjunction: the values an ``enum``/``const`` lists are
kept where they meet every other keyword, read as a validator reads them (exact:
``anyOf``/``oneOf``/``not`` are evaluated, not complemented).
"""

from __future__ import annotations

from automask.budget import check_time
from automask.regex import nodes as rx
from automask.schema.json_text import ANY_TEXT
from automask.schema.lowering import Conjoin, Report
from automask.schema.normalize import decimal_of, shape
from automask.schema.number_keywords import NumberKeywords, is_multiple
from automask.schema.objects import Objects
from automask.schema.strings import Strings
from automask.schema.subschema import (
    Subschema,
    escape,
    json_key,
    json_type,
)
from automask.schema.values import enumerated


class ConcreteValues:
    """Checks of concrete values (enumerated ones, and the items and properties in them)."""

    def __init__(self, conj: Conjoin, strings: Strings, numbers: NumberKeywords,
                 objects: Objects, report: Report, strict: bool):
        self.conj = conj
        self.strings = strings
        self.numbers = numbers
        self.objects = objects
        self.report = report
        self.strict = strict
        # Per subschema (by uri): its string constraints, read once for all the values
        # of an enum (thousands, each checked against them).
        self._strings_of: dict[str, rx.Node] = {}

    def value_ok(self, value, members: list[Subschema]) -> bool:
        """Whether an enumerated value meets the other keywords of the conjunction."""
        check_time()
        for m in members:
            gone = shape(m).not_excluded_keys
            if gone and json_key(value) in gone:
                return False
            if isinstance(value, str):
                node = self._strings_of.get(m.uri)
                if node is None:
                    # exclusions were checked above by hashing, not by derivatives
                    node = self._strings_of[m.uri] = self.strings.string_constraints(
                        [m], exclusions=False)
                if node is not ANY_TEXT and not rx.matches(node, value.encode("utf-8")):
                    return False
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                lo, lo_x, hi, hi_x, mult = self.numbers.bounds([m])
                v = decimal_of(value)
                if lo is not None and (v < lo or (lo_x and v == lo)):
                    return False
                if hi is not None and (v > hi or (hi_x and v == hi)):
                    return False
                if mult is not None and not is_multiple(v, mult):
                    return False
                view = shape(m).number
                if view.not_multiple_of is not None and is_multiple(v, view.not_multiple_of):
                    return False
                if view.integer and v != v.to_integral_value():
                    return False
            elif isinstance(value, dict):
                if not self.object_value_ok(value, m):
                    return False
            elif isinstance(value, list):
                if not self.array_value_ok(value, m):
                    return False
        return True

    def value_in(self, value, members: list[Subschema]) -> bool:
        """Whether a concrete JSON value satisfies every member, read as a validator reads
        it (the subschemas an enumerated object or array value meets): exact, and
        ``anyOf``/``oneOf``/``not`` are evaluated, not complemented."""
        check_time()
        expanded = self.conj.expand(members)
        if expanded is None:
            return False
        members = expanded
        for m in members:
            self.conj.check_keywords(m)
        if json_type(value) not in self.conj.types(members):
            return False
        values = enumerated(members)
        if values is not None and json_key(value) not in {json_key(v) for v in values}:
            return False
        for m in members:
            view = shape(m)
            for kw in ("anyOf", "oneOf"):
                branches = view.branches(kw)
                if branches is not None:  # an array (check_keywords)
                    holds = [self.value_in(value, [Subschema(f"{m.uri}/{kw}/{i}", b, m.base)])
                             for i, b in enumerate(branches)]
                    if holds.count(True) != 1 if kw == "oneOf" else not any(holds):
                        return False
            if "not" in view.keywords and self.value_in(
                    value, [Subschema(m.uri + "/not", view.not_, m.base)]):
                return False
        return self.value_ok(value, members)

    def object_value_ok(self, value: dict, m: Subschema) -> bool:
        """The object keywords of ``m`` on a concrete object."""
        s = shape(m)
        view = s.object
        if any(r not in value for r in view.required):
            return False
        if len(value) < (view.min_properties or 0) or (
                view.max_properties is not None and len(value) > view.max_properties):
            return False
        if "unevaluatedProperties" in s.keywords and s.unevaluated_properties is not True:
            self.report.unsupported("unevaluatedProperties on enumerated values", m,
                                    "unevaluatedProperties")
        props = view.properties
        patterns = [(self.objects.key_pattern(pat, m), Subschema(
            f"{m.uri}/patternProperties/{escape(pat)}", sub, m.base))
            for pat, sub in view.pattern_properties.items()]
        extra = view.extra(self.strict)
        for k, x in value.items():
            at = [sub for node, sub in patterns if rx.matches(node, k.encode("utf-8"))]
            if k in props:
                at.append(Subschema(f"{m.uri}/properties/{escape(k)}", props[k], m.base))
            if not at and extra is not True:
                at.append(Subschema(f"{m.uri}/additionalProperties", extra, m.base))
            if not all(self.value_in(x, [sub]) for sub in at):
                return False
        if view.key_outside is not None:
            region = self.objects.outside_region(view.key_outside, m)
            if not any(rx.matches(region, k.encode("utf-8")) for k in value):
                return False
        if view.has_property_names:
            names = Subschema(f"{m.uri}/propertyNames", view.property_names, m.base)
            return all(self.value_in(k, [names]) for k in value)
        return True

    def array_value_ok(self, value: list, m: Subschema) -> bool:
        """The array keywords of ``m`` on a concrete array."""
        s = shape(m)
        view = s.array
        if len(value) < (view.min_items or 0) or (
                view.max_items is not None and len(value) > view.max_items):
            return False
        if view.unique and len({json_key(x) for x in value}) < len(value):
            return False
        if "unevaluatedItems" in s.keywords and s.unevaluated_items is not True:
            self.report.unsupported("unevaluatedItems on enumerated values", m, "unevaluatedItems")
        for i, x in enumerate(value):
            if i < len(view.prefix):
                sub = Subschema(f"{m.uri}/{view.prefix_keyword}/{i}", view.prefix[i], m.base)
            elif view.rest is not None:
                sub = Subschema(f"{m.uri}/{view.rest_keyword}", view.rest, m.base)
            else:
                continue
            if not self.value_in(x, [sub]):
                return False
        if view.has_contains:
            wanted = Subschema(f"{m.uri}/contains", view.contains, m.base)
            hits = sum(self.value_in(x, [wanted]) for x in value)
            if hits < view.min_contains or (
                    view.max_contains is not None and hits > view.max_contains):
                return False
        return True
