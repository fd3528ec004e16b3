"""``oneOf`` without complements where possible: a cheap, sufficient test that no value
satisfies two branches (then ``oneOf`` is ``anyOf``), and the split by JSON type where
two branches hold for every value of some type.
"""

from __future__ import annotations

from typing import NamedTuple

from automask.errors import GrammarError
from automask.grammar.ir import Choice, Expr, Terminal
from automask.regex import nodes as rx
from automask.schema.lowering import Conjoin
from automask.schema.normalize import shape, types_of
from automask.schema.shapes import Shape, keywords_of, written
from automask.schema.strings import Strings
from automask.schema.subschema import (
    ANNOTATIONS,
    TYPES,
    Subschema,
    escape,
    json_key,
    json_type,
)
from automask.schema.values import enumerated

# The keywords that constrain values of one kind only (a value of another type passes).
OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "key_outside"})
ARRAY_KEYWORDS = frozenset({
    "items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains",
    "minItems", "maxItems", "uniqueItems", "unevaluatedItems"})
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                              "multipleOf"})
TYPE_KEYWORDS = OBJECT_KEYWORDS | ARRAY_KEYWORDS | STRING_KEYWORDS | NUMBER_KEYWORDS
NOT_ONLY = frozenset({"not"})
TYPE_ONLY = frozenset({"type"})
FORBIDDING = frozenset({"type", "properties"})
OBJECT_ONLY = frozenset({"object"})
# Per type: what a schema may hold and still hold for every value of that type.
INERT_FOR = {t: ANNOTATIONS | (TYPE_KEYWORDS - own) for t, own in {
    "object": OBJECT_KEYWORDS, "array": ARRAY_KEYWORDS, "string": STRING_KEYWORDS,
    "number": NUMBER_KEYWORDS, "integer": NUMBER_KEYWORDS,
    "null": frozenset(), "boolean": frozenset()}.items()}



def holds_for_all(schema, t: str) -> bool:
    """Whether ``schema`` surely holds for every value of type ``t``: ``true``, or only
    annotations and keywords of other types (False when unsure)."""
    return schema is True or isinstance(schema, (dict, Shape)) and \
        keywords_of(schema) <= INERT_FOR[t]



class KeyRules(NamedTuple):
    """What a conjunction of object schemas says of single keys (for disjointness)."""

    required: frozenset
    closed: tuple  # declared names of each member with additionalProperties false
    forbidden: frozenset  # properties whose schema is false

    def admits(self, key: str) -> bool:
        return key not in self.forbidden and all(key in names for names in self.closed)


def key_rules(members: list[Subschema]) -> KeyRules:
    required: set[str] = set()
    closed: list[frozenset] = []
    forbidden: set[str] = set()
    for m in members:
        o = shape(m).object
        required.update(o.required)  # strings (check_values)
        forbidden.update(k for k, p in o.properties.items() if p is False)
        if o.has_additional and o.additional is False and not o.pattern_properties:
            closed.append(frozenset(o.properties))
    return KeyRules(frozenset(required), tuple(closed), frozenset(forbidden))


def negated_property(n) -> tuple[str, object] | None:
    """``(K, S)`` where ``n``, the operand of a ``not``, is ``{"properties": {K: S}}`` and
    nothing else: the ``not`` holds exactly of the objects that have K with a value S
    fails of (an if-chain's "this key is set": ``not: {properties: {K: {const: null}}}``).
    """
    if not isinstance(n, (dict, Shape)) or keywords_of(n) - ANNOTATIONS != {"properties"}:
        return None
    props = n.object.properties if isinstance(n, Shape) else n["properties"]
    if type(props) is not dict or len(props) != 1:
        return None
    ((name, operand),) = props.items()
    return name, operand


