"""``oneOf`` of object schemas whose branches overlap, key by key.

Exactly one branch must hold. The general lowering writes, for each branch, the
branch and the complement of every branch it may share a value with; each
complement is a choice (a key the other forbids, a required key missing, a
value the other rejects), and their conjunction multiplies out: eight variants
of a closed object that differ in an optional ``"type"`` tag made tens of
thousands of conjunctions and never finished compiling.

Here the object is read once, in one key order, and the state is the set of
branches that still hold: a key's absence drops the branches that require it;
its value, split into classes by exactly which branches' schemas it meets,
keeps the branches it meets; a key after the declared ones keeps the open
branches. The object is valid where one branch is left at the end. The states
are sets of branches that some object prefix leaves, few in practice (a tag
value leaves one), where the complements multiply with every branch.

Only plain object branches are taken (``type``, ``properties``, ``required``,
``additionalProperties``, references and annotations); anything else declines
(None) and the general lowering runs.
"""

from __future__ import annotations

from collections.abc import Hashable

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded
from automask.grammar.ir import Choice, Expr, Ref, Seq, Terminal
from automask.regex import nodes as rx
from automask.regex import utf8
from automask.schema.complement import expanded, without
from automask.schema.json_text import string_node
from automask.schema.keywords import HANDLED
from automask.schema.lowering import Conjoin, Options
from automask.schema.normalize import shape, types_of
from automask.schema.objects import Objects, key_order
from automask.schema.one_of import OneOf
from automask.schema.shapes import Shape, keywords_of, negated, written
from automask.schema.subschema import ANNOTATIONS, TYPES, Subschema, escape, json_key

# What a branch member may hold: object keywords whose conjunction is read key by key.
PLAIN = ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$ref",
                       "allOf", "embedded"}
UNEVALUATED = frozenset({"unevaluatedProperties", "unevaluatedItems"})
# Keywords whose complement the compiler refuses (besides additionalProperties schemas and
# object or array values): a value class that needs one is left out instead.
UNCOMPLEMENTED = frozenset({"patternProperties", "format", "uniqueItems"})
MAX_BRANCHES = 64  # branches, nested disjoint ones spread out
MAX_NESTING = 3  # nested disjoint oneOf/anyOf spread out into branches
MAX_STATES = 4096  # sets of branches still holding, over all key positions
MAX_CLASSES = 256  # value classes at one key (sets of branch schemas a value meets)
MAX_NEGATED = 40  # schema objects a value schema may reach and still be complemented
MAX_COMPLEMENTED_LENGTH = 1000  # a string length bound complemented in a value class
MAX_MERGE = 250_000  # slots times keys in one merge step of the key orders (50 ms)

Branches = frozenset  # of branch indices


class Branch:
    """One branch's members (the context's included) and its object keywords."""

    def __init__(self, members: list[Subschema], strict: bool):
        self.views = [(m, shape(m).object) for m in members]
        self.types = types_of(members)
        order, required = key_order(self.views)
        self.order = list(order)
        self.required = frozenset(required)
        extras = [v.extra(strict) for _, v in self.views]
        self.open = all(x is True for x in extras)
        self.plain_extras = all(x is True or x is False for x in extras)


def plain(m: Subschema) -> bool:
    """Whether ``m`` says nothing but :data:`PLAIN` (unknown keywords are ignored)."""
    s = m.schema
    if any(kw in HANDLED or kw in UNEVALUATED for kw in keywords_of(s) - PLAIN):
        return False
    o = shape(m).object
    return not (o.pattern_properties or o.has_property_names or o.key_outside is not None
                or o.min_properties is not None or o.max_properties is not None)


