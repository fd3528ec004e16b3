"""Token sets as byte matrices, and the vectorized lexer pass over them.

The vocabulary's distinct byte strings are stored as one flat byte buffer
with offsets. A *child* set holds suffixes of some of its parent's tokens
(each after its own number of bytes) and shares the parent's buffer.

:func:`scan` runs one lexer state over a whole token set with NumPy, one
byte column at a time (only the tokens still alive take part), and returns

* the tokens consumed entirely without any lexeme ending strictly inside
  them ("inside" tokens: they depend on the lexer state alone), and
* the *crossing* groups: tokens in which some lexeme may end strictly
  inside, grouped by the lexer state at the first such point, with the
  child set of their suffixes. Whether those are allowed depends on the
  parser, so the mask computation decides them. Child sets skip ends
  whose next byte cannot start what may follow the lexeme: a run of
  whitespace crosses once, at its last byte, not once per byte. Either
  choice of end point is exact, since the configuration after an end
  keeps the thread that goes on in the lexeme.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from automask.engine.lexer import LexerDFA, distinct
from automask.gc_pause import untrack

_uids = itertools.count()


class TokenSet:
    """Byte strings sharing one flat buffer; ``root_rows`` maps rows to the root set."""

    __slots__ = ("uid", "flat", "offsets", "lengths", "root_rows", "parent_rows", "n", "maxlen",
                 "nbytes", "_texts", "_canonical")

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 root_rows: np.ndarray, parent_rows: np.ndarray | None):
        self.uid = next(_uids)
        self.flat = flat
        self.offsets = offsets
        self.lengths = lengths
        self.root_rows = root_rows
        self.parent_rows = parent_rows
        self.n = len(offsets)
        self.maxlen = int(lengths.max()) if self.n else 0
        #: memory held (cache budgets add it up for every scan they keep)
        self.nbytes = (offsets.nbytes + lengths.nbytes + root_rows.nbytes
                       + (0 if parent_rows is None else parent_rows.nbytes) + 120)
        self._texts: tuple[bytes, ...] | None = None
        self._canonical: tuple[TokenSet, np.ndarray] | None = None
        # Arrays, bytes and another set (never this one: see canonical) only: in no
        # cycle. Scans make thousands of child sets that caches keep for the run, and
        # every collection would walk each one again (see gc_pause).
        untrack(self)

    def texts(self) -> tuple[bytes, ...]:
        """The rows as Python bytes (made once; for walking a few rows in Python).

        A tuple: once it holds only bytes the collector stops tracking it (a list
        of a root set's 128k tokens would be walked by every full collection).
        """
        if self._texts is None:
            flat = self.flat
            self._texts = tuple([flat[o: o + n].tobytes() for o, n in
                                 zip(self.offsets.tolist(), self.lengths.tolist(), strict=True)])
        return self._texts

    def child(self, rows: np.ndarray, skip: np.ndarray) -> TokenSet:
        """The suffixes of ``rows`` after their first ``skip`` bytes."""
        return TokenSet(self.flat, self.offsets[rows] + skip, self.lengths[rows] - skip,
                        self.root_rows[rows], rows)

    def subset(self, keep: np.ndarray) -> TokenSet:
        """The rows where ``keep`` holds (same parent, same suffixes)."""
        parent = None if self.parent_rows is None else self.parent_rows[keep]
        return TokenSet(self.flat, self.offsets[keep], self.lengths[keep],
                        self.root_rows[keep], parent)

    def canonical(self) -> tuple[TokenSet, np.ndarray]:
        """This set's distinct byte strings as a set of their own (one per content,
        see :func:`canonical_set`), and each row's index in it.

        Whether a configuration admits a row depends on the row's bytes alone,
        so decisions are made on the canonical set: the suffixes after a key's
        closing quote (``:``, ``: "``, ``": {"``...) are one set for every key
        of every schema, scanned and decided once per parser configuration
        instead of once per key, and repeated suffixes are decided once.
        """
        found = self._canonical
        if found is None:
            texts = self.texts()
            distinct = sorted(set(texts))
            position = {t: i for i, t in enumerate(distinct)}
            index = np.fromiter((position[t] for t in texts), dtype=np.int64, count=self.n)
            found = (canonical_set(tuple(distinct)), index)
            untrack(found)  # (a set and an array: see untrack(self) above)
            if found[0] is not self:  # (a canonical set holding itself would be a cycle)
                self._canonical = found
        return found

    def row_bytes(self, row: int) -> bytes:
        o = int(self.offsets[row])
        return self.flat[o: o + int(self.lengths[row])].tobytes()


_canonical_sets: dict[tuple[bytes, ...], TokenSet] = {}
MAX_CANONICAL_SETS = 100_000  # past this many the table starts over (sharing is only lost)


def canonical_set(strings: tuple[bytes, ...]) -> TokenSet:
    """The one token set of these distinct, sorted byte strings (its rows index nothing
    else: ``root_rows`` is the identity, and it has no parent)."""
    found = _canonical_sets.get(strings)
    if found is None:
        lengths = np.fromiter(map(len, strings), dtype=np.int32, count=len(strings))
        offsets = np.zeros(len(strings), dtype=np.int32)
        if len(strings) > 1:
            np.cumsum(lengths[:-1], out=offsets[1:])
        flat = np.frombuffer(b"".join(strings) + b"\0", dtype=np.uint8)
        found = TokenSet(flat, offsets, lengths, np.arange(len(strings), dtype=np.int32), None)
        found._texts = strings
        if len(_canonical_sets) >= MAX_CANONICAL_SETS:
            _canonical_sets.clear()
        found = _canonical_sets.setdefault(strings, found)
    return found


def prefix_rows(texts: tuple[bytes, ...], text: bytes) -> tuple[list[int], range]:
    """In sorted, distinct ``texts`` (a root or canonical set): the rows that are
    prefixes of ``text`` (``text`` itself included, shortest first), and the rows
    that start with ``text`` (one range, sorting makes them contiguous).

    By bisection, each prefix's rows inside the last one's: a key of 40 bytes
    costs the few bisections until no row starts with its prefix, not a step
    per byte, and no array as long as the vocabulary.
    """
    found: list[int]
    n, lo, found = len(texts), 0, []
    for k in range(1, len(text) + 1):
        head = text[:k]
        lo = bisect_left(texts, head, lo)
        if lo == n or not texts[lo].startswith(head):
            return found, range(lo, lo)
        if len(texts[lo]) == k:
            found.append(lo)
    above = text.rstrip(b"\xff")  # the least string past every one starting with text
    hi = n if not above else bisect_left(texts, above[:-1] + bytes((above[-1] + 1,)), lo)
    return found, range(lo, hi)


class RootTokens(TokenSet):
    """The distinct byte strings of a vocabulary's ordinary tokens, with their ids."""

    __slots__ = ("size", "row_of_id", "ids_sorted", "id_starts", "valid_ids", "present_bytes",
                 "trie", "_pack_index", "shared_bytes", "one_id_each")

    def __init__(self, token_bytes: list[bytes], excluded: set[int], size: int):
        by_bytes: dict[bytes, list[int]] = {}
        for tid, data in enumerate(token_bytes):
            if data and tid not in excluded:
                by_bytes.setdefault(data, []).append(tid)
        strings = sorted(by_bytes)
        lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
        offsets = np.zeros(len(strings), dtype=np.int64)
        if len(strings) > 1:
            np.cumsum(lengths[:-1], out=offsets[1:])
        flat = np.frombuffer(b"".join(strings) + b"\0", dtype=np.uint8)
        n = len(strings)
        super().__init__(flat, offsets.astype(np.int32), lengths.astype(np.int32),
                         np.arange(n, dtype=np.int32), None)
        self.size = size
        # Every id of each row, grouped: ids_sorted[id_starts[r]:id_starts[r+1]].
        counts = np.fromiter((len(by_bytes[s]) for s in strings), dtype=np.int64, count=n)
        self.id_starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=self.id_starts[1:])
        self.ids_sorted = np.fromiter(itertools.chain.from_iterable(by_bytes[s] for s in strings),
                                      dtype=np.int64, count=int(self.id_starts[-1]))
        self.row_of_id = np.full(size, -1, dtype=np.int64)
        self.row_of_id[self.ids_sorted] = np.repeat(np.arange(n), counts)
        self.valid_ids = self.ids_sorted.copy()
        #: rows spelled by more than one id (most vocabularies have none)
        self.shared_bytes = counts > 1
        self.one_id_each = not self.shared_bytes.any()
        counts_by_byte = np.bincount(flat[:-1], minlength=256)
        #: bitmask of the bytes that occur in at least one token
        self.present_bytes = sum(1 << b for b in np.flatnonzero(counts_by_byte).tolist())
        self.trie = PrefixTrie(self)
        # pack_rows gathers every id's row in one pass; ids with no row (and
        # the padding up to a whole word) read the extra False slot at index n.
        nwords = (size + 31) // 32
        index = np.full(nwords * 32, n, dtype=np.int32)
        index[self.valid_ids] = self.row_of_id[self.valid_ids]
        self._pack_index = index

    def ids_for_rows(self, rows: np.ndarray) -> np.ndarray:
        """Every token id whose bytes are one of ``rows``."""
        if rows.size == 0:
            return rows.astype(np.int64)
        starts = self.id_starts[rows]
        if self.one_id_each or not self.shared_bytes[rows].any():
            return self.ids_sorted[starts]  # type: ignore[no-any-return]  # an int array
        # Some rows are spelled by several ids (Gemma-3: byte tokens beside the same text):
        # each row's run of ids, gathered in one pass (a slice per row cost 60 ms for the
        # inside rows of a string body on 262k tokens).
        return self.ids_sorted[concat_ranges(starts, self.id_starts[rows + 1] - starts)]  # type: ignore[no-any-return]

    def packed_with(self, packed: np.ndarray, rows: np.ndarray | list[int], *,
                    allowed: bool = True) -> np.ndarray:
        """A copy of ``packed`` (a bitmask over ids, as :meth:`pack_rows` makes one) with
        every id of ``rows`` set, or cleared (``allowed`` False).

        A few rows added to or taken from a dense part (a string body's tokens with
        a gap before them, an object's keys less its declared names) are a few bit
        operations; unpacking the vocabulary and packing it again were two passes
        over it, 60-600 µs on 128k tokens.
        """
        out: np.ndarray = packed.copy()
        ids = self.ids_for_rows(np.asarray(rows, dtype=np.int64))
        if ids.size:
            bits = np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32))
            if allowed:
                np.bitwise_or.at(out, ids >> 5, bits)
            else:
                np.bitwise_and.at(out, ids >> 5, ~bits)
        return out

    def pack_rows(self, allowed_rows: np.ndarray) -> np.ndarray:
        """A packed uint32 bitmask over token ids from a boolean array over rows."""
        if np.count_nonzero(allowed_rows) * 4 < self.n:  # sparse: each id's bit set (a
            allowed = np.zeros(self.size, dtype=bool)  # gather of every id costs ~4x more)
            allowed[self.ids_for_rows(np.flatnonzero(allowed_rows))] = True
            return pack_bool(allowed)
        extended = np.zeros(self.n + 1, dtype=bool)
        extended[: self.n] = allowed_rows
        return np.packbits(extended[self._pack_index], bitorder="little").view("<u4")


