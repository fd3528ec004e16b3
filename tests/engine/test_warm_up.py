"""``warm_up(compiler)``: the shared work of JSON grammars' first masks, made ahead.

Warming up changes which scans are cached, never a mask: a schema walked with
a warmed compiler gets the masks a cold one computes, and the warmed one walks
the vocabulary far less often on the way (the point of it).
"""

import numpy as np
import pytest
from support.walks import assert_same_masks, masks_along

from automask import Compiler, warm_up

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "year": {"type": "integer"},
        "rating": {"type": "number"},
        "seen": {"type": "boolean"},
        "released": {"type": "string", "format": "date"},
        "actors": {"type": "array", "items": {
            "type": "object", "properties": {"first": {"type": "string"},
                                             "age": {"type": "integer"}},
            "required": ["first"]}},
    },
    "required": ["title", "year"],
}
INSTANCE = {"title": "The Matrix", "year": 1999, "rating": 8.7, "seen": True,
            "released": "1999-03-31",
            "actors": [{"first": "Keanu", "age": 35}, {"first": "Carrie-Anne"}]}


def _masks(compiler: Compiler, vocab) -> list[np.ndarray]:
    """Every mask along INSTANCE, compact and indented."""
    return [mask for indent in (None, 2)
            for mask in masks_along(vocab, SCHEMA, [INSTANCE], indent, compiler=compiler)]


@pytest.mark.parametrize("whitespace", ["flexible", "compact", 2])
def test_warm_up_in_each_layout_fills_the_shared_scans_once(tiny_bpe_vocab, whitespace):
    compiler = Compiler(tiny_bpe_vocab)
    warm_up(compiler, whitespace=whitespace)
    entries = compiler.stats().entries
    assert entries > 20  # string bodies, numbers, literals, punctuation, keys
    warm_up(compiler, whitespace=whitespace)
    assert compiler.stats().entries == entries  # all found made: nothing new


def test_warmed_masks_are_the_cold_ones(tiny_bpe_vocab):
    warmed = Compiler(tiny_bpe_vocab)
    warm_up(warmed)
    assert_same_masks(_masks(warmed, tiny_bpe_vocab),
                      _masks(Compiler(tiny_bpe_vocab), tiny_bpe_vocab))


@pytest.mark.data
def test_warm_up_spares_a_new_schema_most_vocabulary_walks(llama):
    cold = Compiler(llama)
    cold_masks = _masks(cold, llama)
    warmed = Compiler(llama)
    warm_up(warmed)
    before = warmed.stats().scans.get("walk", 0)
    assert_same_masks(_masks(warmed, llama), cold_masks)
    walks_cold = cold.stats().scans["walk"]
    walks_warmed = warmed.stats().scans.get("walk", 0) - before
    # What is left: the new keys' suffix sets, a few tokens each.
    assert walks_warmed * 2 < walks_cold, (walks_warmed, walks_cold)


@pytest.mark.data
def test_a_date_times_minutes_are_warm_at_every_hour(llama):
    """The one date-time position whose scan depends on the hour: after warm-up, a
    new schema's date-time at any hour needs no walk of the vocabulary there, and
    its mask is the cold compiler's."""
    from automask import Grammar, Matcher

    schema = {"type": "object", "properties": {"at": {"type": "string",
                                                     "format": "date-time"}}}
    warmed, cold = Compiler(llama), Compiler(llama)
    warm_up(warmed)
    for hour in (0, 7, 13, 22):
        text = f'{{"at": "1999-12-31T{hour:02d}:'.encode()
        masks = []
        for compiler in (warmed, cold):
            matcher = Matcher(compiler.compile(Grammar.from_json_schema(schema)))
            assert matcher.accept_bytes(text)
            walks = compiler.stats().scans.get("walk", 0)
            masks.append(matcher.mask_words())
            made = compiler.stats().scans.get("walk", 0) - walks
            assert made == 0 if compiler is warmed else made > 0, (hour, made)
        assert np.array_equal(*masks), hour