def merged_slots(orders: list[list[str]]) -> list[str] | None:
    """A sequence of key slots in which every branch's keys stand in the branch's own
    order: each order merged in along a longest common subsequence, so a key that two
    branches place differently gets two slots. None when too large to merge."""
    slots: list[str] = []
    for order in orders:
        if len(slots) * len(order) > MAX_MERGE:
            return None
        # lcs[a][b]: the longest common subsequence of slots[a:] and order[b:]
        lcs = [[0] * (len(order) + 1) for _ in range(len(slots) + 1)]
        for a in range(len(slots) - 1, -1, -1):
            for b in range(len(order) - 1, -1, -1):
                lcs[a][b] = (lcs[a + 1][b + 1] + 1 if slots[a] == order[b]
                             else max(lcs[a + 1][b], lcs[a][b + 1]))
        out: list[str] = []
        a = b = 0
        while a < len(slots) or b < len(order):
            if a < len(slots) and b < len(order) and slots[a] == order[b] \
                    and lcs[a][b] == lcs[a + 1][b + 1] + 1:
                out.append(slots[a])
                a, b = a + 1, b + 1
            elif b == len(order) or a < len(slots) and lcs[a + 1][b] >= lcs[a][b + 1]:
                out.append(slots[a])
                a += 1
            else:
                out.append(order[b])
                b += 1
        slots = out
    return slots


class TooManyStates(LimitExceeded):
    """The key-by-key reading of a ``oneOf`` met more than :data:`MAX_STATES` states."""


def long_count(view: Shape) -> bool:
    """Whether a schema bounds a string's length past :data:`MAX_COMPLEMENTED_LENGTH`."""
    return any(n is not None and n > MAX_COMPLEMENTED_LENGTH
               for n in (view.string.min_length, view.string.max_length))


