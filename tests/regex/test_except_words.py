"""``except_words``: a plain node's strings less finitely many words, derived lazily.

Checked against membership read off the definition (in the base, not a word) on
every short string over an alphabet that straddles the words, and against the
invariants every node keeps: not ``EMPTY`` means some string matches, and bytes
of one derivative class share one derivative.
"""

from __future__ import annotations

import itertools
import random

import pytest

from automask.regex import nodes as rx
from automask.regex import utf8
from automask.regex.parser import parse_regex


def _strings(alphabet: bytes, up_to: int):
    for n in range(up_to + 1):
        for t in itertools.product(alphabet, repeat=n):
            yield bytes(t)


@pytest.mark.parametrize("base_pattern", ["[ab]*", "a[ab]{0,3}", "(ab|b)+", "[ab]{2}"])
@pytest.mark.parametrize("seed", range(6))
def test_membership_is_the_base_less_the_words(base_pattern: str, seed: int) -> None:
    rng = random.Random(seed)
    words = {bytes(rng.choice(b"abc") for _ in range(rng.randrange(0, 4)))
             for _ in range(rng.randrange(1, 6))}
    base = parse_regex(base_pattern)
    node = rx.except_words(base, words)
    for s in _strings(b"abc", 5):
        assert rx.matches(node, s) == (rx.matches(base, s) and s not in words), s


def test_a_base_inside_the_words_is_empty() -> None:
    base = parse_regex("a|ab")
    assert rx.except_words(base, [b"a", b"ab", b"b"]) is rx.EMPTY
    assert rx.except_words(base, [b"a"]) is not rx.EMPTY
    # and along derivatives: after "a", only "b" was left, and it is a word
    node = rx.except_words(parse_regex("ab|ac"), [b"ab"])
    assert rx.derive(rx.derive(node, ord("a")), ord("b")) is rx.EMPTY
    assert rx.matches(node, b"ac")


def test_no_words_is_the_base_and_a_word_ends_where_the_base_goes_on() -> None:
    base = parse_regex("[a-z]*")
    assert rx.except_words(base, []) is base
    node = rx.except_words(base, [b"", b"ab"])
    assert not node.nullable  # the empty string is a word
    after = rx.derive(rx.derive(node, ord("a")), ord("b"))
    assert not after.nullable and rx.matches(after, b"c")


def test_classes_isolate_the_words_first_bytes() -> None:
    words = ["name", "naïve", "type", "ü"]
    node = utf8.text_except(words)
    for state in (node, rx.derive(node, ord("n")), rx.derive(rx.derive(node, ord("n")), ord("a"))):
        for lo, hi in rx.class_runs(rx.class_starts(state)):
            first = rx.derive(state, lo)
            assert all(rx.derive(state, b) is first for b in range(lo, hi + 1)), (lo, hi)


def test_text_except_matches_valid_text_only_and_keeps_its_words() -> None:
    words = ["naïve", "name", "é"]
    node = utf8.text_except(words)
    for text in ["", "n", "na", "nam", "namex", "naï", "naïv", "naïves", "é", "éa", "e", "x"]:
        assert rx.matches(node, text.encode()) == (text not in words), text
    assert not rx.matches(node, "é".encode()[:1])  # half a code point
    assert utf8.excluded_words(node) == tuple(sorted(words))
    # along whole code points the rest of the words; inside one, no answer
    assert utf8.excluded_words(rx.derive(node, ord("n"))) == ("ame", "a\u00efve")
    assert utf8.excluded_words(rx.derive(node, "é".encode()[0])) is None
    assert utf8.excluded_words(parse_regex("[a-z]*")) is None


def test_a_base_with_a_complement_is_refused() -> None:
    base = rx.complement(parse_regex("a"))
    assert not base.plain
    with pytest.raises(ValueError):
        rx.except_words(base, [b"b"])
