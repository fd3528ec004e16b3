"""An Earley parser over lexemes, with interned, immutable Earley sets.

An Earley set here is a node of a persistent graph-structured stack: its
items point at the sets where they started (their *origin* objects), not at
chart positions. Sets are interned by content, so two sets that will behave
the same on any future input are the same object. That makes parser steps
memoizable (the same completion from the same set always gives the same
set), sequences cheap to fork or roll back (a state is a handful of
pointers), and whole-mask caching possible across steps and sequences.

Nullable rules follow Aycock & Horspool: predicting a nullable nonterminal
also advances over it, so completions never need to look into the set under
construction. Only items that can still consume input (and the "accepting"
flag) take part in a set's identity; completed items do not affect the future.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterable
from typing import Any

from automask.budget import check_time
from automask.errors import LimitExceeded
from automask.gc_pause import untrack
from automask.grammar.ir import Grammar

_ORIGIN_SHIFT = 32  # an item key: core | (origin uid + 1) << 32, origin 0 for "this set"
_CORE_BITS = (1 << _ORIGIN_SHIFT) - 1


class ParserTables:
    """Dotted-rule tables derived once from a :class:`Grammar`."""

    def __init__(self, grammar: Grammar):
        names = sorted({p.lhs for p in grammar.productions})
        self.nt_index = {n: i for i, n in enumerate(names)}
        self.nt_names = names
        # A dotted rule ("core") is an int; next_symbol[core] is a lexeme id (>= 0),
        # a nonterminal as -(index + 1), or None when the rule is complete.
        self.next_symbol: list[int | None] = []
        self.lhs: list[int] = []
        initial_cores: list[list[int]] = [[] for _ in names]
        top = len(names)  # the augmented start rule: TOP -> start
        self.nt_names.append("<top>")
        initial_cores.append([])
        #: the rules as (lhs, rhs), symbols encoded as in next_symbol, TOP -> start first
        self.rules: list[tuple[int, tuple[int, ...]]] = []
        next_symbol, lhs_of, rules, index = self.next_symbol, self.lhs, self.rules, self.nt_index
        for lhs, rhs in [(top, (grammar.start,))] + [(self.nt_index[p.lhs], p.rhs)
                                                      for p in grammar.productions]:
            initial_cores[lhs].append(len(next_symbol))
            encoded = tuple([sym if isinstance(sym, int) else ~index[sym]  # -(index + 1)
                             for sym in rhs])
            rules.append((lhs, encoded))
            next_symbol += encoded
            next_symbol.append(None)
            lhs_of += [lhs] * (len(encoded) + 1)
        # Tuples of ints: the garbage collector stops tracking them (lists it would walk).
        self.initial_cores: list[tuple[int, ...]] = [tuple(cores) for cores in initial_cores]
        self.top_start = self.initial_cores[top][0]
        self.top_done = self.top_start + 1
        self.nullable = self._nullable()
        # None: that closure is over PREDICTION_CAP (see prediction)
        self._predictions: dict[int, tuple[dict[int, None], tuple[int, ...]] | None] = {}

    def _nullable(self) -> list[bool]:
        """Which nonterminals derive the empty string: a worklist in which each rule waits
        at its first nonterminal not yet known nullable, and moves on when that one
        becomes so. Every dotted rule is passed once, so this is linear in the grammar
        (a pass-until-nothing-changes loop is quadratic on a 5,000-rule chain)."""
        next_symbol, lhs_of = self.next_symbol, self.lhs
        nullable = [False] * len(self.nt_names)
        waiting: dict[int, list[int]] = {}  # nonterminal -> dotted rules stopped at it
        found: list[int] = []

        def advance(core: int) -> None:
            while True:
                sym = next_symbol[core]
                if sym is None:
                    lhs = lhs_of[core]
                    if not nullable[lhs]:
                        nullable[lhs] = True
                        found.append(lhs)
                    return
                if sym >= 0:  # a lexeme: never empty
                    return
                if not nullable[-sym - 1]:
                    waiting.setdefault(-sym - 1, []).append(core)
                    return
                core += 1

        for cores in self.initial_cores:
            for core in cores:
                advance(core)
        while found:
            for core in waiting.pop(found.pop(), ()):
                advance(core + 1)
        return nullable

    def prediction(self, nt: int) -> tuple[dict[int, None], tuple[int, ...]] | None:
        """What predicting ``nt`` adds to a set: its items (cores starting in that set,
        closed under prediction and nullable advance) and the nonterminals predicted;
        None when that closure is larger than :data:`PREDICTION_CAP` cores.

        Items that start in the set under construction can only predict, advance
        over nullables, or complete (which, for them, nullability already did),
        so this closure depends on ``nt`` alone: computed once per grammar instead
        of item by item in every set that predicts ``nt``. The cap keeps the closures
        of all nonterminals linear in the grammar: in a chain of N rules each
        predicting the next, the closures together hold N²/2 cores (a set that
        predicts all of them would copy each one), so a large one is predicted item
        by item instead, from the closures of its parts.
        """
        found = self._predictions.get(nt, _MISSING)
        if found is _MISSING:
            next_symbol, nullable = self.next_symbol, self.nullable
            cores: dict[int, None] = {}
            nts = {nt}
            agenda = list(self.initial_cores[nt])
            while agenda:
                core = agenda.pop()
                if core in cores:
                    continue
                cores[core] = None
                if len(cores) > PREDICTION_CAP:
                    found = None
                    break
                sym = next_symbol[core]
                if sym is not None and sym < 0:
                    other = -sym - 1
                    if other not in nts:
                        nts.add(other)
                        agenda.extend(self.initial_cores[other])
                    if nullable[other]:
                        agenda.append(core + 1)
            else:
                found = (cores, tuple(nts))
                untrack(found)  # ints only
            self._predictions[nt] = found
        return found  # type: ignore[return-value]  # not _MISSING: found above


#: The largest prediction closure kept whole (see :meth:`ParserTables.prediction`); JSON
#: Schema grammars' closures are tens of cores.
PREDICTION_CAP = 512
_MISSING = object()


def follow_lexemes(grammar: Grammar, tables: ParserTables | None = None
                   ) -> list[set[int] | None]:
    """For each lexeme, the lexemes that may come right after it (None: anything may).

    Context-free FOLLOW sets over lexemes; used to drop tokens early (a token
    crossing a lexeme end must go on with a byte that can start what follows).
    Sets are bitmasks (bit ``i``: lexeme ``i``; the top bit: the end of the
    text). Both fixpoints go part by part through the strongly connected parts
    of "a nonterminal's rules read another's" (:func:`_settle`): FIRST after
    the parts a part reads, FOLLOW before them, so a chain of 10,000 optional
    properties settles in one pass, not one pass per link, and a part without
    a cycle (most nonterminals of a JSON Schema grammar) is read exactly once.
    ``tables``: the grammar's, if made already (its rules are numbered, and its
    nullable set is the one FIRST needs).
    """
    if tables is None:
        tables = ParserTables(grammar)
    n_lex = len(grammar.lexemes)
    rules, nullable = tables.rules, tables.nullable
    n_nt = len(tables.nt_names)  # nonterminal i is -(i + 1) in a rule; the last is TOP
    first = [0] * n_nt
    uses: list[list[int]] = [[] for _ in range(n_nt)]  # rules with nonterminal i in their rhs
    by_lhs: list[list[int]] = [[] for _ in range(n_nt)]
    reads: list[list[int]] = [[] for _ in range(n_nt)]  # (repeats: harmless to Tarjan)
    for k, (lhs, rhs) in enumerate(rules):
        by_lhs[lhs].append(k)
        for sym in rhs:
            if sym < 0:
                uses[~sym].append(k)
                reads[lhs].append(~sym)

    def first_step(k: int) -> list[int]:
        lhs, rhs = rules[k]
        bits = 0
        for sym in rhs:
            if sym >= 0:
                bits |= 1 << sym
                break
            bits |= first[~sym]
            if not nullable[~sym]:
                break
        if not bits & ~first[lhs]:
            return []
        first[lhs] |= bits
        return uses[lhs]

    # FIRST(a) reads FIRST(b) for each b on a's right sides; FOLLOW the other way round
    # (same strongly connected parts, reversed order).
    parts = _strong_components(reads)
    _settle(parts, reads, by_lhs, first_step)
    follow_nt = [0] * n_nt
    follow_nt[-1] = 1 << n_lex  # TOP -> start: what follows the start is the end of the text
    follow = [0] * n_lex

    def follow_step(k: int) -> list[int]:
        lhs, rhs = rules[k]
        trailer, dirty = follow_nt[lhs], []
        for sym in reversed(rhs):
            if sym >= 0:
                follow[sym] |= trailer
                trailer = 1 << sym
                continue
            nt = ~sym
            if trailer & ~follow_nt[nt]:
                follow_nt[nt] |= trailer
                dirty += by_lhs[nt]
            trailer = (trailer | first[nt]) if nullable[nt] else first[nt]
        return dirty

    parts.reverse()
    _settle(parts, reads, by_lhs, follow_step)
    out: list[set[int] | None] = [_bit_set(bits & ~(1 << n_lex)) for bits in follow]
    for lex in grammar.ignore:
        out[lex] = None  # ignored text may stand anywhere
    if grammar.ignore:
        for f in out:
            if f is not None:
                f.update(grammar.ignore)
    return out


def _settle(parts: list[list[int]], reads: list[list[int]], by_lhs: list[list[int]],
            step: Callable[[int], Iterable[int]]) -> None:
    """Run ``step(k)`` on the rules of each part of nonterminals in turn, until the part
    is stable; ``step`` returns the rules to run again because of what it changed.

    The parts come in an order where everything a part's steps read from other
    parts is settled already, so only a part with a cycle (several nonterminals,
    or one whose rules read itself) runs a rule again: with a worklist, and only
    for rules of that part (one of a later part will read the settled value).
    Every part, and every step inside a cycle, counts towards a time-limit check.
    """
    owner = [-1] * sum(len(r) for r in by_lhs)  # rule -> the cyclic part running it
    queued = bytearray(len(owner))
    for number, part in enumerate(parts):
        check_time()
        if len(part) == 1 and part[0] not in reads[part[0]]:
            for k in by_lhs[part[0]]:
                step(k)
            continue
        work = [k for nt in part for k in by_lhs[nt]]
        for k in work:
            owner[k], queued[k] = number, 1
        work.reverse()  # (a stack: the first rule is popped first)
        while work:
            k = work.pop()
            queued[k] = 0
            check_time()
            for other in step(k):
                if owner[other] == number and not queued[other]:
                    queued[other] = 1
                    work.append(other)


def _strong_components(reads: list[list[int]]) -> list[list[int]]:
    """The strongly connected parts of the graph ``v -> reads[v]`` over ``0 .. len(reads)
    - 1``, each after every part it reads (a cycle is one part). Tarjan's algorithm,
    iterative: it finishes a part only after every part the part reads."""
    n = len(reads)
    index = [-1] * n
    low = [0] * n
    on_stack = bytearray(n)
    stack: list[int] = []
    parts: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        work = [(root, iter(reads[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work.append((w, iter(reads[w])))
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    w = stack.pop()
                    on_stack[w] = 0
                    if w == v:  # (most parts: one nonterminal)
                        parts.append([w])
                        continue
                    part = [w]
                    while w != v:
                        w = stack.pop()
                        on_stack[w] = 0
                        part.append(w)
                    parts.append(part)
    return parts


def _bit_set(bits: int) -> set[int]:
    out = set()
    while bits:
        low = bits & -bits
        out.add(low.bit_length() - 1)
        bits ^= low
    return out


class EarleySet:
    """An interned set of Earley items; see the module docstring."""

    # ``waiting`` is one flat tuple (core, origin, core, origin, ...) of the items
    # waiting on a symbol, grouped by symbol (origin None: this set); ``by_symbol``
    # maps a symbol to its span in it, ``start << 32 | stop``. One tuple per set,
    # not one per symbol: each tuple would be one more object for the garbage
    # collector to walk, and a dict of ints it never tracks at all.
    __slots__ = ("uid", "key", "by_symbol", "waiting", "lexemes", "accepting", "lexer_start",
                 "size")
    # set by Parser._build, never by __init__
    uid: int
    key: bytes
    by_symbol: dict[int, int]  # symbol -> start << 32 | stop in waiting
    waiting: tuple  # (core, origin EarleySet or None, core, origin, ...)
    lexemes: tuple[int, ...]
    accepting: bool
    lexer_start: int
    size: int

    def __repr__(self) -> str:
        return f"<EarleySet #{self.uid} items={self.size} lexemes={self.lexemes}>"


class Parser:
    """Builds and interns Earley sets, and memoizes lexeme completions."""

    def __init__(self, tables: ParserTables, ignore: tuple[int, ...], lexer: Any,
                 max_items: int = 100_000, max_sets: int = 20_000):
        self.tables = tables
        self.ignore = tuple(sorted(set(ignore)))
        self.lexer = lexer
        self.max_items = max_items
        self.max_sets = max_sets
        self._sets: dict[bytes, EarleySet] = {}
        self._completions: dict[tuple | frozenset, EarleySet] = {}
        self._lock = threading.RLock()
        self._uid = 0
        self.initial = self._build([(self.tables.top_start, None)])

    def _build(self, kernel: list[tuple[int, EarleySet | None]]) -> EarleySet:
        tables = self.tables
        nxt_sym, nullable, lhs = tables.next_symbol, tables.nullable, tables.lhs
        prediction, initial_cores = tables.prediction, tables.initial_cores
        # An item is one int: its core, plus (origin uid + 1) above bit 32 (0: this set);
        # ``items`` maps it to its origin, and the agenda holds the ints alone. Adding one
        # is written out where it happens (no helper call: this loop is hot).
        items: dict[int, EarleySet | None] = {}
        agenda: list[int] = []
        push, pop = agenda.append, agenda.pop
        predicted: set[int] = set()
        top_done, accepting, max_items = tables.top_done, False, self.max_items
        for core, origin in kernel:
            key = core if origin is None else core | (origin.uid + 1) << _ORIGIN_SHIFT
            if key not in items:
                items[key] = origin
                push(key)
        while agenda:
            key = pop()
            core = key & _CORE_BITS
            sym = nxt_sym[core]
            if sym is None:
                if core == top_done:  # the augmented start rule is complete
                    accepting = True
                elif key > _CORE_BITS:  # completion; self-origin ones: see nullability
                    # key > _CORE_BITS: the key holds an origin, so its item's is a set
                    parent: EarleySet = items[key]  # type: ignore[assignment]
                    span = parent.by_symbol.get(~lhs[core])
                    if span is not None:
                        waiting = parent.waiting
                        for i in range(span >> 32, span & _CORE_BITS, 2):
                            above = waiting[i + 1] or parent
                            key = waiting[i] + 1 | (above.uid + 1) << _ORIGIN_SHIFT
                            if key not in items:
                                items[key] = above
                                push(key)
                        if len(items) > max_items:
                            raise LimitExceeded(f"an Earley set exceeds {max_items} items")
            elif sym < 0:
                nt = ~sym
                if nt not in predicted:
                    # its items start here: an int key each (the core), no origin to follow
                    closure = prediction(nt)
                    if closure is not None:
                        predicted.update(closure[1])
                        items.update(closure[0])
                    else:  # too large to keep whole: its rules, predicted in turn
                        predicted.add(nt)
                        for start in initial_cores[nt]:
                            if start not in items:
                                items[start] = None
                                push(start)
                    if len(items) > max_items:
                        raise LimitExceeded(f"an Earley set exceeds {max_items} items")
                if nullable[nt]:
                    key += 1  # the dot past the nullable, from the same origin
                    if key not in items:
                        items[key] = items[key - 1]
                        push(key)
        # The identity of a set: its live items (those that can still consume input).
        live = sorted([k for k in items if nxt_sym[k & _CORE_BITS] is not None])
        set_key = array("q", [accepting] + live).tobytes()
        found = self._sets.get(set_key)
        if found is not None:
            return found
        with self._lock:
            found = self._sets.get(set_key)
            if found is not None:
                return found
            if len(self._sets) >= self.max_sets:
                # A bounded cache: sets still referenced stay valid; only sharing is lost.
                self._sets = {self.initial.key: self.initial} if hasattr(self, "initial") else {}
                self._completions.clear()
            s = EarleySet()
            s.uid = self._uid
            self._uid += 1
            s.key = set_key
            s.accepting = accepting
            s.size = len(items)
            by_symbol: dict[int, list] = {}
            for k in live:
                core = k & _CORE_BITS
                # live items only: their next symbol is not None
                by_symbol.setdefault(nxt_sym[core], []).extend((core, items[k]))  # type: ignore[arg-type]
            lexemes = {sym for sym in by_symbol if sym >= 0}
            set_waiting: list = []
            s.by_symbol = {}
            for sym, flat in by_symbol.items():
                s.by_symbol[sym] = len(set_waiting) << 32 | (len(set_waiting) + len(flat))
                set_waiting += flat
            s.waiting = tuple(set_waiting)
            # It refers to older sets only (None stands for this one), so no cycle runs
            # through a set: reference counts free it, and the collector need not look.
            untrack(s.waiting)
            untrack(s)
            if self.ignore and (lexemes or accepting):
                lexemes.update(self.ignore)
            s.lexemes = tuple(sorted(lexemes))
            s.lexer_start = self.lexer.start(s.lexemes) if s.lexemes else 0
            self._sets[set_key] = s
            return s

    def complete(self, completions: list[tuple[EarleySet, int]]) -> EarleySet:
        """The set after the given (origin set, lexeme) pairs all end at one position."""
        key: tuple[int, int] | frozenset[tuple[int, int]]
        if len(completions) == 1:
            key = (completions[0][0].uid, completions[0][1])
        else:  # the order and repeats of the pairs do not matter
            key = frozenset((s.uid, lex) for s, lex in completions)
        found = self._completions.get(key)
        if found is not None:
            return found
        check_time()
        kernel = []
        for s, lex in completions:
            span = s.by_symbol.get(lex)
            if span is not None:
                waiting = s.waiting
                for i in range(span >> 32, span & _CORE_BITS, 2):
                    kernel.append((waiting[i] + 1, waiting[i + 1] or s))
        result = self._build(kernel)
        self._completions[key] = result
        return result
