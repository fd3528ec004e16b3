"""Code points to UTF-8 byte automata.

Patterns speak of code points; tokens are bytes. A set of code-point ranges
becomes an alternation of byte-sequence ranges (at most a handful per UTF-8
length), so ``[^"\\\\]`` is a small byte automaton covering 1- to 4-byte
characters. Surrogates (U+D800..U+DFFF) have no UTF-8 form and are dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from automask.regex import nodes as rx

MAX_CODE_POINT = 0x10FFFF
_LENGTH_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged, inclusive code-point ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def negate_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The complement within 0..U+10FFFF."""
    out = []
    nxt = 0
    for lo, hi in normalize_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return out


def _encode(cp: int, length: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass") if length else b""


def _split_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    parts = []
    if lo < 0xD800:
        parts.append((lo, min(hi, 0xD7FF)))
    if hi > 0xDFFF:
        parts.append((max(lo, 0xE000), hi))
    return parts


def _seq_ranges(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences for code points lo..hi of one UTF-8 length."""
    a = chr(lo).encode("utf-8")
    b = chr(hi).encode("utf-8")
    n = len(a)
    if n == 1:
        return [[(a[0], b[0])]]
    # Find the first position where a and b differ; split so that each piece is
    # a product of byte ranges.
    for i in range(n):
        if a[i] != b[i]:
            break
    else:
        return [[(x, x) for x in a]]
    tail_min = [0x80] * (n - i - 1)
    tail_max = [0xBF] * (n - i - 1)
    if list(a[i + 1:]) == tail_min and list(b[i + 1:]) == tail_max:
        return [[(x, x) for x in a[:i]] + [(a[i], b[i])] + [(0x80, 0xBF)] * (n - i - 1)]
    # a..(end of a's block), middle blocks, (start of b's block)..b
    shift = 6 * (n - i - 1)
    block = 1 << shift
    a_block_end = (lo | (block - 1))
    b_block_start = hi & ~(block - 1)
    out = []
    if list(a[i + 1:]) != tail_min:
        out += _seq_ranges(lo, a_block_end)
        lo = a_block_end + 1
    if list(b[i + 1:]) != tail_max:
        mid_hi = b_block_start - 1
        if lo <= mid_hi:
            out += _seq_ranges(lo, mid_hi)
        out += _seq_ranges(b_block_start, hi)
    elif lo <= hi:
        out += _seq_ranges(lo, hi)
    return out


def ranges_to_node(ranges: Iterable[tuple[int, int]]) -> rx.Node:
    """A byte regex matching exactly the UTF-8 encodings of the code points in ``ranges``."""
    alternatives = []
    for lo, hi in normalize_ranges(ranges):
        for slo, shi in _split_surrogates(lo, min(hi, MAX_CODE_POINT)):
            for blo, bhi in _LENGTH_BOUNDS:
                clo, chi = max(slo, blo), min(shi, bhi)
                if clo <= chi:
                    for seq in _seq_ranges(clo, chi):
                        alternatives.append(rx.concat(*(rx.byte_range(x, y) for x, y in seq)))
    return rx.alt_of(alternatives)


def literal_text(s: str) -> rx.Node:
    """The UTF-8 encoding of ``s``."""
    return rx.literal(s.encode("utf-8"))


def text_except(words: Iterable[str]) -> rx.Node:
    """Any UTF-8 text except ``words``, as a plain node (no complement).

    Any text with the words left out (:func:`automask.regex.nodes.except_words`,
    derived lazily): once a text leaves every word it is exactly ``any_char()*``,
    the node every other string uses, so the token scans from there on are shared.
    """
    return _text_except(tuple(sorted(set(words))))


@functools.lru_cache(maxsize=1024)
def _text_except(words: tuple[str, ...]) -> rx.Node:
    return rx.except_words(rx.any_text(), (w.encode("utf-8") for w in words))


def excluded_words(node: rx.Node) -> tuple[str, ...] | None:
    """The words ``node`` leaves out, if it is :func:`text_except` of them.

    Its derivatives along whole code points of a word are such nodes too
    (the rest of the words), so a key being typed keeps the answer; inside a
    code point (where the base is not any text) there is none.
    """
    if node.kind != rx.K_EXCEPT or node.a is not rx.any_text():
        return None
    return tuple(w.decode("utf-8") for w in node.words)
