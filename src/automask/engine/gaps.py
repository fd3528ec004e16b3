"""Token scans of lexemes that open with a whitespace gap, read off the rest's.

JSON text puts its whitespace at the front of the lexeme after it
(``ws "key" ws :``, ``ws 123``, ``ws }``; see :class:`automask.schema.json_text.Layout`).
Such a lexeme is ``W{0,m} R``, where no text of ``R`` starts with a byte of
``W``. A token's fate under it splits on its first byte:

* a token not starting with ``W`` goes as it goes under ``R`` alone;
* a token of ``W`` bytes only is inside when it has at most ``m`` of them;
* a token ``w r`` (``w`` its leading run of ``W``, at most ``m`` bytes,
  ``r`` not empty) goes as ``r`` goes under ``R``, its lexeme ends moved
  ``len(w)`` bytes on.

So the scan is ``R``'s (with every shortcut ``R`` has: a key's bisection, a
string's shared scan) plus ``R``'s scan of the distinct remainders ``r``:
one sorted set per vocabulary (see :class:`SpacedTokens`), which a key or an
enum value scans by bisection too. No walk of the vocabulary for each key.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from automask.engine.tokens import RootTokens, TokenSet, canonical_set, concat_ranges
from automask.regex import nodes as rx

UNBOUNDED = 1 << 30


class Gap(NamedTuple):
    """``W{0,most} rest``: the gap's bytes (bitmask), its bound, and what follows it."""

    bits: int
    most: int
    rest: rx.Node


def leading_gap(node: rx.Node) -> Gap | None:
    """``node`` as a gap of one byte class (bounded, or unbounded once clamped to the
    longest token) before a part that is never empty and cannot start with those
    bytes, or None."""
    if node.kind != rx.K_CONCAT:
        return None
    gap, rest = node.a, node.b
    if gap.kind != rx.K_REPEAT or gap.lo != 0 or gap.a.kind != rx.K_BYTES:
        return None
    if rest.nullable or rx.first_bytes(rest) & gap.a.bits:
        return None
    return Gap(gap.a.bits, UNBOUNDED if gap.hi is None else gap.hi, rest)


class SpacedTokens(NamedTuple):
    """A vocabulary's tokens that start with bytes of one gap class, by what follows.

    ``rest`` holds the distinct remainders (sorted, a canonical set); the root rows
    whose remainder is ``rest`` row ``i`` are ``rows[starts[i]:starts[i + 1]]``, each
    with the length of its leading run in ``runs``. Tokens of gap bytes only are
    ``blank_rows``, with their lengths.
    """

    rest: TokenSet
    rows: np.ndarray
    runs: np.ndarray
    starts: np.ndarray
    blank_rows: np.ndarray
    blank_lengths: np.ndarray

    @classmethod
    def of(cls, root: RootTokens, bits: int) -> SpacedTokens:
        gap = bytes(b for b in range(256) if bits >> b & 1)
        by_rest: dict[bytes, list[tuple[int, int]]] = {}
        blank_rows, blank_lengths = [], []
        for row, text in enumerate(root.texts()):
            if text[0] not in gap:
                continue
            rest = text.lstrip(gap)
            run = len(text) - len(rest)
            if rest:
                by_rest.setdefault(rest, []).append((row, run))
            else:
                blank_rows.append(row)
                blank_lengths.append(run)
        remainders = sorted(by_rest)
        pairs = [pair for r in remainders for pair in by_rest[r]]
        counts = np.fromiter((len(by_rest[r]) for r in remainders), dtype=np.int64,
                             count=len(remainders))
        starts = np.zeros(len(remainders) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return cls(canonical_set(tuple(remainders)),
                   np.array([r for r, _ in pairs], dtype=np.int32),
                   np.array([k for _, k in pairs], dtype=np.int32), starts,
                   np.array(blank_rows, dtype=np.int32), np.array(blank_lengths, dtype=np.int32))

    @property
    def nbytes(self) -> int:
        texts = self.rest.texts()  # (held as Python bytes too: ~33 bytes each past the data)
        return (self.rest.nbytes + len(self.rest.flat) + 33 * len(texts) + self.rows.nbytes
                + self.runs.nbytes + self.starts.nbytes + self.blank_rows.nbytes
                + self.blank_lengths.nbytes)

    def expand(self, indices: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For remainder rows ``indices``: the root rows spelled ``w r`` with a run of at
        most ``most``, each one's position in ``indices``, and its run length."""
        lo = self.starts[indices]
        counts = self.starts[indices + 1] - lo
        at = concat_ranges(lo, counts)
        rows, runs = self.rows[at], self.runs[at]
        source = np.repeat(np.arange(len(indices)), counts)
        keep = runs <= most
        return rows[keep], source[keep], runs[keep]

    def blanks(self, most: int) -> np.ndarray:
        """Root rows of gap bytes only, at most ``most`` of them (inside any such gap)."""
        return self.blank_rows[self.blank_lengths <= most]

    def crossing(self, root: RootTokens, child: TokenSet, most: int) -> TokenSet | None:
        """A crossing group of the remainders' scan as one of the root's (each root row
        spelled ``w r``, its suffix moved past the run), or None if no row fits."""
        skips = child.offsets - self.rest.offsets[child.parent_rows]
        # a crossing group is a child set: its parent_rows are set
        rows, source, runs = self.expand(child.parent_rows, most)  # type: ignore[arg-type]
        if not len(rows):
            return None
        return root.child(rows, runs + skips[source])
