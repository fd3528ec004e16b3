"""``compile(grammar, vocab)``: the immutable, shareable product of compilation.

Compilation is lazy by design: it builds the parser tables, the lexer shell
and the initial configuration; lexer states, Earley sets, configurations and
masks are materialized on first use and cached here, shared by every
:class:`~automask.engine.matcher.Matcher` and thread that uses this object.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from automask.budget import time_budget
from automask.engine.earley import Parser, ParserTables, follow_lexemes
from automask.engine.lexer import LexerDFA
from automask.engine.masks import MaskComputer
from automask.engine.state import Runtime
from automask.engine.tokens import RootTokens
from automask.errors import GrammarError
from automask.grammar.ir import Grammar
from automask.regex import nodes as rx

if TYPE_CHECKING:
    from automask.vocab.vocabulary import Vocabulary


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one compiled grammar may do."""

    max_lexer_states: int = 200_000
    max_earley_items: int = 100_000
    #: interned configurations / Earley sets kept before the tables are reset
    max_configs: int = 16_000
    max_earley_sets: int = 16_000
    #: byte budgets of the mask-side caches
    mask_cache_bytes: int = 8 << 20
    scan_cache_bytes: int = 8 << 20
    decision_cache_bytes: int = 4 << 20
    max_forced_bytes: int = 4096
    #: time limits in seconds of the calling thread's CPU time (None: none), past
    #: which LimitExceeded is raised: compiling, and one mask or token commit
    max_compile_seconds: float | None = 2.0
    max_mask_seconds: float | None = 5.0


_roots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_roots_lock = threading.Lock()


def root_tokens(vocab: Vocabulary) -> RootTokens:
    """The vocabulary's ordinary tokens as a byte matrix (built once per vocabulary)."""
    with _roots_lock:
        root = _roots.get(vocab)
        if root is None:
            excluded = set(vocab.special_ids) | set(vocab.eos_token_ids)
            root = RootTokens(vocab.tokens, excluded, vocab.size)
            _roots[vocab] = root
        return root


class CompiledGrammar:
    """A grammar compiled against one vocabulary. Immutable from the outside; thread-safe."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary, limits: Limits | None = None):
        self.grammar = grammar
        self.vocab = vocab
        self.limits = limits or Limits()
        self.eos_token_ids = tuple(vocab.eos_token_ids)
        self._eos_set = frozenset(self.eos_token_ids)
        self.root = root_tokens(vocab)
        with time_budget(self.limits.max_compile_seconds, "compiling the grammar"):
            _check_spelling(grammar, self.root)
            follow = follow_lexemes(grammar)
        self.lexer = LexerDFA(grammar.lexemes, self.limits.max_lexer_states, follow)
        self.parser = Parser(ParserTables(grammar), grammar.ignore, self.lexer,
                             self.limits.max_earley_items, self.limits.max_earley_sets)
        self.runtime = Runtime(self.lexer, self.parser, self.limits.max_configs)
        self.masks = MaskComputer(self.runtime, self.root, self.eos_token_ids,
                                  self.limits.mask_cache_bytes, self.limits.scan_cache_bytes,
                                  self.limits.decision_cache_bytes)

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    def is_eos(self, token_id: int) -> bool:
        return token_id in self._eos_set

    def __repr__(self) -> str:
        return (f"<CompiledGrammar {self.grammar.source or 'grammar'}: "
                f"{len(self.grammar.productions)} productions, {len(self.grammar.lexemes)} "
                f"lexemes, vocab {self.vocab.size}>")


def compile(grammar: Grammar, vocab: Vocabulary, *, limits: Limits | None = None
            ) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``; cheap, because the automata are built lazily."""
    if not isinstance(grammar, Grammar):
        raise TypeError(f"compile() takes a Grammar, not {type(grammar).__name__}")
    return CompiledGrammar(grammar, vocab, limits)


def _check_spelling(grammar: Grammar, root: RootTokens, max_states: int = 2000) -> None:
    """Fail at compile time when some lexeme cannot be spelled with the vocabulary's bytes.

    A lexeme every string of which needs a byte that no ordinary token
    contains would be a dead end at generation time.
    """
    present = root.present_bytes
    if present == rx.FULL_BITS:
        return  # every byte is some token: every (non-empty) lexeme can be spelled
    for lex in productive_lexemes(grammar):
        node = grammar.lexemes[lex]
        if not _spellable(node, present, max_states):
            raise GrammarError(
                f"the vocabulary cannot spell lexeme L{lex} /{rx.to_pattern(node, limit=60)}/: "
                "it needs bytes that no ordinary token contains")


def productive_lexemes(grammar: Grammar) -> list[int]:
    out = set(grammar.ignore)
    for p in grammar.productions:
        out.update(s for s in p.rhs if isinstance(s, int))
    return sorted(out)


def _spellable(node: rx.Node, present: int, max_states: int) -> bool:
    """Whether ``node`` matches some non-empty string over the bytes in ``present``."""
    seen = {node.uid}
    todo = [node]
    while todo:
        n = todo.pop()
        if n.nullable and n is not node:
            return True
        for lo, hi in rx.class_runs(rx.class_starts(n)):
            run = ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
            if not run & present:
                continue
            d = rx.derive(n, lo)
            if d is not rx.EMPTY and d.uid not in seen:
                if len(seen) > max_states:
                    return True  # too big to decide cheaply: assume it can
                seen.add(d.uid)
                todo.append(d)
    return False
