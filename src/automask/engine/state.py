"""Parser+lexer configurations: the whole state of one sequence, interned.

A configuration is a set of *threads*. A thread is a lexeme in progress: the
Earley set it started from and the lexer state reached since. Lexing is
non-deterministic: when a lexeme may end but could also go on, both futures
are kept, so every way of splitting the text into lexemes is explored and
the language is exactly the grammar's. Configurations are interned and their
byte transitions memoized, so after warm-up a step is a list lookup per byte.
"""

from __future__ import annotations

import threading
from array import array
from typing import Any

from automask.engine.earley import EarleySet, Parser
from automask.engine.lexer import DEAD as LEX_DEAD
from automask.engine.lexer import LexerDFA
from automask.gc_pause import untrack


class ParseState:
    """An interned configuration; compare by identity.

    ``threads`` is flat, ``(set, lexer state, set, lexer state, ...)``: one
    tuple where a tuple of pairs would be one object per thread more for the
    garbage collector to walk, for as long as the configuration lives.
    Iterate it with :func:`pairs`. ``next`` memoizes transitions, byte string
    to configuration uid (see :meth:`StateTable.advance`).
    """

    __slots__ = ("uid", "threads", "accepting", "next", "live_bytes", "parts", "parts_capped")
    # set by StateTable.intern, never by __init__
    uid: int
    threads: tuple  # (EarleySet, lexer state, EarleySet, lexer state, ...)
    accepting: bool
    next: dict[bytes, int] | None  # byte string -> the configuration's uid
    live_bytes: int  # -1 until worked out
    parts: tuple | None  # the threads split per lexeme (engine.masks)
    parts_capped: tuple | None

    def __repr__(self) -> str:
        ts = ", ".join(f"(set#{s.uid}, lex{lexer_state})" for s, lexer_state in pairs(self.threads))
        return f"<ParseState #{self.uid} [{ts}]{' accepting' if self.accepting else ''}>"

    @property
    def dead(self) -> bool:
        return not self.threads and not self.accepting


def pairs(flat: tuple) -> zip:
    """``(a, b, c, d, ...)`` as ``(a, b), (c, d), ...``."""
    it = iter(flat)
    return zip(it, it, strict=True)


