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
  parser, so the mask computation decides them.
"""

from __future__ import annotations

import itertools

import numpy as np

from automask.engine.lexer import LexerDFA

_uids = itertools.count()


class TokenSet:
    """Byte strings sharing one flat buffer; ``root_rows`` maps rows to the root set."""

    __slots__ = ("uid", "flat", "offsets", "lengths", "root_rows", "parent_rows", "n", "maxlen",
                 )

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

    def child(self, rows: np.ndarray, skip: np.ndarray) -> TokenSet:
        """The suffixes of ``rows`` after their first ``skip`` bytes."""
        return TokenSet(self.flat, self.offsets[rows] + skip, self.lengths[rows] - skip,
                        self.root_rows[rows], rows)

    @property
    def nbytes(self) -> int:
        return (self.offsets.nbytes + self.lengths.nbytes + self.root_rows.nbytes
                + (0 if self.parent_rows is None else self.parent_rows.nbytes) + 120)

    def row_bytes(self, row: int) -> bytes:
        o = int(self.offsets[row])
        return self.flat[o: o + int(self.lengths[row])].tobytes()


class RootTokens(TokenSet):
    """The distinct byte strings of a vocabulary's ordinary tokens, with their ids."""

    __slots__ = ("size", "row_of_id", "ids_sorted", "id_starts", "valid_ids", "present_bytes")

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
        counts_by_byte = np.bincount(flat[:-1], minlength=256)
        #: bitmask of the bytes that occur in at least one token
        self.present_bytes = sum(1 << b for b in np.flatnonzero(counts_by_byte).tolist())

    def ids_for_rows(self, rows: np.ndarray) -> np.ndarray:
        """Every token id whose bytes are one of ``rows``."""
        if rows.size == 0:
            return rows.astype(np.int64)
        starts = self.id_starts[rows]
        counts = self.id_starts[rows + 1] - starts
        if np.all(counts == 1):
            return self.ids_sorted[starts]
        return np.concatenate([self.ids_sorted[s:e] for s, e in
                               zip(starts.tolist(), (starts + counts).tolist(), strict=True)])

    def pack_rows(self, allowed_rows: np.ndarray) -> np.ndarray:
        """A packed uint32 bitmask over token ids from a boolean array over rows."""
        allowed = np.zeros(self.size, dtype=bool)
        allowed[self.valid_ids] = allowed_rows[self.row_of_id[self.valid_ids]]
        return pack_bool(allowed)


def pack_bool(allowed: np.ndarray) -> np.ndarray:
    """Bool array over ids → uint32 words, bit ``t % 32`` of word ``t // 32``."""
    nwords = (len(allowed) + 31) // 32
    padded = np.zeros(nwords * 32, dtype=bool)
    padded[: len(allowed)] = allowed
    return np.packbits(padded, bitorder="little").view("<u4").astype(np.uint32, copy=False)


def scan(tokens: TokenSet, lexer: LexerDFA, start: int
         ) -> tuple[np.ndarray, list[tuple[int, TokenSet]]]:
    """Run lexer state ``start`` over every token; see the module docstring.

    Returns the inside rows (bool) and the crossing groups as ``(state, child)``:
    the tokens whose first possible lexeme end (strictly inside the token) is
    reached in lexer ``state``, with ``child`` the suffixes after that point.
    The configuration after that point depends on ``state`` alone (and on the
    thread's origin), so a group is decided by one parser step, however many
    different prefixes it holds.
    """
    inside = np.zeros(tokens.n, dtype=bool)
    if tokens.n == 0:
        return inside, []
    idx = np.arange(tokens.n, dtype=np.int32)
    offsets, lengths, flat = tokens.offsets, tokens.lengths, tokens.flat
    lexer.row(start)
    # Column 0 from one state: a row lookup instead of a gather per token.
    st = np.asarray(lexer.rows[start], dtype=np.int32)[flat[offsets]]
    recorded = np.zeros(tokens.n, dtype=bool)  # first possible lexeme end already seen
    groups: dict[int, list[tuple[np.ndarray, int]]] = {}
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
            recorded[rows] = True
            after = flat[offsets[rows] + j + 1]
            for state in np.unique(states).tolist():
                # Rows whose next byte can go on, in this lexeme or in one that may follow.
                sel = (states == state) & lexer.next_ok(state)[after]
                if sel.any():
                    groups.setdefault(state, []).append((rows[sel], j + 1))
        j += 1
        lexer.ensure_rows(st)
        st = lexer.table[st, flat[offsets[idx] + j]]
    crossing = []
    for state, parts in groups.items():
        rows = np.concatenate([r for r, _ in parts])
        skip = np.concatenate([np.full(len(r), k, dtype=np.int32) for r, k in parts])
        needed = ~inside[rows]  # consumed inside the lexeme anyway: allowed already
        if needed.any():
            crossing.append((state, tokens.child(rows[needed], skip[needed])))
    return inside, crossing
