"""Token-scan shortcuts give exactly the general walk's answer.

* :func:`scan_string`: a lexeme state that must read one string first (a key's
  name, then its colon) is scanned along one path of the trie, and the few
  tokens going on past it stepped one by one; compared with the breadth-first
  walk of the whole vocabulary on real and trained tokenizers.
* :func:`prefix_rows` (the bisection under both, and under key scans of
  suffix sets) against a plain filter of the sorted strings.
* :func:`scan_finite`: a lexeme state matching a few strings (an enum value)
  is scanned over a canonical suffix set by bisection; compared with the
  general walk of the same set, with FOLLOW pruning.
* Child-set walks end a lexeme only where the next byte can start what may
  follow it; exact masks against the prefix oracle on every short token
  (a JSON object with flexible whitespace, where runs of spaces and newlines
  would otherwise cross once per byte) are in test_engine's oracle tests.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from automask import Vocabulary
from automask.engine.compiled import compiler_for
from automask.engine.lexer import LexerDFA
from automask.engine.tokens import (
    SMALL_SET,
    canonical_set,
    prefix_rows,
    scan,
    scan_finite,
    scan_prefixed,
    scan_string,
)
from automask.regex import nodes as rx
from automask.schema.json_text import Layout, literal_string_node

COLON = Layout.make().key_sep  # flexible whitespace, then a colon
DIGITS = rx.repeat(rx.byte_set(sum(1 << b for b in b"0123456789")), 1, None)

TEXTS = [b"name", b"the", b" the", b"a", b"zzzzqq", b"\xc3\xa9t\xc3\xa9", b"ab" * 40]


def _groups(crossing) -> set[tuple[int, int, int, int]]:
    """Crossing groups as (state, root row, suffix offset, suffix length)."""
    out = set()
    for state, child in crossing:
        for row, offset, length in zip(child.root_rows.tolist(), child.offsets.tolist(),
                                       child.lengths.tolist(), strict=True):
            out.add((state, row, offset, length))
    return out


def _same_as_walk(found, tokens, lexer: LexerDFA, state: int, label) -> int:
    """Assert a shortcut's scan equals the general walk's; the crossing rows' count."""
    inside_a, crossing_a = found
    inside_b, crossing_b = scan(tokens, lexer, state)
    assert np.array_equal(inside_a, inside_b), label
    assert _groups(crossing_a) == _groups(crossing_b), label
    return sum(c.n for _, c in crossing_a)


def _every_token(vocab: Vocabulary):
    """Every distinct token as one sorted (canonical) set."""
    return canonical_set(tuple(sorted({vocab.token_bytes(i) for i in range(vocab.size)}
                                      - {b""})))


def _compare(vocab: Vocabulary, node: rx.Node) -> tuple[int, int] | None:
    """Both scans of ``node``'s start; None where the shortcut declines (too many
    tokens go on past the forced text), which must be for that reason only."""
    root = compiler_for(vocab).tokens
    lexer = LexerDFA((node,))
    state = lexer.single(0, node)
    text = rx.forced_prefix(node)  # longer than any token, too
    whole = rx.finite_strings(node, 1)
    assert not whole or text == whole[0]  # a node matching one string: all of it
    found = scan_string(root, lexer, state, text)
    if found is None:
        going_on = sum(t.startswith(text) and t != text for t in root.texts())
        assert going_on > SMALL_SET
        return None
    rows, crossing = found  # the inside part as rows: few, and no array as long as the vocabulary
    assert rows.dtype == np.int32 and np.all(np.diff(rows) > 0)
    inside = np.zeros(root.n, dtype=bool)
    inside[rows] = True
    return len(rows), _same_as_walk((inside, crossing), root, lexer, state, text)


@pytest.mark.parametrize("text", TEXTS)
def test_forced_text_scan_matches_the_walk(text, tiny_bpe_vocab):
    key = literal_string_node(text.decode("utf-8"))
    for node in (rx.literal(text), key, rx.concat(key, rx.literal(b":")), rx.concat(key, COLON),
                 rx.concat(rx.literal(text), DIGITS)):
        _compare(tiny_bpe_vocab, node)


@pytest.mark.data
def test_forced_text_scan_matches_the_walk_on_llama(shared_data):
    vocab = Vocabulary.from_file(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json")
    inside = crossing = 0
    nodes = [rx.literal(t) for t in TEXTS + [b"\"", b"\":", b"description"]]
    keys = [literal_string_node(t) for t in ("description", "properties", "émoji", "a b", "id")]
    nodes += keys + [rx.concat(k, COLON) for k in keys]
    nodes += [rx.concat(rx.literal(t), DIGITS) for t in (b"id", b" the", b"x")]
    declined = 0
    for node in nodes:
        found = _compare(vocab, node)
        if found is None:
            declined += 1
            continue
        inside, crossing = inside + found[0], crossing + found[1]
    assert inside > 20 and crossing > 20  # prefixes and longer tokens both occur
    assert declined < len(nodes) // 4


KEYED_SCHEMA = {"type": "object", "properties": {
    "description": {"type": "string"}, "count": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}}, "nested": {
        "type": "object", "properties": {"deep_key": {"type": "boolean"}}}},
    "required": ["description"]}
