"""Token masks for configurations, with the caches that make them cheap.

mask(config) = OR over its threads of inside(lexer state)       (cached per lexer state)
             | tokens that cross a lexeme boundary and survive   (decided by the parser)
             | EOS, when the configuration accepts.

Crossing tokens are grouped by the lexer state in which a lexeme may first
end inside them; the configuration after that point is one memoized parser
step (:meth:`StateTable.after_thread`), and the group's suffixes are decided by
the same computation, recursively, on the (much smaller) child token set.
Threads are treated one at a time: the mask is a union over paths, and a
path starts in exactly one thread. Whole masks are cached per
configuration, so revisited configurations cost a dictionary lookup.
All caches are bounded (oldest entries dropped first).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from gc import is_tracked
from typing import Any

import numpy as np

from automask.budget import check_time
from automask.engine.earley import EarleySet
from automask.engine.shortcuts import SHORTCUTS, STRATEGIES, UNION
from automask.engine.shortcuts.base import ScanRequest, shared_key
from automask.engine.state import ParseState, StateTable, pairs
from automask.engine.tokens import RootTokens, TokenSet, pack_bool, scan
from automask.gc_pause import untrack
from automask.regex import nodes as rx

# Inside sets up to this many rows are kept as rows (copied into each mask), larger ones
# packed once and shared: a string's or a number's opening tokens (~2k rows over ~1k
# words) copied into every value position's mask made it 9 KB, and a large schema's
# masks then overflowed the mask cache (a second walk of one text recomputed them all).
SPARSE_INSIDE = 256
SPLIT_MAX = 16  # child-set scans keep lexer states of more lexemes whole (see _threads)
EVICT_SLACK = 32  # a full cache frees a 32nd of its budget (see BoundedCache._evict)
SMALL_MASK_IDS = 16  # a mask's sparse part up to this many ids is packed in plain Python
PACKED_MASK_IDS = 800  # ... from this many, through a bool per id (a sort costs more)


class BoundedCache(dict):
    """A dict bounded by the total *cost* (bytes) of its values; oldest entries go first.

    Plain ``get`` leaves the order alone (first in, first out: the per-grammar
    caches, where a lookup must cost no more than a dict's); :meth:`recent`
    also marks the entry as just used, for a cache whose few hot entries
    must outlive a stream of one-off ones (least recently used first out).

    Safe to share between threads (the compiler's shared scans are: grammars are
    compiled and masked from several): what changes the entries, and an eviction's
    walk over them, holds the cache's lock; a ``get`` is one dict read, atomic.
    """

    def __init__(self, budget: int):
        super().__init__()
        self.budget = budget
        self.used = 0
        self.evicted = 0  # entries dropped to stay within the budget
        self._costs: dict = {}
        self._anchors: dict = {}  # key -> what the entry holds alive beside its value
        self._lock = threading.Lock()

    def put(self, key: Any, value: Any, cost: int, anchor: object = None) -> Any:
        """Keep ``value`` under ``key``; ``anchor``: an object held as long as the entry is
        (a regex node whose uid is in the key: interning is weak, see automask.regex.nodes)."""
        with self._lock:
            return self._put(key, value, cost, anchor)

    def _put(self, key: Any, value: Any, cost: int, anchor: object) -> Any:
        if key in self:
            self.used -= self._costs.pop(key, 0)
            self._anchors.pop(key, None)
        if self.used + cost > self.budget:
            self._evict(self.budget - self.budget // EVICT_SLACK - cost)
        self[key] = value
        self._costs[key] = cost
        self.used += cost
        if anchor is not None:
            self._anchors[key] = anchor
            untrack(self._anchors)  # (nodes: in no cycle)
        # Out of the collector's sight (an insert of a tracked tuple tracks a dict again):
        # what a cache holds never refers back to it, and a full collection would otherwise
        # walk every entry of the shared scans (100k+ in a long run) each time. ``_costs``
        # too: its values are ints, but its keys are the same tuples. (The check costs a
        # tenth of the call it saves.)
        if is_tracked(self):
            untrack(self)
        if is_tracked(self._costs):
            untrack(self._costs)
        return value

    def _evict(self, target: int) -> None:
        """Drops the oldest entries until at most ``target`` is used. A little at a time:
        freeing a quarter of the 256 MiB shared scans at once (40,000 entries) was one
        step of 130-180 ms, nine times over a MaskBench run; a 32nd is a few ms, eight
        times as often."""
        costs, freed = self._costs, 0
        victims = []
        for old in self:  # oldest first (insertion order)
            if self.used - freed <= target:
                break
            victims.append(old)
            freed += costs.get(old, 0)
        anchors = self._anchors
        for old in victims:
            del self[old]
            self.used -= costs.pop(old, 0)
            if anchors:
                anchors.pop(old, None)
        self.evicted += len(victims)

    def made(self, key: Any, make: Callable[[], Any], cost: Callable[[Any], int]) -> Any:
        """The value under ``key``, made by ``make()`` and kept (at ``cost(value)``) if absent."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value, cost(value))
        return value

    def clear_all(self) -> None:
        """Drop every entry and reset the counts."""
        with self._lock:
            self.clear()
            self._costs.clear()
            self._anchors.clear()
            self.used = self.evicted = 0

    def recent(self, key: Any) -> Any:
        """``get``, moving a hit to the back of the eviction order."""
        if key not in self:  # (a miss takes no lock)
            return None
        with self._lock:
            value = self.pop(key, None)
            if value is not None:
                self[key] = value
                if is_tracked(self):
                    untrack(self)  # (see put)
            return value


class Mask:
    """A cached mask, kept small: shared dense parts ORed with a sparse tail.

    ``dense`` are the per-lexer-state inside masks (shared between all the
    configurations that use that lexer state); ``word_idx``/``word_val`` hold
    the crossing tokens and EOS as (word, value) pairs, each value the whole
    word (the dense parts' bits there included). Writing one into a bitmask
    row is a copy, an OR per extra thread, and one scatter of whole words.
    """

    __slots__ = ("dense", "word_idx", "word_val", "empty")

    def __init__(self, dense: tuple[np.ndarray, ...], ids: np.ndarray):
        self.dense = dense
        self._pack(ids)
        if dense and len(self.word_idx):  # whole words: written, not ORed, at each use
            for inside_part in dense:
                self.word_val |= inside_part[self.word_idx]

    def _pack(self, ids: np.ndarray) -> None:
        """``word_idx``/``word_val`` of the sparse ids, by whichever way is cheapest."""
        dense = self.dense
        if len(ids) <= SMALL_MASK_IDS:  # a key, a few crossing tokens: NumPy's calls cost more
            bits: dict[int, int] = {}
            for i in ids.tolist():
                bits[i >> 5] = bits.get(i >> 5, 0) | 1 << (i & 31)
            ordered = sorted(bits)
            self.word_idx = np.array(ordered, dtype=np.int32)
            self.word_val = np.array([bits[w] for w in ordered], dtype=np.uint32)
            self.empty = not dense and not ordered
            return
        if len(ids) >= PACKED_MASK_IDS:  # packbits over every id up to the last one
            allowed = np.zeros(((int(ids.max()) >> 5) + 1) * 32, dtype=bool)
            allowed[ids] = True
            words = np.packbits(allowed, bitorder="little").view("<u4")
            self.word_idx = np.flatnonzero(words).astype(np.int32)
            self.word_val = words[self.word_idx]
            self.empty = False
            return
        ids = np.sort(ids)  # repeated ids are fine: their bits are ORed
        words = ids >> 5
        change = np.empty(len(words), dtype=bool)
        change[0] = True
        np.not_equal(words[1:], words[:-1], out=change[1:])
        starts = change.nonzero()[0]
        self.word_idx = words[starts].astype(np.int32)
        self.word_val = np.bitwise_or.reduceat(np.left_shift(1, ids & 31), starts
                                               ).astype(np.uint32)
        self.empty = False

    @property
    def nbytes(self) -> int:
        return self.word_idx.nbytes + self.word_val.nbytes + 200

    def write(self, out: np.ndarray) -> None:
        """Write the mask into ``out`` (uint32 words)."""
        if not self.dense:
            out.fill(0)
        else:
            np.copyto(out, self.dense[0])
            for extra in self.dense[1:]:
                np.bitwise_or(out, extra, out=out)
        out.put(self.word_idx, self.word_val)  # distinct, whole words: no OR needed


@dataclass(eq=False)
class SharedScans:
    """The scans every grammar of one compiler shares (see
    :class:`~automask.engine.compiled.Compiler`): the cache, the shortcuts in use (names
    of :mod:`automask.engine.shortcuts`' strategies, all of :data:`SHORTCUTS` by default),
    and how many scans each made (``walk``: plain walks of the token trie)."""

    cache: BoundedCache
    shortcuts: frozenset[str] = SHORTCUTS
    made: Counter[str] = field(default_factory=Counter)


class MaskComputer:
    """Computes and caches token masks for configurations."""

    def __init__(self, states: StateTable, root: RootTokens, eos_ids: tuple[int, ...],
                 mask_cache_bytes: int = 12 << 20, scan_cache_bytes: int = 12 << 20,
                 decision_cache_bytes: int = 6 << 20, *, shared: SharedScans):
        self.states = states
        self.root = root
        self.shared_cache = shared.cache
        self._shortcuts = shared.shortcuts
        self._scan_counts = shared.made
        self.nwords = (root.size + 31) // 32
        self.eos_ids = np.array(sorted(i for i in set(eos_ids) if 0 <= i < root.size),
                                dtype=np.int64)
        self._eos_words: np.ndarray | None = None  # (see eos_words)
        self._root_scans: BoundedCache = BoundedCache(scan_cache_bytes // 2)
        self._scans: BoundedCache = BoundedCache(scan_cache_bytes // 2)
        # A configuration's entry costs SHARED_MASK_COST, its Mask is counted once by content:
        # a quarter of the budget holds ~17k entries at the default 8 MB.
        self._masks: BoundedCache = BoundedCache(mask_cache_bytes // 4)
        self._by_content: BoundedCache = BoundedCache(mask_cache_bytes - mask_cache_bytes // 4)
        self._decisions: BoundedCache = BoundedCache(decision_cache_bytes)
        self._parts: dict[int, tuple[int, ...]] = {}  # lexer state -> root_parts
        self._probing = False  # (under the lock) shared_scan raises _WouldWalk for a walk
        self._lock = threading.RLock()

    @property
    def eos_words(self) -> np.ndarray:
        """The mask of the EOS tokens alone, all a sequence that ended allows (packed on
        first use: most grammars never end a sequence that way, and a bool per token
        packed for each grammar cost ~20 µs of every compile)."""
        words = self._eos_words
        if words is None:
            words = pack_bool(_bool_of(self.eos_ids, self.root.size))
            words.setflags(write=False)
            self._eos_words = words
        return words

    def root_scan(self, lexer_state: int) -> tuple[Any, Sequence[tuple[int, TokenSet]]]:
        """The inside tokens and crossing groups of lexer state ``lexer_state`` (cached).

        The inside part is a packed mask over ids when many tokens are inside
        (shared by every mask using ``lexer_state``), else the inside rows (int32):
        packing costs a pass over the whole vocabulary, which a lexer state
        admitting a few tokens (a key, a keyword) should not pay. A lexeme
        opening with whitespace has a tuple of such parts: its own, and the
        whitespace-only tokens' part that every such lexeme shares.
        """
        found = self._root_scans.get(lexer_state)
        if found is None:
            with self._lock:
                found = self._root_scans.get(lexer_state)
                if found is None:
                    found = self.shared_scan(self.root, lexer_state, self.pack_inside)
                    self._root_scans.put(lexer_state, found, _scan_cost(*found))
        return found

    def root_parts(self, lexer_state: int) -> tuple[int, ...]:
        """The lexer states whose root scans together make ``lexer_state``'s (kept).

        One per lexeme (``lexer.split``: their scans are shared), but where the
        scans of several lexemes with an intersection or a complement inside
        would each be a walk of the token trie (none cached, no shortcut makes
        them), those lexemes are one state, walked once. A string under a
        ``oneOf`` of patterns is one such lexeme per branch, every branch alive
        on every text: seven full walks, each deriving the same texts, became
        one. Plain lexemes (string bodies, numbers, keys) are scanned one by one
        however cold: other positions and schemas meet them again, beside other
        lexemes, and find their scans shared (docs/masks.md, "Lexemes walked
        together").
        """
        found = self._parts.get(lexer_state)
        if found is None:
            lexer = self.states.lexer
            found = lexer.split(lexer_state)
            if len(found) > 1 and UNION in self._shortcuts:
                cold = [part for part in found if not lexer.nodes[part][0].plain
                        and not self._made_without_walk(part)]
                if len(cold) > 1:
                    found = tuple([part for part in found if part not in cold]) + (
                        lexer.union(cold),)
                    self._scan_counts[UNION] += 1
            self._parts[lexer_state] = found
        return found

    def _made_without_walk(self, part: int) -> bool:
        """Whether the root scan of one-lexeme state ``part`` is cached, or made by a
        shortcut that walks no trie of its own (it is then kept, as by root_scan)."""
        if part in self._root_scans:
            return True
        with self._lock:
            self._probing = True
            try:
                self.root_scan(part)
            except _WouldWalk:
                return False
            finally:
                self._probing = False
        return True

    def pack_inside(self, inside: np.ndarray) -> np.ndarray:
        """A root scan's inside rows (a bool per row, or the rows: int32) as the part
        :meth:`root_scan` describes."""
        if inside.dtype == np.int32:
            inside_part = inside if len(inside) <= SPARSE_INSIDE else self.root.pack_rows(
                self.inside_rows(inside))
        elif np.count_nonzero(inside) > SPARSE_INSIDE:
            inside_part = self.root.pack_rows(inside)
        else:
            inside_part = np.flatnonzero(inside).astype(np.int32)
        inside_part.setflags(write=False)
        return inside_part

    def sub_scan(self, tokens: TokenSet, lexer_state: int
                 ) -> tuple[np.ndarray, Sequence[tuple[int, TokenSet]]]:
        key = (tokens.uid << 32) | lexer_state
        found = self._scans.get(key)
        if found is None:
            with self._lock:
                found = self.shared_scan(tokens, lexer_state, _frozen)
                self._scans.put(key, found, _scan_cost(*found))
        return found

    def shared_scan(self, tokens: TokenSet, lexer_state: int, finish: Any, borrow: bool = True,
                    follow: int | None = None) -> tuple[Any, Sequence[tuple[int, TokenSet]]]:
        """:func:`scan`, shared between grammars for one-lexeme states.

        A one-lexeme state's scan depends only on its regex node and on the
        bytes that may follow the lexeme (FOLLOW pruning), not on the grammar,
        so it is cached per vocabulary under that key, with the crossing
        states kept as nodes and mapped back into this grammar's lexer. Keys,
        strings, numbers and punctuation recur across schemas, so a new
        schema's first masks mostly find their scans done. A root scan is
        walked once without pruning (``follow`` = every byte) and each FOLLOW
        set's groups are filtered from it: a string body followed by ``,``
        or ``}`` in one object and by ``}`` alone in the next is one walk of
        the vocabulary, not two.

        A scan not found cached is asked of the scan shortcuts in use
        (:mod:`automask.engine.shortcuts`), in the order of ``STRATEGIES``: the
        first scan returned is kept, and with none the token trie is walked.
        The strategies are tried once per computed scan, never on a cache hit.
        """
        lexer = self.states.lexer
        crossing: Sequence[tuple[int, TokenSet]]
        if len(lexer.lexes[lexer_state]) != 1:
            if self._probing:
                raise _WouldWalk
            inside, crossing = scan(tokens, lexer, lexer_state)
            return finish(inside), _kept(crossing)
        lex, node = lexer.lexes[lexer_state][0], lexer.nodes[lexer_state][0]
        root = tokens is self.root
        if root:
            # No token is longer than maxlen bytes, so a node that agrees with this one on
            # strings that long scans the same; x{0,1000} and x{0,999} share one scan.
            # (Child sets are small, and their varying maxlen would only multiply nodes.)
            node = rx.clamp(node, tokens.maxlen)
        if follow is None:
            follow = lexer.follow_bytes(lex)
        key = shared_key(tokens, node, follow)
        shared = self.shared_cache
        # Least recently used goes first: the plain string body's scan, used by every
        # schema, must not be dropped for being old (a 10-20 ms walk each time).
        hit: tuple[Any, tuple] | None = shared.recent(key)
        if hit is not None:
            inside_part, by_node = hit
            if not by_node:  # most keys and punctuation: nothing crosses
                return hit
            return inside_part, _kept([(lexer.single(lex, n), child) for n, child in by_node])
        state = lexer.single(lex, node)
        on = self._shortcuts
        request = ScanRequest(tokens, lex, state, node, follow, finish, borrow, root)
        for strategy in STRATEGIES:
            if strategy.name in on and (found := strategy.scan(self, request)) is not None:
                inside_part, crossing, part_is_own = found
                made_by = strategy.name
                break
        else:  # no shortcut applies
            if self._probing:
                raise _WouldWalk
            inside, crossing = scan(tokens, lexer, state)
            inside_part, part_is_own = finish(inside), True
            made_by = "walk"
        self._scan_counts[made_by] += 1
        crossing = _kept(crossing)
        by_node = _kept([(lexer.nodes[after][0], child) for after, child in crossing])
        # The entry holds its node: interning is weak (see automask.regex.nodes), and the
        # next schema that builds this lexeme must find it again under the same uid.
        shared.put(key, _kept((inside_part, by_node)),
                   _scan_cost(inside_part if part_is_own else None, crossing) + SHARED_ENTRY_COST
                   + NODE_COST * (1 + len(by_node)), anchor=node)
        return inside_part, crossing

    def inside_rows(self, inside_part: np.ndarray | tuple[np.ndarray, ...]) -> np.ndarray:
        """A root scan's finished inside part (rows, or packed over ids, or a tuple of
        those) as a bool per row."""
        root = self.root
        if type(inside_part) is tuple:
            inside = self.inside_rows(inside_part[0])
            for piece in inside_part[1:]:
                inside |= self.inside_rows(piece)
            return inside
        # not a tuple here (type() is not narrowed by mypy: the check above is the fast one)
        if inside_part.dtype == np.int32:  # type: ignore[union-attr]
            inside = np.zeros(root.n, dtype=bool)
            inside[inside_part] = True
            return inside
        bits = np.unpackbits(inside_part.view(np.uint8), bitorder="little").view(bool)  # type: ignore[union-attr]
        return bits[root.ids_sorted[root.id_starts[:-1]]]

    def cached(self, config: ParseState) -> Mask | None:
        """The mask of ``config`` if it is cached (no work at all), else None."""
        return self._masks.get(config.uid)

    def mask(self, config: ParseState) -> Mask:
        """The mask of ``config`` (cached)."""
        found: Mask | None = self._masks.get(config.uid)  # uids are never reused
        if found is not None:
            return found
        dense: list[np.ndarray] = []
        crossing_rows: list[np.ndarray] = []
        for origin, lexer_state in pairs(_threads(config, self.root_parts)):
            inside_part, crossing = self.root_scan(lexer_state)
            for piece in inside_part if type(inside_part) is tuple else (inside_part,):
                if piece.dtype == np.int32:
                    crossing_rows.append(piece)
                elif not any(piece is d for d in dense):
                    dense.append(piece)
            for state, child in crossing:
                allowed = self._decide(origin, state, child)
                if allowed is not None:
                    crossing_rows.append(child.root_rows[allowed])
        if not crossing_rows:
            rows = _NO_ROWS
        else:  # rows may repeat (several threads, several groups): Mask ORs them
            rows = crossing_rows[0] if len(crossing_rows) == 1 else np.concatenate(crossing_rows)
        # Configurations the tokens cannot tell apart (the value of one key or the next,
        # the same place one level deeper) get equal parts: one Mask, found by its
        # content before packing. The key's ids are safe: the Mask holds those arrays.
        rows_key = rows.astype(np.int32, copy=False).tobytes()  # (one dtype: equal bytes)
        content = (config.accepting, *[id(d) for d in dense], rows_key)
        mask = self._by_content.get(content)
        if mask is not None:
            shared: Mask = self._masks.put(config.uid, mask, SHARED_MASK_COST)
            return shared
        ids = self.root.ids_for_rows(rows) if len(rows) else np.zeros(0, dtype=np.int64)
        if config.accepting and len(self.eos_ids):
            ids = np.concatenate([ids, self.eos_ids])
        mask = Mask(tuple(dense), ids)
        untrack(mask)  # arrays only: in no cycle (see gc_pause)
        self._by_content.put(content, mask, mask.nbytes + len(rows_key))
        kept: Mask = self._masks.put(config.uid, mask, SHARED_MASK_COST)
        return kept

    def _decide(self, origin: EarleySet, state: int, child: TokenSet) -> np.ndarray | None:
        """Which suffixes of a crossing group survive, after the lexeme end in ``state``."""
        after = self.states.after_thread(origin, state)
        if after is self.states.dead:
            return None
        canonical, index = child.canonical()
        allowed = self.allowed(after, canonical)[index]
        return allowed if np.count_nonzero(allowed) else None  # (.any() costs 5x more)

    def allowed(self, config: ParseState, tokens: TokenSet) -> np.ndarray:
        """Which rows of a child token set ``config`` accepts (bool array)."""
        key = (config.uid << 32) | tokens.uid  # uids are never reused
        found: np.ndarray | None = self._decisions.get(key)
        if found is not None:
            return found
        check_time()
        # The first thread's inside rows (a scan's, read-only) stand as the result until
        # something is added to them: a one-thread configuration with nothing crossing
        # (most) copies nothing.
        result, owned = None, False
        for origin, lexer_state in pairs(_threads(config, self.states.lexer.split, capped=True)):
            inside, crossing = self.sub_scan(tokens, lexer_state)
            if result is None:
                result = inside
            elif owned:
                result |= inside
            else:
                result, owned = result | inside, True
            for state, child in crossing:
                allowed = self._decide(origin, state, child)
                if allowed is not None:
                    if not owned:
                        result, owned = result.copy(), True
                    # not None: the first thread's inside rows are set before its groups
                    result[child.parent_rows[allowed]] = True  # type: ignore[index]
        if result is None:
            result = np.zeros(tokens.n, dtype=bool)
        self._decisions.put(key, result, result.nbytes + 150)
        return result


class _WouldWalk(Exception):
    """A scan asked for while probing (``MaskComputer._made_without_walk``) would walk."""


#: what a shared scan costs beyond its arrays' bytes and _scan_cost's 200: its key (a
#: 256-bit follow set among its ints), tuples, array headers and three dict slots
SHARED_ENTRY_COST = 300
#: what a regex node a shared scan holds costs (the node, its memos, its table entries)
NODE_COST = 600


#: what a configuration's entry costs the mask cache: the Mask is counted where it is kept
#: by its content (``MaskComputer._by_content``)
SHARED_MASK_COST = 120
_NO_ROWS = np.zeros(0, dtype=np.int32)


def _kept(items: Any) -> tuple:
    """``items`` as a tuple for a cache, it and its tuple members out of the collector's
    sight. Tuples, not lists: an empty one is the shared (), so a scan with no crossing
    groups (most keys) leaves nothing to track. And a tuple holding a token set or a
    regex node stays tracked for good (CPython untracks only tuples of atoms), so every
    full collection of a long run would walk each cached group again; they hold arrays,
    nodes and token sets, which refer to no cache: in no cycle."""
    out = tuple(items)
    for item in out:
        if type(item) is tuple:
            untrack(item)
    untrack(out)
    return out


def _frozen(inside: np.ndarray) -> np.ndarray:
    inside.setflags(write=False)  # shared between grammars
    return inside


def _threads(config: ParseState, split: Callable[[int], Any], capped: bool = False) -> tuple:
    """The config's threads with each lexer state split into one state per lexeme
    (flat, as ``ParseState.threads``).

    A token's path through a lexer state follows one lexeme at a time, so
    the mask is the union over the members; one-lexeme states recur far more
    often than their unions (the key of an object next to "any other key"),
    so their scans are shared instead of redone for every union. ``capped``:
    a state of more than :data:`SPLIT_MAX` lexemes is kept whole, since on a
    small child set one walk of the union beats a lookup per member (the next
    key of an object with hundreds of optional properties).
    """
    found = config.parts_capped if capped else config.parts
    if found is None:
        out: list = []
        any_split = False
        for origin, lexer_state in pairs(config.threads):
            parts = split(lexer_state)
            if len(parts) == 1 or (capped and len(parts) > SPLIT_MAX):
                out += (origin, lexer_state)
            else:
                any_split = True
                for one in parts:
                    out += (origin, one)
        if any_split:
            found = tuple(out)
            untrack(found)  # as the threads (see StateTable.intern)
        else:
            found = config.threads  # nothing split: the same object
        if capped:
            config.parts_capped = found
        else:
            config.parts = found
    return found


def _scan_cost(inside: Any, crossing: Any) -> int:
    if type(inside) is tuple:  # (own part, shared parts): those are counted where they are kept
        inside = inside[0]
    held = 0 if inside is None else inside.nbytes
    cost: int = held + sum(c.nbytes for _, c in crossing) + 200
    return cost


def _bool_of(ids: Any, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    for i in ids:
        if 0 <= i < size:
            out[i] = True
    return out
