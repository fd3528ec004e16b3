"""JSON Schema → grammar IR.

A schema position compiles as a *conjunction*: the list of schema objects
that must all hold there (the schema itself, its ``allOf`` members, the
targets of its ``$ref``s). Combinators distribute over it (``anyOf``/
``oneOf`` become a choice of conjunctions), and for each JSON type the
members' keywords combine exactly: strings by regex intersection, numbers by
the tightest bounds, objects key by key, arrays position by position. Every
conjunction becomes one grammar rule, memoized by the schema positions it
holds, so recursive ``$ref``s become recursive rules with no depth limit.

Nothing is ignored silently: a keyword with a validation meaning that is not
enforced raises :class:`UnsupportedFeature` naming it and its JSON pointer
(``lenient=True`` turns that into a warning and ignores the keyword).
Annotations (``title``, ``description``, ``default``, ``examples``, …) and
unknown keywords carry no validation meaning and are ignored by design.

Parts: :mod:`~automask.schema.refs` (``$id``, anchors, ``$ref``,
``$dynamicRef``), :mod:`~automask.schema.complement` (``not``, the failing side
of ``if`` and ``oneOf``), :mod:`~automask.schema.annotations` (unevaluated*),
:mod:`~automask.schema.arrays` (``contains`` counts, ``uniqueItems``),
:mod:`~automask.schema.keywords` (well-formed values), and
:mod:`~automask.schema.members` (positions and shared helpers).
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

from automask.budget import check_time, check_time_now, time_budget
from automask.errors import EmptyLanguage, GrammarError, LimitExceeded, UnsupportedFeature
from automask.gc_pause import paused_gc
from automask.grammar.ir import Choice, Expr, Grammar, Ref, Repeat, Seq, Terminal, lower
from automask.regex import nodes as rx
from automask.regex import utf8
from automask.regex.parser import parse_regex, parse_regex_search
from automask.schema.annotations import Annotations, _mentions_unevaluated, _pending
from automask.schema.arrays import CountedArrays
from automask.schema.complement import EXPANDED, Inexpressible, complement
from automask.schema.document import load_document
from automask.schema.json_text import (
    ANY_CHAR,
    ANY_TEXT,
    JsonPieces,
    Layout,
    literal_node,
    separated,
    string_node,
)
from automask.schema.keywords import _check_document, _check_values
from automask.schema.members import (
    ANNOTATIONS,
    TYPES,
    Member,
    _count,
    _escape,
    _json_key,
    _json_type,
    _negated,
    _num,
    _opened,
    _pointer,
    _prefix,
    _prefix_kw,
    _rest_items,
    _type_set,
    _types_of,
)
from automask.schema.refs import References, _changes_base, _scope

HANDLED = frozenset({
    "type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf", "not",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
    "minContains", "maxContains", "uniqueItems",
    "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
    # internal keywords of the schemas the compiler writes itself (see complement.py)
    "~ref", "~notString", "~notMultipleOf", "~keyOutside", "$dynamicRef",
})


@dataclass
class Options:
    whitespace: str | int = "flexible"
    strict: bool = False
    lenient: bool = False
    max_whitespace: int = 24
    max_rules: int = 20_000


SCHEMA_SECONDS = 2.0  # default CPU-time limit of a JSON Schema compile


def compile_schema(schema, **options) -> Grammar:
    """The grammar of the JSON texts valid under ``schema`` (a dict, bool, or JSON text as
    str or bytes; checked first by :func:`~automask.schema.document.load_document`):
    ``Grammar.from_json_schema``, whose docstring lists the options. It runs under a
    CPU-time limit, ``max_seconds`` (default :data:`SCHEMA_SECONDS`; None: none)."""
    seconds = options.pop("max_seconds", SCHEMA_SECONDS)
    with paused_gc(), time_budget(seconds, "compiling the JSON Schema", start_now=True):
        return _compile_schema(schema, options)


def _compile_schema(schema, options: dict) -> Grammar:
    schema = load_document(schema)  # JSON, acyclic, UTF-8 strings, bounded depth
    unknown = set(options) - set(Options.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return _SchemaCompiler(schema, Options(**options)).run()
    except RecursionError:
        raise LimitExceeded("schema is nested too deeply to compile", "#") from None
    except LimitExceeded as e:
        if e.location is None:  # a pass over the whole document (or the lowering)
            raise LimitExceeded(e.message, "#") from None
        raise
    finally:
        sys.setrecursionlimit(limit)


def _position(uri: str, root_base: str) -> str:
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


class _SchemaCompiler(References, Annotations, CountedArrays):
    def __init__(self, schema, options: Options):
        self.options = options
        self.rules: dict[str, Expr] = {}
        self.json = JsonPieces(Layout.make(options.whitespace, options.max_whitespace),
                               self.rules)
        self.root_base = "file:///automask/root.json"
        self.docs: dict[str, object] = {}       # base URI -> schema
        self.anchors: dict[str, tuple[object, str, str]] = {}
        self.base_of: dict[int, str] = {}  # id(schema object with an $id) -> its base URI
        self.dynamic: dict[str, int] = {}  # $dynamicAnchor name -> how many declare it
        self.dynamic_names: dict[str, list[str]] = {}  # resource -> its $dynamicAnchors
        self.dynamic_anchors: dict[str, tuple[object, str]] = {}  # resource#name -> schema
        self._index(schema, self.root_base, "")
        _check_document(schema, self.root_base)
        # unevaluated* need to know which subschemas hold (annotations): then a lone
        # `if` is distributed too, and anyOf over the subsets of its branches.
        self.tracks = _mentions_unevaluated(schema)
        self.positions: dict[str, Member] = {}  # uri -> the member as the schema has it
        # Dynamic scope (only when some $dynamicAnchor is declared twice, so that it can
        # matter): the first resource entered that declares each name, carried as a
        # prefix of member URIs so that it reaches every descendant and keys the memo.
        self.scoped = any(n > 1 for n in self.dynamic.values())
        self.scopes: list[tuple[tuple[str, str], ...]] = [()]
        self._scope_ids: dict[tuple[tuple[str, str], ...], int] = {(): 0}
        root_base = self.base_of.get(id(schema), self.root_base)
        self.root = Member(self.scoped_uri(self.root_base + "#", self.enter(0, root_base)),
                           schema, self.root_base)
        self._memo: dict[tuple[str, ...], str] = {}
        self._keys: dict[str, tuple[str, ...]] = {}  # conjunction rule -> its key
        self._sites: dict[str, str] = {}  # memo rule -> the member URI it compiles first
        # Conjunctions being compiled at the current instance position, and per compile
        # under way the open ones it read as their local part (see conj_ref: a reference
        # back at the same position). A rule that read some is right only where they are
        # open: it is kept in _scoped, with their keys, not in _memo.
        self._here: set[tuple[str, ...]] = set()
        self._assumed: list[set[tuple[str, ...]]] = []
        self._scoped: dict[tuple[str, ...], list[tuple[frozenset, str]]] = {}
        # Per member (by uri): its string constraints and the values its ``not`` excludes,
        # read once for all the values of an enum (thousands, each checked against both).
        self._strings_of: dict[str, rx.Node] = {}
        self._excluded_of: dict[str, set] = {}

    # ------------------------------------------------------------------ refs

    # ------------------------------------------------------------------ driver
    def run(self) -> Grammar:
        js = self.json
        self.rules["root"] = Seq((js.lead(self.conj_ref([self.root])), Terminal(js.layout.ws)))
        js.finish()
        # Lexemes stay JSON-token sized (keys, strings, numbers, punctuation), not
        # fused into one regex per object: a lexer state inside a string or a key
        # then recurs across positions and schemas, so its token scan is shared.
        try:
            return lower(self.rules, "root", fuse=False, source="json-schema")
        except EmptyLanguage as e:
            raise self.empty_at(e.rule) from None

    def empty_at(self, rule: str | None) -> EmptyLanguage:
        """The error for a schema that accepts nothing, at the position to blame (the
        conjunction behind ``rule``: a lone member, or the members that contradict)."""
        names = self._keys
        if rule is not None and rule.endswith("+ws"):  # a rule's leading twin (JsonPieces)
            rule = rule[:-3]
        if rule not in names:  # a helper rule of an object or array: its conjunction's
            rule = self._rule_owner(rule, names)
        site = self._sites.get(rule, self.root.uri)
        where = _position(site, self.root_base)
        others: list[str] = []
        for uri in names.get(rule, ()):
            pointer = _position(uri, self.root_base)
            if pointer != where and pointer not in others:
                others.append(pointer)
        also = f" (where {', '.join(others)} must hold too)" if others else ""
        e = EmptyLanguage(f"the schema accepts no JSON value: nothing is valid at {where}{also}",
                          where)
        e.rule = rule
        return e

    def _rule_owner(self, rule: str | None, names: dict) -> str | None:
        """The conjunction rule whose expression made ``rule`` (found through the helper
        rules it refers to, which are not conjunctions; each helper walked once)."""
        seen: set[str] = set()
        for owner in names:
            todo: list[Expr] = [self.rules[owner]]
            while todo:
                e = todo.pop()
                if isinstance(e, Ref):
                    if e.name == rule:
                        return owner
                    if e.name not in names and e.name not in seen and e.name in self.rules:
                        seen.add(e.name)
                        todo.append(self.rules[e.name])
                elif isinstance(e, (Seq, Choice)):
                    todo += e.items
                elif isinstance(e, Repeat):
                    todo.append(e.item)
        return None

    def conj_ref(self, members: list[Member]) -> Expr:
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
        members = self.expand(members)
        if members is None:
            return Terminal(rx.EMPTY)
        if not members:
            return self.json.any_value()
        key = tuple(sorted({m.uri for m in members}))
        if key in self._here:  # met again where it is open: its local part
            self._assumed[-1].add(key)
            return self._local_ref(key, members)
        name = self._memo.get(key)
        if name is None:
            for needs, scoped in self._scoped.get(key, ()):
                if needs <= self._here:  # made where the same ones were open
                    self._assumed[-1] |= needs
                    return Ref(scoped)
            name = self._new_rule(key, members)
            self._memo[key] = name
            self._here.add(key)
            self._assumed.append(set())
            try:
                self.rules[name] = self.conj(members)
            except LimitExceeded as e:
                if e.location is None:  # the innermost schema position being compiled
                    raise LimitExceeded(e.message,
                                        _position(members[0].uri, self.root_base)) from None
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
        return Ref(name)

    def _new_rule(self, key: tuple[str, ...], members: list[Member]) -> str:
        if len(self._keys) >= self.options.max_rules:
            raise LimitExceeded(f"schema needs more than {self.options.max_rules} rules")
        check_time_now()  # distributions (oneOf, not, anyOf subsets) can multiply rules
        name = f"s{len(self._keys)}:{key[0].rsplit('#', 1)[-1][-40:] or '/'}"
        self._keys[name] = key
        self._sites[name] = members[0].uri  # the position (the others hold there too)
        return name

    def _local_ref(self, key: tuple[str, ...], members: list[Member]) -> Expr:
        """A rule for the local part of an open conjunction (see :meth:`conj_ref`)."""
        local = ("~local", *key)
        name = self._memo.get(local)
        if name is None:
            name = self._new_rule(key, members)
            self._memo[local] = name
            self.rules[name] = self.typed(members)
        return Ref(name)

    def expand(self, members: list[Member]) -> list[Member] | None:
        """Flatten ``$ref`` and ``allOf``; None when some member is ``false``."""
        out: dict[str, Member] = {}
        todo = list(members)
        while todo:
            m = todo.pop(0)
            if m.uri in out:
                continue
            s = m.schema
            if s is True:
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                raise GrammarError("a schema is an object or a boolean", _pointer(m))
            if _changes_base(s):
                base = self.rebase(m.base, s)
                m = Member(self.scoped_uri(m.uri, self.enter(_scope(m.uri), base)), s, base)
            out[m.uri] = m
            self.positions.setdefault(m.uri, m)
            children: list[Member] = []
            if "$ref" in s:
                if not isinstance(s["$ref"], str):
                    raise GrammarError("$ref must be a string", _pointer(m, "$ref"))
                children.append(self.resolve(s["$ref"], m))
            if "$dynamicRef" in s:
                children.append(self.dynamic_target(m))
            if "~ref" in s:
                children.append(s["~ref"])
            all_of = s.get("allOf", [])
            if not isinstance(all_of, list) or (not all_of and "allOf" in s):
                raise GrammarError("allOf must be a non-empty array", _pointer(m, "allOf"))
            for i, sub in enumerate(all_of):
                children.append(Member(f"{m.uri}/allOf/{i}", sub, m.base))
            # depth first: a member's subschemas come right after it (property order)
            todo[:0] = children + self.conditionals(m)
        return list(out.values())

    def conditionals(self, m: Member) -> list[Member]:
        """Members equivalent to ``if``/``then``/``else`` and the dependency keywords of
        ``m``: unions of disjoint cases (the ``if`` holds or fails; the key is absent or
        present), which ``conj`` distributes like any ``anyOf``."""
        s = m.schema
        out = []

        def ref(*path) -> dict:
            node = s
            for p in path:
                node = node[p]
            return {"~ref": Member(m.uri + "".join(f"/{_escape(str(p))}" for p in path),
                                   node, m.base)}

        if "if" in s and ("then" in s or "else" in s or self.tracks):
            yes = [ref("if")] + ([ref("then")] if "then" in s else [])
            no = [{"not": ref("if")}] + ([ref("else")] if "else" in s else [])
            out.append(Member(m.uri + "/~if", _opened({"anyOf": [{"allOf": yes},
                                                                   {"allOf": no}]}), m.base))
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            deps = s.get(kw)
            if deps is None:
                continue
            if not isinstance(deps, dict):
                raise GrammarError(f"{kw} must be an object", _pointer(m, kw))
            for k, v in deps.items():
                where = f"{_pointer(m, kw)}/{_escape(k)}"
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
                out.append(Member(f"{m.uri}/~{kw}/{_escape(k)}", _opened(union), m.base))
        return out

    def negation(self, operand: Member) -> list[list[Member]]:
        """The complement of ``operand`` as a union of conjunctions (see complement.py)."""
        members = self.expand([operand])
        if members is None:
            return [[]]  # not false: anything
        out: list[list[Member]] = []
        for x in members:
            self.check_keywords(x)

            def sub(*path, x=x) -> dict:
                node = x.schema
                for p in path:
                    node = node[p]
                return {"~ref": Member(x.uri + "".join(f"/{_escape(str(p))}" for p in path),
                                       node, x.base)}

            schema = _without(x.schema)
            while True:
                try:
                    branches = complement(schema, sub)
                    break
                except Inexpressible as e:
                    # lenient: drop the keyword from the operand (a smaller complement)
                    self.unsupported(f"'not' of {e.keyword}", x, e.keyword)
                    schema = {k: v for k, v in schema.items() if k != e.keyword}
            for k, b in enumerate(branches):
                if b is True:
                    out.append([])
                else:
                    out.append([Member(f"{x.uri}/~neg{k}", _opened(b), x.base)])
        return out

    # ------------------------------------------------------------------ conjunctions
    def conj(self, members: list[Member]) -> Expr:
        for m in members:
            self.check_keywords(m)
        # Distribute the first anyOf/oneOf over the rest.
        for i, m in enumerate(members):
            for kw in ("anyOf", "oneOf"):
                branches = m.schema.get(kw)
                if branches is None:
                    continue
                if not isinstance(branches, list) or not branches:
                    raise GrammarError(f"{kw} must be a non-empty array", _pointer(m, kw))
                # The members are expanded already: strip their $ref/allOf so that
                # expanding the branches does not bring this combinator back.
                rest = [_expanded(x) for x in members[:i] + members[i + 1:]]
                rest.append(Member(m.uri + f"/~{kw}", _without(m.schema, kw), m.base))
                subs = [Member(f"{m.uri}/{kw}/{j}", b, m.base) for j, b in enumerate(branches)]
                if kw == "anyOf" and self.tracks and any(_pending(x) for x in members) and \
                        len(subs) > 1:
                    return self.any_of_subsets(rest, subs, m)
                if kw == "oneOf" and not self.disjoint(subs, rest):
                    split = self.one_of_by_type(subs, rest, m)
                    if split is not None:
                        return split
                    # Exactly one: branch i holds and every other branch fails.
                    alternatives = [self.conj_ref(rest + [sub] + [
                        _negated(o) for o in subs if o is not sub]) for sub in subs]
                    return Choice(tuple(alternatives))
                alternatives = [self.conj_ref(rest + [sub]) for sub in subs]
                return Choice(tuple(alternatives))
        for i, m in enumerate(members):
            if "not" not in m.schema or _simple_not(m.schema["not"]):
                continue
            before = [_expanded(x) for x in members[:i]] + [
                Member(m.uri + "/~not", _without(m.schema, "not"), m.base)]
            after = [_expanded(x) for x in members[i + 1:]]
            branches = self.negation(Member(m.uri + "/not", m.schema["not"], m.base))
            if not branches:
                return Terminal(rx.EMPTY)
            # the complement's members right after the `not`'s own (property order)
            return Choice(tuple(self.conj_ref(before + b + after) for b in branches))
        return self.typed(members)

    def types(self, members: list[Member]) -> set[str]:
        """The JSON types every member's ``type`` allows."""
        types = set(TYPES)
        for m in members:
            t = m.schema.get("type")
            if t is None:
                continue
            ts = _type_set(t)
            if ts is None:
                raise GrammarError(f"invalid type {t!r}", _pointer(m, "type"))
            types &= ts
        return types

    def typed(self, members: list[Member]) -> Expr:
        types = self.types(members)
        for m in members:
            types -= self.negated_types(m)
        values = self.enumerated(members)
        if values is not None:
            ok = [v for v in values if _json_type(v) in types and self.value_ok(v, members)]
            if not ok:
                return Terminal(rx.EMPTY)
            return Choice(tuple(self.json.value(v) for v in ok))
        alternatives: list[Expr] = []
        excluded = [v for m in members if isinstance(m.schema.get("not"), dict)
                    for v in _excluded(m.schema["not"])]
        scalar = rx.EMPTY
        if "null" in types and not any(v is None for v in excluded):
            scalar = rx.alt(scalar, literal_node(None))
        if "boolean" in types:
            for b in (True, False):
                if not any(v is b for v in excluded):
                    scalar = rx.alt(scalar, literal_node(b))
        if "string" in types:
            scalar = rx.alt(scalar, self.string(members))
        numeric = None
        if "number" in types and "integer" not in types:
            # Numbers that are not integers: a nonzero fraction, no exponent (sound; the
            # exponent forms of non-integers are not generated).
            numeric = rx.intersect(self.number(members, integer=False),
                                   parse_regex(r"-?(0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"))
        elif "number" in types:
            numeric = self.number(members, integer=False)
        elif "integer" in types:
            numeric = self.number(members, integer=True)
        if numeric is not None:
            gone = [v for v in excluded if _num(v)]
            if gone:
                numeric = rx.intersect(numeric, rx.complement(rx.alt_of(
                    literal_node(v) for v in gone)))
            scalar = rx.alt(scalar, numeric)
        if scalar is not rx.EMPTY:
            alternatives.append(Terminal(scalar))
        if "object" in types or "array" in types:
            here, self._here = self._here, set()  # values inside: another instance position
            try:
                if "object" in types:
                    alternatives.append(self.object(members))
                if "array" in types:
                    alternatives.append(self.array(members))
            finally:
                self._here = here
        if not alternatives:
            return Terminal(rx.EMPTY)
        return alternatives[0] if len(alternatives) == 1 else Choice(tuple(alternatives))

    # ------------------------------------------------------------------ keywords
    def check_keywords(self, m: Member) -> None:
        s = m.schema
        _check_values(m)
        for kw in s:
            if kw in HANDLED or kw in ANNOTATIONS:
                continue
            if kw == "$recursiveRef":
                self.unsupported(kw, m, kw)

    def unsupported(self, what: str, m: Member, kw: str) -> None:
        where = _pointer(m, kw)
        if self.options.lenient:
            warnings.warn(f"automask: {what} is not enforced (at {where})", stacklevel=4)
            return
        raise UnsupportedFeature(f"{what} is not supported", where)

    def negated_types(self, m: Member) -> set[str]:
        """Types excluded by ``not`` (only ``not: {type: …}`` style negations are exact)."""
        n = m.schema.get("not")
        if n is None:
            return set()
        if n is True:
            return set(TYPES)
        if n is False:
            return set()
        if isinstance(n, dict) and not set(n) - ANNOTATIONS:
            return set(TYPES)  # not {} is not true
        if isinstance(n, dict) and set(n) - ANNOTATIONS == {"type"}:
            return _type_set(n["type"]) or set()
        if isinstance(n, dict) and set(n) - ANNOTATIONS <= {"enum", "const"}:
            if any(isinstance(v, (dict, list)) for v in _excluded(n)):
                self.unsupported("'not' of object or array values", m, "not")
            return set()  # enforced per type: see excluded_values()
        return set()  # other forms are distributed by conj()

    def enumerated(self, members: list[Member]) -> list | None:
        values = None
        for m in members:
            s = m.schema
            if "enum" in s and not isinstance(s["enum"], list):
                raise GrammarError("enum must be an array", _pointer(m, "enum"))
            # const and enum side by side both hold
            for cand in ([s["const"]] if "const" in s else None,
                         list(s["enum"]) if "enum" in s else None):
                if cand is not None:
                    if values is None:
                        values = cand
                    else:
                        keys = {_json_key(c) for c in cand}
                        values = [v for v in values if _json_key(v) in keys]
        if values is None:
            return None
        unique: dict = {}
        for v in values:
            unique.setdefault(_json_key(v), v)
        return list(unique.values())

    def value_ok(self, value, members: list[Member]) -> bool:
        """Whether an enumerated value meets the other keywords of the conjunction."""
        check_time()
        for m in members:
            s = m.schema
            n = s.get("not")
            if isinstance(n, dict):
                excluded = self._excluded_of.get(m.uri)
                if excluded is None:
                    excluded = self._excluded_of[m.uri] = {_json_key(c) for c in _excluded(n)}
                if _json_key(value) in excluded:
                    return False
            if isinstance(value, str):
                node = self._strings_of.get(m.uri)
                if node is None:
                    # exclusions were checked above by hashing, not by derivatives
                    node = self._strings_of[m.uri] = self.string_constraints(
                        [m], exclusions=False)
                if node is not ANY_TEXT and not rx.matches(node, value.encode("utf-8")):
                    return False
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                lo, lo_x, hi, hi_x, mult = self.bounds([m])
                v = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
                if lo is not None and (v < lo or (lo_x and v == lo)):
                    return False
                if hi is not None and (v > hi or (hi_x and v == hi)):
                    return False
                if mult is not None and not _is_multiple(v, mult):
                    return False
                if "~notMultipleOf" in s and _is_multiple(v, _dec(s["~notMultipleOf"])):
                    return False
                if s.get("type") == "integer" and v != v.to_integral_value():
                    return False
            elif isinstance(value, dict):
                if not self.object_value_ok(value, m):
                    return False
            elif isinstance(value, list):
                if not self.array_value_ok(value, m):
                    return False
        return True

    def value_in(self, value, members: list[Member]) -> bool:
        """Whether a concrete JSON value satisfies every member, read as a validator reads
        it (the subschemas an enumerated object or array value meets): exact, and
        ``anyOf``/``oneOf``/``not`` are evaluated, not complemented."""
        check_time()
        members = self.expand(members)
        if members is None:
            return False
        for m in members:
            self.check_keywords(m)
        if _json_type(value) not in self.types(members):
            return False
        values = self.enumerated(members)
        if values is not None and _json_key(value) not in {_json_key(v) for v in values}:
            return False
        for m in members:
            s = m.schema
            for kw in ("anyOf", "oneOf"):
                if kw in s:
                    holds = [self.value_in(value, [Member(f"{m.uri}/{kw}/{i}", b, m.base)])
                             for i, b in enumerate(s[kw])]
                    if holds.count(True) != 1 if kw == "oneOf" else not any(holds):
                        return False
            if "not" in s and self.value_in(value, [Member(m.uri + "/not", s["not"], m.base)]):
                return False
        return self.value_ok(value, members)

    def object_value_ok(self, value: dict, m: Member) -> bool:
        """The object keywords of ``m`` on a concrete object."""
        s = m.schema
        if any(r not in value for r in s.get("required", ())):
            return False
        if len(value) < s.get("minProperties", 0) or len(value) > s.get("maxProperties",
                                                                        len(value)):
            return False
        if s.get("unevaluatedProperties", True) is not True:
            self.unsupported("unevaluatedProperties on enumerated values", m,
                             "unevaluatedProperties")
        props = s.get("properties") or {}
        patterns = [(self.key_pattern(pat, m), Member(
            f"{m.uri}/patternProperties/{_escape(pat)}", sub, m.base))
            for pat, sub in self.pattern_properties(m).items()]
        extra = s.get("additionalProperties", True if self.default_additional(s) else False)
        for k, x in value.items():
            at = [sub for node, sub in patterns if rx.matches(node, k.encode("utf-8"))]
            if k in props:
                at.append(Member(f"{m.uri}/properties/{_escape(k)}", props[k], m.base))
            if not at and extra is not True:
                at.append(Member(f"{m.uri}/additionalProperties", extra, m.base))
            if not all(self.value_in(x, [sub]) for sub in at):
                return False
        if "~keyOutside" in s:
            region = self.outside_region(s["~keyOutside"], m)
            if not any(rx.matches(region, k.encode("utf-8")) for k in value):
                return False
        if "propertyNames" in s:
            names = Member(f"{m.uri}/propertyNames", s["propertyNames"], m.base)
            return all(self.value_in(k, [names]) for k in value)
        return True

    def array_value_ok(self, value: list, m: Member) -> bool:
        """The array keywords of ``m`` on a concrete array."""
        s = m.schema
        if len(value) < s.get("minItems", 0) or len(value) > s.get("maxItems", len(value)):
            return False
        if s.get("uniqueItems") is True and len({_json_key(x) for x in value}) < len(value):
            return False
        if s.get("unevaluatedItems", True) is not True:
            self.unsupported("unevaluatedItems on enumerated values", m, "unevaluatedItems")
        prefix = _prefix(s)
        rest, rest_kw = _rest_items(s)
        for i, x in enumerate(value):
            if i < len(prefix):
                sub = Member(f"{m.uri}/{_prefix_kw(s)}/{i}", prefix[i], m.base)
            elif rest is not None:
                sub = Member(f"{m.uri}/{rest_kw}", rest, m.base)
            else:
                continue
            if not self.value_in(x, [sub]):
                return False
        if "contains" in s:
            wanted = Member(f"{m.uri}/contains", s["contains"], m.base)
            hits = sum(self.value_in(x, [wanted]) for x in value)
            if hits < s.get("minContains", 1) or hits > s.get("maxContains", hits):
                return False
        return True

    # ------------------------------------------------------------------ strings
    def string_constraints(self, members: list[Member], *,
                           exclusions: bool = True) -> rx.Node:
        """The strings ``members`` allow, as one regex; without the values their
        ``not: {enum/const}`` excludes when ``exclusions`` is false (a caller that checks
        those by hashing, not by a complement of thousands of literals)."""
        parts = [ANY_TEXT]
        for m in members:
            s = m.schema
            lo, hi = s.get("minLength"), s.get("maxLength")
            if lo is not None or hi is not None:
                lo_i = _count(lo, m, "minLength") if lo is not None else 0
                hi_i = _count(hi, m, "maxLength") if hi is not None else None
                parts.append(rx.EMPTY if hi_i is not None and hi_i < lo_i
                             else rx.repeat(ANY_CHAR, lo_i, hi_i))
            if "pattern" in s:
                if not isinstance(s["pattern"], str):
                    raise GrammarError("pattern must be a string", _pointer(m, "pattern"))
                try:
                    parts.append(parse_regex_search(s["pattern"]))
                except GrammarError as e:
                    raise type(e)(f"pattern: {e.message}",
                                  f"{_pointer(m, 'pattern')} {e.location or ''}".strip()
                                  ) from None
            if "format" in s:
                node = self.format(s["format"], m)
                if node is not None:
                    parts.append(node)
            if "~notString" in s:
                inner = self.string_constraints([Member(m.uri + "/~s", s["~notString"],
                                                        m.base)])
                parts.append(rx.complement(inner))
            n = s.get("not")
            if exclusions and isinstance(n, dict) and set(n) - ANNOTATIONS <= {"enum", "const"}:
                excluded = [v for v in _excluded(n) if isinstance(v, str)]
                if excluded:
                    parts.append(rx.complement(rx.alt_of(
                        rx.literal(v.encode("utf-8")) for v in excluded)))
        return rx.intersect(*parts) if len(parts) > 1 else parts[0]

    def string(self, members: list[Member]) -> rx.Node:
        return string_node(self.string_constraints(members))

    def format(self, name, m: Member) -> rx.Node | None:
        from automask.schema.formats import format_node

        node = (format_node(name, leap_seconds=not self.options.strict)
                if isinstance(name, str) else None)
        if node is None:
            self.unsupported(f"format {name!r}", m, "format")
        return node

    # ------------------------------------------------------------------ numbers
    def bounds(self, members: list[Member]):
        lo = hi = None
        lo_x = hi_x = False
        mult = None
        for m in members:
            s = m.schema
            for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                       "multipleOf"):
                v = s.get(kw)
                if v is None or isinstance(v, bool):
                    continue
                if not isinstance(v, (int, float)):
                    raise GrammarError(f"{kw} must be a number", _pointer(m, kw))
            if s.get("exclusiveMinimum") is True and "minimum" in s:  # draft-04
                cand = [(_dec(s["minimum"]), True)]
            else:
                cand = [(_dec(s["minimum"]), False)] if _num(s.get("minimum")) else []
                if _num(s.get("exclusiveMinimum")):
                    cand.append((_dec(s["exclusiveMinimum"]), True))
            for v, x in cand:
                if lo is None or v > lo or (v == lo and x):
                    lo, lo_x = v, x
            if s.get("exclusiveMaximum") is True and "maximum" in s:
                cand = [(_dec(s["maximum"]), True)]
            else:
                cand = [(_dec(s["maximum"]), False)] if _num(s.get("maximum")) else []
                if _num(s.get("exclusiveMaximum")):
                    cand.append((_dec(s["exclusiveMaximum"]), True))
            for v, x in cand:
                if hi is None or v < hi or (v == hi and x):
                    hi, hi_x = v, x
            if _num(s.get("multipleOf")):
                v = _dec(s["multipleOf"])
                if v <= 0:
                    raise GrammarError("multipleOf must be > 0", _pointer(m, "multipleOf"))
                if mult is None:
                    mult = v
                elif mult == mult.to_integral_value() and v == v.to_integral_value():
                    mult = Decimal(math.lcm(int(mult), int(v)))
                elif _is_multiple(mult, v):
                    pass
                elif _is_multiple(v, mult):
                    mult = v
                else:
                    self.unsupported("several non-integer multipleOf", m, "multipleOf")
        return lo, lo_x, hi, hi_x, mult

    def number(self, members: list[Member], integer: bool) -> rx.Node:
        from automask.schema import numbers

        node = self.bounded_number(members, integer)
        excluded = [m.schema["~notMultipleOf"] for m in members if "~notMultipleOf" in m.schema]
        if excluded and node is not rx.EMPTY:
            node = rx.intersect(node, *(numbers.non_multiple_node(v) for v in excluded))
        return node

    def bounded_number(self, members: list[Member], integer: bool) -> rx.Node:
        """Number (or integer) texts within the members' bounds and ``multipleOf``."""
        from automask.schema import numbers

        lo, lo_x, hi, hi_x, mult = self.bounds(members)
        if mult is not None and not integer:  # 6000.0 is a number and a multiple of 1
            return numbers.decimal_multiple_node(mult, **_number_bounds(lo, lo_x, hi, hi_x))
        if mult is not None and mult != mult.to_integral_value():
            if (1 / mult) != (1 / mult).to_integral_value():
                self.unsupported("non-integer multipleOf on integers", members[0], "multipleOf")
            mult = None  # every integer is a multiple of 1/k
        if integer:
            ilo = None if lo is None else int(math.floor(lo)) + 1 if (
                lo_x and lo == lo.to_integral_value()) else int(math.ceil(lo))
            ihi = None if hi is None else int(math.ceil(hi)) - 1 if (
                hi_x and hi == hi.to_integral_value()) else int(math.floor(hi))
            if mult is not None:
                node = numbers.integer_multiple_node(int(mult), ilo, ihi)
            else:
                node = numbers.integer_node(ilo, ihi)
            return node
        return numbers.number_node(**_number_bounds(lo, lo_x, hi, hi_x))

    # ------------------------------------------------------------------ objects
    def object(self, members: list[Member]) -> Expr:
        members = members + self.evaluated(members, "unevaluatedProperties")
        # Dicts as ordered sets: a schema may declare 100,000 keys (linear, not quadratic).
        order: dict[str, None] = {}
        required: dict[str, None] = {}
        min_p, max_p = 0, None
        names_node = ANY_TEXT
        for m in members:
            s = m.schema
            props = s.get("properties", {})
            if not isinstance(props, dict):
                raise GrammarError("properties must be an object", _pointer(m, "properties"))
            order.update(dict.fromkeys(props))
            req = s.get("required", [])
            if not isinstance(req, list):
                raise GrammarError("required must be an array", _pointer(m, "required"))
            required.update(dict.fromkeys(req))  # strings (check_keywords)
            if "minProperties" in s:
                min_p = max(min_p, _count(s["minProperties"], m, "minProperties"))
            if "maxProperties" in s:
                v = _count(s["maxProperties"], m, "maxProperties")
                max_p = v if max_p is None else min(max_p, v)
            if "propertyNames" in s:
                names_node = rx.intersect(names_node, self.names_admitted(
                    Member(m.uri + "/propertyNames", s["propertyNames"], m.base)))
        order.update(required)
        # Declared keys: each member constrains the value by properties, else by matching
        # patternProperties, else by additionalProperties.
        declared = []
        for k in order:
            check_time()
            kb = k.encode("utf-8")
            if not rx.matches(names_node, kb):
                if k in required:
                    return Terminal(rx.EMPTY)
                continue
            value_members: list[Member] = []
            forbidden = False
            for m in members:
                subs = self.value_schemas_for_key(m, k)
                if subs is None:
                    forbidden = True
                    break
                value_members.extend(subs)
            if forbidden:
                if k in required:
                    return Terminal(rx.EMPTY)
                continue
            declared.append((k, self.conj_ref(value_members), k in required))
        extras = self.extra_classes(members, list(order), names_node)
        needs = tuple(self.outside_region(m.schema["~keyOutside"], m)
                      for m in members if "~keyOutside" in m.schema)
        if extras and min_p > len(declared) + 1:
            # Extra keys may repeat (JSON allows it) and a repeated key counts once in the
            # parsed object, so extra keys are only sure to add one distinct key.
            self.unsupported("minProperties that additional properties must help reach",
                             members[0], "minProperties")
            min_p = len(declared) + 1  # lenient: enforce what can be enforced soundly
        return self.object_body(declared, extras, min_p, max_p, needs)

    def names_admitted(self, pn: Member, exact: bool = False) -> rx.Node:
        """The key texts a ``propertyNames`` schema admits: string keywords, ``enum``/
        ``const`` and ``not`` of those. ``exact``: for a complement, so no ``format``
        (its automaton leaves some valid strings out)."""
        if pn.schema is True or pn.schema is False:
            return ANY_TEXT if pn.schema else rx.EMPTY
        sub = self.expand([pn])
        if sub is None:
            return rx.EMPTY
        allowed = _NAME_KEYWORDS - ({"format"} if exact else set())
        for x in sub:
            s = x.schema
            n = s.get("not", {})
            if (set(s) - allowed or s.get("type", "string") != "string"
                    or not isinstance(n, dict) or set(n) - ANNOTATIONS - {"enum", "const"}):
                embedded = pn.schema.get("~ref")  # a complement's: the user's position
                self.unsupported("propertyNames beyond string constraints",
                                 embedded if isinstance(embedded, Member) else pn, None)
                if exact:  # lenient: the complement admits nothing (the strict side)
                    return ANY_TEXT
        values = self.enumerated(sub)
        node = self.string_constraints(sub)
        if values is not None:
            node = rx.intersect(node, rx.alt_of(
                rx.literal(v.encode()) for v in values if isinstance(v, str)))
        return node

    def outside_region(self, spec: dict, m: Member) -> rx.Node:
        """The keys outside ``~keyOutside``'s names, (unanchored) patterns and the names
        its ``admitted`` schema admits."""
        region = utf8.text_except(list(spec.get("names", ())))
        if spec.get("patterns"):
            region = rx.intersect(region, rx.complement(rx.alt_of(
                self.key_pattern(p, m) for p in spec["patterns"])))
        if "admitted" in spec:
            region = rx.intersect(region, rx.complement(self.names_admitted(
                Member(m.uri + "/~keyOutside", spec["admitted"], m.base), exact=True)))
        return region

    def value_schemas_for_key(self, m: Member, key: str) -> list[Member] | None:
        """What member ``m`` requires of the value of ``key`` (None: the key is forbidden)."""
        s = m.schema
        props = s.get("properties", {})
        out = []
        if key in props:
            out.append(Member(f"{m.uri}/properties/{_escape(key)}", props[key], m.base))
        for pat, sub in self.pattern_properties(m).items():
            if rx.matches(self.key_pattern(pat, m), key.encode("utf-8")):
                out.append(Member(f"{m.uri}/patternProperties/{_escape(pat)}", sub, m.base))
        if out:
            return out
        add = s.get("additionalProperties", self.default_additional(s))
        if add is False:
            return None
        return [Member(f"{m.uri}/additionalProperties", add, m.base)]

    def pattern_properties(self, m: Member) -> dict:
        pp = m.schema.get("patternProperties") or {}
        if not isinstance(pp, dict):
            raise GrammarError("patternProperties must be an object",
                               _pointer(m, "patternProperties"))
        return pp

    def key_pattern(self, pat: str, m: Member) -> rx.Node:
        """A ``patternProperties`` regex (unanchored), errors located at its pointer."""
        where = f"{_pointer(m, 'patternProperties')}/{_escape(pat)}"
        try:
            return parse_regex_search(pat)
        except GrammarError as e:
            raise type(e)(f"patternProperties: {e.message}",
                          f"{where} {e.location or ''}".strip()) from None

    def default_additional(self, s: dict) -> bool:
        """An absent ``additionalProperties``: false under ``strict``, except in the schemas
        the compiler writes itself (complements, rewrites), which must stay exact."""
        return not self.options.strict or bool(s.get("~open"))

    def extra_classes(self, members: list[Member], declared: list[str],
                      names_node: rx.Node) -> list[tuple[rx.Node, Expr]]:
        """Key classes for undeclared keys: (key regex, value expression), pairwise disjoint."""
        not_declared = utf8.text_except(declared)
        classes: list[tuple[rx.Node, list[Member]]] = [
            (not_declared if names_node is ANY_TEXT else rx.intersect(names_node, not_declared),
             [])]
        for m in members:
            s = m.schema
            # Key regions by the set of patterns they match (overlapping patterns give
            # regions that match several: their values meet every matching schema).
            regions: list[tuple[rx.Node, list[Member]]] = [(ANY_TEXT, [])]
            for pat, sub in self.pattern_properties(m).items():
                node = self.key_pattern(pat, m)
                pm = Member(f"{m.uri}/patternProperties/{_escape(pat)}", sub, m.base)
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
            add = s.get("additionalProperties", self.default_additional(s))
            parts = [(region, subs) for region, subs in regions if subs]
            rest = [region for region, subs in regions if not subs]
            if add is not False and rest:
                parts.append((rx.alt_of(rest), [Member(f"{m.uri}/additionalProperties", add,
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
            value = self.conj_ref(subs) if subs else self.json.any_value()
            out.append((node, value))
        return out

    def object_body(self, declared, extras, min_p: int, max_p: int | None,
                    needs: tuple[rx.Node, ...] = ()) -> Expr:
        """``{`` members in schema order, then extra members, with count bounds ``}``.

        ``needs``: key regions each of which some key must fall in (the complement of
        ``additionalProperties: false``). A declared key meets the regions it lies in;
        extra keys meet the rest (:meth:`extras_meeting`).
        """
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
            tail = rule_for = None

    def extra_run(self, extra_member: Expr | None, first: bool, lo: int,
                  hi: int | None) -> Expr:
        """``lo..hi`` extra members, each after a separator unless ``first``."""
        if extra_member is None or hi == 0:
            return Terminal(rx.EPS if lo == 0 and (hi is None or hi >= 0) else rx.EMPTY)
        sep = self.json.item_sep()
        return (separated(extra_member, sep, lo, hi) if first
                else _repeat_with_sep(extra_member, sep, lo, hi))

    def extras_meeting(self, needs: tuple[rx.Node, ...], unmet: frozenset, extras,
                       extra_member: Expr, first: bool, hi: int | None) -> Expr:
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
            out = []
            for node, value in extras:
                parts = [(node, frozenset())]
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
            rest = None  # (see object_body)

    # ------------------------------------------------------------------ arrays
    def array(self, members: list[Member]) -> Expr:
        members = members + self.evaluated(members, "unevaluatedItems")
        js = self.json
        min_i, max_i = 0, None
        prefix_len = 0
        for m in members:
            s = m.schema
            if "minItems" in s:
                min_i = max(min_i, _count(s["minItems"], m, "minItems"))
            if "maxItems" in s:
                v = _count(s["maxItems"], m, "maxItems")
                max_i = v if max_i is None else min(max_i, v)
            prefix_len = max(prefix_len, len(_prefix(s)))
        contains = [m for m in members if "contains" in m.schema]

        def at_members(i: int | None) -> list[Member] | None:
            """What the item at position i must satisfy (None: beyond every prefix;
            returns None when no item may be there)."""
            subs: list[Member] = []
            for m in members:
                s = m.schema
                prefix = _prefix(s)
                if i is not None and i < len(prefix):
                    subs.append(Member(f"{m.uri}/{_prefix_kw(s)}/{i}", prefix[i], m.base))
                    continue
                rest, kw = _rest_items(s)
                if rest is False:
                    return None
                if rest is not None:
                    subs.append(Member(f"{m.uri}/{kw}", rest, m.base))
            return subs

        def at(i: int | None) -> Expr | None:
            """The item expression at position i (None: beyond every prefix)."""
            subs = at_members(i)
            if subs is None:
                return None
            return js.lead(self.conj_ref(subs) if subs else js.any_value())

        counts = []
        for m in contains:
            lo = _count(m.schema.get("minContains", 1), m, "minContains")
            hi = None
            if "maxContains" in m.schema:
                hi = _count(m.schema["maxContains"], m, "maxContains")
            if lo or hi is not None:
                counts.append((m, lo, hi))
        unique = [m for m in members if m.schema.get("uniqueItems") is True]
        if unique:
            if counts:
                self.unsupported("uniqueItems with contains counts", unique[0], "uniqueItems")
            else:
                found = self.unique_array(unique[0], min_i, max_i, prefix_len, at_members)
                if found is not None:
                    return found
        if len(counts) == 1:
            m, lo, hi = counts[0]
            return self.counted_array(members, m, lo, hi, min_i, max_i, prefix_len,
                                      at_members)
        if counts:
            return self.multi_counted_array(counts, min_i, max_i, prefix_len, at_members)

        def tail(i: int, first: bool) -> Expr:
            """Items from the i-th on; ``first``: none written yet, and (see
            JsonPieces.enclose) at least one must be."""
            done = rx.EPS if i >= min_i and not first else rx.EMPTY
            if max_i is not None and i >= max_i:
                return Terminal(done)
            if i < prefix_len:
                item = at(i)
                if item is None:
                    return Terminal(done)
                head = item if first else Seq((js.item_sep(), item))
                more = Seq((head, tail(i + 1, False)))
                return Choice((Terminal(done), more)) if done is rx.EPS else more
            item = at(None)
            lo = max(min_i - i, 1 if first else 0)
            hi = None if max_i is None else max_i - i
            if item is None:
                return Terminal(rx.EPS if lo == 0 else rx.EMPTY)
            if first:
                return separated(item, js.item_sep(), lo, hi)
            return _repeat_with_sep(item, js.item_sep(), lo, hi)

        try:
            return js.enclose("[", tail(0, True), "]", min_i == 0)
        finally:
            tail = None  # a recursive closure: see object_body

    # ------------------------------------------------------------------ oneOf
    def disjoint(self, subs: list[Member], context: list[Member] = ()) -> bool:
        """Whether no JSON value can satisfy two branches (a sufficient, cheap test).

        ``context`` are the members every branch is conjoined with (the
        ``type`` next to the ``oneOf``): two branches that each require a key
        the other's closed object forbids are disjoint only among objects.
        """
        context_types = _types_of([m.schema for m in context], set(TYPES))
        sigs = [self.signature([sub], context_types) for sub in subs]
        for i in range(len(sigs)):
            for j in range(i + 1, len(sigs)):
                a, b = sigs[i], sigs[j]
                if a == ("never",) or b == ("never",):
                    continue
                if not _sigs_disjoint(a, b):
                    return False
        return True

    def one_of_by_type(self, subs: list[Member], rest: list[Member], at: Member) -> Expr | None:
        """``oneOf`` without complements, when it is exact per type.

        A branch whose keywords all constrain other types holds for every value
        of a type (``{"properties": …, "additionalProperties": false}`` holds for
        every string): where two branches do, no value of that type passes. The
        other types are kept, and if the branches are disjoint there, the
        ``oneOf`` is their ``anyOf``. None when that does not settle it.
        """
        types = _types_of([x.schema for x in rest], set(TYPES))
        crowded = {t for t in types if sum(_holds_for_all(b.schema, t) for b in subs) >= 2}
        left = types - crowded
        if not crowded or ("number" in left) != ("integer" in left):
            return None
        if not left:
            return Terminal(rx.EMPTY)
        typed = Member(at.uri + "/~oneOfTypes", {"type": sorted(left)}, at.base)
        if not self.disjoint(subs, rest + [typed]):
            return None
        return Choice(tuple(self.conj_ref(rest + [typed, sub]) for sub in subs))

    def signature(self, branch: list[Member], types: set, depth: int = 0) -> tuple:
        """What :func:`_sigs_disjoint` compares: supersets of a branch's types and
        values, the values of its required keys, and its key rules."""
        try:
            members = self.expand(branch)
        except GrammarError:
            if not depth:
                raise
            return (set(TYPES), {}, None, _key_rules([]))  # nothing known below the top
        if members is None:
            return ("never",)
        values = self.enumerated(members)
        consts: dict[str, list] = {}
        for m in members:
            s = m.schema
            nested = [b for kw in ("anyOf", "oneOf") for b in (s.get(kw) or ())]
            if nested:  # the value is one of the branches': narrow to their union
                if depth >= 3 or not all(isinstance(b, dict) for b in nested):
                    continue
                subs = [self.signature([Member(f"{m.uri}/~{i}", b, m.base)], set(TYPES),
                                       depth + 1) for i, b in enumerate(nested)]
                subs = [x for x in subs if x != ("never",)]
                types &= set().union(*(x[0] for x in subs))
                if all(x[2] is not None for x in subs):
                    union = [v for x in subs for v in x[2]]
                    keys = {_json_key(u) for u in union}
                    values = union if values is None else [
                        v for v in values if _json_key(v) in keys]
            for k, p in (s.get("properties") or {}).items():
                if k in s.get("required", ()) and isinstance(p, dict) and depth < 3:
                    sig = self.signature([Member(f"{m.uri}/properties/{k}", p, m.base)],
                                         set(TYPES), depth + 1)
                    if sig != ("never",) and sig[2] is not None:
                        consts[k] = sig[2]
        types = _types_of([m.schema for m in members], types)
        return (types, consts, values, _key_rules(members))


# ---------------------------------------------------------------------- helpers

# What a propertyNames schema may hold (after expansion): string keywords and values.
_NAME_KEYWORDS = ANNOTATIONS | {"type", "pattern", "minLength", "maxLength", "format", "enum",
                                "const", "not", "$ref", "allOf", "~ref"}
MAX_COUNTED_EXTRAS = 16  # maxProperties up to which a needed extra key is counted

# The keywords that constrain values of one kind only (a value of another type passes).
_OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "~keyOutside"})
_ARRAY_KEYWORDS = frozenset({
    "items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains",
    "minItems", "maxItems", "uniqueItems", "unevaluatedItems"})
_STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                              "multipleOf"})
_TYPE_KEYWORDS = _OBJECT_KEYWORDS | _ARRAY_KEYWORDS | _STRING_KEYWORDS | _NUMBER_KEYWORDS
# Per type: what a schema may hold and still hold for every value of that type.
_INERT_FOR = {t: ANNOTATIONS | (_TYPE_KEYWORDS - own) for t, own in {
    "object": _OBJECT_KEYWORDS, "array": _ARRAY_KEYWORDS, "string": _STRING_KEYWORDS,
    "number": _NUMBER_KEYWORDS, "integer": _NUMBER_KEYWORDS,
    "null": frozenset(), "boolean": frozenset()}.items()}