class OneOfObjects:
    """Lowers ``oneOf`` of plain object schemas by the set of branches still holding."""

    def __init__(self, conj: Conjoin, objects: Objects, one_of: OneOf, options: Options):
        self.conj = conj
        self.json = conj.json
        self.rules = conj.rules
        self.objects = objects
        self.one_of = one_of
        self.strict = options.strict
        self._content: dict[int, Hashable] = {}  # id(schema) -> its key (schemas live on)
        self._small: dict[str, bool] = {}  # position -> whether its complement is small

    def lower(self, rest: list[Subschema], subs: list[Subschema], at: Subschema
              ) -> Expr | None:
        """Exactly one of ``subs`` beside ``rest``, or None when a branch is not plain."""
        if self.conj.tracks:
            return None
        branches: list[Branch] = []
        for sub in subs:
            parts = self.plain_parts(rest, sub)
            if parts is None or len(branches) + len(parts) > MAX_BRANCHES:
                return None
            branches += [Branch(members, self.strict) for members in parts]
        others = self.other_types(branches)
        if others is None:
            return None
        holding = [b for b in branches if "object" in b.types]
        alternatives: list[Expr] = []
        if others:
            alternatives.append(self.conj.conj_ref(
                [Subschema(at.uri + "/~oneOfTypes", written(type=sorted(others)), at.base)]))
        if holding:
            if not all(b.plain_extras for b in holding):
                return None
            slots = merged_slots([b.order for b in holding])
            if slots is None or self.declines(holding, slots):
                return None
            try:
                alternatives.append(self.conj.inside(lambda: self.object(holding, slots)))
            except TooManyStates:
                # (the rules made so far are left unreachable, and dropped with them)
                return None  # the general lowering, which may still fit
        if not alternatives:
            return Terminal(rx.EMPTY)
        return alternatives[0] if len(alternatives) == 1 else Choice(tuple(alternatives))

    def plain_parts(self, rest: list[Subschema], sub: Subschema, depth: int = 0
                    ) -> list[list[Subschema]] | None:
        """The members of ``sub`` beside ``rest``, as plain branches: one, or where a
        member holds a ``oneOf`` or ``anyOf`` of branches that are disjoint beside the
        others, one per branch (exactly one of them holds where ``sub`` does, so a
        ``oneOf`` counts them as it counts ``sub``); None when not plain."""
        members = self.conj.expand(rest + [sub])
        if members is None:
            return []  # a false branch holds nowhere
        for m in members:
            self.conj.check_keywords(m)
        nested = [m for m in members if not plain(m)]
        if not nested:
            return [members]
        m = nested[0]
        kws = keywords_of(m.schema) & {"anyOf", "oneOf"}
        if depth >= MAX_NESTING or len(nested) > 1 or len(kws) != 1:
            return None
        (kw,) = kws
        inner = shape(m).branches(kw)
        if not isinstance(inner, (list, tuple)) or not inner:
            return None
        around = [expanded(x) for x in members if x is not m] + [
            Subschema(f"{m.uri}/~{kw}", without(m.schema, kw), m.base)]
        if not plain(around[-1]):
            return None
        subs = [Subschema(f"{m.uri}/{kw}/{j}", b, m.base) for j, b in enumerate(inner)]
        if not self.one_of.disjoint(subs, around):
            return None
        out: list[list[Subschema]] = []
        for branch in subs:
            parts = self.plain_parts(around, branch, depth + 1)
            if parts is None:
                return None
            out += parts
        return out

    @staticmethod
    def other_types(branches: list[Branch]) -> list[str] | None:
        """The types other than object of which exactly one branch holds: there its
        object keywords are inert, so it holds of every value (None: only non-integer
        numbers would be left, which a type cannot say)."""
        left = [t for t in TYPES if t != "object" and sum(t in b.types for b in branches) == 1]
        if "number" in left and "integer" not in left:
            return None
        return left

    def object(self, branches: list[Branch], slots: list[str]) -> Expr:
        """``{`` the keys slot by slot, then extra keys ``}``, one rule per (slot,
        branches still holding, keys of several slots written so far, none written
        yet); valid where exactly one branch is left."""
        js = self.json
        sep = js.item_sep()
        n = len(slots)
        every = frozenset(range(len(branches)))
        last = {name: i for i, name in enumerate(slots)}
        # keys with several slots: written at most once, so the state says which are
        # (until their last slot has passed)
        repeated = {name for i, name in enumerate(slots) if last[name] != i}
        # a required key not written by its last slot drops the branches requiring it
        requiring = [frozenset(j for j, b in enumerate(branches) if name in b.required)
                     if last[name] == i else frozenset() for i, name in enumerate(slots)]
        opened = frozenset(i for i, b in enumerate(branches) if b.open)
        extra_member = js.member(string_node(utf8.text_except(list(last))), js.any_value())
        memo: dict[tuple[int, Branches, frozenset, bool], Expr] = {}
        rules = self.rules

        def rule_for(key: tuple[int, Branches, frozenset, bool], result: Expr) -> Expr:
            name = f"obj{len(rules)}"
            rules[name] = result
            memo[key] = Ref(name)
            return memo[key]

        def end(alive: Branches, first: bool) -> Expr:
            """After the declared keys: extra keys keep the open branches. At least one
            is needed where none was written (the empty object is the enclosing
            choice's) or where several branches are left."""
            extra = extra_member if len(alive & opened) == 1 else None
            return self.objects.extra_run(extra, first, int(first or len(alive) > 1), None)

        def tail(i: int, alive: Branches, written: frozenset, first: bool) -> Expr:
            key = (i, alive, written, first)
            found = memo.get(key)
            if found is not None:
                return found
            if len(memo) >= MAX_STATES:
                raise TooManyStates("oneOf of objects needs too many states")
            check_time()
            if i == n:
                return rule_for(key, end(alive, first))
            name = slots[i]
            out: list[Expr] = []
            done = written - {name} if last[name] == i else written
            absent = alive if name in written else alive - requiring[i]
            if absent:
                out.append(tail(i + 1, absent, done, first))
            if name not in written:
                now = done | {name} if name in repeated and last[name] != i else done
                for value, kept in self.value_classes(branches, alive, name):
                    member = js.member(name, value)
                    head = member if first else Seq((sep, member))
                    out.append(Seq((head, tail(i + 1, kept, now, False))))
            result: Expr = Choice(tuple(out)) if out else Terminal(rx.EMPTY)
            return rule_for(key, result)

        empty = sum(1 for b in branches if not b.required) == 1
        try:
            return js.enclose("{", tail(0, every, frozenset(), True), "}", empty)
        finally:
            tail = rule_for = end = None  # type: ignore[assignment]  # (see Objects.object_body)

    def kinds(self, branches: list[Branch], alive: Branches, name: str
              ) -> tuple[list[Subschema], list[tuple[list[Subschema], list[int]]], Branches]:
        """What the ``alive`` branches require of key ``name``'s value: the schemas they
        all require, then the rest grouped by equal content (schemas, branches), and the
        branches that require nothing more (they keep every value the first part
        admits). A branch that forbids the key is in none."""
        groups: dict[frozenset, tuple[dict[Hashable, Subschema], list[int]]] = {}
        for i in sorted(alive):
            schemas: list[Subschema] = []
            for m, view in branches[i].views:
                found = self.objects.value_schemas_for_key(m, view, name)
                if found is None:
                    break
                schemas += found
            else:
                keyed = {self.content(s): s for s in schemas}
                groups.setdefault(frozenset(keyed), (keyed, []))[1].append(i)
        shared = frozenset.intersection(*groups) if groups else frozenset()
        anything: list[int] = []
        kinds = []
        for keyed, ids in groups.values():
            own = [s for k, s in keyed.items() if k not in shared]
            if own:
                kinds.append((own, ids))
            else:
                anything += ids
        first = next(iter(groups.values()), ({}, []))[0]
        return [s for k, s in first.items() if k in shared], kinds, frozenset(anything)

    def declines(self, branches: list[Branch], slots: list[str]) -> bool:
        """Whether some key's values split in a way :meth:`value_classes` does not
        write (checked for all branches at once: a subset's split is coarser)."""
        every = frozenset(range(len(branches)))
        for name in dict.fromkeys(slots):
            _, kinds, anything = self.kinds(branches, every, name)
            if len(kinds) + bool(anything) > 1 and (
                    any(len(own) != 1 for own, _ in kinds)
                    or cliques(self.overlaps(kinds), MAX_CLASSES) is None):
                return True
        return False

    def overlaps(self, kinds: list[tuple[list[Subschema], list[int]]]) -> list[set[int]]:
        """For each kind, the others some value may meet with it (a pair left out is
        surely disjoint: see :meth:`OneOf.meet`)."""
        signs = [self.one_of.signed(own) for own, _ in kinds]
        return [{u for u in range(len(kinds)) if u != t and self.one_of.meet(
                    kinds[t][0], signs[t], kinds[u][0], signs[u])}
                for t in range(len(kinds))]

    def value_classes(self, branches: list[Branch], alive: Branches, name: str
                      ) -> list[tuple[Expr, Branches]]:
        """The values of key ``name`` split by which of the ``alive`` branches they
        keep: per class, its rule and those branches (see :meth:`kinds`)."""
        shared, kinds, anything = self.kinds(branches, alive, name)
        meets = self.overlaps(kinds)
        out = []
        for chosen in cliques(meets, MAX_CLASSES) or ():
            if not chosen and not anything:
                continue
            # the values that meet exactly the schemas of ``chosen``: one disjoint from a
            # chosen schema fails there anyway (no complement needed)
            outside = [u for u in range(len(kinds)) if u not in chosen
                       and all(u in meets[t] for t in chosen)]
            if outside and not (all(self.small(kinds[u][0][0]) for u in outside) and not any(
                    self.counted(s) for t in chosen for s in kinds[t][0])):
                # A complement that multiplies out (an array of a five-way ``oneOf``:
                # some item that fails all five or meets two), or one beside a long
                # length count (whose automaton the emptiness test cannot finish).
                # The class is left out: those values are not written here, which
                # loses valid objects (an open branch's value for this key that the
                # others' schema rejects) and admits no invalid one.
                continue
            members = shared + [s for t in chosen for s in kinds[t][0]] + [
                negated(kinds[u][0][0]) for u in outside]
            kept = frozenset(i for t in chosen for i in kinds[t][1]) | anything
            out.append((self.conj.conj_ref(members), kept))
        return out

    def small(self, m: Subschema) -> bool:
        """Whether ``m`` reaches at most :data:`MAX_NEGATED` schema objects (through
        references, properties, items and combinators: the size its complement's
        branches grow with) and none whose complement is refused (see ``docs/
        json-schema.md``, ``not``)."""
        found = self._small.get(m.uri)
        if found is None:
            found = self._small[m.uri] = self._reach(m) <= MAX_NEGATED
        return found

    def counted(self, m: Subschema) -> bool:
        """Whether ``m`` bounds a string's length past :data:`MAX_COMPLEMENTED_LENGTH`."""
        try:
            members = self.conj.expand([m]) or []
        except GrammarError:
            return True
        return any(long_count(shape(x)) for x in members)

    def _reach(self, start: Subschema) -> int:
        seen: set[str] = set()
        todo = [start]
        while todo and len(seen) <= MAX_NEGATED:
            try:
                members = self.conj.expand([todo.pop()]) or []
            except GrammarError:
                return MAX_NEGATED + 1
            for m in members:
                if m.uri in seen:
                    continue
                seen.add(m.uri)
                view = shape(m)
                if view.keywords & UNCOMPLEMENTED or long_count(view) or \
                        view.object.has_additional and \
                        isinstance(view.object.additional, (dict, Shape)) or any(
                        isinstance(v, (dict, list)) for vs in view.values for v in vs):
                    return MAX_NEGATED + 1
                todo += [Subschema(f"{m.uri}/properties/{escape(k)}", p, m.base)
                         for k, p in view.object.properties.items()]
                todo += [Subschema(f"{m.uri}/{kw}/{i}", b, m.base)
                         for kw in ("anyOf", "oneOf") for i, b in enumerate(
                             view.branches(kw) or ()) if isinstance(b, (dict, Shape))]
                for kw, child in (("items", view.array.rest), ("not", view.not_),
                                  ("additionalProperties", view.object.additional)):
                    if isinstance(child, (dict, Shape)):
                        todo.append(Subschema(f"{m.uri}/{kw}", child, m.base))
                todo += [Subschema(f"{m.uri}/prefixItems/{i}", p, m.base)
                         for i, p in enumerate(view.array.prefix) if isinstance(p, (dict, Shape))]
        return len(seen)

    def content(self, m: Subschema) -> Hashable:
        """A schema's JSON value with its base URI: equal ones hold of the same values,
        wherever they stand (a compiler-written shape is its position)."""
        s = m.schema
        if type(s) is Shape:
            return (m.base, "@", m.uri)
        if type(s) is not dict:
            return (m.base, json_key(s))
        found = self._content.get(id(s))
        if found is None:
            found = self._content[id(s)] = (m.base, json_key(s))
        return found


def cliques(meets: list[set[int]], most: int) -> list[tuple[int, ...]] | None:
    """Every set of pairwise overlapping indices, the empty one included (None when
    there are more than ``most``)."""
    out: list[tuple[int, ...]] = []
    todo: list[tuple[tuple[int, ...], list[int]]] = [((), list(range(len(meets))))]
    while todo:
        chosen, candidates = todo.pop()
        out.append(chosen)
        if len(out) > most:
            return None
        for j, c in enumerate(candidates):
            todo.append((chosen + (c,), [d for d in candidates[j + 1:] if d in meets[c]]))
    return out
