"""The lexer: one lazy DFA over the union of a grammar's lexemes.

A lexer state is the set of ``(lexeme, regex node)`` pairs still alive, i.e.
the lexemes the parser allowed here and how far into each one the text has
gone (kept as two parallel tuples, ``lexes`` and ``nodes``: a state lives as
long as its grammar, and a tuple per pair would be one more object per
member for the garbage collector to walk). States are interned to small ints.
Transitions live in a NumPy table (for vectorized passes over a whole
vocabulary) and are computed lazily, one byte class at a time: a walk over a
vocabulary meets most states with only a few next bytes, and a new grammar's
states (its keys, its patterns) would otherwise each pay one derivative per
byte class. A state's whole row (:meth:`LexerDFA.row`, also kept as a tuple
for stepping from Python) is materialized when something needs all of it.
State 0 is the dead state.
"""

from __future__ import annotations

import threading

import numpy as np

from automask.budget import check_time
from automask.errors import LimitExceeded
from automask.gc_pause import untrack
from automask.regex import nodes as rx

DEAD = 0
UNKNOWN = -1  # a table entry whose transition is not computed yet


class LexerDFA:
    """Lazily built DFA whose states are sets of live (lexeme, regex) pairs."""

    def __init__(self, lexemes: tuple[rx.Node, ...], max_states: int = 200_000,
                 follow: list[set[int] | None] | None = None):
        self.lexemes = lexemes
        # Bytes that may start what follows each lexeme (None: unknown, any byte).
        self._follow = follow
        self._follow_bytes: dict[int, int] = {}
        self._next_ok: dict[int, np.ndarray] = {}
        self._follow_ok: dict[int, np.ndarray] = {}
        self.max_states = max_states
        self._ids: dict[tuple, int] = {}
        self.lexes: list[tuple[int, ...]] = []  # per state, its members' lexemes
        self.nodes: list[tuple[rx.Node, ...]] = []  # ... and their regex nodes
        self.accepts: list[tuple[int, ...]] = []  # lexemes that may end in this state
        self.rows: list[tuple[int, ...] | None] = []  # tuples: the GC does not track them
        self.live_bytes: list[int] = []  # bitmask of bytes with a live transition (-1: unknown)
        self._starts: list[int] = []  # per state, its byte classes' first bytes (0: unknown)
        self._lock = threading.RLock()
        cap = 64
        self.table = np.full((cap, 256), UNKNOWN, dtype=np.int32)
        self.accepting = np.zeros(cap, dtype=bool)
        self._start_cache: dict[tuple[int, ...], int] = {}
        self._split: dict[int, tuple[int, ...]] = {}
        self._continues: dict[int, bool] = {}
        dead = self._intern((), ())
        assert dead == DEAD
        self.rows[DEAD] = (DEAD,) * 256
        self.table[DEAD] = DEAD
        self.live_bytes[DEAD] = 0

    def __len__(self) -> int:
        return len(self.lexes)

    def members(self, sid: int) -> zip:
        """The ``(lexeme, regex node)`` pairs of state ``sid``."""
        return zip(self.lexes[sid], self.nodes[sid], strict=True)

    def _intern(self, lexes: tuple[int, ...], nodes: tuple[rx.Node, ...]) -> int:
        """The state of the members ``zip(lexes, nodes)`` (in that order)."""
        key: tuple
        if len(nodes) == 1:  # most states: a flat int key (the GC stops tracking it)
            key = (lexes[0], nodes[0].uid)
        else:  # (a pair of tuples: never equal to a one-member key, a pair of ints)
            key = (lexes, tuple([node.uid for node in nodes]))
        sid = self._ids.get(key)
        if sid is not None:
            return sid
        with self._lock:
            sid = self._ids.get(key)
            if sid is not None:
                return sid
            sid = len(self.lexes)
            if sid >= self.max_states:
                raise LimitExceeded(f"lexer automaton exceeds {self.max_states} states")
            if sid >= len(self.accepting):
                self._grow()
            if len(nodes) == 1:
                acc = lexes if nodes[0].nullable else ()
            else:
                acc = tuple([lex for lex, node in zip(lexes, nodes, strict=True) if node.nullable])
            self.lexes.append(lexes)
            untrack(nodes)  # regex nodes refer to no lexer: in no cycle (see gc_pause)
            self.nodes.append(nodes)
            self.accepts.append(acc)
            self.accepting[sid] = bool(acc)
            self.rows.append(None)
            self._starts.append(0)
            self.live_bytes.append(-1)
            if len(nodes) != 1:
                untrack(key)  # ints only, in two tuples
            self._ids[key] = sid
            return sid

    def _grow(self) -> None:
        cap = len(self.accepting) * 2
        table = np.full((cap, 256), UNKNOWN, dtype=np.int32)
        table[: len(self.table)] = self.table
        accepting = np.zeros(cap, dtype=bool)
        accepting[: len(self.accepting)] = self.accepting
        self.table, self.accepting = table, accepting

    def start(self, lexeme_ids: tuple[int, ...]) -> int:
        """The state at the start of any of ``lexeme_ids`` (sorted, distinct)."""
        sid = self._start_cache.get(lexeme_ids)
        if sid is None:
            sid = self._intern(lexeme_ids, tuple([self.lexemes[lex] for lex in lexeme_ids]))
            self._start_cache[lexeme_ids] = sid
        return sid

    def single(self, lex: int, node: rx.Node) -> int:
        """The state holding just lexeme ``lex`` at ``node``."""
        sid = self._ids.get((lex, node.uid))  # the key _intern gives it
        return sid if sid is not None else self._intern((lex,), (node,))

    def split(self, sid: int) -> tuple[int, ...]:
        """The one-lexeme states whose union is ``sid`` (``(sid,)`` when it has one)."""
        found = self._split.get(sid)
        if found is None:
            found = (sid,) if len(self.lexes[sid]) <= 1 else tuple(
                self.single(lex, node) for lex, node in self.members(sid))
            self._split[sid] = found
        return found

    def union(self, parts: list[int]) -> int:
        """The state holding the members of the one-lexeme states ``parts`` (in order)."""
        return self._intern(tuple([self.lexes[p][0] for p in parts]),
                            tuple([self.nodes[p][0] for p in parts]))

    def row(self, sid: int) -> tuple[int, ...]:
        """The 256 successor states of ``sid`` (materialized on first use)."""
        r = self.rows[sid]
        if r is not None:
            return r
        with self._lock:
            r = self.rows[sid]
            if r is not None:
                return r
            check_time()
            filling = [DEAD] * 256
            live = 0
            for lo, hi in rx.class_runs(self._class_starts(sid)):
                target = self._successor(sid, lo)
                if target != DEAD:
                    filling[lo: hi + 1] = [target] * (hi - lo + 1)
                    live |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
            self.table[sid] = filling
            self.live_bytes[sid] = live
            self.rows[sid] = r = tuple(filling)
            return r

    def transition(self, sid: int, byte: int) -> int:
        """The successor of ``sid`` on ``byte``, computing only that byte's class."""
        found = self.table.item(sid, byte)
        if found != UNKNOWN:
            return found
        with self._lock:
            check_time()
            starts = self._class_starts(sid)
            lo = class_first(starts, byte)
            above = starts >> (byte + 1)
            hi = byte + (above & -above).bit_length() - 1 if above else 255
            target = self._successor(sid, lo)
            self.table[sid, lo: hi + 1] = target
            return target

    def _class_starts(self, sid: int) -> int:
        """The first byte of each class of bytes that ``sid``'s members all treat alike
        (kept per state: a state of many members, the keys of a large object, is asked
        once per byte class it meets)."""
        starts = self._starts[sid]
        if not starts:  # (0: not worked out; a real one has bit 0 set)
            starts = 1
            for node in self.nodes[sid]:
                starts |= rx.class_starts(node)
            self._starts[sid] = starts
        return starts

    def _successor(self, sid: int, byte: int) -> int:
        """The state after ``byte`` (interned; the caller stores it in the table)."""
        nodes = self.nodes[sid]
        if len(nodes) == 1:  # most states: one derivative, no tuple of members
            d = rx.derive(nodes[0], byte)
            return DEAD if d is rx.EMPTY else self.single(self.lexes[sid][0], d)
        lexes, after = rx.live_derivatives(self.lexes[sid], nodes, byte)
        return self._intern(tuple(lexes), tuple(after)) if after else DEAD

    def gather(self, states: np.ndarray, data: np.ndarray) -> np.ndarray:
        """``table[states, data]``, computing the transitions not known yet."""
        # One take from the flat table: 2-D fancy indexing costs about twice as much.
        at = (states.astype(np.intp) << 8) | data
        out: np.ndarray = self.table.ravel().take(at)
        unknown = out == UNKNOWN
        if np.count_nonzero(unknown):
            missing = at[unknown]
            for pair in distinct(missing):
                self.transition(pair >> 8, pair & 255)
            out[unknown] = self.table.ravel().take(missing)  # (the table may have grown)
        return out

    def step(self, sid: int, byte: int) -> int:
        r = self.rows[sid]
        if r is not None:
            return r[byte]
        found = self.table.item(sid, byte)  # (transition's first look, without the call)
        return found if found != UNKNOWN else self.transition(sid, byte)

    def walk(self, sid: int, data: bytes) -> int:
        """The state after every byte of ``data`` (DEAD once a byte kills it)."""
        i, n = 0, len(data)
        while i < n and sid:
            sid, i = self.walk_to_end(sid, data, i)
        return sid

    def walk_to_end(self, sid: int, data: bytes, i: int = 0) -> tuple[int, int]:
        """Step ``sid`` over ``data[i:]`` until a lexeme may end there, the state dies or
        the data runs out; returns the state and the index of the next byte.

        Stepping is inlined (no :meth:`step` call per byte): token commits and
        suffix scans run it for every byte of every new transition.
        """
        rows, accepts, n = self.rows, self.accepts, len(data)
        while i < n:
            row = rows[sid]
            if row is not None:
                sid = row[data[i]]
            else:  # the table (not cached here: a new state may grow it) before the call
                found = self.table.item(sid, data[i])
                if found == UNKNOWN:
                    if len(self.nodes[sid]) == 1:
                        return self._walk_node(sid, data, i)
                    found = self.transition(sid, data[i])
                sid = found
            i += 1
            if sid == DEAD or accepts[sid]:
                break
        return sid, i

    def _walk_node(self, sid: int, data: bytes, i: int) -> tuple[int, int]:
        """:meth:`walk_to_end` from a one-lexeme state on its regex node's derivatives
        (memoized on the nodes, for every grammar), making a state only where it stops.

        A committed token's bytes mostly lead through states no scan of this grammar
        made (its scans were shared): a key's name, a string's characters. Interning
        each would cost a state and a table entry per byte, for places no sequence
        stops at.
        """
        lex, node = self.lexes[sid][0], self.nodes[sid][0]
        n = len(data)
        while i < n:
            byte = data[i]
            i += 1
            node = rx.derive(node, class_first(rx.class_starts(node), byte))  # as transition
            if node is rx.EMPTY:
                return DEAD, i
            if node.nullable:
                break
        return self.single(lex, node), i

    def can_continue(self, sid: int) -> bool:
        """Whether some byte keeps ``sid`` alive (asked of its members' nodes: shared)."""
        live = self.live_bytes[sid]
        if live >= 0:
            return live != 0
        found = self._continues.get(sid)
        if found is None:
            found = any(rx.can_continue(node) for node in self.nodes[sid])
            self._continues[sid] = found
        return found

    def live_mask(self, sid: int) -> int:
        """Bitmask of the bytes with a live transition from ``sid``."""
        if self.live_bytes[sid] < 0:
            self.row(sid)
        return self.live_bytes[sid]

    def follow_bytes(self, lex: int) -> int:
        """Bitmask of the bytes that can start a lexeme that may follow ``lex``."""
        bits = self._follow_bytes.get(lex)
        if bits is None:
            nxt = None if self._follow is None else self._follow[lex]
            if nxt is None:
                bits = rx.FULL_BITS
            else:
                bits = 0
                for other in nxt:
                    bits |= rx.first_bytes(self.lexemes[other])
            self._follow_bytes[lex] = bits
        return bits

    def next_ok(self, sid: int) -> np.ndarray:
        """For an accepting state: which next bytes can go on (in this lexeme or the next)."""
        lut = self._next_ok.get(sid)
        if lut is None:
            lut = self._next_ok[sid] = byte_lut(self.live_mask(sid) | self._ends_follow(sid))
        return lut

    def follow_ok(self, sid: int) -> np.ndarray:
        """For an accepting state: which next bytes can start what may follow a lexeme
        ending here. Ending where the next byte can only go on in the lexeme is no
        end at all (whitespace before more whitespace), so walks do not split there."""
        lut = self._follow_ok.get(sid)
        if lut is None:
            lut = self._follow_ok[sid] = byte_lut(self._ends_follow(sid))
        return lut

    def _ends_follow(self, sid: int) -> int:
        bits = 0
        for lex in self.accepts[sid]:
            bits |= self.follow_bytes(lex)
        return bits


