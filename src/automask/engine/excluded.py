"""Token scans of "any text but these words" string bodies, read off the plain body's.

An object that admits undeclared keys has a key lexeme ``enc(X) tail`` with X
any text except the declared names (:func:`automask.regex.utf8.text_except`).
X leaves out finitely many texts, and a prefix of any text can be extended
past all of them, so a token goes the same way under ``X`` as under any text
unless the text it closes (before the tail) is one of the names: then it is
dead. So the scan is the plain body's, shared by every schema, with those
few rows taken out, instead of a walk of the vocabulary for every object.
The rows that could close a name are picked by their first byte and stepped
through the real lexer state, so what is taken out is exact. A literal
before the text (the key's opening quote, when the key starts an object or
follows a comma) changes nothing but where that first byte is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from automask.engine.lexer import LexerDFA, byte_lut
from automask.engine.tokens import RootTokens, TokenSet, prefix_rows
from automask.regex import nodes as rx
from automask.regex import utf8

MAX_PREFIX = 8  # a longer literal before the text is not read as an except-body (a plain scan)


class ExceptBody(NamedTuple):
    """``prefix enc(text except words) tail``: the plain body it differs from, and where."""

    plain: rx.Node  # prefix enc(any text) tail
    first: int      # bytes that can begin the text of a row closing a left-out word (bitmask)
    tail: int       # bytes that can begin the tail (bitmask)
    prefix: bytes   # the literal before the text


def except_body(node: rx.Node) -> ExceptBody | None:
    """``node`` as an except-body whose scan can be read off the plain one, or None."""
    prefix = bytearray()
    while node.kind == rx.K_CONCAT and node.a.kind == rx.K_BYTES and not node.a.bits & (
            node.a.bits - 1):  # one byte
        if len(prefix) == MAX_PREFIX:
            return None  # a long literal first (a key's name): scanned as such
        prefix.append(node.a.bits.bit_length() - 1)
        node = node.b
    if node.kind != rx.K_CONCAT or node.a.kind != rx.K_ENC or node.a.hi != 0:
        return None
    enc, tail = node.a, node.b
    words = utf8.excluded_words(enc.a)
    if not words:
        return None
    code = rx._codes[enc.lo]
    starts = sum(1 << b for b in code.children[0])
    tail_first = rx.first_bytes(tail)
    if tail_first & starts or tail.nullable or not code.identity:
        return None  # the text must end at the tail's first byte, and be extendable
    first = 0
    for word in words:
        if word:
            first |= sum(1 << spelling[0] for spelling in code.words[word.encode()[0]])
        else:
            first |= tail_first  # the empty text: the row closes it at once
    plain = rx.concat(rx.literal(bytes(prefix)), rx.encoded(rx.any_text(), code),
                      tail)
    return ExceptBody(plain, first, tail_first, bytes(prefix))


def dying_rows(root: RootTokens, lexer: LexerDFA, state: int, body: ExceptBody,
               holding_tail: np.ndarray | None) -> list[int]:
    """Rows that may be inside the plain body but die in ``state``: those closing a
    left-out word within the tail (a key's ``name"``). ``holding_tail``: per row,
    whether it holds a byte that can begin the tail (see :func:`rows_holding`); not
    used under a prefix, where the few rows starting with it are looked at one by one."""
    trie, texts = root.trie, root.texts()
    dead = []
    if body.prefix:
        k = len(body.prefix)
        for r in prefix_rows(texts, body.prefix)[1]:
            text = texts[r]
            if (len(text) > k and body.first >> text[k] & 1
                    and any(body.tail >> b & 1 for b in text[k:])
                    and not lexer.walk(state, text)):
                dead.append(r)
        return dead
    for node in np.flatnonzero(byte_lut(body.first)[trie.byte[1]]).tolist():
        lo, hi = int(trie.start[1][node]), int(trie.end[1][node])
        # holding_tail is given where there is no prefix (see rows_holding's caller)
        for r in (lo + np.flatnonzero(holding_tail[lo:hi])).tolist():  # type: ignore[index]
            if not lexer.walk(state, texts[r]):
                dead.append(r)
    return dead


def drop_closed_words(root: RootTokens, lexer: LexerDFA, state: int, body: ExceptBody,
                      crossing: Sequence[tuple[int, TokenSet]]) -> list[tuple[int, TokenSet]]:
    """The plain body's crossing groups without the rows that close a left-out word
    (they die in ``state``). A group that loses no row is the same object, so its
    decisions stay shared with the plain body's."""
    first_ok = byte_lut(body.first)
    texts = root.texts()
    out = []
    for after, child in crossing:  # (a row crossing after the tail holds the whole prefix)
        # a crossing group is a child set: its parent_rows are set
        rows: np.ndarray = child.parent_rows  # type: ignore[assignment]
        picked = np.flatnonzero(first_ok[root.flat[root.offsets[rows] + len(body.prefix)]])
        skips = (child.offsets[picked] - root.offsets[rows[picked]]).tolist()
        gone = [i for i, r, k in zip(picked.tolist(), rows[picked].tolist(), skips, strict=True)
                if not lexer.walk(state, texts[r][:k])]
        if not gone:
            out.append((after, child))
            continue
        keep = np.ones(child.n, dtype=bool)
        keep[gone] = False
        if keep.any():
            out.append((after, child.subset(keep)))
    return out


def rows_holding(root: RootTokens, bits: int) -> np.ndarray:
    """Per root row: whether it holds one of the bytes in ``bits``."""
    hit = byte_lut(bits)[root.flat[:-1]].astype(np.int8)
    return np.maximum.reduceat(hit, root.offsets).astype(bool)
