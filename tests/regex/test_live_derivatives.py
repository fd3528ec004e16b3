"""``live_derivatives``: a union's members derived at once, as ``derive`` one by one.

The members mix the shapes a lexer state holds: key literals (a byte set then a
plain rest, read off without a call), gap-prefixed keys, patterns, and members
whose rest is not plain (an intersection or a complement, which ``derive``
checks for liveness). Every byte, derived both ways, gives the same nodes
(interned: the same objects) with the same tags, in order.
"""

from __future__ import annotations

import pytest

from automask.regex import nodes as rx
from automask.regex.parser import parse_regex

WS = rx.repeat(rx.byte_set(sum(1 << b for b in b" \t\n\r")), 0, 24)

MEMBERS = [
    rx.literal(b'"name":'),
    rx.literal(b'"nam":'),
    rx.literal(b'"type":'),
    rx.concat(WS, rx.literal(b'"id":')),
    parse_regex("[a-z]+[0-9]{0,3}"),
    rx.concat(rx.byte_set(1 << ord("a")),
              rx.intersect(parse_regex("[a-z]{2,}"), parse_regex(".*z"))),  # rest not plain
    rx.concat(rx.byte_set(1 << ord("n")), rx.intersect(parse_regex("[a-z]*"), parse_regex("a.*"))),
    rx.concat(rx.byte_set(1 << ord("q")), rx.complement(parse_regex("x*"))),
]


def _one_by_one(tags, nodes, byte):
    pairs = [(t, rx.derive(n, byte)) for t, n in zip(tags, nodes, strict=True)]
    return [t for t, d in pairs if d is not rx.EMPTY], [d for _, d in pairs if d is not rx.EMPTY]


@pytest.mark.parametrize("depth", range(3))
def test_members_derive_as_one_by_one(depth: int) -> None:
    tags, nodes = list(range(len(MEMBERS))), list(MEMBERS)
    for text in (b'"na', b"az", b"nq", b"q", b' "i'):  # down a few paths, then every byte
        for byte in text[:depth]:
            tags, nodes = rx.live_derivatives(tags, nodes, byte)
        for byte in range(256):
            got = rx.live_derivatives(tags, nodes, byte)
            want = _one_by_one(tags, nodes, byte)
            assert got[0] == want[0] and all(a is b for a, b in zip(got[1], want[1], strict=True))
        tags, nodes = list(range(len(MEMBERS))), list(MEMBERS)


def test_a_key_literal_is_read_off_its_next_byte() -> None:
    key = rx.literal(b'"name":')
    tags, nodes = rx.live_derivatives([7], [key], ord('"'))
    assert tags == [7] and nodes == [key.b]
    assert rx.live_derivatives([7], [key], ord("x")) == ([], [])