KEYED_INSTANCES = [{"description": "x y", "count": 12, "tags": ["a"],
                    "nested": {"deep_key": True}}, {"description": "", "nested": {}}]


@pytest.mark.data
def test_literal_answers_pruned_root_scans_with_the_walks_masks(llama, monkeypatch):
    """A key's root scan under its own FOLLOW set is found by bisection and pruned as
    ``unpruned`` prunes a walk's groups (the literal shortcut is asked first): the
    masks along instances are those of a compiler without the shortcut."""
    from support.walks import assert_same_masks, masks_along

    from automask.engine.shortcuts import literal

    pruned = []
    real = literal.Literal.scan

    def spy(self, computer, request):
        found = real(self, computer, request)
        pruned.append(found is not None and request.follow != rx.FULL_BITS)
        return found

    monkeypatch.setattr(literal.Literal, "scan", spy)
    with_literal = masks_along(llama, KEYED_SCHEMA, KEYED_INSTANCES)
    assert sum(pruned) >= 4  # the keys' rests after their opening quote
    assert_same_masks(with_literal, masks_along(llama, KEYED_SCHEMA, KEYED_INSTANCES,
                                                off={"literal"}))


@pytest.mark.data
def test_finite_scan_matches_the_walk_on_llama(llama):
    suffixes = _every_token(llama)  # values followed by ',' or '}' occur in it
    comma, brace = rx.literal(b","), rx.literal(b"}")
    enums = [
        rx.alt(*(literal_string_node(v) for v in ("red", "green", "re", "blue"))),
        rx.alt(literal_string_node("a"), rx.literal(b"true"), rx.literal(b"null")),
        literal_string_node("description"),
        rx.concat(literal_string_node("id"), rx.literal(b":")),
        rx.alt(rx.literal(b"1"), rx.literal(b"12"), rx.literal(b"123")),  # prefixes of each other
        rx.alt(rx.literal(b'"'), rx.literal(b'"]')),  # '",' '"},' '"],' are tokens
    ]
    crossing = 0
    for node in enums:
        strings = rx.finite_strings(node)
        assert strings is not None
        for follow in ([{1}, None, None], [{1, 2}, None, None]):  # what may follow: "," or ",}"
            lexer = LexerDFA((node, comma, brace), follow=follow)
            state = lexer.single(0, node)
            crossing += _same_as_walk(scan_finite(suffixes, lexer, state, strings),
                                      suffixes, lexer, state, strings)
    assert crossing > 20  # suffixes going on past a value occur


def test_finite_strings():
    assert rx.finite_strings(rx.alt(rx.literal(b"ab"), rx.literal(b"a"))) == (b"a", b"ab")
    assert rx.finite_strings(rx.concat(rx.byte_range(97, 98), rx.literal(b"!"))) == (b"a!", b"b!")
    assert rx.finite_strings(rx.star(rx.literal(b"a"))) is None
    assert rx.finite_strings(rx.byte_range(0, 255)) is None  # 256 strings: over the limit
    assert rx.finite_strings(rx.byte_range(0, 255), limit=256) is not None


@pytest.mark.data
def test_prefixed_scan_matches_the_walk_on_llama(llama):
    """A key-and-colon state over a canonical suffix set: the rows on the key's path,
    walked, against the general walk of the whole set, with FOLLOW pruning."""
    suffixes = _every_token(llama)
    value_start = rx.alt(rx.literal(b'"'), rx.literal(b"{"), rx.literal(b"1"))
    crossing = 0
    # whole keys, and what is left of any key once its name is typed (`":"`, `": {`...)
    nodes = [rx.concat(literal_string_node(k), COLON) for k in ("id", "description", "émoji")]
    for node in nodes + [rx.concat(rx.literal(b'"'), COLON)]:
        text = rx.forced_prefix(node)
        assert text.startswith(b'"') and text.endswith(b'"')
        lexer = LexerDFA((node, value_start), follow=[{1}, None])
        state = lexer.single(0, node)
        crossing += _same_as_walk(scan_prefixed(suffixes, lexer, state, text),
                                  suffixes, lexer, state, text)
    assert crossing > 5  # '":"', '": {' and the like go on into the value


