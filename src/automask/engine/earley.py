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

from automask.errors import LimitExceeded
from automask.grammar.ir import Grammar

_SELF = -1  # origin marker: the item started in the set that holds it


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
        self.initial_cores: list[list[int]] = [[] for _ in names]
        top = len(names)  # the augmented start rule: TOP -> start
        self.nt_names.append("<top>")
        self.initial_cores.append([])
        for lhs, rhs in [(top, (grammar.start,))] + [(self.nt_index[p.lhs], p.rhs)
                                                      for p in grammar.productions]:
            self.initial_cores[lhs].append(len(self.next_symbol))
            for sym in rhs:
                self.next_symbol.append(sym if isinstance(sym, int) else -(self.nt_index[sym] + 1))
                self.lhs.append(lhs)
            self.next_symbol.append(None)
            self.lhs.append(lhs)
        self.top_start = self.initial_cores[top][0]
        self.top_done = self.top_start + 1
        self.nullable = [False] * len(self.nt_names)
        changed = True
        while changed:
            changed = False
            for lhs, cores in enumerate(self.initial_cores):
                if self.nullable[lhs]:
                    continue
                for c in cores:
                    while self.next_symbol[c] is not None and self.next_symbol[c] < 0 \
                            and self.nullable[-self.next_symbol[c] - 1]:
                        c += 1
                    if self.next_symbol[c] is None:
                        self.nullable[lhs] = True
                        changed = True
                        break


def follow_lexemes(grammar: Grammar) -> list[set[int] | None]:
    """For each lexeme, the lexemes that may come right after it (None: anything may).

    Context-free FOLLOW sets over lexemes; used to drop tokens early (a token
    crossing a lexeme end must go on with a byte that can start what follows).
    """
    n_lex = len(grammar.lexemes)
    nts = {p.lhs for p in grammar.productions}
    nullable = {a: False for a in nts}
    first: dict[str, set[int]] = {a: set() for a in nts}
    changed = True
    while changed:
        changed = False
        for p in grammar.productions:
            all_null = True
            for sym in p.rhs:
                add = {sym} if isinstance(sym, int) else first[sym]
                if not add <= first[p.lhs]:
                    first[p.lhs] |= add
                    changed = True
                if isinstance(sym, int) or not nullable[sym]:
                    all_null = False
                    break
            if all_null and not nullable[p.lhs]:
                nullable[p.lhs] = changed = True
    follow_nt: dict[str, set[int]] = {a: set() for a in nts}
    follow: list[set[int]] = [set() for _ in range(n_lex)]
    end = -1  # the end of the text
    follow_nt[grammar.start].add(end)
    changed = True
    while changed:
        changed = False
        for p in grammar.productions:
            trailer = set(follow_nt[p.lhs])
            for sym in reversed(p.rhs):
                target = follow[sym] if isinstance(sym, int) else follow_nt[sym]
                if not trailer <= target:
                    target |= trailer
                    changed = True
                if isinstance(sym, int):
                    trailer = {sym}
                elif nullable[sym]:
                    trailer = trailer | first[sym]
                else:
                    trailer = set(first[sym])
    out: list[set[int] | None] = [f - {end} for f in follow]
    for lex in grammar.ignore:
        out[lex] = None  # ignored text may stand anywhere
    if grammar.ignore:
        for f in out:
            if f is not None:
                f.update(grammar.ignore)
    return out


class EarleySet:
    """An interned set of Earley items; see the module docstring."""

    __slots__ = ("uid", "key", "by_symbol", "lexemes", "accepting", "lexer_start", "size")

    def __repr__(self) -> str:
        return f"<EarleySet #{self.uid} items={self.size} lexemes={self.lexemes}>"


