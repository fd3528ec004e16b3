"""Token scans of length-bounded string bodies, read off the unbounded body's scan.

A JSON string with ``maxLength: 64`` is the lexeme ``enc(C{0,64})"``: code
points ``C`` spelled with JSON escapes, then the closing quote. Every token
consumed moves it to a new node (``C{0,60}``, ``C{0,57}``, ...), and each
node's scan would be a fresh walk of the whole vocabulary (about 20 ms on
128k tokens), once per token of the string. But a token's fate under
``enc(C{lo,hi})"`` is its fate under ``enc(C*)"`` plus one number: how many
code points it begins before the quote. So the bounded scan is the
unbounded one (shared by every such string) filtered by a per-token count,
a few vectorized comparisons.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from automask.engine.lexer import byte_lut
from automask.engine.tokens import RootTokens
from automask.regex import nodes as rx

CONTINUATION = sum(1 << b for b in range(0x80, 0xC0))  # UTF-8 continuation bytes


class BoundedBody(NamedTuple):
    """``enc(C{lo,hi} [& P]) tail`` split into its unbounded form and the bounds."""

    unbounded: rx.Node  # enc(C* [& P]) tail
    lo: int
    hi: int | None
    code: rx.Code
    #: a row that stays inside the unbounded body after ``n`` code points stays inside the
    #: bounded one when ``n <= hi - slack`` (0 without a pattern; see :func:`_slack`)
    slack: int


def bounded_body(node: rx.Node) -> BoundedBody | None:
    """``node`` as a bounded body whose scan can be derived, or None.

    It must be a concatenation of an encoding, at a spelling boundary, of a
    bounded repeat of one code point (alone, or met with other constraints:
    a pattern), with a tail that cannot start a spelling (so the body ends at
    the tail's first byte, wherever it is).
    """
    if node.kind != rx.K_CONCAT or node.a.kind != rx.K_ENC or node.a.hi != 0:
        return None
    enc, tail = node.a, node.b
    others: tuple[rx.Node, ...]
    rep, others = enc.a, ()
    if rep.kind == rx.K_AND:
        counts = [m for m in rep.items if m.kind == rx.K_REPEAT and m.hi is not None]
        if len(counts) != 1:
            return None
        others = tuple(m for m in rep.items if m is not counts[0])
        rep = counts[0]
    if rep.kind != rx.K_REPEAT or (rep.lo == 0 and rep.hi is None):
        return None
    code = rx._codes[enc.lo]
    if not _one_code_point(rep.a) or not _counts_by_first_byte(code):
        return None
    if rx.first_bytes(tail) & _spelling_starts(code) or tail.nullable:
        return None
    content = rx.intersect(rx.star(rep.a), *others) if others else rx.star(rep.a)
    slack = _slack(content) if others else 0
    if slack is None:
        return None
    return BoundedBody(rx.concat(rx.encoded(content, code), tail), rep.lo, rep.hi, code, slack)


MAX_SLACK_STATES = 1024
_slacks: dict[int, int | None] = rx.uid_keyed({})  # (an entry goes with its node)


def _slack(content: rx.Node) -> int | None:
    """How close to its bound a text of ``content`` may come before the bound can bite.

    From every state of ``content``'s automaton a text can be completed with
    any number of code points from ``slack`` up: within ``slack`` more code
    points (the rest of a character begun costs none) it reaches a state that
    accepts and loops on an ASCII byte. So a prefix of
    ``n`` code points that stays alive in ``content`` stays alive under
    ``{lo,hi}`` too when ``n + slack <= hi``. None when some state cannot
    reach such a loop, or the automaton is bigger than :data:`MAX_SLACK_STATES`.
    """
    if content.uid in _slacks:
        return _slacks[content.uid]
    seen, states, nexts = {content.uid}, [content], []
    found: int | None = 0
    for node in states:
        succ = []
        for lo, hi in rx.class_runs(rx.class_starts(node)):
            d = rx.derive(node, lo)
            if d is not rx.EMPTY:
                # a continuation byte goes on with a code point already counted
                succ.append((lo, d, 0 if lo <= 0xBF and hi >= 0x80 else 1))
                if d.uid not in seen:
                    seen.add(d.uid)
                    states.append(d)
        nexts.append(succ)
        if len(states) > MAX_SLACK_STATES:
            found = None
            break
    if found is not None:
        index = {n.uid: i for i, n in enumerate(states)}
        dist = [0 if n.nullable and any(b < 0x80 and d is n for b, d, _w in succ) else None
                for n, succ in zip(states, nexts, strict=True)]
        changed = True
        while changed:  # fewest code points to a looping accepting state, by relaxation
            changed = False
            for i, succ in enumerate(nexts):
                for _b, d, weight in succ:
                    j = dist[index[d.uid]]
                    # dist[i] is not None on the right of the or (mypy does not narrow an index)
                    if j is not None and (dist[i] is None or j + weight < dist[i]):  # type: ignore[operator]
                        dist[i] = j + weight
                        changed = True
        found = None if any(d is None for d in dist) else max(dist)  # type: ignore[type-var]  # no None left
    _slacks[content.uid] = found
    return found


_single: dict[int, bool] = rx.uid_keyed({})


def _one_code_point(char: rx.Node) -> bool:
    """Whether every string of ``char`` is one UTF-8 sequence: a lead byte, then only
    continuation bytes (so iterations are counted by their lead bytes), finitely."""
    found = _single.get(char.uid)
    if found is not None:
        return found
    found = char.plain and not char.nullable
    if found:
        level, seen = [char], {char.uid}
        for depth in range(5):
            nxt = []
            for n in level:
                for lo, hi in rx.class_runs(rx.class_starts(n)):
                    d = rx.derive(n, lo)
                    if d is rx.EMPTY:
                        continue
                    run = ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
                    cont = run & CONTINUATION
                    if (cont != 0) if depth == 0 else (cont != run):
                        found = False
                    if depth > 0 and n.nullable:
                        found = False  # a sequence could end here and another begin
                    if d.uid not in seen:
                        seen.add(d.uid)
                        nxt.append(d)
            level = nxt
        found = found and not level  # no sequence longer than four bytes
    _single[char.uid] = found
    return found


def _spelling_starts(code: rx.Code) -> int:
    return sum(1 << b for b in code.children[0])


def _counts_by_first_byte(code: rx.Code) -> bool:
    """Whether a spelling's first byte says if it begins a code point: spelled as
    itself, or (escapes) spelling only non-continuation bytes."""
    for b, n in code.children[0].items():
        if not (code.identity >> b) & 1 and any((CONTINUATION >> s) & 1 for s in code.below[n]):
            return False
    return True


def body_counts(root: RootTokens, code: rx.Code) -> tuple[np.ndarray, np.ndarray]:
    """Per root row: the code points begun in its body (the bytes up to the first one
    that cannot start a spelling), and whether the body ends inside the row.

    NumPy for the rows spelled as themselves, Python for the few with escapes.
    """
    flat, offsets, lengths = root.flat, root.offsets, root.lengths
    data = flat[:-1]
    identity = byte_lut(code.identity)
    starts = np.array([b in code.children[0] for b in range(256)], dtype=bool)
    lead = ((data & 0xC0) != 0x80).astype(np.int32)
    before = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum(lead, out=before[1:])
    position = np.arange(len(data), dtype=np.int64)
    stop = np.where(identity[data], len(data), position)
    first_other = np.minimum.reduceat(stop, offsets)
    ends = (offsets + lengths).astype(np.int64)
    first_other = np.minimum(first_other, ends)
    ended = first_other < ends
    counts = before[first_other] - before[offsets]
    escaped = np.flatnonzero(ended & starts[data[np.minimum(first_other, len(data) - 1)]])
    for r in escaped.tolist():
        counts[r], ended[r] = _count_in_python(root.row_bytes(r), code)
    return counts.astype(np.int32), ended


def _count_in_python(data: bytes, code: rx.Code) -> tuple[int, bool]:
    count, node = 0, 0
    for b in data:
        kids = code.children[node]
        nxt = kids.get(b)
        if nxt is None:
            return count, node == 0  # the body ended (or the row is dead: never used)
        if node == 0:
            count += 1 if not (code.identity >> b) & 1 else int((CONTINUATION >> b) & 1 == 0)
        node = nxt if code.children[nxt] else 0
    return count, False


def in_bounds(counts: np.ndarray, lo: int, hi: int | None) -> np.ndarray:
    ok = counts >= lo
    if hi is not None:
        ok &= counts <= hi
    return ok


def effective_bounds(counts: np.ndarray, lo: int, hi: int | None) -> tuple[int, int | None]:
    """Bounds that select the same rows of ``counts``, normalized (for cache keys)."""
    if not len(counts):
        return 0, None
    low, high = int(counts.min()), int(counts.max())
    lo = 0 if lo <= low else min(lo, high + 1)
    hi = None if hi is None or hi >= high else max(hi, low - 1)
    return lo, hi
