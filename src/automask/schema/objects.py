"""Object keywords: ``properties``, ``required``, ``patternProperties``,
``additionalProperties``, ``propertyNames``, the property counts, and the compiler's
"some key outside these" requirements, lowered key by key (declared keys in schema
order, then classes of extra keys whose values meet the schemas that hold there).
"""

from __future__ import annotations

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded
from automask.grammar.ir import Choice, Expr, Ref, Seq, Terminal
from automask.regex import nodes as rx
from automask.regex import utf8
from automask.regex.parser import parse_regex_search
from automask.schema.annotations import Annotations
from automask.schema.json_text import ANY_TEXT, repeat_with_sep, separated, string_node
from automask.schema.lowering import Conjoin, Report
from automask.schema.normalize import shape
from automask.schema.shapes import KeyOutside, ObjectPart, Shape, keywords_of, trivial
from automask.schema.strings import Strings
from automask.schema.subschema import (
    ANNOTATIONS,
    Subschema,
    escape,
    pointer,
)
from automask.schema.values import enumerated

# What a propertyNames schema may hold (after expansion): string keywords and values.
NAME_KEYWORDS = ANNOTATIONS | {"type", "pattern", "minLength", "maxLength", "format", "enum",
                               "const", "not", "$ref", "allOf", "embedded"}
MAX_COUNTED_EXTRAS = 16  # maxProperties up to which a needed extra key is counted
#: The most properties an object may declare: its body is built by a recursion one call
#: deep per property (under the compile's recursion limit, 20,000), and makes a rule per
#: property. Equal properties share their values' rule, so the count of rules alone
#: (Options.max_rules) no longer stops a schema of 30,000 equal properties first.
MAX_DECLARED_PROPERTIES = 15_000


def key_order(views: list[tuple[Subschema, ObjectPart]]
              ) -> tuple[dict[str, None], dict[str, None]]:
    """A conjunction's declared keys in the order they are written (each member's
    ``properties`` in member order, then required keys none declares), and its required
    keys. Dicts as ordered sets: a schema may declare 100,000 keys (linear, not
    quadratic)."""
    order: dict[str, None] = {}
    required: dict[str, None] = {}
    for _, view in views:
        order.update(dict.fromkeys(view.properties))
        required.update(dict.fromkeys(view.required))  # strings (check_keywords)
    order.update(required)
    return order, required


