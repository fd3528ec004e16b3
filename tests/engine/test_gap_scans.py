"""Scans of lexemes that open with a whitespace gap, read off the rest's scan.

JSON text puts each whitespace gap at the front of the lexeme after it
(``ws "key" ws :``, ``ws 12``, ``ws }``). ``engine/shortcuts/gap.py`` takes
the scan of what follows the gap and the scan of the vocabulary's
whitespace-led tokens with their whitespace cut off, and maps that back;
every mask must be exactly the one plain walks give. Checked on a tokenizer
trained at test time and on the real Llama-3.1 one, on compact and indented
instances (whitespace-only tokens, runs past the bound).
"""

import json

import numpy as np
import pytest
from support.shortcuts import watch_shortcut
from support.walks import assert_same_masks, masks_along

from automask import Grammar, Matcher, compile
from automask.engine import gaps
from automask.engine.compiled import compiler_for
from automask.engine.matcher import parse_state
from automask.engine.tokens import prune_crossing, scan
from automask.regex import nodes as rx
from automask.schema.json_text import Layout, literal_string_node

WS_BITS = sum(1 << b for b in b" \t\n\r")
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "kind": {"enum": ["a", "b", "long value"]},
        "count": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        "nothing": {"type": "null"},
    },
    "additionalProperties": {"type": "integer"},
}
INSTANCES = [
    {"name": "x", "kind": "long value", "count": 3, "ratio": -1.5e3, "tags": ["a", "", "b c"],
     "nested": {"ok": True}, "nothing": None, "extra": 7},
    {"kind": "a", "tags": [], "nested": {}},
    {},
]


def test_leading_gaps_are_recognized():
    layout = Layout.make()
    key = rx.concat(layout.ws, literal_string_node("id", layout.key_sep))
    gap = gaps.leading_gap(key)
    assert gap == (WS_BITS, 24, literal_string_node("id", layout.key_sep))
    assert gaps.leading_gap(gap.rest) is None  # no gap in front
    spaced = rx.concat(layout.ws, rx.literal(b" x"))
    assert gaps.leading_gap(spaced) is None  # the rest could start with a gap byte
    assert gaps.leading_gap(rx.concat(layout.ws, rx.repeat(rx.literal(b"x"), 0, 3))) is None
    unbounded = rx.concat(rx.star(rx.byte_set(WS_BITS)), rx.literal(b"}"))
    assert gaps.leading_gap(unbounded).most == gaps.UNBOUNDED


def test_spaced_tokens_split_each_token_at_its_leading_run(tiny_bpe_vocab):
    root = compiler_for(tiny_bpe_vocab).tokens
    spaced = gaps.SpacedTokens.of(root, WS_BITS)
    texts, rest = root.texts(), spaced.rest.texts()
    assert list(rest) == sorted(set(rest))
    seen = set()
    for i, remainder in enumerate(rest):
        for j in range(spaced.starts[i], spaced.starts[i + 1]):
            row, run = int(spaced.rows[j]), int(spaced.runs[j])
            assert texts[row] == texts[row][:run] + remainder
            assert texts[row][:run].strip(b" \t\n\r") == b"" and remainder[0] not in b" \t\n\r"
            seen.add(row)
    for row, length in zip(spaced.blank_rows.tolist(), spaced.blank_lengths.tolist(),
                           strict=True):
        assert texts[row].strip(b" \t\n\r") == b"" and len(texts[row]) == length
        seen.add(row)
    assert seen == {r for r, t in enumerate(texts) if t[0] in b" \t\n\r"}
    assert spaced.blank_rows.size and spaced.rows.size  # the tokenizer has both kinds


def _same_masks_both_ways(vocab, monkeypatch, indent):
    """Every gap scan against a walk of its own state, then every mask against the
    masks of plain walks."""
    used = []

    def checked(real, self, lex, gap, finish, follow):
        part, crossing = real(self, lex, gap, finish, follow)
        lexer = self.states.lexer
        state = lexer.single(lex, rx.concat(rx.repeat(rx.byte_set(gap.bits), 0, gap.most
                                                      if gap.most < gaps.UNBOUNDED else None),
                                            gap.rest))
        inside, walked = scan(self.root, lexer, state)
        assert np.array_equal(self.inside_rows(part), inside)
        pruned = [prune_crossing(child, lexer.next_ok(after)) for after, child in walked]
        assert _rows(crossing) == _rows((None, c) for c in pruned if c is not None)
        used.append(rx.forced_prefix(gap.rest)[:1])
        return part, crossing

    watch_shortcut(monkeypatch, "gap", checked)
    derived = masks_along(vocab, SCHEMA, INSTANCES, indent)
    assert {b'"', b"{", b"["} <= set(used) and {b"}", b"]"} & set(used)  # keys, values, closers
    assert_same_masks(derived, masks_along(vocab, SCHEMA, INSTANCES, indent, off={"gap"}))


def _rows(crossing) -> set[int]:
    return {r for _, child in crossing for r in child.parent_rows.tolist()}


@pytest.mark.parametrize("indent", [None, 2])
def test_gap_scans_give_the_same_masks_tiny(tiny_bpe_vocab, monkeypatch, indent):
    _same_masks_both_ways(tiny_bpe_vocab, monkeypatch, indent)


@pytest.mark.data
@pytest.mark.parametrize("indent", [None, 2])
def test_gap_scans_give_the_same_masks_llama(llama, monkeypatch, indent):
    _same_masks_both_ways(llama, monkeypatch, indent)


@pytest.mark.data
def test_a_key_after_a_colon_is_one_thread(llama):
    """After ``"name":`` the parser holds one thread (the value's start), and `` "``
    lies inside the value's lexeme: whitespace leads a lexeme, never trails one."""
    matcher = Matcher(compile(Grammar.from_json_schema(SCHEMA), llama))
    assert matcher.accept_bytes(b'{"name":')
    assert len(parse_state(matcher).threads) == 2  # (origin, lexer state): one pair
    assert matcher.is_allowed(llama.encode(' "')[0])
    assert matcher.accept_bytes(b' "x",   "count"   :   ')
    assert len(parse_state(matcher).threads) == 2
    assert not matcher.accept_bytes(b" " * 30)  # a gap is bounded (24 bytes)


def test_whitespace_runs_stay_bounded(tiny_bpe_vocab):
    matcher = Matcher(compile(Grammar.from_json_schema(SCHEMA), tiny_bpe_vocab))
    text = json.dumps({"count": 1}, separators=(",", ":")).replace(":", ":" + " " * 24)
    assert matcher.accept_bytes(text.encode())
    matcher.reset()
    assert not matcher.accept_bytes(text.replace(":", ": ").encode())
