"""Array keywords: ``prefixItems``/``items`` (and the draft-07 array form with
``additionalItems``), item counts, ``contains`` with ``minContains``/``maxContains`` (one
or several), and ``uniqueItems`` over items with finitely many values.
"""

from __future__ import annotations

from collections.abc import Callable

from automask.errors import LimitExceeded
from automask.grammar.ir import Choice, Expr, Ref, Repeat, Seq, Terminal
from automask.regex import nodes as rx
from automask.schema.annotations import Annotations
from automask.schema.json_text import repeat_with_sep, separated
from automask.schema.lowering import Conjoin, Report
from automask.schema.normalize import shape, types_of
from automask.schema.shapes import ArrayPart, negated
from automask.schema.subschema import Subschema, json_key, json_type
from automask.schema.values import enumerated


class Arrays:
    """The array keywords of a conjunction."""

    def __init__(self, conj: Conjoin, annotations: Annotations, report: Report):
        self.conj = conj
        self.json = conj.json
        self.rules = conj.rules
        self.annotations = annotations
        self.report = report

    def array(self, members: list[Subschema]) -> Expr:
        members = members + self.annotations.evaluated(members, "unevaluatedItems")
        js = self.json
        min_i, max_i = 0, None
        prefix_len = 0
        views = [(m, shape(m).array) for m in members]
        for _m, view in views:
            if view.min_items is not None:
                min_i = max(min_i, view.min_items)
            if view.max_items is not None:
                max_i = view.max_items if max_i is None else min(max_i, view.max_items)
            prefix_len = max(prefix_len, len(view.prefix))

        def at_members(i: int | None) -> list[Subschema] | None:
            """What the item at position i must satisfy (None: beyond every prefix;
            returns None when no item may be there)."""
            subs: list[Subschema] = []
            for m, view in views:
                if i is not None and i < len(view.prefix):
                    subs.append(Subschema(f"{m.uri}/{view.prefix_keyword}/{i}", view.prefix[i],
                                          m.base))
                    continue
                if view.rest is False:
                    return None
                if view.rest is not None:
                    subs.append(Subschema(f"{m.uri}/{view.rest_keyword}", view.rest, m.base))
            return subs

        def at(i: int | None) -> Expr | None:
            """The item expression at position i (None: beyond every prefix)."""
            subs = at_members(i)
            if subs is None:
                return None
            return js.lead(self.conj.conj_ref(subs) if subs else js.any_value())

        try:
            return self._array_of(members, at_members, at, min_i, max_i, prefix_len, views)
        finally:
            # Nested functions that call one another: compiled, they share one environment
            # object that each of them holds (a cycle, see Objects.object_body)
            at_members = at = None  # type: ignore[assignment]

    def _array_of(self, members: list[Subschema],
                  at_members: Callable[[int | None], list[Subschema] | None],
                  at: Callable[[int | None], Expr | None], min_i: int, max_i: int | None,
                  prefix_len: int, views: list[tuple[Subschema, ArrayPart]]) -> Expr:
        """The array of :meth:`array`'s bounds, by the lowering its keywords call for."""
        js = self.json
        counts = [(m, view.min_contains, view.max_contains) for m, view in views
                  if view.has_contains and (view.min_contains or view.max_contains is not None)]
        unique = [m for m, view in views if view.unique]
        if unique:
            if counts:
                self.report.unsupported("uniqueItems with contains counts", unique[0],
                                        "uniqueItems")
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
            return repeat_with_sep(item, js.item_sep(), lo, hi)

        try:
            return js.enclose("[", tail(0, True), "]", min_i == 0)
        finally:
            tail = None  # type: ignore[assignment]  # (see Objects.object_body)

    def unique_array(self, m: Subschema, min_i: int, max_i: int | None, prefix_len: int,
                     at_members) -> Expr | None:
        """``uniqueItems`` where every item has finitely many possible values (enum,
        const, booleans, null): arrays of pairwise distinct values, each item also meeting
        its own schema. Such arrays are bounded by the number of values. None (lenient):
        not enforceable here, ignored."""
        longest = max_i if at_members(None) is not None else min(
            prefix_len, max_i if max_i is not None else prefix_len)
        if longest is not None and longest <= 1:
            return None  # at most one item: always unique
        js = self.json
        sep = js.item_sep()
        values: list = []  # every candidate value, once (JSON equality)
        index: dict = {}  # its JSON key -> its place in values
        domains: dict[int | None, tuple[list[Subschema], list[int]] | None] = {}

        def domain(i: int | None):
            if i not in domains:
                subs = at_members(i)
                if subs is None:
                    domains[i] = None
                    return None
                expanded = self.conj.expand(subs)
                cands = [] if expanded is None else enumerated(expanded)
                if cands is None:
                    types = types_of(expanded or [])
                    if not types <= {"null", "boolean"}:
                        raise _Infinite
                    cands = [v for v in (None, True, False) if json_type(v) in types]
                ids = []
                for v in cands:
                    k = index.setdefault(json_key(v), len(values))
                    if k == len(values):
                        values.append(v)
                    ids.append(k)
                domains[i] = (subs, ids)
            return domains[i]

        try:
            domain(None)
            for i in range(prefix_len):
                domain(i)
        except _Infinite:
            domain = None  # type: ignore[assignment]  # (see Objects.object_body)
            self.report.unsupported("uniqueItems on items with infinitely many values", m,
                             "uniqueItems")
            return None
        memo: dict[tuple[int, frozenset[int]], Expr] = {}

        def tail(i: int, used: frozenset[int]) -> Expr:
            key = (i, used)
            if key in memo:
                return memo[key]
            if len(memo) >= 4096:
                raise LimitExceeded("uniqueItems needs too many states")
            options: list[Expr] = []
            if i >= min_i and i > 0:  # the empty array is enclose's (see JsonPieces.enclose)
                options.append(Terminal(rx.EPS))
            d = domain(i if i < prefix_len else None)
            if d is not None and (max_i is None or i < max_i):
                subs, ids = d
                for k in ids:
                    if k in used:
                        continue
                    item = js.lead(self.conj.conj_ref(subs + [Subschema(
                        f"{m.uri}/~unique/{k}", {"const": values[k]}, m.base)]))
                    options.append(Seq((item if i == 0 else Seq((sep, item)),
                                        tail(i + 1, used | {k}))))
            rule = f"arr{len(self.rules)}"
            self.rules[rule] = Choice(tuple(options)) if options else Terminal(rx.EMPTY)
            memo[key] = Ref(rule)
            return memo[key]

        try:
            return js.enclose("[", tail(0, frozenset()), "]", min_i == 0)
        finally:
            tail = domain = None  # type: ignore[assignment]  # (see Objects.object_body)

    def multi_counted_array(self, counts: list[tuple[Subschema, int, int | None]], min_i: int,
                            max_i: int | None, prefix_len: int, at_members) -> Expr:
        """Several ``contains`` at once: each item is credited to a set of them (it must
        match those; it must fail those with a ``maxContains``, whose counts are exact),
        and the state is the count per ``contains``, capped where it stops mattering."""
        if len(counts) > 3:
            self.report.unsupported("more than 3 contains at one position", counts[3][0],
                                    "contains")
            counts = counts[:3]  # lenient: the others are ignored
        js = self.json
        sep = js.item_sep()
        hits = [Subschema(m.uri + "/contains", shape(m).array.contains, m.base)
                for m, _, _ in counts]
        steady = max(prefix_len, min_i)
        memo: dict[tuple, Expr] = {}
        kinds_memo: dict[int | None, list | None] = {}

        def kinds(i: int | None) -> list[tuple[tuple[int, ...], Expr]] | None:
            """(credited flags, item expression) for each credit set at position i."""
            if i not in kinds_memo:
                subs = at_members(i)
                if subs is None:
                    kinds_memo[i] = None
                else:
                    out = []
                    for mask in range(1 << len(counts)):
                        flags = tuple(mask >> t & 1 for t in range(len(counts)))
                        extra = [hits[t] if f else negated(hits[t])
                                 for t, f in enumerate(flags)
                                 if f or counts[t][2] is not None]
                        out.append((flags, js.lead(self.conj.conj_ref(subs + extra)
                                                   if subs or extra else js.any_value())))
                    kinds_memo[i] = out
            return kinds_memo[i]

        def tail(i: int, h: tuple[int, ...], first: bool) -> Expr:
            if any(hi is not None and n > hi for n, (_, _, hi) in zip(h, counts, strict=True)):
                return Terminal(rx.EMPTY)
            h = tuple(min(n, lo) if hi is None else n
                      for n, (_, lo, hi) in zip(h, counts, strict=True))
            if max_i is None:
                i = min(i, steady)
            key = (i, h, first)
            if key in memo:
                return memo[key]
            if len(memo) >= 4096:
                raise LimitExceeded("contains with item counts needs too many states")
            rule = f"arr{len(self.rules)}"
            self.rules[rule] = Terminal(rx.EMPTY)
            memo[key] = Ref(rule)
            options: list[Expr] = []
            if not first and i >= min_i and all(
                    n >= lo for n, (_, lo, _) in zip(h, counts, strict=True)):
                options.append(Terminal(rx.EPS))
            ks = kinds(i if i < steady or max_i is not None else None) \
                if max_i is None or i < max_i else None
            for flags, item in ks or ():
                nxt = tuple(n + f for n, f in zip(h, flags, strict=True))
                options.append(Seq((item if first else Seq((sep, item)),
                                    tail(i + 1, nxt, False))))
            self.rules[rule] = Choice(tuple(options)) if options else Terminal(rx.EMPTY)
            return memo[key]

        empty = min_i == 0 and all(lo == 0 for _, lo, _ in counts)
        try:
            return js.enclose("[", tail(0, (0,) * len(counts), True), "]", empty)
        finally:
            tail = kinds = None  # type: ignore[assignment]  # (see Objects.object_body)

    def counted_array(self, members: list[Subschema], m: Subschema, lo: int, hi: int | None,
                      min_i: int, max_i: int | None, prefix_len: int, at_members) -> Expr:
        """An array with ``lo..hi`` items matching ``contains`` (exact: with a ``hi``, the
        other items are the complement of ``contains``), item counts and prefixes."""
        js = self.json
        if hi is not None and hi < lo:
            return Terminal(rx.EMPTY)
        sep = js.item_sep()
        hit_m = Subschema(m.uri + "/contains", shape(m).array.contains, m.base)
        steady = max(prefix_len, min_i)  # from here on positions are alike (no maxItems)
        memo: dict[tuple[int, int, bool], Expr] = {}
        budget = 4096

        def kinds(i: int | None) -> tuple[Expr, Expr, Expr] | None:
            """(any item, a hit, a miss) at position i; None when no item may be there."""
            subs = at_members(i)
            if subs is None:
                return None
            anything = js.lead(self.conj.conj_ref(subs) if subs else js.any_value())
            hit = js.lead(self.conj.conj_ref(subs + [hit_m]))
            miss = (js.lead(self.conj.conj_ref(subs + [negated(hit_m)])) if hi is not None
                    else anything)
            return anything, hit, miss

        def join(first: bool, e: Expr) -> Expr:
            return e if first else Seq((sep, e))

        def steady_tail(h: int, first: bool) -> Expr:
            """Items past ``steady`` with unbounded length: misses, then hits each
            followed by misses, as many hits as still allowed."""
            a = max(lo - h, 0)
            b = None if hi is None else hi - h
            if b is not None and b < a:
                return Terminal(rx.EMPTY)
            k = kinds(None)
            if k is None:
                return Terminal(rx.EPS if a == 0 and not first else rx.EMPTY)
            _, hit, miss = k
            misses = Repeat(Seq((sep, miss)), 0, None)
            hits = Repeat(Seq((sep, hit, misses)), a, b)
            if not first:
                return Seq((misses, hits))
            options: list[Expr] = [Seq((miss, misses, hits))]
            if b is None or b >= 1:
                options.append(Seq((hit, misses, Repeat(Seq((sep, hit, misses)),
                                                         max(a - 1, 0),
                                                         None if b is None else b - 1))))
            return Choice(tuple(options))

        def tail(i: int, h: int, first: bool) -> Expr:
            if hi is None:
                h = min(h, lo)
            if max_i is None and i >= steady:
                return steady_tail(h, first)
            key = (i, h, first)
            if key in memo:
                return memo[key]
            if len(memo) >= budget:
                raise LimitExceeded("contains with item counts needs too many states")
            rule = f"arr{len(self.rules)}"
            self.rules[rule] = Terminal(rx.EMPTY)
            memo[key] = Ref(rule)
            options: list[Expr] = []
            if not first and i >= min_i and h >= lo and (hi is None or h <= hi):
                options.append(Terminal(rx.EPS))
            k = kinds(i) if max_i is None or i < max_i else None
            if k is not None:
                anything, hit, miss = k
                if hi is None and h >= lo:
                    options.append(Seq((join(first, anything), tail(i + 1, h, False))))
                else:
                    if hi is None or h < hi:
                        options.append(Seq((join(first, hit), tail(i + 1, h + 1, False))))
                    options.append(Seq((join(first, miss), tail(i + 1, h, False))))
            self.rules[rule] = Choice(tuple(options)) if options else Terminal(rx.EMPTY)
            return memo[key]

        try:
            return js.enclose("[", tail(0, 0, True), "]", min_i == 0 and lo == 0)
        finally:
            tail = kinds = join = steady_tail = None  # type: ignore[assignment]  # (as above)


class _Infinite(Exception):
    """An item that may take infinitely many values (uniqueItems cannot enumerate it)."""
