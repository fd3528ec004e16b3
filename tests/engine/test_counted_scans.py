"""Scans of length-bounded string bodies read off the unbounded body's scan.

``engine/shortcuts/bounded.py`` filters the scan of ``enc(C*)"`` by the code
points each token begins; the masks must be exactly those of walking the
bounded lexeme itself. Checked on a tokenizer trained at test time and on the
real Llama-3.1 one, with escapes, multi-byte characters and both bounds.
"""

import pytest
from support.shortcuts import shortcuts_forced, watch_shortcut
from support.walks import assert_same_masks, masks_along

from automask.engine import counted
from automask.engine.compiled import compiler_for
from automask.regex import nodes as rx
from automask.schema.json_text import JSON_STRING_CODE, QUOTE

SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "maxLength": 44},
        "b": {"type": "string", "minLength": 5, "maxLength": 12},
        "c": {"type": "array", "items": {"type": "string", "minLength": 3}},
        "d": {"type": "string", "maxLength": 3},
        "e": {"type": "string", "minLength": 2, "maxLength": 2},
        # a pattern and a length: the pattern's scan, filtered by code points
        "f": {"type": "string", "pattern": "\\S", "maxLength": 30},
        "g": {"type": "string", "pattern": "^[a-z ]*[a-z]$", "minLength": 2, "maxLength": 9},
        "h": {"type": "string", "pattern": "^[^x]*x", "maxLength": 4},
    },
}

INSTANCES = [
    {"a": "Hello there, this is a string of many words", "b": "héllo wörld",
     "c": ["abc", "a\"b\\c\n", "日本語テキスト"], "d": "✨✨", "e": "ab",
     "f": "  a wide string near its bound", "g": "abc defgh", "h": "abx"},
    {"a": "x\u00e9\"\\\n\t\u0001yz é ✨ 日本", "b": "12345", "c": [], "d": "", "e": "\n\""},
    {"a": "the quick brown fox jumps over the lazy", "b": "abcdefghijkl", "c": ["???"],
     "f": "\u00e9", "g": "ab", "h": "\n\"\\x"},
]


def _body(lo, hi, char=None, tail=QUOTE):
    char = char or rx.any_char()
    return rx.concat(rx.encoded(rx.repeat(char, lo, hi), JSON_STRING_CODE), tail)


def test_bounded_bodies_are_recognized():
    found = counted.bounded_body(_body(2, 9))
    assert found is not None and (found.lo, found.hi) == (2, 9)
    assert found.unbounded is _body(0, None)
    assert counted.bounded_body(_body(0, None)) is None  # nothing to filter
    # one iteration must be one code point: "ab" is two
    assert counted.bounded_body(_body(0, 4, char=rx.literal(b"ab"))) is None
    # a tail that could continue the body (a backslash starts an escape)
    assert counted.bounded_body(_body(0, 4, tail=rx.literal(b"\\"))) is None
    # a length met with a pattern: the pattern's body, and how near the bound it may come
    a_star = rx.star(rx.literal(b"a"))
    both = counted.bounded_body(rx.concat(rx.encoded(
        rx.intersect(rx.repeat(rx.any_char(), 0, 4), a_star), JSON_STRING_CODE), QUOTE))
    assert both is not None and (both.lo, both.hi, both.slack) == (0, 4, 0)
    assert both.unbounded is rx.concat(rx.encoded(a_star, JSON_STRING_CODE), QUOTE)
    ends_in_b = rx.concat(rx.star(rx.any_char()), rx.literal(b"bb"))  # two more to close
    found = counted.bounded_body(rx.concat(rx.encoded(
        rx.intersect(rx.repeat(rx.any_char(), 0, 9), ends_in_b), JSON_STRING_CODE), QUOTE))
    assert found is not None and found.slack == 2
    # a pattern with no loop to finish in (a fixed length): read nothing off it
    fixed = rx.concat(rx.literal(b"a"), rx.literal(b"b"))
    assert counted.bounded_body(rx.concat(rx.encoded(
        rx.intersect(rx.repeat(rx.any_char(), 0, 9), fixed), JSON_STRING_CODE), QUOTE)) is None


def _check_counts(vocab, step):
    root = compiler_for(vocab).tokens
    counts, ended = counted.body_counts(root, JSON_STRING_CODE)
    for row in range(0, root.n, step):
        data = root.row_bytes(row)
        if any(data[i + 1: i + 2] not in (b"", *(bytes([c]) for c in b'"\\/bfnrtu'))
               for i in range(len(data)) if data[i] == 0x5C and (i == 0 or data[i - 1] != 0x5C)):
            continue  # an invalid escape: the row dies in every string body, uncounted
        # code points begun before the first byte that cannot start a spelling
        text, escape, n, stop = 0, 0, 0, len(data)
        for i, b in enumerate(data):
            if escape:
                escape -= 1
                continue
            if b == 0x5C:
                n += 1
                escape = 5 if data[i + 1: i + 2] == b"u" else 1
            elif b < 0x20 or b == 0x22:
                stop = i
                break
            elif b & 0xC0 != 0x80:
                n += 1
            text += 1
        assert (int(counts[row]), bool(ended[row])) == (n, stop < len(data)), data


def test_body_counts_tiny(tiny_bpe_vocab):
    _check_counts(tiny_bpe_vocab, 1)


@pytest.mark.data
def test_body_counts_llama(llama):
    _check_counts(llama, 5)


def _same_masks_both_ways(vocab, monkeypatch):
    used = []

    def spy(real, self, *args):
        used.append(1)
        return real(self, *args)

    watch_shortcut(monkeypatch, "bounded", spy)
    shortcuts_forced(monkeypatch, "bounded")  # check every row near a bound
    derived = masks_along(vocab, SCHEMA, INSTANCES)
    assert len(used) >= 10
    assert_same_masks(derived, masks_along(vocab, SCHEMA, INSTANCES, off={"bounded"}))


def test_bounded_scans_give_the_same_masks_tiny(tiny_bpe_vocab, monkeypatch):
    _same_masks_both_ways(tiny_bpe_vocab, monkeypatch)


@pytest.mark.data
def test_bounded_scans_give_the_same_masks_llama(llama, monkeypatch):
    _same_masks_both_ways(llama, monkeypatch)