class Objects:
    """The object keywords of a conjunction."""

    def __init__(self, conj: Conjoin, strings: Strings, annotations: Annotations,
                 report: Report, strict: bool):
        self.conj = conj
        self.json = conj.json
        self.rules = conj.rules
        self.strings = strings
        self.annotations = annotations
        self.report = report
        self.strict = strict

    def object(self, members: list[Subschema]) -> Expr:
        members = members + self.annotations.evaluated(members, "unevaluatedProperties")
        min_p, max_p = 0, None
        names_node = ANY_TEXT
        views = [(m, shape(m).object) for m in members]
        order, required = key_order(views)
        for m, view in views:
            if view.min_properties is not None:
                min_p = max(min_p, view.min_properties)
            if view.max_properties is not None:
                v = view.max_properties
                max_p = v if max_p is None else min(max_p, v)
            if view.has_property_names:
                names_node = rx.intersect(names_node, self.names_admitted(
                    Subschema(m.uri + "/propertyNames", view.property_names, m.base)))
        # Declared keys: each member constrains the value by properties, else by matching
        # patternProperties, else by additionalProperties. A member with none of these
        # that admits any other key adds nothing to any value (most members of a wide
        # conjunction: allOf mixins, rewritten ifs), so only the others are asked.
        strict = self.strict
        valued = [(m, view) for m, view in views if view.properties
                  or view.pattern_properties or view.extra(strict) is not True]
        declared = []
        for k in order:
            check_time()
            # (any text is every key: ``k`` is a str, so it encodes)
            if names_node is not ANY_TEXT and not rx.matches(names_node, k.encode("utf-8")):
                if k in required:
                    return Terminal(rx.EMPTY)
                continue
            value_members: list[Subschema] = []
            forbidden = False
            for m, view in valued:
                subs = self.value_schemas_for_key(m, view, k)
                if subs is None:
                    forbidden = True
                    break
                value_members.extend(subs)
            if forbidden:
                if k in required:
                    return Terminal(rx.EMPTY)
                continue
            declared.append((k, self.conj.conj_ref(value_members), k in required))
        extras = self.extra_classes(views, list(order), names_node)
        needs = tuple(self.outside_region(view.key_outside, m) for m, view in views
                      if view.key_outside is not None)
        if extras and min_p > len(declared) + 1:
            # Extra keys may repeat (JSON allows it) and a repeated key counts once in the
            # parsed object, so extra keys are only sure to add one distinct key.
            self.report.unsupported("minProperties that additional properties must help reach",
                             members[0], "minProperties")
            min_p = len(declared) + 1  # lenient: enforce what can be enforced soundly
        return self.object_body(declared, extras, min_p, max_p, needs)

    def names_admitted(self, pn: Subschema, exact: bool = False) -> rx.Node:
        """The key texts a ``propertyNames`` schema admits: string keywords, ``enum``/
        ``const`` and ``not`` of those. ``exact``: for a complement, so no ``format``
        (its automaton leaves some valid strings out)."""
        if pn.schema is True or pn.schema is False:
            return ANY_TEXT if pn.schema else rx.EMPTY
        sub = self.conj.expand([pn])
        if sub is None:
            return rx.EMPTY
        allowed = NAME_KEYWORDS - ({"format"} if exact else set())
        for x in sub:
            s = shape(x)
            n = s.not_ if "not" in s.keywords else {}
            if (s.keywords - allowed or ("type" in s.keywords and s.type != "string")
                    or not isinstance(n, (dict, Shape))
                    or set(keywords_of(n)) - ANNOTATIONS - {"enum", "const"}):
                # a complement's: the user's position
                embedded = pn.schema.embedded if type(pn.schema) is Shape else None
                self.report.unsupported("propertyNames beyond string constraints",
                                        embedded if embedded is not None else pn, None)
                if exact:  # lenient: the complement admits nothing (the strict side)
                    return ANY_TEXT
        values = enumerated(sub)
        node = self.strings.string_constraints(sub)
        if values is not None:
            node = rx.intersect(node, rx.alt_of(
                rx.literal(v.encode()) for v in values if isinstance(v, str)))
        return node

    def outside_region(self, spec: KeyOutside, m: Subschema) -> rx.Node:
        """The keys outside ``spec``'s names, (unanchored) patterns and the names its
        ``admitted`` schema admits."""
        region = utf8.text_except(list(spec.names))
        if spec.patterns:
            region = rx.intersect(region, rx.complement(rx.alt_of(
                self.key_pattern(p, m) for p in spec.patterns)))
        if spec.admitted is not None:
            region = rx.intersect(region, rx.complement(self.names_admitted(
                Subschema(m.uri + "/~keyOutside", spec.admitted, m.base), exact=True)))
        return region

    def value_schemas_for_key(self, m: Subschema, view: ObjectPart,
                              key: str) -> list[Subschema] | None:
        """What member ``m`` requires of the value of ``key`` (None: the key is forbidden)."""
        props = view.properties
        out = []
        if key in props:
            out.append(Subschema(f"{m.uri}/properties/{escape(key)}", props[key], m.base))
        for pat, sub in view.pattern_properties.items():
            if rx.matches(self.key_pattern(pat, m), key.encode("utf-8")):
                out.append(Subschema(f"{m.uri}/patternProperties/{escape(pat)}", sub, m.base))
        if out:
            return out
        add = view.extra(self.strict)
        if add is True:  # (a true member adds nothing to the value's conjunction)
            return []
        if add is False:
            return None
        return [Subschema(f"{m.uri}/additionalProperties", add, m.base)]


    def key_pattern(self, pat: str, m: Subschema) -> rx.Node:
        """A ``patternProperties`` regex (unanchored), errors located at its pointer."""
        where = f"{pointer(m, 'patternProperties')}/{escape(pat)}"
        try:
            return parse_regex_search(pat)
        except GrammarError as e:
            raise type(e)(f"patternProperties: {e.message}",
                          f"{where} {e.location or ''}".strip()) from None

    def extra_classes(self, views: list[tuple[Subschema, ObjectPart]], declared: list[str],
                      names_node: rx.Node) -> list[tuple[rx.Node, Expr]]:
        """Key classes for undeclared keys: (key regex, value expression), pairwise disjoint."""
        # A member that admits no undeclared key leaves no class. (Not where some member
        # has patternProperties: reading them below reports a malformed pattern.)
        if not any(view.pattern_properties for _, view in views) and any(
                view.extra(self.strict) is False for _, view in views):
            return []
        not_declared = utf8.text_except(declared)
        classes: list[tuple[rx.Node, list[Subschema]]] = [
            (not_declared if names_node is ANY_TEXT else rx.intersect(names_node, not_declared),
             [])]
        for m, view in views:
            # Key regions by the set of patterns they match (overlapping patterns give
            # regions that match several: their values meet every matching schema).
            regions: list[tuple[rx.Node, list[Subschema]]] = [(ANY_TEXT, [])]
            add = view.extra(self.strict)
            for pat, sub in view.pattern_properties.items():
                node = self.key_pattern(pat, m)  # (read even where unused: it may be malformed)
                if trivial(sub) and trivial(add):
                    # A key matching it or not takes any value: splitting the keys by it
                    # would only add a complement of the pattern to every key, walked
                    # cold in each scan (``^.{1,255}$``: 65 ms for the first key).
                    continue
                pm = Subschema(f"{m.uri}/patternProperties/{escape(pat)}", sub, m.base)
                split = []
                for region, subs in regions:
                    inside = rx.intersect(region, node)
                    outside = rx.intersect(region, rx.complement(node))
                    if inside is not rx.EMPTY:
                        split.append((inside, subs + [pm]))
                    if outside is not rx.EMPTY:
                        split.append((outside, subs))
                regions = split
                if len(regions) > 256:
                    raise LimitExceeded("patternProperties overlap in too many ways")
            parts = [(region, subs) for region, subs in regions if subs]
            rest = [region for region, subs in regions if not subs]
            if add is not False and rest:
                parts.append((rx.alt_of(rest), [Subschema(f"{m.uri}/additionalProperties", add,
                                                       m.base)]))
            refined = []
            for node, subs in classes:
                for pnode, psubs in parts:
                    # Key regions all lie inside ANY_TEXT: meeting it changes nothing
                    # (and a plain node stays plain, so its scans stay cheap and shared).
                    both = (node if pnode is ANY_TEXT else pnode if node is ANY_TEXT
                            else rx.intersect(node, pnode))
                    if both is not rx.EMPTY:
                        refined.append((both, subs + psubs))
            classes = refined
        out = []
        for node, subs in classes:
            value = self.conj.conj_ref(subs) if subs else self.json.any_value()
            out.append((node, value))
        return out

    def object_body(self, declared, extras, min_p: int, max_p: int | None,
                    needs: tuple[rx.Node, ...] = ()) -> Expr:
        """``{`` members in schema order, then extra members, with count bounds ``}``.

        ``needs``: key regions each of which some key must fall in (the complement of
        ``additionalProperties: false``). A declared key meets the regions it lies in;
        extra keys meet the rest (:meth:`extras_meeting`).
        """
        if len(declared) > MAX_DECLARED_PROPERTIES:
            raise LimitExceeded(f"an object declares more than {MAX_DECLARED_PROPERTIES:,} "
                                "properties")
        js = self.json
        cap = max_p if max_p is not None else min_p
        memo: dict[tuple[int, int, bool, frozenset], Expr] = {}
        extra_member = None
        if extras:
            extra_member = Choice(tuple(
                js.member(string_node(node), value) for node, value in extras))
        meets = [frozenset(j for j, region in enumerate(needs)
                           if rx.matches(region, name.encode("utf-8")))
                 for name, _, _ in declared]

        def rule_for(key, result: Expr) -> Expr:
            rule = f"obj{len(self.rules)}"
            self.rules[rule] = result
            memo[key] = Ref(rule)
            return memo[key]

        def tail(i: int, n: int, first: bool, unmet: frozenset) -> Expr:
            """Members from the i-th declared one on, n counted so far; ``first``: none
            written yet, and (see JsonPieces.enclose) at least one must be; ``unmet``:
            the regions of ``needs`` no key has fallen in yet."""
            key = (i, n, first, unmet)
            if key in memo:
                return memo[key]
            if i == len(declared):
                # Declared keys appear at most once; extra keys may repeat, so together
                # they are only sure to add one distinct key towards minProperties.
                lo = max(min_p - n, 1 if first else 0)
                hi = None if max_p is None else max_p - n
                if lo > 1 or (lo == 1 and extra_member is None):
                    return rule_for(key, Terminal(rx.EMPTY))
                if unmet:
                    return rule_for(key, self.extras_meeting(needs, unmet, extras,
                                                             extra_member, first, hi))
                result: Expr = self.extra_run(extra_member, first, lo, hi)
            else:
                name, value, req = declared[i]
                member = js.member(name, value)
                head = member if first else Seq((js.item_sep(), member))
                nxt = min(n + 1, cap) if max_p is not None or min_p else n
                if max_p is not None and n + 1 > max_p:
                    with_it: Expr = Terminal(rx.EMPTY)
                else:
                    with_it = Seq((head, tail(i + 1, nxt, False, unmet - meets[i])))
                result = with_it if req else Choice((with_it, tail(i + 1, n, first, unmet)))
            return rule_for(key, result)

        empty = min_p == 0 and not any(req for _, _, req in declared) and not needs
        try:
            return js.enclose("{", tail(0, 0, True, frozenset(range(len(needs)))), "}", empty)
        finally:
            # A recursive closure holds itself (function -> cell -> function): left so,
            # the compile's whole state (rules, members, this compiler) would wait for
            # the cyclic collector, whose pass over it then lands in some later step.
            tail = rule_for = None  # type: ignore[assignment]

    def extra_run(self, extra_member: Expr | None, first: bool, lo: int,
                  hi: int | None) -> Expr:
        """``lo..hi`` extra members, each after a separator unless ``first``."""
        if extra_member is None or hi == 0:
            return Terminal(rx.EPS if lo == 0 and (hi is None or hi >= 0) else rx.EMPTY)
        sep = self.json.item_sep()
        return (separated(extra_member, sep, lo, hi) if first
                else repeat_with_sep(extra_member, sep, lo, hi))

    def extras_meeting(self, needs: tuple[rx.Node, ...], unmet: frozenset, extras,
                       extra_member: Expr | None, first: bool, hi: int | None) -> Expr:
        """Extra members, at most ``hi``, whose keys fall in every region of ``needs``
        named in ``unmet``: one rule per (regions still unmet, members still allowed),
        each extra key class split by the regions it lies in (one way to read a text)."""
        if hi is not None and hi > MAX_COUNTED_EXTRAS:
            raise LimitExceeded(f"maxProperties above {MAX_COUNTED_EXTRAS} with keys "
                                "required outside the declared ones")
        js = self.json
        sep = js.item_sep()
        memo: dict[tuple[frozenset, int | None, bool], Expr] = {}

        def cells(left: frozenset) -> list[tuple[Expr, frozenset]]:
            """The extra members split by which of the regions ``left`` their key is in."""
            out: list[tuple[Expr, frozenset]] = []
            for node, value in extras:
                parts: list[tuple[rx.Node, frozenset]] = [(node, frozenset())]
                for j in left:
                    parts = [(piece, hits | ({j} if inside else set()))
                             for part, hits in parts
                             for piece, inside in ((rx.intersect(part, needs[j]), True),
                                                   (rx.intersect(part, rx.complement(needs[j])),
                                                    False))
                             if piece is not rx.EMPTY]
                out += [(js.member(string_node(piece), value), hits) for piece, hits in parts]
            return out

        def rest(left: frozenset, most: int | None, first: bool) -> Expr:
            key = (left, most, first)
            if key in memo:
                return memo[key]
            rule = f"obj{len(self.rules)}"
            self.rules[rule] = Terminal(rx.EMPTY)  # (the name taken: the rule may recur)
            memo[key] = Ref(rule)
            if not left:
                result: Expr = self.extra_run(extra_member, first, 0, most)
            elif most == 0:
                result = Terminal(rx.EMPTY)
            else:
                after = None if most is None else most - 1
                result = Choice(tuple(
                    Seq((*(() if first else (sep,)), member, rest(left - hits, after, False)))
                    for member, hits in cells(left)) or (Terminal(rx.EMPTY),))
            self.rules[rule] = result
            return memo[key]

        try:
            return rest(unmet, hi, first)
        finally:
            rest = None  # type: ignore[assignment]  # (see object_body)
