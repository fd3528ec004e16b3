"""The byte-level oracle for the flat grammar IR (tests only): slow, obviously correct.

One recognizer serves every test that needs the language of a :class:`Grammar`:

* :meth:`Recognizer.accepts` decides whether a byte string is a sentence;
* :meth:`Recognizer.feed` / :meth:`Recognizer.step` / :meth:`Recognizer.accepting` walk
  byte by byte from :attr:`Recognizer.initial`: a state is ``None`` exactly when the bytes
  so far are no *viable prefix* (no continuation completes them). :func:`oracle_allowed`
  turns a state into the token ids a mask must allow: an id exactly when the output plus
  its bytes is a viable prefix, EOS exactly when the output is a sentence.

It is Earley over bytes with persistent states. A state is ``(chart, scans)``:
``chart[i]`` is the closed item set at byte position ``i`` with its ``waiting`` index
(items expecting a nonterminal), and ``scans`` are the lexemes in progress, as regex
derivatives. A lexeme scan ending at ``j`` advances its item into set ``j``; an ignored
lexeme that started at ``i`` and ends at ``j`` copies set ``i`` into set ``j`` (ignored
text belongs to no item). Nullable rules are handled by advancing over them at
prediction time (Aycock and Horspool), which is exact here because lexemes never match
the empty string. States are never mutated, so one state can be extended by many
different tokens (a walk over the token trie).
"""

from __future__ import annotations

from automask import Vocabulary
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
    """Decides membership of byte strings, and of their prefixes, in a :class:`Grammar`'s
    language."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.rules = {lhs: [tuple(r) for r in alts] for lhs, alts in grammar.rules.items()}
        self.start = grammar.start
        self.lexemes = grammar.lexemes
        self.ignore = tuple(grammar.ignore)
        self.nullable = _nullable_rules(self.rules)
        for i, node in enumerate(grammar.lexemes):
            assert not node.nullable, f"lexeme {i} matches the empty string"
        kernel = [(self.start, a, 0, 0) for a in range(len(self.rules.get(self.start, [])))]
        self.initial = self._close((), kernel, frozenset())

    def accepts(self, data: bytes | str) -> bool:
        """Whether ``data`` is in the language."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        return self.accepting(self.feed(data))

    def _close(self, chart: tuple, kernel: list, scans: frozenset) -> tuple:
        j = len(chart)
        rules, nullable = self.rules, self.nullable
        items: set = set()
        agenda: list = []
        waiting: dict[str, list] = {}
        new_scans = set(scans)

        def add(item):
            if item not in items:
                items.add(item)
                agenda.append(item)

        for item in kernel:
            add(item)
        while agenda:
            item = agenda.pop()
            lhs, a, dot, origin = item
            rhs = rules[lhs][a]
            if dot == len(rhs):
                if origin != j:  # empty derivations are covered by nullable prediction
                    for w in chart[origin][1].get(lhs, ()):
                        add((w[0], w[1], w[2] + 1, w[3]))
                continue
            sym = rhs[dot]
            if isinstance(sym, str):
                waiting.setdefault(sym, []).append(item)
                for b in range(len(rules.get(sym, []))):
                    add((sym, b, 0, j))
                if sym in nullable:
                    add((lhs, a, dot + 1, origin))
                # items already complete here (only empty ones) were handled via nullable
            else:
                new_scans.add(("lex", (lhs, a, dot + 1, origin), self.lexemes[sym]))
        if items:
            for k in self.ignore:
                new_scans.add(("ign", j, self.lexemes[k]))
        return (chart + ((frozenset(items), waiting),), frozenset(new_scans))

    def step(self, state: tuple, byte: int) -> tuple | None:
        """The state after one more byte, or None when no parse survives."""
        chart, scans = state
        kernel: list = []
        alive = set()
        for kind, payload, node in scans:
            d = rx.derive(node, byte)
            if d is rx.EMPTY:
                continue
            if d is not rx.EPS:
                alive.add((kind, payload, d))
            if d.nullable:
                if kind == "lex":
                    kernel.append(payload)
                else:
                    kernel.extend(chart[payload][0])
        if not kernel and not alive:
            return None
        return self._close(chart, kernel, frozenset(alive))

    def feed(self, data: bytes, state: tuple | None = None) -> tuple | None:
        """The state after ``data`` (from ``state``, else from the start), or None when
        ``data`` is no viable prefix."""
        state = self.initial if state is None else state
        for byte in data:
            state = self.step(state, byte)
            if state is None:
                return None
        return state

    def accepting(self, state: tuple | None) -> bool:
        """Whether the bytes that led to ``state`` are a sentence."""
        if state is None:
            return False
        rules = self.rules
        return any(lhs == self.start and origin == 0 and dot == len(rules[lhs][a])
                   for lhs, a, dot, origin in state[0][-1][0])


_TRIES: dict[int, tuple] = {}


def ordinary_ids(vocab: Vocabulary) -> list[int]:
    """Ids that may ever be allowed as text: non-empty, not special, not EOS."""
    excluded = set(vocab.special_ids) | set(vocab.eos_token_ids)
    return [t for t, b in enumerate(vocab.tokens) if b and t not in excluded]


def token_trie(vocab: Vocabulary) -> dict:
    """A byte trie of the ordinary tokens: ``{byte: child}``, ids ending at a node under -1."""
    found = _TRIES.get(id(vocab))
    if found is not None and found[0] is vocab:
        return found[1]
    root: dict = {}
    for t in ordinary_ids(vocab):
        node = root
        for byte in vocab.tokens[t]:
            node = node.setdefault(byte, {})
        node.setdefault(-1, []).append(t)
    _TRIES[id(vocab)] = (vocab, root)
    return root


def oracle_allowed(oracle: Recognizer, state: tuple, vocab: Vocabulary) -> set[int]:
    """Every id the mask must allow after the output whose oracle state is ``state``."""
    out: set[int] = set()
    todo = [(token_trie(vocab), state)]
    while todo:
        node, st = todo.pop()
        for key, child in node.items():
            if key == -1:
                out.update(child)
                continue
            nxt = oracle.step(st, key)
            if nxt is not None:
                todo.append((child, nxt))
    if oracle.accepting(state):
        out.update(vocab.eos_token_ids)
    return out