def sigs_disjoint(a, b) -> bool:
    ta, pa, va, ka = a
    tb, pb, vb, kb = b
    if not (ta & tb):
        return True
    if va is not None and vb is not None and not share(va, vb):
        return True
    if va is not None and not any(json_type(x) in tb or (
            json_type(x) == "integer" and "number" in tb) for x in va):
        return True
    if vb is not None and not any(json_type(y) in ta or (
            json_type(y) == "integer" and "number" in ta) for y in vb):
        return True
    if (ta & tb) <= {"object"}:
        # a key one side requires is in every common object, and its value must then
        # be one both sides' ``properties`` allow (a tag: ``{"type": {"const": …}}``;
        # or a type, as in the complement of a property's schema)
        for k in (ka.required | kb.required) & pa.keys() & pb.keys():
            if any(sigs_disjoint(x, y) for x in pa[k] for y in pb[k]):
                return True
        # a key one side requires and the other forbids
        if any(not kb.admits(k) for k in ka.required) or \
                any(not ka.admits(k) for k in kb.required):
            return True
    return False


def share(xs: list, ys: list) -> bool:
    """Whether two lists of JSON values have a value in common."""
    return not {json_key(x) for x in xs}.isdisjoint(json_key(y) for y in ys)



class OneOf:
    """Disjointness of ``oneOf`` branches, through the conjunction builder."""

    def __init__(self, conj: Conjoin, strings: Strings):
        self.conj = conj
        self.strings = strings
        self._signatures: dict[tuple[tuple[str, ...], int], tuple] = {}
        self._texts: dict[tuple[str, ...], rx.Node | None] = {}

    def disjoint(self, subs: list[Subschema], context: list[Subschema] | tuple[()] = ()) -> bool:
        """Whether no JSON value can satisfy two branches (a sufficient, cheap test)."""
        return not any(self.overlaps(subs, context))

    def overlaps(self, subs: list[Subschema],
                 context: list[Subschema] | tuple[()] = ()) -> list[list[int]]:
        """For each branch, the other branches some value might satisfy with it (a
        pair left out is surely disjoint: a sufficient, cheap test).

        ``context`` are the members every branch is conjoined with (the
        ``type`` next to the ``oneOf``): two branches that each require a key
        the other's closed object forbids are disjoint only among objects. Keys the
        context requires are in every object that passes, so a branch's value for
        such a key discriminates as if the branch required it (a tagged union whose
        tag is required beside the ``oneOf``).
        """
        context_types = types_of(context, set(TYPES))
        context_required = key_rules(list(context)).required
        sigs = [self.signature([sub], context_types, required=context_required)
                for sub in subs]
        out: list[list[int]] = [[] for _ in subs]
        for i in range(len(sigs)):
            for j in range(i + 1, len(sigs)):
                if self.meet([subs[i]], sigs[i], [subs[j]], sigs[j]):
                    out[i].append(j)
                    out[j].append(i)
        return out

    def meet(self, a: list[Subschema], sig_a: tuple, b: list[Subschema], sig_b: tuple) -> bool:
        """Whether some value may satisfy both conjunctions ``a`` and ``b`` (False: surely
        none), by their signatures, and where both hold of strings only, by their texts
        (``{"enum": ["Door"]}`` and ``{"pattern": "[+]"}``; tags written as patterns)."""
        if sig_a == ("never",) or sig_b == ("never",) or sigs_disjoint(sig_a, sig_b):
            return False
        text_a = self.string_text(a, sig_a)
        text_b = self.string_text(b, sig_b) if text_a is not None else None
        if text_a is None or text_b is None:
            return True
        try:
            return rx.intersect(text_a, text_b) is not rx.EMPTY
        except rx.Undecided:  # (they may meet; a spent time budget is not caught)
            return True

    def string_text(self, members: list[Subschema], sig: tuple) -> rx.Node | None:
        """The decoded texts of the strings a conjunction may hold of (a superset), where
        it holds of strings only; None otherwise (or where ``format`` is asked). Kept per
        compile by the members' positions, like :meth:`signed`."""
        key = tuple(m.uri for m in members)
        if key not in self._texts:
            self._texts[key] = self._string_text(members, sig)
        return self._texts[key]

    def _string_text(self, members: list[Subschema], sig: tuple) -> rx.Node | None:
        types, _, values, _ = sig
        if values is not None:
            if not all(isinstance(v, str) for v in values):
                return None
            return rx.alt_of(rx.literal(v.encode("utf-8")) for v in values)
        expanded_members = self.conj.expand(members)
        if types - {"string"} or expanded_members is None or any(
                "format" in keywords_of(m.schema) for m in expanded_members):
            return None
        return self.strings.string_constraints(expanded_members)

    def consistent(self, branches: list[list[Subschema]],
                   members: list[Subschema]) -> list[list[Subschema]]:
        """The ``branches`` (each a conjunction) that may hold with ``members``: one
        whose signature is disjoint from theirs holds of no value that they hold of."""
        if len(branches) < 2:
            return branches
        held = self.signed(members)
        if held == ("never",):
            return []
        out = []
        for branch in branches:
            if not branch:  # (no member: any value)
                out.append(branch)
                continue
            sig = self.signed(branch)
            if sig != ("never",) and not sigs_disjoint(held, sig):
                out.append(branch)
        return out

    def signed(self, members: list[Subschema], depth: int = 0) -> tuple:
        """:meth:`signature` of the conjunction of ``members``, kept per compile by their
        positions: the distribution of each ``not`` reads the other members' twice, the
        same complement branches are read in every conjunction that holds the ``not``,
        and every conjunction that holds a member signs its properties again."""
        key = (tuple(m.uri for m in members), depth)
        sig = self._signatures.get(key)
        if sig is None:
            sig = self._signatures[key] = self.signature(members, set(TYPES), depth)
        return sig

    def absorbed(self, branches: list[list[Subschema]], members: list[Subschema]) -> bool:
        """Whether every value that ``members`` hold of satisfies one of ``branches`` (a
        sufficient, cheap test): then conjoining their union adds nothing. Recognized:
        a branch with no member; one that excludes types ``members`` rule out; one that
        forbids keys ``members`` forbid (a ``required`` key's complement)."""
        if any(not branch for branch in branches):
            return True
        shapes = [b[0].schema for b in branches if len(b) == 1 and type(b[0].schema) is Shape]
        shapes = [s for s in shapes if s.keywords == FORBIDDING or s.keywords == NOT_ONLY]
        if not shapes:
            return False
        held = self.signed(members)
        if held == ("never",):
            return True
        types, rules = held[0], held[3]
        for s in shapes:
            n = s.not_
            if s.keywords == NOT_ONLY:
                if type(n) is Shape and n.keywords == TYPE_ONLY and not types & n.types:
                    return True
            elif s.types == OBJECT_ONLY and types <= OBJECT_ONLY and not s.object.required \
                    and all(p is False and not rules.admits(k)
                            for k, p in s.object.properties.items()):
                return True
        return False

    def one_of_by_type(self, subs: list[Subschema], rest: list[Subschema],
                       at: Subschema) -> Expr | None:
        """``oneOf`` without complements, when it is exact per type.

        A branch whose keywords all constrain other types holds for every value
        of a type (``{"properties": …, "additionalProperties": false}`` holds for
        every string): where two branches do, no value of that type passes. The
        other types are kept, and if the branches are disjoint there, the
        ``oneOf`` is their ``anyOf``. None when that does not settle it.
        """
        types = types_of(rest, set(TYPES))
        crowded = {t for t in types if sum(holds_for_all(b.schema, t) for b in subs) >= 2}
        left = types - crowded
        if not crowded or ("number" in left) != ("integer" in left):
            return None
        if not left:
            return Terminal(rx.EMPTY)
        typed = Subschema(at.uri + "/~oneOfTypes", written(type=sorted(left)), at.base)
        if not self.disjoint(subs, rest + [typed]):
            return None
        return Choice(tuple(self.conj.conj_ref(rest + [typed, sub]) for sub in subs))

    def signature(self, branch: list[Subschema], types: set, depth: int = 0, *,
                  required: frozenset = frozenset()) -> tuple:
        """What :func:`sigs_disjoint` compares: supersets of a branch's types and
        values, of the values of its properties (where finite), and its key rules.
        ``required``: keys that every object conjoined with the branch has (its
        context's).

        A conjunction's signature is the meet of its members' own (:meth:`own`, kept
        with each member): the distribution of a ``oneOf`` signs the rest of its
        conjunction again in every conjunction that holds it, and a rest of forty
        members (``allOf`` mixins, ``if`` rewrites) was forty members read again each
        time."""
        types = set(types)  # narrowed below: the caller's set is shared between branches
        try:
            members = self.conj.expand(branch)
        except GrammarError:
            if not depth:
                raise
            return (set(TYPES), {}, None, key_rules([]))  # nothing known below the top
        if members is None:
            return ("never",)
        values: list | None = None
        # key -> the signatures of its properties schemas (a value meets them all)
        props: dict[str, list[tuple]] = {}
        keys_required, closed, forbidden = set(required), [], set()
        for m in members:
            own_types, own_values, own_props, own_rules = self.own(m, depth)
            types &= own_types
            if own_values is not None:
                if values is None:
                    values = own_values
                else:
                    keys = {json_key(v) for v in own_values}
                    values = [v for v in values if json_key(v) in keys]
            for k, sigs in own_props.items():
                props.setdefault(k, []).extend(sigs)
            keys_required |= own_rules.required
            closed += own_rules.closed
            forbidden |= own_rules.forbidden
        return (types, props, values,
                KeyRules(frozenset(keys_required), tuple(closed), frozenset(forbidden)))

    def own(self, m: Subschema, depth: int) -> tuple:
        """Member ``m``'s part of a signature (see :meth:`signature`): its types, values
        (None: not enumerated), properties' signatures (at depth 0) and key rules; the
        values of a nested ``anyOf``/``oneOf`` narrow them to its branches' union."""
        key = f"signature{depth}"
        found = m.memo.get(key)
        if found is not None:
            return found
        view = shape(m)
        types = set(TYPES)
        values = enumerated([m])
        props: dict[str, list[tuple]] = {}
        nested = [b for kw in ("anyOf", "oneOf") for b in (view.branches(kw) or ())]
        readable = not nested or depth < 3 and all(isinstance(b, (dict, Shape)) for b in nested)
        if nested and readable:  # the value is one of the branches': narrow to their union
            subs = [self.signed([Subschema(f"{m.uri}/~{i}", b, m.base)], depth + 1)
                    for i, b in enumerate(nested)]
            subs = [x for x in subs if x != ("never",)]
            types &= set().union(*(x[0] for x in subs))
            if all(x[2] is not None for x in subs):
                union = [v for x in subs for v in x[2]]
                keys = {json_key(u) for u in union}
                values = union if values is None else [v for v in values if json_key(v) in keys]
        if readable and depth == 0:
            # (only the branch's own keys are compared; below, values alone)
            for k, p in view.object.properties.items():
                if isinstance(p, (dict, Shape)):
                    sig = self.signed([Subschema(f"{m.uri}/properties/{escape(k)}", p,
                                                 m.base)], depth + 1)
                    if sig != ("never",):
                        props.setdefault(k, []).append(sig)
        types = types_of([m], types) - self.conj.negated_types(m)
        rules = key_rules([m])
        negated = negated_property(view.not_) if "not" in view.keywords else None
        if negated is not None:  # an object that has the key, with a value failing its schema
            name, operand = negated
            types &= OBJECT_ONLY
            rules = rules._replace(required=rules.required | {name})
            if depth == 0 and isinstance(operand, (dict, Shape)):
                sig = self.signed([Subschema(f"{m.uri}/not/properties/{escape(name)}/~!",
                                             written(not_=operand), m.base)], depth + 1)
                if sig != ("never",):
                    props.setdefault(name, []).append(sig)
        found = m.memo[key] = (types, values, props, rules)
        return found