def _is_multiple(v: Decimal, m: Decimal) -> bool:
    """Exactly (as fractions: Decimal's ``%`` gives up on quotients past its precision,
    1e308 by 0.123456789)."""
    return Fraction(v) % Fraction(m) == 0


def _holds_for_all(schema, t: str) -> bool:
    """Whether ``schema`` surely holds for every value of type ``t``: ``true``, or only
    annotations and keywords of other types (False when unsure)."""
    return schema is True or isinstance(schema, dict) and set(schema) <= _INERT_FOR[t]


def _excluded(n: dict) -> list:
    """The values a ``not: {enum/const}`` excludes."""
    values = list(n.get("enum") or []) if "enum" in n else None
    if "const" in n:  # with both, only values in both are excluded
        values = [n["const"]] if values is None else [
            v for v in values if _json_key(v) == _json_key(n["const"])]
    return values or []


class _KeyRules(NamedTuple):
    """What a conjunction of object schemas says of single keys (for disjointness)."""

    required: frozenset
    closed: tuple  # declared names of each member with additionalProperties false
    forbidden: frozenset  # properties whose schema is false

    def admits(self, key: str) -> bool:
        return key not in self.forbidden and all(key in names for names in self.closed)


def _key_rules(members: list[Member]) -> _KeyRules:
    required, closed, forbidden = set(), [], set()
    for m in members:
        s = m.schema
        if isinstance(s.get("required"), list):
            required.update(k for k in s["required"] if isinstance(k, str))
        props = s.get("properties")
        props = props if isinstance(props, dict) else {}
        forbidden.update(k for k, p in props.items() if p is False)
        if s.get("additionalProperties") is False and not s.get("patternProperties"):
            closed.append(frozenset(props))
    return _KeyRules(frozenset(required), tuple(closed), frozenset(forbidden))


