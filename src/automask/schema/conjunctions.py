"""Conjunctions: the rule for the schema objects that must all hold at one position.

A schema position compiles as a *conjunction*: the list of schema objects
that must all hold there (the schema itself, its ``allOf`` members, the
targets of its ``$ref``s). Combinators distribute over it (``anyOf``/
``oneOf`` become a choice of conjunctions, ``not`` a choice of the complement's
branches), and for each JSON type the members' keywords combine exactly, in the
family modules (:mod:`~automask.schema.strings`, :mod:`~automask.schema.number_keywords`,
:mod:`~automask.schema.objects`, :mod:`~automask.schema.arrays`). Every conjunction
becomes one grammar rule, memoized by the schema positions it holds, so recursive
``$ref``s become recursive rules with no depth limit.
"""

from __future__ import annotations

from collections.abc import Callable

from automask.budget import check_time_now
from automask.errors import GrammarError, LimitExceeded
from automask.grammar.ir import Choice, Expr, Ref, Terminal
from automask.regex import nodes as rx
from automask.regex.parser import parse_regex
from automask.schema.annotations import Annotations, pending
from automask.schema.arrays import Arrays
from automask.schema.complement import Negation, branches_beside, expanded, negation, without
from automask.schema.concrete import ConcreteValues
from automask.schema.conditionals import conditionals, tag_cases
from automask.schema.json_text import JsonPieces, literal_node, values_node
from automask.schema.keywords import HANDLED, check_values
from automask.schema.lowering import Options, Report
from automask.schema.normalize import negated_types_of, shape, types_of
from automask.schema.number_keywords import NumberKeywords
from automask.schema.objects import Objects
from automask.schema.one_of import INERT_FOR, OneOf
from automask.schema.one_of_objects import OneOfObjects
from automask.schema.refs import References, changes_base, scope_of
from automask.schema.same_content import SameContent
from automask.schema.shapes import Shape, keywords_of, negated
from automask.schema.strings import Strings
from automask.schema.subschema import (
    ANNOTATIONS,
    TYPES,
    Subschema,
    is_number,
    json_type,
    pointer,
)
from automask.schema.values import enumerated

# What a schema may hold beside "$ref" and still say nothing of its own: annotations,
# less those that change what references resolve to (a base URI, anchors, definitions).
DESCRIPTIVE = frozenset({"$ref"}) | ANNOTATIONS - {
    "$schema", "$id", "$anchor", "$dynamicAnchor", "$defs", "definitions", "$vocabulary",
    "contentSchema"}


def only_a_reference(m: Subschema) -> bool:
    """Whether ``m`` is a plain ``{"$ref": …}``, annotations aside."""
    keywords = shape(m).keywords
    return "$ref" in keywords and keywords <= DESCRIPTIVE


def held_positions(members: list[Subschema]) -> set[str]:
    """The positions whose schema objects hold wherever all of ``members`` do: theirs,
    and for a member less the keywords expansion followed (``…/~``), its object's."""
    return {u[:-2] if u.endswith("/~") else u for u in (m.uri for m in members)}


ALL_TYPES = frozenset(TYPES)
EMBEDDED = frozenset({"embedded"})
NO_TYPES: frozenset[str] = frozenset()


def position_of(uri: str, root_base: str) -> str:
    """The JSON pointer of a member URI without the compiler's own steps: ``/~anyOf``
    (the schema less its ``anyOf``, at the same position) is left out, and a pointer
    stops before a step into a schema the compiler wrote (``/~neg0``, a complement);
    resources other than the root document keep their base URI."""
    uri = uri.split("|", 1)[-1]  # no dynamic scope
    base, _, fragment = uri.rpartition("#")
    parts = []
    for part in fragment.split("/"):
        if part in ("~anyOf", "~oneOf", "~not"):
            continue
        if part.startswith("~") and part[1:2] not in ("0", "1"):
            break
        parts.append(part)
    pointer = "#" + "/".join(parts)
    return pointer if base == root_base else f"{base}{pointer}"


