"""A cached mask's sparse part is packed three ways (plain Python for a few ids, a sort
for more, a bool per id for many); each must write exactly the bits of its ids, over a
dense part or not."""

from __future__ import annotations

import numpy as np
import pytest

from automask.engine.masks import PACKED_MASK_IDS, SMALL_MASK_IDS, Mask
from automask.engine.matcher import parse_state
from automask.engine.tokens import pack_bool

VOCAB = 4_000


def _reference(ids: np.ndarray, dense: tuple[np.ndarray, ...]) -> np.ndarray:
    allowed = np.zeros(VOCAB, dtype=bool)
    allowed[ids] = True
    out = pack_bool(allowed)
    for part in dense:
        out |= part
    return out


@pytest.mark.parametrize("count", [0, 1, 2, SMALL_MASK_IDS - 1, SMALL_MASK_IDS,
                                   SMALL_MASK_IDS + 1, 600, PACKED_MASK_IDS - 1,
                                   PACKED_MASK_IDS, 3_000])
@pytest.mark.parametrize("with_dense", [False, True])
def test_every_packing_writes_exactly_its_ids(count, with_dense):
    rng = np.random.default_rng(count * 2 + with_dense)
    ids = rng.integers(0, VOCAB, size=count)  # unsorted, with repeats
    if count >= 4:
        ids[:3] = [31, 32, VOCAB - 1]  # the last bit of a word, the first of the next, the end
        ids[-1] = ids[0]  # a repeat for certain
    dense = ()
    if with_dense:
        bits = rng.random(VOCAB) < 0.3
        dense = (pack_bool(bits),)
    mask = Mask(dense, ids)
    out = np.full((VOCAB + 31) // 32, 0xDEADBEEF, dtype=np.uint32)  # stale words
    mask.write(out)
    assert np.array_equal(out, _reference(ids, dense))
    assert mask.empty == (not count and not with_dense)
    assert np.all(np.diff(mask.word_idx) > 0)  # distinct words, sorted


def test_a_value_mask_shares_its_inside_parts(llama):
    """At a position where any JSON value may start, the tokens opening a string or a
    number (nearly two thousand, spread over most of the vocabulary) are each lexer state's shared
    inside part, not ids copied into every such mask: a large schema has thousands of
    these positions, and masks that each carried ~9 KB of them overflowed the mask cache,
    so a second walk over the same text computed every mask again."""
    from automask import Grammar
    from automask.engine.compiled import compile as compile_grammar
    from automask.engine.matcher import Matcher

    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    compiled = compile_grammar(Grammar.from_json_schema(schema), llama)
    matcher = Matcher(compiled)
    for tid in llama.encode('{"a": '):
        assert matcher.accept_token(tid)
    mask = compiled.masks.mask(parse_state(matcher))
    out = np.zeros((llama.size + 31) // 32, dtype=np.uint32)
    mask.write(out)
    allowed = np.unpackbits(out.view(np.uint8), bitorder="little")[: llama.size]
    for text in ('"', '"x', "1", "12", "-", "{", "[", "true", "null"):
        assert allowed[llama.encode(text)[0]], text
    assert np.count_nonzero(allowed) > 1_000
    assert mask.nbytes < 2_048  # ids copied in would be > 8 KB


@pytest.mark.parametrize("share", [0.0, 0.001, 0.2, 0.3, 1.0])
def test_pack_rows_sets_exactly_the_ids_of_its_rows(llama, share):
    """Rows to packed ids two ways (each id's bit set when few rows are on, a gather over
    every id when many are): both give each id of an allowed row, and nothing else."""
    from automask.engine.compiled import compiler_for

    root = compiler_for(llama).tokens
    rows = np.random.default_rng(int(share * 1000)).random(root.n) < share
    expected = np.zeros(root.size, dtype=bool)
    expected[root.ids_for_rows(np.flatnonzero(rows))] = True
    assert np.array_equal(root.pack_rows(rows), pack_bool(expected))


def test_ids_for_rows_gives_every_id_of_rows_spelled_by_several():
    """Where several ids spell one row (byte tokens beside the same text, as in Gemma-3
    and Llama-2), each row gives all its ids, in row order, repeated rows repeating them."""
    from automask.engine.tokens import RootTokens

    texts = [b"a", b"b", b"<0x61>", b"a", b"c", b"b", b"", b"dd", b"a"]
    root = RootTokens(texts, excluded={4}, size=len(texts) + 2)
    assert not root.one_id_each
    spelled = {text: [i for i, t in enumerate(texts) if t == text and i != 4] for text in texts}
    rows = {text: r for r in range(root.n) if (text := root.row_bytes(r))}
    for picked in ([], [rows[b"dd"]], [rows[b"a"]], [rows[b"b"], rows[b"a"], rows[b"b"]],
                   list(range(root.n))):
        expected = [i for r in picked for i in spelled[root.row_bytes(r)]]
        assert root.ids_for_rows(np.array(picked, dtype=np.int32)).tolist() == expected


def test_configurations_with_one_mask_share_it(llama):
    """Inside the string value of ``a`` and of ``b`` the parser configurations differ (the
    keys still open differ), but no token reaches far enough to tell: the second mask is
    the first one's object, found by its content. Each is still exactly the mask a fresh
    compiler computes for that text alone, and the string of ``c``, after which no key
    may follow, gets a mask of its own (``","`` refused)."""
    from automask import Grammar
    from automask.engine.compiled import Compiler
    from automask.engine.matcher import Matcher

    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"},
                                               "c": {"type": "string"}},
              "additionalProperties": False}
    texts = ['{"a": "x', '{"a": "1", "b": "x', '{"a": "1", "b": "2", "c": "x']
    compiled = Compiler(llama).compile(Grammar.from_json_schema(schema))
    masks, configs = [], []
    for text in texts:
        matcher = Matcher(compiled)
        assert matcher.accept_tokens(llama.encode(text)) == len(llama.encode(text))
        configs.append(parse_state(matcher))
        masks.append(compiled.masks.mask(configs[-1]))
    assert len({c.uid for c in configs}) == 3
    assert masks[1] is masks[0]
    assert masks[2] is not masks[0]

    def words(mask: Mask) -> np.ndarray:
        out = np.zeros((llama.size + 31) // 32, dtype=np.uint32)
        mask.write(out)
        return out

    comma = llama.encode('","')
    assert len(comma) == 1
    for text, mask in zip(texts, masks, strict=True):
        alone = Compiler(llama).compile(Grammar.from_json_schema(schema))
        matcher = Matcher(alone)
        matcher.accept_tokens(llama.encode(text))
        assert np.array_equal(words(mask), words(alone.masks.mask(parse_state(matcher))))
        allowed = np.unpackbits(words(mask).view(np.uint8), bitorder="little")
        assert allowed[comma[0]] == (not text.endswith('"c": "x'))


@pytest.mark.parametrize("allowed", [True, False])
def test_packed_with_edits_exactly_the_ids_of_its_rows(llama, allowed):
    """A packed part with rows added (a gap's spaced tokens) or taken out (an object's
    declared names) is the packing of the edited rows: every id of each row, repeats and
    the first and last rows included, and the part it was made from unchanged."""
    from automask.engine.compiled import compiler_for

    root = compiler_for(llama).tokens
    rng = np.random.default_rng(7)
    rows = rng.random(root.n) < 0.6
    packed = root.pack_rows(rows)
    before = packed.copy()
    edited = np.concatenate([rng.choice(root.n, 300, replace=False), [0, root.n - 1, 0]])
    expected_rows = rows.copy()
    expected_rows[edited] = allowed
    assert np.array_equal(root.packed_with(packed, edited, allowed=allowed),
                          root.pack_rows(expected_rows))
    assert np.array_equal(root.packed_with(packed, [], allowed=allowed), packed)
    assert np.array_equal(packed, before)


def test_packed_with_sets_every_id_of_a_row_spelled_by_several():
    """Where several ids spell one row (Gemma-3's byte tokens beside the same text), an
    edit reaches each of them, as packing the rows does."""
    from automask.engine.tokens import RootTokens

    texts = [b"a", b"b", b"<0x61>", b"a", b"c", b"b", b"dd", b"a"] + [b"x%d" % i for i in range(40)]
    root = RootTokens(texts, excluded=set(), size=len(texts))
    assert not root.one_id_each
    rows_a = [r for r in range(root.n) if root.row_bytes(r) == b"a"]
    none = np.zeros(root.n, dtype=bool)
    added = root.packed_with(root.pack_rows(none), rows_a)
    assert np.flatnonzero(np.unpackbits(added.view(np.uint8), bitorder="little")).tolist() == [
        i for i, t in enumerate(texts) if t == b"a"]
    every = np.ones(root.n, dtype=bool)
    taken = root.packed_with(root.pack_rows(every), rows_a, allowed=False)
    expected = every.copy()
    expected[rows_a] = False
    assert np.array_equal(taken, root.pack_rows(expected))
