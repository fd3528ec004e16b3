"""Scans of "any key but the declared ones" read off the plain key body's scan.

``engine/shortcuts/excluded_keys.py`` takes the plain body's scan and drops the rows
that close a declared name; every mask must be exactly the one a walk of the
except-lexeme itself gives. Checked on a tokenizer trained at test time and
on the real Llama-3.1 one, with names that are prefixes of each other, the
empty name, escapes and multi-byte characters.
"""

import numpy as np
import pytest
from support.shortcuts import watch_shortcut
from support.walks import assert_same_masks, masks_along

from automask.engine import excluded
from automask.engine.tokens import scan
from automask.regex import nodes as rx
from automask.regex import utf8
from automask.schema.json_text import JSON_STRING_CODE, QUOTE

NAMES = ["name", "na", "names", "", "id", "qu\"ote", "back\\slash", "日本", "n\u00e9"]
SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "integer"} for name in NAMES},
    "additionalProperties": {"type": "string"},
}
INSTANCES = [  # declared names come first, in schema order
    {"name": 1, "": 2, "nam": "x", "namesake": "y", "nb": "z", "i": "w"},
    {"na": 3, "n": "", "qu\"ot": "a", "qu\"ote!": "b", "日": "c", "日本語": "d", "ne": "e"},
    {"id": 5, "back\\slash": 4, "back\\": "f", "idx": "g", "n\u00e9e": "h", "\n": "i"},
]


def _body(words):
    return rx.concat(rx.encoded(utf8.text_except(words), JSON_STRING_CODE), QUOTE)


def test_except_bodies_are_recognized():
    found = excluded.except_body(_body(["ab", "x"]))
    assert found is not None
    assert found.plain is rx.concat(rx.encoded(rx.star(rx.any_char()), JSON_STRING_CODE), QUOTE)
    assert found.first & (1 << ord("a")) and found.first & (1 << ord("x"))
    assert not found.first & (1 << ord("b"))
    # a derivative along a name is the except-body of the rest of the names
    after_a = rx.derive(_body(["ab", "x"]), ord("a"))
    assert excluded.except_body(after_a) is not None
    assert utf8.excluded_words(after_a.a.a) == ("b",)
    assert excluded.except_body(found.plain) is None  # nothing left out
    # the empty name: a row closing the text at once is a candidate
    assert excluded.except_body(_body([""])).first & (1 << ord('"'))
    # a key before its opening quote: the same body behind a literal
    quoted = excluded.except_body(rx.concat(QUOTE, _body(["ab", "x"])))
    assert quoted.prefix == b'"' and found.prefix == b""
    assert quoted.plain is rx.concat(QUOTE, found.plain)
    assert (quoted.first, quoted.tail) == (found.first, found.tail)


def _same_masks_both_ways(vocab, monkeypatch):
    used = []

    def checked(real, self, lex, state, body, finish):
        """The derived scan, compared with a walk of the except-state itself."""
        part, crossing, own = real(self, lex, state, body, finish)
        inside, walked = scan(self.root, self.states.lexer, state)
        assert np.array_equal(self.inside_rows(part), inside)
        assert _groups(self.root, crossing) == _groups(self.root, walked)
        used.append(body.prefix)
        return part, crossing, own

    watch_shortcut(monkeypatch, "excluded", checked)
    # (literal off: where few tokens start with a key's quote, as in a tiny vocabulary,
    # that shortcut answers for the quoted form first, and this test is about the other)
    derived = masks_along(vocab, SCHEMA, INSTANCES, off={"literal"})
    assert len(used) >= 5 and b'"' in used and b"" in used  # keys' starts and their rests
    assert_same_masks(derived, masks_along(vocab, SCHEMA, INSTANCES, off={"excluded", "literal"}))


def _groups(root, crossing) -> dict[int, set[tuple[int, int]]]:
    out: dict[int, set[tuple[int, int]]] = {}
    for state, child in crossing:
        skips = child.offsets - root.offsets[child.parent_rows]
        out.setdefault(state, set()).update(
            zip(child.parent_rows.tolist(), skips.tolist(), strict=True))
    return out


def test_except_scans_give_the_same_masks_tiny(tiny_bpe_vocab, monkeypatch):
    _same_masks_both_ways(tiny_bpe_vocab, monkeypatch)


@pytest.mark.data
def test_except_scans_give_the_same_masks_llama(llama, monkeypatch):
    _same_masks_both_ways(llama, monkeypatch)