class PrefixTrie:
    """The distinct prefixes of a root set's (sorted) strings, level by level.

    Sorting makes the strings sharing a prefix a contiguous run of rows, so
    a node is a row range. Level ``d`` (prefixes of ``d`` bytes) holds, per
    node: the first row ``start`` and the end ``end`` of its range, its last
    byte, whether a token ends exactly there (``ends``: then it is the row
    ``start``), and the range of its children in level ``d + 1``
    (``kid_lo``, ``kid_hi``). :func:`scan_root` walks it breadth first, so
    a lexer state that kills most first bytes costs almost nothing, and
    shared prefixes are stepped once instead of once per token.
    """

    __slots__ = ("start", "end", "byte", "ends", "kid_lo", "kid_hi", "parent", "has_kids",
                 "end_nodes", "end_rows")

    def __init__(self, tokens: TokenSet):
        n, flat, offsets, lengths = tokens.n, tokens.flat, tokens.offsets, tokens.lengths
        # lcp[i]: the common prefix length of rows i-1 and i (lcp[0] = 0).
        lcp = np.zeros(n, dtype=np.int32)
        pairs = np.arange(1, n)
        pairs = pairs[np.minimum(lengths[pairs - 1], lengths[pairs]) > 0]
        depth = 0
        while pairs.size:
            same = flat[offsets[pairs - 1] + depth] == flat[offsets[pairs] + depth]
            pairs = pairs[same]
            lcp[pairs] += 1
            depth += 1
            pairs = pairs[np.minimum(lengths[pairs - 1], lengths[pairs]) > depth]
        self.start: list[np.ndarray] = [np.zeros(1, dtype=np.int32)]
        self.end: list[np.ndarray] = [np.array([n], dtype=np.int32)]
        self.byte: list[np.ndarray] = [np.zeros(1, dtype=np.uint8)]
        self.ends: list[np.ndarray] = [np.zeros(1, dtype=bool)]
        self.kid_lo: list[np.ndarray] = []
        self.kid_hi: list[np.ndarray] = []
        self.parent: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]  # index one level up
        rows = np.arange(n, dtype=np.int32)
        for d in range(1, tokens.maxlen + 1):
            rows = rows[lengths[rows] >= d]
            starts = rows[lcp[rows] < d]
            breaks = np.flatnonzero(lcp < d).astype(np.int32)
            nxt = np.searchsorted(breaks, starts, side="right")
            ends = np.append(breaks, n)[nxt].astype(np.int32)
            parents = np.searchsorted(self.start[d - 1], starts, side="right") - 1
            above = np.arange(len(self.start[d - 1]))
            self.kid_lo.append(np.searchsorted(parents, above, side="left").astype(np.int32))
            self.kid_hi.append(np.searchsorted(parents, above, side="right").astype(np.int32))
            self.parent.append(parents.astype(np.int32))
            self.start.append(starts)
            self.end.append(ends)
            self.byte.append(flat[offsets[starts] + d - 1])
            self.ends.append(lengths[starts] == d)
        self.kid_lo.append(np.zeros(len(self.start[-1]), dtype=np.int32))
        self.kid_hi.append(np.zeros(len(self.start[-1]), dtype=np.int32))
        # Per level, for whole-level steps: which nodes have children, and the nodes
        # where a token ends with the row it is (a few per level, not a mask over all).
        self.has_kids = [hi > lo for lo, hi in zip(self.kid_lo, self.kid_hi, strict=True)]
        self.end_nodes = [np.flatnonzero(e).astype(np.int32) for e in self.ends]
        self.end_rows = [s[e] for s, e in zip(self.start, self.end_nodes, strict=True)]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for level in (self.start, self.end, self.byte, self.ends,
                                          self.kid_lo, self.kid_hi, self.parent, self.has_kids,
                                          self.end_nodes, self.end_rows) for a in level)