def test_forced_prefix_is_what_every_match_starts_with():
    assert rx.forced_prefix(rx.literal(b"abc")) == b"abc"
    assert rx.forced_prefix(rx.concat(rx.literal(b"ab"), DIGITS, rx.literal(b"c"))) == b"ab"
    assert rx.forced_prefix(rx.concat(literal_string_node("name"), COLON)) == b'"name"'
    assert rx.forced_prefix(rx.alt(rx.literal(b"ab"), rx.literal(b"ac"))) == b""  # not read
    assert rx.forced_prefix(rx.star(rx.literal(b"a"))) == b""
    assert rx.forced_prefix(rx.optional(rx.literal(b"a"))) == b""
    assert rx.forced_prefix(rx.EPS) == b""
    # a quote inside a JSON string has two spellings (\" and \u0022)
    assert rx.forced_prefix(literal_string_node('say "hi"')) == b'"'
    # a chain of 3,000 concatenations (a long literal pattern): walked, not recursed
    assert rx.forced_prefix(rx.literal(b"x" * 3000)) == b"x" * 3000
    # a chain's suffixes (its derivatives) are answered from the walk of the whole
    node = rx.concat(rx.literal(b"qwerty"), DIGITS, rx.literal(b"z"))
    assert rx.forced_prefix(node) == b"qwerty"
    for k in range(1, 7):
        node = rx.derive(node, node.a.bits.bit_length() - 1)
        assert rx.forced_prefix(node) == b"qwerty"[k:]


# ------------------------------------------------- whole-level stepping of the prefix trie

def _text_nodes() -> list[rx.Node]:
    """Lexemes whose walks stay mostly live (stepped a whole level at a time), and some
    that die at once (stepped through live-node lists only)."""
    from automask.regex.parser import parse_regex, parse_regex_search
    from automask.schema.json_text import string_node

    any_char = rx.any_char

    return [
        rx.concat(string_node(rx.star(any_char())), rx.literal(b'"')),  # a string body
        string_node(rx.star(any_char())),
        rx.concat(string_node(parse_regex_search("ab")), rx.literal(b'"')),  # unanchored
        parse_regex("[a-z ]*"),
        parse_regex("[0-9]+(\\.[0-9]+)?"),
        literal_string_node("description"),
    ]


def _both_walks(vocab: Vocabulary, node: rx.Node) -> None:
    root = compiler_for(vocab).tokens
    lexer = LexerDFA((node,))
    state = lexer.single(0, node)
    inside_a, crossing_a = scan(root, lexer, state)
    inside_b, crossing_b = scan(root, lexer, state, whole_levels=False)
    assert np.array_equal(inside_a, inside_b), rx.to_pattern(node)[:60]
    assert _groups(crossing_a) == _groups(crossing_b), rx.to_pattern(node)[:60]


def test_whole_level_walk_matches_the_live_node_walk(tiny_bpe_vocab):
    for node in _text_nodes():
        _both_walks(tiny_bpe_vocab, node)


@pytest.mark.data
def test_whole_level_walk_matches_the_live_node_walk_on_llama(shared_data):
    vocab = Vocabulary.from_file(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json")
    for node in _text_nodes():
        _both_walks(vocab, node)


@pytest.mark.parametrize("text", [b"", b"a", b"ab", b"abc", b"b", b"\xff", b"a\xff", b"\xff\xff",
                                  b"zz", b"\x00"])
def test_prefix_rows_matches_a_filter(text):
    texts = tuple(sorted({b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"a\xff", b"a\xff\xff",
                          b"\xff", b"\xff\xff", b"\xff\xff\x01", b"\x00", b"zzz"}))
    prefixes, longer = prefix_rows(texts, text)
    assert prefixes == [i for i, t in enumerate(texts) if t and text.startswith(t)]
    assert list(longer) == [i for i, t in enumerate(texts) if t.startswith(text)]


@pytest.mark.parametrize("value", ["name", "émoji", "", "a b", "a/b", 'say "hi"', "tab\there",
                                   "back\\slash"])
def test_literal_string_node_matches_the_json_spellings(value):
    """Names JSON spells only as themselves are one chain of bytes (its derivatives are
    its own suffixes); the others are encoded with their escapes. Both match exactly
    the spellings the JSON string code gives, with what follows them built in."""
    node = literal_string_node(value, COLON)
    written = json.dumps(value, ensure_ascii=False).encode()
    assert rx.matches(node, written + b" :")
    assert not rx.matches(node, written + b": ")  # whitespace after it leads the value
    assert not rx.matches(node, written)  # the colon is part of it
    assert not rx.matches(node, written[:-1] + b'x":')
    if "/" in value:  # a slash is written as itself or escaped
        assert rx.matches(node, written.replace(b"/", b"\\/") + b":")
    plain = not any(c in value for c in '"\\/\t')
    if plain:
        assert rx.derive(node, ord('"')) is node.b  # no new node per byte
        assert rx.forced_prefix(node) == written