class Parser:
    """Builds and interns Earley sets, and memoizes lexeme completions."""

    def __init__(self, tables: ParserTables, ignore: tuple[int, ...], lexer,
                 max_items: int = 100_000, max_sets: int = 20_000):
        self.t = tables
        self.ignore = tuple(sorted(set(ignore)))
        self.lexer = lexer
        self.max_items = max_items
        self.max_sets = max_sets
        self._sets: dict[frozenset, EarleySet] = {}
        self._completions: dict[frozenset, EarleySet] = {}
        self._lock = threading.RLock()
        self._uid = 0
        self.initial = self._build([(self.t.top_start, None)])

    def _build(self, kernel: list[tuple[int, EarleySet | None]]) -> EarleySet:
        t = self.t
        nxt_sym, initial_cores, nullable = t.next_symbol, t.initial_cores, t.nullable
        items: dict[tuple[int, int], EarleySet | None] = {}
        agenda: list[tuple[int, EarleySet | None]] = []
        predicted: set[int] = set()

        def add(core: int, origin: EarleySet | None) -> None:
            key = (core, _SELF if origin is None else origin.uid)
            if key not in items:
                items[key] = origin
                agenda.append((core, origin))

        for core, origin in kernel:
            add(core, origin)
        while agenda:
            core, origin = agenda.pop()
            sym = nxt_sym[core]
            if sym is None:
                if origin is not None:  # completion; self-origin ones are covered by nullability
                    waiting = origin.by_symbol.get(-(t.lhs[core] + 1), ())
                    for i in range(0, len(waiting), 2):
                        add(waiting[i] + 1, waiting[i + 1])
            elif sym < 0:
                nt = -sym - 1
                if nt not in predicted:
                    predicted.add(nt)
                    for c0 in initial_cores[nt]:
                        add(c0, None)
                if nullable[nt]:
                    add(core + 1, origin)
            if len(items) > self.max_items:
                raise LimitExceeded(f"an Earley set exceeds {self.max_items} items")
        accepting = any(k[0] == t.top_done for k in items)
        # The identity of a set: its live items as a compact, exact byte string.
        live = sorted(k for k in items if nxt_sym[k[0]] is not None)
        key = array("q", [accepting] + [x for k in live for x in k]).tobytes()
        found = self._sets.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._sets.get(key)
            if found is not None:
                return found
            if len(self._sets) >= self.max_sets:
                # A bounded cache: sets still referenced stay valid; only sharing is lost.
                self._sets = {self.initial.key: self.initial} if hasattr(self, "initial") else {}
                self._completions.clear()
            s = EarleySet()
            s.uid = self._uid
            self._uid += 1
            s.key = key
            s.accepting = accepting
            s.size = len(items)
            by_symbol: dict[int, list[tuple[int, EarleySet]]] = {}
            lexemes = set()
            for (core, _), origin in items.items():
                sym = nxt_sym[core]
                if sym is None:
                    continue
                by_symbol.setdefault(sym, []).append((core, s if origin is None else origin))
                if sym >= 0:
                    lexemes.add(sym)
            # Flat (core, origin, core, origin, ...) tuples: one object per symbol.
            s.by_symbol = {sym: tuple(x for pair in v for x in pair)
                           for sym, v in by_symbol.items()}
            if self.ignore and (lexemes or accepting):
                lexemes.update(self.ignore)
            s.lexemes = tuple(sorted(lexemes))
            s.lexer_start = self.lexer.start(s.lexemes) if s.lexemes else 0
            self._sets[key] = s
            return s

    def complete(self, completions: frozenset[tuple[EarleySet, int]]) -> EarleySet:
        """The set after the given (origin set, lexeme) pairs all end at one position."""
        key = frozenset((s.uid, lex) for s, lex in completions) if len(completions) > 1 else (
            next(iter(completions))[0].uid, next(iter(completions))[1])
        found = self._completions.get(key)
        if found is not None:
            return found
        kernel = []
        for s, lex in completions:
            waiting = s.by_symbol.get(lex, ())
            for i in range(0, len(waiting), 2):
                kernel.append((waiting[i] + 1, waiting[i + 1]))
        result = self._build(kernel)
        self._completions[key] = result
        return result