def concat_ranges(lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(lo[i], lo[i] + counts[i])`` over i."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int32)
    shift: np.ndarray = (lo - (counts.cumsum() - counts)).repeat(counts)
    return (shift + np.arange(total)).astype(np.int32, copy=False)


def pack_bool(allowed: np.ndarray) -> np.ndarray:
    """Bool array over ids → uint32 words, bit ``t % 32`` of word ``t // 32``."""
    nwords = (len(allowed) + 31) // 32
    padded = np.zeros(nwords * 32, dtype=bool)
    padded[: len(allowed)] = allowed
    return np.packbits(padded, bitorder="little").view("<u4").astype(np.uint32, copy=False)


SMALL_SET = 400  # up to this many rows, stepping bytes in Python beats NumPy's call overhead


def scan(tokens: TokenSet, lexer: LexerDFA, start: int, reuse: Reuse | None = None, *,
         whole_levels: bool = True) -> tuple[np.ndarray, list[tuple[int, TokenSet]]]:
    """Run lexer state ``start`` over every token; see the module docstring.

    Returns the inside rows (bool) and the crossing groups as ``(state, child)``:
    the tokens whose first possible lexeme end (strictly inside the token) is
    reached in lexer ``state``, with ``child`` the suffixes after that point.
    The configuration after that point depends on ``state`` alone (and on the
    thread's origin), so a group is decided by one parser step, however many
    different prefixes it holds.

    Three walks compute the same thing: the prefix trie for a whole
    vocabulary, plain Python for a handful of suffixes, and a column-wise
    NumPy pass for everything in between.

    ``reuse`` (root sets only) supplies the finished scan of another state
    that has the same successor as ``start`` on some first bytes: a token's
    fate depends only on the state after its first byte, so those tokens
    are copied from it and only the other first bytes are walked.

    ``whole_levels`` (root sets): step the trie a whole level at a time while
    most of it is live (see :func:`_walk_trie`); False follows live nodes only,
    the same result by the other path (the tests compare the two).

    A root scan keeps crossing suffixes whatever their next byte, so it does
    not depend on what may follow the lexeme: :func:`prune_crossing` derives
    each grammar's groups from it. A child scan ends a lexeme only where the
    next byte can start what may follow it (see the module docstring).
    """
    inside = np.zeros(tokens.n, dtype=bool)
    if tokens.n == 0:
        return inside, []
    if isinstance(tokens, RootTokens):
        lexer.row(start)
        only = None
        if reuse is not None:
            only = ~reuse.same_first
            keep = np.repeat(reuse.same_first, tokens.trie.end[1] - tokens.trie.start[1])
            np.logical_and(reuse.inside, keep, out=inside)
        groups = _walk_trie(tokens, lexer, start, inside, only, whole_levels)
        if reuse is not None:
            for state, child in reuse.crossing:
                sel = keep[child.parent_rows]
                if sel.any():
                    rows = child.parent_rows[sel]
                    skip = (child.offsets - tokens.offsets[child.parent_rows])[sel]
                    groups.setdefault(state, []).append((rows, skip))
    elif tokens.n <= SMALL_SET:
        groups = _walk_rows(tokens, lexer, start, inside)
    else:
        lexer.row(start)
        groups = _walk_columns(tokens, lexer, start, inside)
    return inside, _crossing(tokens, groups, inside)


def _crossing(tokens: TokenSet, groups: Groups, inside: np.ndarray
              ) -> list[tuple[int, TokenSet]]:
    """A walk's groups as child sets, without the rows consumed inside the lexeme
    anyway (allowed already)."""
    crossing = []
    for state, parts in groups.items():
        rows = np.concatenate([r for r, _ in parts])
        skip = np.concatenate([np.broadcast_to(np.asarray(k, dtype=np.int32), len(r))
                               for r, k in parts])
        needed = ~inside[rows]
        if np.count_nonzero(needed):
            crossing.append((state, tokens.child(rows[needed], skip[needed])))
    return crossing


def scan_string(tokens: RootTokens, lexer: LexerDFA, start: int, text: bytes
                ) -> tuple[np.ndarray, list[tuple[int, TokenSet]]] | None:
    """:func:`scan` of a state that must read ``text`` first (:func:`rx.forced_prefix`),
    without pruning; None where too many tokens go on past ``text`` (a walk is cheaper).
    The inside part is returned as rows (int32), not a bool per row: there are few.

    The inside tokens are the prefixes of ``text``; the ones going on past it
    start with all of it (sorted rows: one range). Where the lexeme ends at the
    end of ``text`` they cross there, in one group; otherwise each is stepped on.
    A few bisections instead of a walk of every token sharing a first byte
    with it, and no lexer state made for ``text`` unless some token goes past it.
    """
    if not text:  # nothing forced: a walk, unless the lexeme has ended (no token goes on)
        return None if lexer.can_continue(start) else (np.zeros(0, dtype=np.int32), [])
    texts = tokens.texts()
    inside, longer = prefix_rows(texts, text)
    first, last, level = longer.start, longer.stop, len(text)
    if inside and inside[-1] == first:
        first += 1  # the row equal to text: inside
    if first >= last:
        return np.array(inside, dtype=np.int32), []
    end = lexer.walk(start, text)
    if lexer.accepts[end] and not lexer.can_continue(end):
        ended_rows = np.arange(first, last, dtype=np.int32)
        return (np.array(inside, dtype=np.int32),
                [(end, tokens.child(ended_rows, np.full(ended_rows.size, level, dtype=np.int32)))])
    if last - first > SMALL_SET:
        return None
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for r in range(first, last):
        sid, data = end, texts[r]
        ended = (end, level) if lexer.accepts[end] else None
        for j in range(level, len(data)):
            sid = lexer.step(sid, data[j])
            if not sid:
                break
            if ended is None and j + 1 < len(data) and lexer.accepts[sid]:
                ended = (sid, j + 1)  # the first point where a lexeme may end
        if sid:
            inside.append(r)  # consumed inside the lexeme (whatever ends it passed)
        elif ended is not None:
            rows, skips = groups.setdefault(ended[0], ([], []))
            rows.append(r)
            skips.append(ended[1])
    return np.array(inside, dtype=np.int32), [
        (state, tokens.child(np.array(rows, dtype=np.int32), np.array(skips, dtype=np.int32)))
        for state, (rows, skips) in groups.items()]


def scan_prefixed(tokens: TokenSet, lexer: LexerDFA, start: int, text: bytes
                  ) -> tuple[np.ndarray, list[tuple[int, TokenSet]]]:
    """:func:`scan` of a sorted, distinct set (a canonical set) for a state that must
    read ``text`` first (:func:`rx.forced_prefix`: no lexeme ends inside it), with pruning.

    Only the rows that are prefixes of ``text`` or start with it can live (any
    other dies at its first byte off ``text``): found by bisection. The prefixes
    are inside, with no step taken (a lexeme cannot end before ``text`` does);
    the rows going on past ``text`` are walked from the state after it. A key's
    state with its colon after it, met by the suffixes after a comma: no lexer
    state is made for the key's first bytes unless a token is seen going past.
    """
    texts = tokens.texts()
    prefixes, longer = prefix_rows(texts, text)
    inside = np.zeros(tokens.n, dtype=bool)
    inside[prefixes] = True
    rows = [r for r in longer if len(texts[r]) > len(text)]
    end = lexer.walk(start, text) if rows else 0
    if not end:
        return inside, []
    return inside, _crossing(tokens, _walk_rows(tokens, lexer, end, inside, rows, len(text)),
                             inside)


def scan_finite(tokens: TokenSet, lexer: LexerDFA, start: int, strings: tuple[bytes, ...]
                ) -> tuple[np.ndarray, list[tuple[int, TokenSet]]]:
    """:func:`scan` of a sorted, distinct set (a canonical set) for a one-lexeme state
    whose lexeme matches just ``strings`` (an enum value, a key): by bisection.

    The inside rows are the prefixes of a string; a crossing row starts with a
    string and goes on with a byte that can follow the lexeme (the shortest such
    string: the first end a walk would meet). Rows sharing a prefix are one
    range of a sorted set, so nothing else is looked at.
    """
    texts = tokens.texts()
    inside = np.zeros(tokens.n, dtype=bool)
    found = {text: prefix_rows(texts, text) for text in strings}
    for prefixes, _ in found.values():
        inside[prefixes] = True
    taken: set[int] = set()
    groups: dict[int, list[tuple[list[int], int]]] = {}
    for text in sorted(strings, key=len):
        if not text:
            continue  # a walk looks for ends after a token's first byte
        size = len(text)
        longer = [i for i in found[text][1]
                  if len(texts[i]) > size and not inside[i] and i not in taken]
        if not longer:  # most strings: no row goes on past them, and no state is made
            continue
        end = lexer.walk(start, text)
        ok = lexer.follow_ok(end)
        rows = [j for j in longer if ok[texts[j][size]]]
        taken.update(rows)
        if rows:
            groups.setdefault(end, []).append((rows, size))
    crossing = []
    for state, parts in groups.items():
        child_rows = np.array([r for part, _ in parts for r in part], dtype=np.int32)
        skip = np.array([k for part, k in parts for _ in part], dtype=np.int32)
        crossing.append((state, tokens.child(child_rows, skip)))
    return inside, crossing


def prune_crossing(child: TokenSet, ok: np.ndarray) -> TokenSet | None:
    """The rows of a crossing group whose next byte ``ok`` admits (None if none does;
    ``child`` itself if all do): :func:`scan` with pruning, read off one without."""
    keep = ok[child.flat[child.offsets]]
    kept = np.count_nonzero(keep)
    if kept == child.n:
        return child
    return child.subset(keep) if kept else None


def prune_groups(crossing: Sequence[tuple[int, TokenSet]], lexer: LexerDFA
                 ) -> list[tuple[int, TokenSet]]:
    """A scan without pruning's crossing groups, each pruned for what may follow its
    lexeme end (:func:`prune_crossing`), the emptied ones dropped."""
    return [(after, kept) for after, child in crossing
            if (kept := prune_crossing(child, lexer.next_ok(after))) is not None]


Groups = dict[int, list[tuple[np.ndarray, int | np.ndarray]]]  # state -> (rows, bytes skipped)


class Reuse(NamedTuple):
    """A finished root scan standing in for another state's on some first bytes."""

    same_first: np.ndarray  # bool per first-level trie node: both states agree after it
    inside: np.ndarray      # the other scan's inside rows (bool)
    crossing: Sequence      # the other scan's crossing groups, (state, child of the root)


def _walk_trie(tokens: RootTokens, lexer: LexerDFA, start: int, inside: np.ndarray,
               only: np.ndarray | None = None, whole_levels: bool = True) -> Groups:
    """Breadth first over the prefix trie: each live prefix is stepped once.

    ``only`` (bool per first-level node) limits the walk to those first bytes.
    While most of a level is live (a string body: nearly every token), the
    level is stepped whole, a parent gather per level; once few nodes are
    left, only the live ones are followed (index lists, then plain Python).
    """
    trie = tokens.trie
    groups: Groups = {}
    st = lexer.table[start][trie.byte[1]]
    if only is not None:
        st = np.where(only, st, 0)
    recorded = None  # per node: a lexeme end was already seen above (None: none anywhere)
    d = 1
    while True:  # whole levels; the dead state 0 steps to itself
        alive = st != 0
        live = int(np.count_nonzero(alive))
        if live * DENSE_SHARE < st.size or not whole_levels:
            break
        inside[trie.end_rows[d][alive[trie.end_nodes[d]]]] = True
        acc = lexer.accepting[st]
        if acc.any():  # (never, inside a string body: most of a whole-level walk)
            acc &= trie.has_kids[d]
            if recorded is not None:
                acc &= ~recorded
            nodes = acc.nonzero()[0]
            if nodes.size:
                recorded = acc if recorded is None else recorded | acc
                _record_ends(trie, d, nodes, st[nodes], groups)
        if d + 1 >= len(trie.start):
            return groups
        parent = trie.parent[d + 1]
        if recorded is not None:
            recorded = recorded[parent]
        d += 1
        st = lexer.gather(st[parent], trie.byte[d])
    nodes = alive.nonzero()[0].astype(np.int32)
    st = st[nodes]
    recorded = np.zeros(nodes.size, dtype=bool) if recorded is None else recorded[nodes]
    while nodes.size:
        if nodes.size <= FEW_ROWS and int(  # the deep levels hold a handful of long tokens
                (trie.end[d][nodes] - trie.start[d][nodes]).sum()) <= FEW_ROWS:
            _finish_in_python(tokens, lexer, nodes, st, recorded, d, inside, groups)
            break
        ends = trie.ends[d][nodes]
        if ends.any():
            inside[trie.start[d][nodes[ends]]] = True
        lo, hi = trie.kid_lo[d][nodes], trie.kid_hi[d][nodes]
        more = hi > lo
        acc = lexer.accepting[st] & more & ~recorded  # (the lexer's arrays may grow)
        if acc.any():
            recorded |= acc
            _record_ends(trie, d, nodes[acc], st[acc], groups)
        if not more.all():
            lo, hi, st, recorded = lo[more], hi[more], st[more], recorded[more]
        counts = hi - lo
        if int(counts.sum()) == counts.size:  # one child each (deep in the trie: long tokens)
            nodes = lo
        else:
            nodes = concat_ranges(lo, counts)
            if not nodes.size:
                break
            st = st.repeat(counts)
            recorded = recorded.repeat(counts)
        d += 1
        st = lexer.gather(st, trie.byte[d][nodes])
        alive = st != 0
        if not alive.all():
            nodes, st, recorded = nodes[alive], st[alive], recorded[alive]
    return groups


DENSE_SHARE = 3  # a level is stepped whole while at least a third of it is live


def _record_ends(trie: PrefixTrie, d: int, nodes: np.ndarray, states: np.ndarray,
                 groups: Groups) -> None:
    """Group the rows below ``nodes`` (depth ``d``) by the lexer state in which a
    lexeme may end there: each group crosses that lexeme end after ``d`` bytes."""
    for state in distinct(states):
        mine = nodes[states == state]
        kids = concat_ranges(trie.kid_lo[d][mine], trie.kid_hi[d][mine] - trie.kid_lo[d][mine])
        if kids.size:
            lo_rows = trie.start[d + 1][kids]
            rows = concat_ranges(lo_rows, trie.end[d + 1][kids] - lo_rows)
            groups.setdefault(state, []).append((rows, d))


FEW_ROWS = 48  # below this many rows left, a trie level's NumPy calls cost more than Python


def _finish_in_python(tokens: RootTokens, lexer: LexerDFA, nodes: np.ndarray, st: np.ndarray,
                      recorded: np.ndarray, d: int, inside: np.ndarray, groups: Groups) -> None:
    """The rest of a trie walk, row by row: the rows below ``nodes`` (at depth ``d``,
    in lexer states ``st``), as :func:`_walk_rows` steps them."""
    trie, texts = tokens.trie, tokens.texts()
    step, accepts = lexer.step, lexer.accepts
    found: dict[int, list[tuple[int, int]]] = {}
    starts, ends = trie.start[d], trie.end[d]
    for node, s0, rec0 in zip(nodes.tolist(), st.tolist(), recorded.tolist(), strict=True):
        for r in range(int(starts[node]), int(ends[node])):
            data = texts[r]
            n = len(data)
            s, rec = s0, rec0
            for j in range(d, n + 1):
                if j == n:
                    inside[r] = True
                    break
                if not rec and accepts[s]:
                    rec = True
                    found.setdefault(s, []).append((r, j))
                s = step(s, data[j])
                if not s:
                    break
    for state, pairs in found.items():
        for skip in {j for _, j in pairs}:
            rows = np.array([r for r, j in pairs if j == skip], dtype=np.int32)
            groups.setdefault(state, []).append((rows, skip))


def _walk_rows(tokens: TokenSet, lexer: LexerDFA, start: int, inside: np.ndarray,
               rows: list[int] | None = None, skip: int = 0) -> Groups:
    """Byte by byte in Python, for a few rows (``rows``: only those, the others dead).

    Only the first bytes the rows hold are stepped from ``start``, not its whole
    row: a new key's or pattern's state met by a handful of suffixes (``"``,
    ``,"``) derives one class, not every byte class of its regex. ``skip``: the
    rows' first ``skip`` bytes (at least one) are read already, ``start`` is
    the state after them, and no lexeme ended inside them.
    """
    found: dict[int, list[tuple[int, int]]] = {}
    step, accepts, texts = lexer.step, lexer.accepts, tokens.texts()
    first = max(skip, 1)
    for r in range(len(texts)) if rows is None else rows:
        data = texts[r]
        s = start if skip else step(start, data[0])
        if not s:
            continue
        n = len(data)
        recorded = False
        for j in range(first, n):
            if not recorded and accepts[s] and lexer.follow_ok(s)[data[j]]:
                recorded = True
                found.setdefault(s, []).append((r, j))
            s = step(s, data[j])
            if not s:
                break
        else:
            inside[r] = True
    return {state: [(np.array([r for r, _ in parts], dtype=np.int32), parts[0][1])]
            if len({k for _, k in parts}) == 1 else
            [(np.array([r], dtype=np.int32), k) for r, k in parts]
            for state, parts in found.items()}


def _walk_columns(tokens: TokenSet, lexer: LexerDFA, start: int,
                  inside: np.ndarray) -> Groups:
    """One byte column at a time over the rows still alive, in NumPy."""
    idx = np.arange(tokens.n, dtype=np.int32)
    offsets, lengths, flat = tokens.offsets, tokens.lengths, tokens.flat
    # Column 0 from one state: a row lookup instead of a gather per token.
    st = lexer.table[start][flat[offsets]]
    recorded = np.zeros(tokens.n, dtype=bool)  # first possible lexeme end already seen
    groups: Groups = {}
    j = 0
    while True:
        alive = st != 0
        if not alive.all():
            idx, st = idx[alive], st[alive]
        if idx.size == 0:
            break
        done = lengths[idx] == j + 1
        if done.any():
            inside[idx[done]] = True
            keep = ~done
            idx, st = idx[keep], st[keep]
            if idx.size == 0:
                break
        acc = lexer.accepting[st]
        if acc.any():
            acc &= ~recorded[idx]
        if acc.any():
            rows, states = idx[acc], st[acc]
            after = flat[offsets[rows] + j + 1]
            for state in distinct(states):
                # A lexeme ends here only if the next byte can start what follows it.
                sel = (states == state) & lexer.follow_ok(state)[after]
                if sel.any():
                    recorded[rows[sel]] = True
                    groups.setdefault(state, []).append((rows[sel], j + 1))
        j += 1
        st = lexer.gather(st, flat[offsets[idx] + j])
    return groups