def class_first(starts: int, byte: int) -> int:
    """The first byte of ``byte``'s class in a class-start bitmask (see rx.class_starts):
    bytes of one class share one derivative, so it is computed for this byte alone."""
    return (starts & ((2 << byte) - 1)).bit_length() - 1


#: below this many values, a Python set sorts them faster than NumPy (measured: 3 values
#: 0.9 against 7 us, 300 values 10 against 15 us)
_FEW = 256


def distinct(values: np.ndarray) -> list[int]:
    """The distinct values of a 1-D integer array, ascending, as Python ints.

    Not ``np.unique``: NumPy 2's reads ``np.ma.is_masked`` on every call, and the first
    call in a process imports ``numpy.ma`` (15-30 ms, inside whichever mask comes
    first); it also costs more (30,000 values: 2.6 against 0.6 ms sorted here).
    """
    if values.size < _FEW:
        return sorted(set(values.tolist()))
    ordered = np.sort(values)
    kept: list[int] = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))].tolist()
    return kept


def byte_lut(bits: int) -> np.ndarray:
    """A 256-entry bool table of a byte bitmask (shared: read-only, and few bitmasks recur)."""
    lut = _luts.get(bits)
    if lut is None:
        lut = np.array([(bits >> b) & 1 for b in range(256)], dtype=bool)
        lut.setflags(write=False)
        if len(_luts) < 10_000:
            _luts[bits] = lut
    return lut


_luts: dict[int, np.ndarray] = {}