class StateTable:
    """Interns configurations and computes their byte transitions."""

    def __init__(self, lexer: LexerDFA, parser: Parser, max_configs: int = 20_000):
        self.lexer = lexer
        self.parser = parser
        self.ignore = frozenset(parser.ignore)
        self.max_configs = max_configs
        self._configs: dict[tuple | bytes, ParseState] = {}
        # Transition memos hold uids, not configurations: no configuration refers to
        # another, so none is in a reference cycle and the collector need not track them.
        self._by_uid: dict[int, ParseState] = {}
        self._after: dict[int, ParseState] = {}
        self._lock = threading.Lock()
        self._uid = 0
        self.dead = self.intern((), False)
        init = parser.initial
        self.initial = self.intern(((init, init.lexer_start),) if init.lexemes else (),
                                   init.accepting)

    def intern(self, threads: Any, accepting: bool) -> ParseState:
        if len(threads) != 1:  # distinct threads in (set, lexer state) order, an int each
            by_int = {s.uid << 32 | lexer_state: (s, lexer_state) for s, lexer_state in threads}
            ints = sorted(by_int)
            threads = [by_int[i] for i in ints]
        key: tuple[bool, int, int] | bytes
        if len(threads) == 1:  # most configurations: a small int tuple for a key
            key = (accepting, threads[0][0].uid, threads[0][1])
        else:
            key = array("q", [accepting] + ints).tobytes()
        c = self._configs.get(key)
        if c is not None:
            return c
        with self._lock:
            c = self._configs.get(key)
            if c is not None:
                return c
            if len(self._configs) >= self.max_configs:
                self.forget()
            c = ParseState()
            c.uid = self._uid
            self._uid += 1
            c.threads = tuple(x for thread in threads for x in thread)
            untrack(c.threads)  # sets and ints: in no cycle (see gc_pause)
            c.accepting = accepting
            c.next = None  # made on the first advance: most configurations never step
            c.live_bytes = -1
            c.parts = c.parts_capped = None  # the threads split per lexeme (engine.masks)
            untrack(c)
            self._configs[key] = c
            self._by_uid[c.uid] = c
            return c

    def forget(self) -> None:
        """Drop the interned configurations and their transitions (a bounded cache).

        Configurations still held by matchers stay valid; their transitions are
        recomputed (into new objects) when next needed. The initial and dead
        configurations are kept.
        """
        for c in self._configs.values():
            c.next = None
        self._configs = {k: c for k, c in self._configs.items()
                         if c is self.dead or c is getattr(self, "initial", None)}
        self._by_uid = {c.uid: c for c in self._configs.values()}
        self._after.clear()

    def step(self, config: ParseState, byte: int) -> ParseState:
        """The configuration after one more byte (``self.dead`` if none survives)."""
        return self.advance(config, bytes((byte,)))

    def resolve(self, moved: list[tuple[EarleySet, int]]) -> ParseState:
        """The configuration of threads that have just reached the given lexer states."""
        threads, accepting = self._resolved(moved)
        return self.intern(threads, accepting) if threads or accepting else self.dead

    def _resolved(self, moved: list[tuple[EarleySet, int]]
                  ) -> tuple[list[tuple[EarleySet, int]], bool]:
        """:meth:`resolve`'s threads and accepting flag, not interned.

        A thread whose lexer state may end a lexeme completes it in the parser
        (and, non-deterministically, also goes on if the lexer state can).
        """
        lexer = self.lexer
        accepts = lexer.accepts
        if (not accepts[moved[0][1]] if len(moved) == 1
                else not any(accepts[lexer_state] for _, lexer_state in moved)):
            # No lexeme can end here (most bytes): every thread goes on as it is, since a
            # live lexer state that does not accept can always continue.
            return moved, False
        threads: list[tuple[EarleySet, int]] = []
        completions: list[tuple[EarleySet, int]] = []
        accepting = False
        for origin, lexer_state in moved:
            if lexer.can_continue(lexer_state):
                threads.append((origin, lexer_state))
            for lex in accepts[lexer_state]:
                if lex in self.ignore:
                    # ignored text belongs to no item: go on from the same set
                    threads.append((origin, origin.lexer_start))
                    accepting = accepting or origin.accepting
                else:
                    completions.append((origin, lex))
        if completions:
            new_set = self.parser.complete(completions)
            if new_set.lexemes:
                threads.append((new_set, new_set.lexer_start))
            accepting = accepting or new_set.accepting
        return threads, accepting

    def after_thread(self, origin: EarleySet, lexer_state: int) -> ParseState:
        """:meth:`resolve` for one thread, memoized."""
        key = (origin.uid << 32) | lexer_state  # uids are never reused
        found = self._after.get(key)
        if found is None:
            if len(self._after) >= self.max_configs:
                self._after.clear()
            found = self._after[key] = self.resolve([(origin, lexer_state)])
        return found

    def advance(self, config: ParseState, data: bytes) -> ParseState:
        """The configuration after ``data`` (``self.dead`` if nothing survives).

        Memoized per configuration and byte string, and only the configuration
        at the end is interned: the ones between a token's bytes are no place
        a sequence stops at, and interning each would cost a configuration,
        its threads and its transitions per byte, for the collector to walk.
        """
        found = self.memoized(config, data)
        if found is not None:
            return found
        step, walk_to_end = self.lexer.step, self.lexer.walk_to_end
        threads, accepting = list(pairs(config.threads)), config.accepting
        i, n = 0, len(data)
        while i < n:
            if len(threads) == 1:
                # One thread (most steps): the lexer alone moves until a lexeme may end.
                origin, lexer_state = threads[0]
                lexer_state, i = walk_to_end(lexer_state, data, i)
                moved = [(origin, lexer_state)] if lexer_state != LEX_DEAD else []
            else:
                byte = data[i]
                i += 1
                moved = [(origin, reached) for origin, lexer_state in threads
                         if (reached := step(lexer_state, byte)) != LEX_DEAD]
            threads, accepting = self._resolved(moved)
            if len(threads) > 1:
                threads = list(dict.fromkeys(threads))
            if not threads and not accepting:
                break
        found = self.intern(threads, accepting) if threads or accepting else self.dead
        if config.next is None:
            config.next = {}
        config.next[data] = found.uid
        return found

    def memoized(self, config: ParseState, data: bytes) -> ParseState | None:
        """:meth:`advance` if it is already memoized, else None (no work at all; also
        None for a memo naming a configuration :meth:`forget` has dropped since)."""
        uid = None if config.next is None else config.next.get(data)
        return None if uid is None else self._by_uid.get(uid)

    def live_bytes(self, config: ParseState) -> int:
        """Bitmask of the bytes that keep ``config`` alive."""
        live = config.live_bytes
        if live < 0:
            live = 0
            for lexer_state in config.threads[1::2]:
                live |= self.lexer.live_mask(lexer_state)
            config.live_bytes = live
        return live
