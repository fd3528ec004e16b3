"""``compile(grammar, vocab)``: the immutable, shareable product of compilation, and
the :class:`Compiler` that holds what every grammar of one vocabulary shares.

Compilation is lazy by design: it builds the parser tables, the lexer shell
and the initial configuration; lexer states, Earley sets, configurations and
masks are materialized on first use and cached here, shared by every
:class:`~automask.engine.matcher.Matcher` and thread that uses this object.

What does not depend on the grammar lives one level up, on the compiler: the
vocabulary's token tables and the scans of one-lexeme lexer states (a key, a
string body, a number), which recur from schema to schema. The user may hold a
:class:`Compiler` (its size limit, :meth:`Compiler.clear`,
:meth:`Compiler.stats`); :func:`compile` uses one default compiler per
vocabulary (:func:`compiler_for`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from automask.budget import time_budget
from automask.engine.earley import Parser, ParserTables, follow_lexemes
from automask.engine.lexer import LexerDFA
from automask.engine.masks import SHORTCUTS, BoundedCache, MaskComputer, SharedScans
from automask.engine.state import StateTable
from automask.engine.tokens import RootTokens
from automask.errors import GrammarError
from automask.gc_pause import paused_gc
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


#: Default size limit of a compiler's shared scans. A server sees schema after schema
#: sharing keys, strings and patterns; on MaskBench (3,000 schemas) 48 MB kept 21k scans,
#: 256 MB 115k, and the mean mask time fell ~4% (1 GB, all of them: ~10%).
CACHE_LIMIT_BYTES = 256 << 20


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of a :class:`Compiler`'s shared scans (:meth:`Compiler.stats`)."""

    entries: int
    bytes: int  # what the entries cost, as the limit counts it (arrays, keys, nodes)
    limit_bytes: int
    evicted: int  # entries dropped to stay under the limit, since made or cleared
    #: scans made per shortcut since made or cleared (see docs/masks.md); ``walk``:
    #: plain walks of the token trie, the case every shortcut avoids
    scans: Mapping[str, int]


class Compiler:
    """Compiles grammars for one vocabulary and holds what they share.

    ``cache_limit_bytes`` bounds the shared scans (oldest out first).
    ``shortcuts`` names the scan shortcuts in use (all by default; see
    :data:`~automask.engine.masks.SHORTCUTS` and docs/masks.md): each is exact,
    so masks are the same with any subset; a compiler with fewer walks more,
    which is how the tests check each shortcut against the walk it replaces.
    Thread-safe; grammars compiled here keep it alive.
    """

    def __init__(self, vocab: Vocabulary, *, cache_limit_bytes: int = CACHE_LIMIT_BYTES,
                 shortcuts: Iterable[str] = SHORTCUTS):
        unknown = set(shortcuts) - SHORTCUTS
        if unknown:
            raise ValueError(f"unknown shortcut(s): {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(SHORTCUTS))})")
        self.vocab = vocab
        excluded = set(vocab.special_ids) | set(vocab.eos_token_ids)
        #: the vocabulary's ordinary tokens as a byte matrix, shared by every grammar
        self.tokens = RootTokens(vocab.tokens, excluded, vocab.size)
        self.scans = SharedScans(BoundedCache(cache_limit_bytes), frozenset(shortcuts))

    def compile(self, grammar: Grammar, *, limits: Limits | None = None) -> CompiledGrammar:
        """``grammar`` compiled for this compiler's vocabulary (cheap: automata are lazy)."""
        if not isinstance(grammar, Grammar):
            raise TypeError(f"compile() takes a Grammar, not {type(grammar).__name__}")
        return CompiledGrammar(grammar, self, limits)

    def clear(self) -> None:
        """Drop the shared scans (grammars compiled before go on, and make them again)."""
        self.scans.cache.clear_all()
        self.scans.made.clear()

    def stats(self) -> CacheStats:
        cache = self.scans.cache
        return CacheStats(len(cache), cache.used, cache.budget, cache.evicted,
                          dict(self.scans.made))


_defaults: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_defaults_lock = threading.Lock()


def compiler_for(vocab: Vocabulary) -> Compiler:
    """The default compiler of ``vocab`` (made on first use, kept while ``vocab`` lives):
    the one :func:`compile` uses."""
    with _defaults_lock:
        compiler = _defaults.get(vocab)
        if compiler is None:
            compiler = _defaults[vocab] = Compiler(vocab)
        return compiler


class CompiledGrammar:
    """A grammar compiled against one vocabulary. Immutable from the outside; thread-safe."""

    def __init__(self, grammar: Grammar, compiler: Compiler, limits: Limits | None = None):
        self.grammar = grammar
        self.compiler = compiler
        self.vocab = vocab = compiler.vocab
        self.limits = limits or Limits()
        self.eos_token_ids = tuple(vocab.eos_token_ids)
        self.eos_id_set = frozenset(self.eos_token_ids)  # (a matcher's test per token)
        self.root = compiler.tokens
        # Collector paused: what a compile makes lives as long as the grammar (see gc_pause).
        with paused_gc():
            with time_budget(self.limits.max_compile_seconds, "compiling the grammar"):
                _check_spelling(grammar, self.root)
                tables = ParserTables(grammar)
                follow = follow_lexemes(grammar, tables)
            self.lexer = LexerDFA(grammar.lexemes, self.limits.max_lexer_states, follow)
            self.parser = Parser(tables, grammar.ignore, self.lexer,
                                 self.limits.max_earley_items, self.limits.max_earley_sets)
            self.states = StateTable(self.lexer, self.parser, self.limits.max_configs)
            self.masks = MaskComputer(self.states, self.root, self.eos_token_ids,
                                      self.limits.mask_cache_bytes,
                                      self.limits.scan_cache_bytes,
                                      self.limits.decision_cache_bytes, shared=compiler.scans)

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    def is_eos(self, token_id: int) -> bool:
        return token_id in self.eos_id_set

    def __repr__(self) -> str:
        return (f"<CompiledGrammar {self.grammar.source or 'grammar'}: "
                f"{len(self.grammar.productions)} productions, {len(self.grammar.lexemes)} "
                f"lexemes, vocab {self.vocab.size}>")


def compile(grammar: Grammar, vocab: Vocabulary, *, limits: Limits | None = None
            ) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab`` with its default :class:`Compiler`; cheap, because
    the automata are built lazily."""
    return compiler_for(vocab).compile(grammar, limits=limits)


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