#: An enum of more scalar values than this is one lexeme (their alternation, a prefix tree
#: of their texts), not one lexeme each: a value position of a 1,554-value enum was a
#: lexer state of 1,554 lexemes, its first mask 1,554 scans (375 ms), each lexer
#: transition a derivative per member. Below it, one lexeme per value keeps the values'
#: scans shared with every schema that has them (true, false, null, short names).
ENUM_LEXEMES = 16


class Conjunctions:
    """Builds (and memoizes) the rule of each conjunction, through the keyword families."""

    def __init__(self, options: Options, json: JsonPieces, refs: References, tracks: bool,
                 root_base: str, *, share_equal: bool = True):
        self.options = options
        self.rules = json.rules
        self.json = json
        self.refs = refs
        # unevaluated* need to know which subschemas hold (annotations): then a lone
        # `if` is distributed too, and anyOf over the subsets of its branches.
        self.tracks = tracks
        self.root_base = root_base
        self.positions: dict[str, Subschema] = {}  # uri -> the subschema as the schema has it
        # Every member of the user's document met in a conjunction, one object per (uri,
        # schema object, base): what is read of a position (its shape, its expansion, its
        # checks) is then made once however many conjunctions hold it. (The key holds the
        # schema's id, and the value the schema: no id is reused while the compile runs.)
        # Schemas the compiler writes are not held here: most are made for one
        # distribution and dropped (held, they tripled a large compile's peak memory);
        # those that recur are reached through a document position's expansion, which
        # keeps the same object, shape and all.
        self._interned: dict[tuple[str, int, str], Subschema] = {}
        self._memo: dict[tuple[str, ...], str] = {}
        self._negations: dict[str, Negation] = {}  # operand position -> its complement
        self.keys: dict[str, tuple[str, ...]] = {}  # conjunction rule -> its key
        self.sites: dict[str, str] = {}  # memo rule -> the subschema URI it compiles first
        # Conjunctions being compiled at the current instance position, and per compile
        # under way the open ones it read as their local part (see conj_ref: a reference
        # back at the same position). A rule that read some is right only where they are
        # open: it is kept in _scoped, with their keys, not in _memo.
        self._here: set[tuple[str, ...]] = set()
        self._assumed: list[set[tuple[str, ...]]] = []
        self._scoped: dict[tuple[str, ...], list[tuple[frozenset, str]]] = {}
        # Equal members, one rule (see same_content); not where positions carry meaning
        # (tracked annotations, a dynamic scope) nor where each position must warn.
        self.same = SameContent(share_equal and not tracks and not refs.scoped
                                and not options.lenient)
        self.report = report = Report(options.lenient)
        self.strings = strings = Strings(report, options.strict)
        self.numbers = numbers = NumberKeywords(report)
        self.annotations = annotations = Annotations(self, refs, self.positions, report,
                                                     options.strict)
        self.objects = objects = Objects(self, strings, annotations, report, options.strict)
        self.arrays = Arrays(self, annotations, report)
        self.one_of = OneOf(self, strings)
        self.one_of_objects = OneOfObjects(self, objects, self.one_of, options)
        self.values = ConcreteValues(self, strings, numbers, objects, report, options.strict)

    # what close() deletes: a class compiled by mypyc must name them to allow it
    __deletable__ = ["strings", "numbers", "annotations", "objects", "arrays", "one_of",
                     "one_of_objects", "values"]

    def close(self) -> None:
        """Drops the keyword families: each holds this builder, and the cycles would leave
        the compile's whole state to the cyclic collector, whose pass over it would then
        land in some later step (see :mod:`automask.gc_pause`)."""
        del self.strings, self.numbers, self.annotations, self.objects, self.arrays
        del self.one_of, self.one_of_objects, self.values
        for table in (self.positions, self._interned, self._memo, self._scoped, self._negations):
            table.clear()

    def conj_ref(self, members: list[Subschema]) -> Expr:
        """A rule for the conjunction of ``members`` (memoized; recursion-safe).

        Schemas that refer to themselves at the same instance position (through
        ``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/``else`` or the
        dependency keywords, without going into a property or an item) are read as
        their greatest fixpoint: the reference back adds no constraint beyond the ones
        the schema states itself. So ``{"$ref": "#"}`` and ``{"anyOf": [{"$ref": "#"}]}``
        accept any JSON value, ``{"type": "string", "anyOf": [{"$ref": "#"}]}`` any
        string, and ``{"anyOf": [{"$ref": "#"}, {"type": "string"}]}`` anything, as
        ``allOf`` and ``$ref`` cycles always were. (The specification leaves such
        schemas undefined: a validator following the reference would never stop. The
        reading is the one under which the reference is a constraint that holds of
        whatever satisfies the rest.) A conjunction met again at the position where it
        is open stands for its local part (:meth:`typed`: every keyword but the
        in-place combinators), which for combinators other than ``not`` gives the
        greatest fixpoint exactly (one step down from "anything" reaches it). A schema
        that negates itself (``{"not": {"$ref": "#"}}``) has no fixpoint at all; the same
        substitution reads it too (as any value, there).
        """
        expanded_members = self.expand(members)
        if expanded_members is None:
            return Terminal(rx.EMPTY)
        members = expanded_members
        if not members:
            return self.json.any_value()
        key = self._key(members)
        if key in self._here:  # met again where it is open: its local part
            self._assumed[-1].add(key)
            return self._local_ref(key, members)
        name = self._memo.get(key)
        if name is None:
            for held, scoped in self._scoped.get(key, ()):
                if held <= self._here:  # made where the same ones were open
                    self._assumed[-1] |= held
                    return Ref(scoped)
            content = self.same.key(members)
            if content is not None and (shared := self.same.rules.get(content)) is not None:
                self.same.shared += 1  # equal members made a rule elsewhere
                self._memo[key] = shared
                return Ref(shared)
            name = self._new_rule(key, members)
            self._memo[key] = name
            self._here.add(key)
            self._assumed.append(set())
            try:
                self.rules[name] = self.conj(members)
            except LimitExceeded as e:
                if e.location is None:  # the innermost schema position being compiled
                    raise LimitExceeded(e.message,
                                        position_of(members[0].uri, self.root_base)) from None
                raise
            finally:
                self._here.discard(key)
                needs = self._assumed.pop()
            needs.discard(key)
            if needs:
                # It read enclosing conjunctions as their local parts: right where they
                # are open (at this position), not elsewhere. (Only conjunctions made in
                # place are ever read so, and those hold a rest member, ``…/~anyOf`` and
                # the like, which no plain schema expands to: a reference from inside a
                # value never meets one, so a memo hit from there is never one of these.)
                del self._memo[key]
                self._scoped.setdefault(key, []).append((frozenset(needs), name))
                self._assumed[-1] |= needs
            elif content is not None:
                self.same.rules[content] = name
        return Ref(name)

    def _key(self, members: list[Subschema]) -> tuple[str, ...]:
        """The memo key of a conjunction: the positions of its members, less those that
        only refer to another (``{"$ref": …}`` with annotations), whose target is a
        member too. So every property that refers to one definition shares one rule:
        160 properties ``{"$ref": "#/definitions/record"}`` of a 230-key object were
        160 compiles of that object. (Not under ``unevaluated*``, whose annotations
        are tracked by position.)"""
        uris = {m.uri for m in members}
        if not self.tracks:
            own = {m.uri for m in members if not only_a_reference(m)}
            if own:
                uris = own
        return tuple(sorted(uris))

    def _new_rule(self, key: tuple[str, ...], members: list[Subschema]) -> str:
        if len(self.keys) >= self.options.max_rules:
            raise LimitExceeded(f"schema needs more than {self.options.max_rules} rules")
        check_time_now()  # distributions (oneOf, not, anyOf subsets) can multiply rules
        name = f"s{len(self.keys)}:{key[0].rsplit('#', 1)[-1][-40:] or '/'}"
        self.keys[name] = key
        self.sites[name] = members[0].uri  # the position (the others hold there too)
        return name

    def _local_ref(self, key: tuple[str, ...], members: list[Subschema]) -> Expr:
        """A rule for the local part of an open conjunction (see :meth:`conj_ref`)."""
        local = ("~local", *key)
        name = self._memo.get(local)
        if name is None:
            name = self._new_rule(key, members)
            self._memo[local] = name
            self.rules[name] = self.typed(members)
        return Ref(name)

    def expand(self, members: list[Subschema]) -> list[Subschema] | None:
        """Flatten ``$ref`` and ``allOf``; None when some member is ``false``."""
        out: dict[str, Subschema] = {}
        todo = members[::-1]  # a stack: the next member is last
        interned = self._interned
        while todo:
            m = todo.pop()
            if m.uri in out:
                continue
            s = m.schema
            if s is True:
                continue
            if s is False:
                return None
            if "expansion" in m.memo:
                known = m
            else:
                known = interned.get((m.uri, id(s), m.base)) or self._intern(m)
            out[known.uri] = known
            # depth first: a member's subschemas come right after it (property order)
            todo += known.memo["expansion"]
        return list(out.values())

    def _intern(self, m: Subschema) -> Subschema:
        """The one object for ``m``'s position (its base URI applied), with its expansion
        (pushed reversed: ``expand`` pops from the end)."""
        s = m.schema
        if not isinstance(s, (dict, Shape)):
            raise GrammarError("a schema is an object or a boolean", pointer(m))
        key = (m.uri, id(s), m.base)
        if changes_base(s):
            base = self.refs.rebase(m.base, s)
            m = Subschema(self.refs.scoped_uri(m.uri, self.refs.enter(scope_of(m.uri), base)),
                          s, base)
        m = self._interned.get((m.uri, id(s), m.base), m)
        if "expansion" not in m.memo:  # (an error leaves nothing interned)
            m.memo["expansion"] = self._children(m)[::-1]
        if type(s) is dict:
            self._interned[key] = self._interned[(m.uri, id(s), m.base)] = m
        self.positions.setdefault(m.uri, m)
        return m

    def _children(self, m: Subschema) -> list[Subschema]:
        """The members ``m`` brings into its conjunction: the targets of its references,
        its embedded subschema, its ``allOf`` members and the rewrites of its conditional
        keywords (made once per position: see ``_interned``)."""
        s = shape(m)
        children: list[Subschema] = []
        if "$ref" in s.keywords:
            if not isinstance(s.ref, str):
                raise GrammarError("$ref must be a string", pointer(m, "$ref"))
            children.append(self.refs.resolve(s.ref, m))
        if "$dynamicRef" in s.keywords:
            children.append(self.refs.dynamic_target(m))
        if s.embedded is not None:
            children.append(s.embedded)
        all_of = s.all_of if "allOf" in s.keywords else ()
        if not isinstance(all_of, (list, tuple)) or not all_of and "allOf" in s.keywords:
            raise GrammarError("allOf must be a non-empty array", pointer(m, "allOf"))
        for i, sub in enumerate(all_of):
            children.append(Subschema(f"{m.uri}/allOf/{i}", sub, m.base))
        return children + conditionals(m, self.tracks)

    # ------------------------------------------------------------------ conjunctions
    def conj(self, members: list[Subschema]) -> Expr:
        for m in members:
            self.check_keywords(m)
        cases = None if self.tracks else tag_cases(members)
        if cases is not None:
            return Choice(tuple(self.conj_ref(c) for c in cases))
        # Distribute the first anyOf/oneOf over the rest.
        for i, m in enumerate(members):
            view = shape(m)
            for kw in ("anyOf", "oneOf"):
                branches = view.branches(kw)
                if branches is None:
                    continue
                if not isinstance(branches, (list, tuple)) or not branches:
                    raise GrammarError(f"{kw} must be a non-empty array", pointer(m, kw))
                # The members are expanded already: strip their $ref/allOf so that
                # expanding the branches does not bring this combinator back.
                rest = [expanded(x) for x in members[:i] + members[i + 1:]]
                rest.append(Subschema(m.uri + f"/~{kw}", without(m.schema, kw), m.base))
                subs = [Subschema(f"{m.uri}/{kw}/{j}", b, m.base) for j, b in enumerate(branches)]
                if kw == "anyOf" and self.tracks and any(pending(x) for x in members) and \
                        len(subs) > 1:
                    return self.annotations.any_of_subsets(rest, subs, m)
                # a branch the rest contradicts holds nowhere here (for oneOf, it never
                # holds beside another either); if-chains over a required tag distribute
                # to one case per tag, not to every subset of the ifs
                subs = [b[0] for b in self.one_of.consistent([[x] for x in subs], rest)]
                if not subs:
                    return Terminal(rx.EMPTY)
                overlaps = self.one_of.overlaps(subs, rest) if kw == "oneOf" else []
                if any(overlaps):
                    split = self.one_of.one_of_by_type(subs, rest, m)
                    if split is None:
                        split = self.one_of_objects.lower(rest, subs, m)
                    if split is not None:
                        return split
                    # Exactly one: branch i holds and every other branch fails; one
                    # disjoint from branch i fails wherever it holds (no complement).
                    alternatives = [self.conj_ref(rest + [sub] + [
                        negated(subs[j]) for j in overlaps[i]]) for i, sub in enumerate(subs)]
                    return Choice(tuple(alternatives))
                alternatives = [self.conj_ref(rest + [sub]) for sub in subs]
                return Choice(tuple(alternatives))
        for i, m in enumerate(members):
            view = shape(m)
            if "not" not in view.keywords or view.not_simple:
                continue
            before = [expanded(x) for x in members[:i]] + [
                Subschema(m.uri + "/~not", without(m.schema, "not"), m.base)]
            after = [expanded(x) for x in members[i + 1:]]
            branches = self.complement_beside(Subschema(m.uri + "/not", view.not_, m.base),
                                              members[:i] + members[i + 1:])
            # a branch the other members contradict (a key they require, absent there;
            # another type) adds nothing, and each one left multiplies the rules made
            # for every `not` still to distribute
            others = before + after
            branches = self.one_of.consistent(branches, others)
            if not branches:
                return Terminal(rx.EMPTY)
            if self.one_of.absorbed(branches, others):
                # the others imply the complement: the `not` adds nothing (C and not X is
                # C where C implies not X), and distributing it multiplied the rules
                return self.conj_ref(others)
            # the complement's members right after the `not`'s own (property order)
            return Choice(tuple(self.conj_ref(before + b + after) for b in branches))
        return self.typed(members)

    def complement_beside(self, operand: Subschema, others: list[Subschema]
                          ) -> list[list[Subschema]]:
        """The branches of ``operand``'s complement where ``others`` hold (see
        :func:`~automask.schema.complement.branches_beside`). The complement is made once
        per position: a ``not`` is distributed again in every conjunction that holds it
        (one of 76 operands was complemented 1,472 times, 18% of a compile)."""
        parts = self._negations.get(operand.uri)
        if parts is None:
            parts = self._negations[operand.uri] = negation(self, self.report, operand)
        return branches_beside(parts, held_positions(others))

    def inside(self, build: Callable[[], Expr]) -> Expr:
        """``build()``, whose conjunctions are of the values inside the one being
        compiled (its members or items): another instance position, where none of the
        conjunctions open here is (see :meth:`conj_ref`)."""
        here, self._here = self._here, set()
        try:
            return build()
        finally:
            self._here = here

    def types(self, members: list[Subschema]) -> set[str]:
        """The JSON types every member's ``type`` allows."""
        return types_of(members)

    def typed(self, members: list[Subschema]) -> Expr:
        types = self.types(members)
        for m in members:
            types -= self.negated_types(m)
        values = enumerated(members)
        if values is not None:
            ok = [v for v in values if json_type(v) in types and self.values.value_ok(v, members)]
            if not ok:
                return Terminal(rx.EMPTY)
            scalars = [v for v in ok if not isinstance(v, (dict, list))]
            if len(scalars) <= ENUM_LEXEMES:
                return Choice(tuple(self.json.value(v) for v in ok))
            structured = [self.json.value(v) for v in ok if isinstance(v, (dict, list))]
            return Choice((Terminal(values_node(scalars)), *structured))
        alternatives: list[Expr] = []
        gone = [v for m in members for v in shape(m).not_excludes]
        scalar = rx.EMPTY
        if "null" in types and not any(v is None for v in gone):
            scalar = rx.alt(scalar, literal_node(None))
        if "boolean" in types:
            for b in (True, False):
                if not any(v is b for v in gone):
                    scalar = rx.alt(scalar, literal_node(b))
        if "string" in types:
            scalar = rx.alt(scalar, self.strings.string(members))
        numeric = None
        if "number" in types and "integer" not in types:
            # Numbers that are not integers: a nonzero fraction, no exponent (sound; the
            # exponent forms of non-integers are not generated).
            numeric = rx.intersect(self.numbers.number(members, integer=False),
                                   parse_regex(r"-?(0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"))
        elif "number" in types:
            numeric = self.numbers.number(members, integer=False)
        elif "integer" in types:
            numeric = self.numbers.number(members, integer=True)
        if numeric is not None:
            numbers_gone = [v for v in gone if is_number(v)]
            if numbers_gone:
                numeric = rx.intersect(numeric, rx.complement(rx.alt_of(
                    literal_node(v) for v in numbers_gone)))
            scalar = rx.alt(scalar, numeric)
        if scalar is not rx.EMPTY:
            alternatives.append(Terminal(scalar))
        if "object" in types:
            alternatives.append(self.inside(lambda: self.objects.object(members)))
        if "array" in types:
            alternatives.append(self.inside(lambda: self.arrays.array(members)))
        if not alternatives:
            return Terminal(rx.EMPTY)
        return alternatives[0] if len(alternatives) == 1 else Choice(tuple(alternatives))

    # ------------------------------------------------------------------ keywords
    def check_keywords(self, m: Subschema) -> None:
        if "checked" in m.memo:  # an interned member, checked when first met
            return
        s = m.schema
        if type(s) is Shape:  # the compiler's own: well formed
            m.memo["checked"] = True
            return
        check_values(m)
        for kw in s:
            if kw in HANDLED or kw in ANNOTATIONS:
                continue
            if kw == "$recursiveRef":
                self.report.unsupported(kw, m, kw)
        m.memo["checked"] = True

    def negated_types(self, m: Subschema) -> frozenset[str]:
        """Types excluded by ``not`` (only ``not: {type: …}`` style negations are exact;
        made on first use, then kept with ``m``)."""
        found = m.memo.get("negated")
        if found is None:
            found = m.memo["negated"] = self._negated_types(m)
        return found

    def _negated_types(self, m: Subschema) -> frozenset[str]:
        view = shape(m)
        n = view.not_
        while type(n) is Shape and n.keywords == EMBEDDED and n.embedded is not None:
            # (a complement's `not`: the subschema it embeds)
            n = n.embedded.schema
        if n is None:
            return NO_TYPES
        if n is True:
            return ALL_TYPES
        if n is False:
            return NO_TYPES
        if not isinstance(n, (dict, Shape)):
            return NO_TYPES
        kws = set(keywords_of(n)) - ANNOTATIONS
        if not kws:
            return ALL_TYPES  # not {} is not true
        if "type" in kws:
            # the types where `n` holds of every value: its type's, less those its other
            # keywords constrain (`not {"type": "string", "minimum": 1}`: every string)
            kws.discard("type")
            return frozenset(t for t in negated_types_of(n) if kws <= INERT_FOR[t])
        if kws <= {"enum", "const"}:
            gone = view.not_excludes
            if any(isinstance(v, (dict, list)) for v in gone):
                self.report.unsupported("'not' of object or array values", m, "not")
            # enforced per type (see excluded_values()), but a type whose every value is
            # excluded is gone whole: null, or both booleans
            whole = {"null"} if any(v is None for v in gone) else set()
            if any(v is True for v in gone) and any(v is False for v in gone):
                whole.add("boolean")
            return frozenset(whole)
        return NO_TYPES  # other forms are distributed by conj()
