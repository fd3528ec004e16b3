"""A slow, obviously-correct recognizer for the flat grammar IR (tests only).

Earley over bytes: an item expecting lexeme ``k`` at position ``i`` advances to
every ``j`` where the lexeme matches ``data[i:j]`` (found by walking byte
derivatives), after any run of ignored lexemes. Nullable rules are handled by
advancing over them at prediction time (Aycock and Horspool), which is exact
here because lexemes never match the empty string.
"""

from __future__ import annotations

from automask.grammar.ir import Grammar
from automask.regex import nodes as rx


def _nullable_rules(rules: dict[str, list[tuple]]) -> set[str]:
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for lhs, alternatives in rules.items():
            if lhs not in nullable and any(
                    all(isinstance(s, str) and s in nullable for s in rhs) for rhs in alternatives):
                nullable.add(lhs)
                changed = True
    return nullable


class Recognizer:
    """Decides membership of byte strings in a :class:`Grammar`'s language."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.rules = grammar.rules
        self.nullable = _nullable_rules(self.rules)
        for i, node in enumerate(grammar.lexemes):
            assert not node.nullable, f"lexeme {i} matches the empty string"

    def accepts(self, data: bytes | str) -> bool:
        if isinstance(data, str):
            data = data.encode("utf-8")
        return _Run(self, data).accepts()


class _Run:
    def __init__(self, rec: Recognizer, data: bytes):
        self.rec = rec
        self.data = data
        self.ends: dict[tuple[int, int], list[int]] = {}
        self.reach_cache: dict[int, list[int]] = {}

    def lexeme_ends(self, k: int, i: int) -> list[int]:
        key = (k, i)
        out = self.ends.get(key)
        if out is None:
            out = []
            node = self.rec.grammar.lexemes[k]
            for j in range(i, len(self.data)):
                node = rx.derive(node, self.data[j])
                if node is rx.EMPTY:
                    break
                if node.nullable:
                    out.append(j + 1)
            self.ends[key] = out
        return out

    def reach(self, i: int) -> list[int]:
        """Positions reachable from ``i`` by zero or more ignored lexemes."""
        out = self.reach_cache.get(i)
        if out is None:
            seen = {i}
            todo = [i]
            while todo:
                p = todo.pop()
                for k in self.rec.grammar.ignore:
                    for j in self.lexeme_ends(k, p):
                        if j not in seen:
                            seen.add(j)
                            todo.append(j)
            out = sorted(seen)
            self.reach_cache[i] = out
        return out

    def accepts(self) -> bool:
        rules, nullable = self.rec.rules, self.rec.nullable
        start = self.rec.grammar.start
        n = len(self.data)
        sets: list[set[tuple]] = [set() for _ in range(n + 1)]
        waiting: list[dict[str, list[tuple]]] = [{} for _ in range(n + 1)]
        for a in range(len(rules.get(start, []))):
            sets[0].add((start, a, 0, 0))
        for i in range(n + 1):
            agenda = list(sets[i])
            while agenda:
                item = agenda.pop()
                lhs, a, dot, origin = item
                rhs = rules[lhs][a]
                new: list[tuple] = []
                if dot == len(rhs):
                    for w in list(waiting[origin].get(lhs, ())):
                        new.append((w[0], w[1], w[2] + 1, w[3]))
                else:
                    sym = rhs[dot]
                    if isinstance(sym, str):
                        waiting[i].setdefault(sym, []).append(item)
                        new.extend((sym, b, 0, i) for b in range(len(rules.get(sym, []))))
                        if sym in nullable:
                            new.append((lhs, a, dot + 1, origin))
                    else:
                        advanced = (lhs, a, dot + 1, origin)
                        for p in self.reach(i):
                            for j in self.lexeme_ends(sym, p):
                                sets[j].add(advanced)
                for it in new:
                    if it not in sets[i]:
                        sets[i].add(it)
                        agenda.append(it)
        for e in range(n + 1):
            if n in self.reach(e):
                for lhs, a, dot, origin in sets[e]:
                    if lhs == start and origin == 0 and dot == len(rules[lhs][a]):
                        return True
        return False


def accepts(grammar: Grammar, data: bytes | str) -> bool:
    """Whether ``data`` is in the language of ``grammar``."""
    return Recognizer(grammar).accepts(data)