def _sigs_disjoint(a, b) -> bool:
    ta, ca, va, ka = a
    tb, cb, vb, kb = b
    if not (ta & tb):
        return True
    if va is not None and vb is not None and not _share(va, vb):
        return True
    if va is not None and not any(_json_type(x) in tb or (
            _json_type(x) == "integer" and "number" in tb) for x in va):
        return True
    if vb is not None and not any(_json_type(y) in ta or (
            _json_type(y) == "integer" and "number" in ta) for y in vb):
        return True
    if (ta & tb) <= {"object"}:
        for k in set(ca) & set(cb):
            if not _share(ca[k], cb[k]):
                return True
        # a key one side requires and the other forbids
        if any(not kb.admits(k) for k in ka.required) or \
                any(not ka.admits(k) for k in kb.required):
            return True
    return False


def _share(xs: list, ys: list) -> bool:
    """Whether two lists of JSON values have a value in common."""
    return not {_json_key(x) for x in xs}.isdisjoint(_json_key(y) for y in ys)


def _star(e: Expr) -> Expr:

    return Repeat(e, 0, None)


def _repeat_with_sep(item: Expr, sep: Expr, lo: int, hi: int | None) -> Expr:

    if hi is not None and hi < lo:
        return Terminal(rx.EMPTY)
    return Repeat(Seq((sep, item)), lo, hi)


def _without(schema: dict, kw: str | None = None) -> dict:
    """``schema`` less ``kw`` and the keywords that expansion has followed (``$ref``,
    ``allOf``, and the conditionals it rewrote into members of their own)."""
    return {k: v for k, v in schema.items() if k != kw and k not in EXPANDED}


def _expanded(m: Member) -> Member:
    """``m`` without the keywords that :meth:`expand` has already followed."""
    if not any(k in m.schema for k in EXPANDED):
        return m
    return Member(m.uri + "/~", _without(m.schema), m.base)


def _simple_not(n) -> bool:
    """Whether typed() enforces ``not: n`` directly (types, scalar values, booleans)."""
    if isinstance(n, bool):
        return True
    if not isinstance(n, dict):
        return False
    kws = set(n) - ANNOTATIONS
    if kws <= {"type"}:
        return True
    return kws <= {"enum", "const"} and not any(
        isinstance(v, (dict, list)) for v in _excluded(n))


def _dec(v) -> Decimal:
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)


def _number_bounds(lo, lo_x, hi, hi_x) -> dict:
    out = {}
    if lo is not None:
        out["exclusive_minimum" if lo_x else "minimum"] = lo
    if hi is not None:
        out["exclusive_maximum" if hi_x else "maximum"] = hi
    return out


