"""The Compiler: the owner of what every grammar of one vocabulary shares (token tables,
shared scans), with its size limit, clear() and stats(), and the scan shortcuts as an
option (each exact: masks are the same with any subset)."""

import json

import numpy as np
import pytest

from automask import CacheStats, Compiler, Grammar, Matcher, compile
from automask.engine.compiled import compiler_for
from automask.engine.masks import SHORTCUTS, BoundedCache

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
                         "n": {"type": "integer", "minimum": -5}},
          "required": ["name"], "additionalProperties": {"type": "number"}}
INSTANCES = [{"name": "ab cd", "tags": ["red", "blue"], "n": 12},
             {"name": "", "x": 1.5, "yy": -2},
             {"name": "twelve chars", "tags": []}]


def _masks(compiler: Compiler, indent: int | None = None) -> list[np.ndarray]:
    matcher = Matcher(compiler.compile(Grammar.from_json_schema(SCHEMA)))
    out = []
    for x in INSTANCES:
        matcher.reset()
        for token in compiler.vocab.encode(json.dumps(x, indent=indent)):
            out.append(matcher.mask_words().copy())
            assert matcher.accept_token(token), x
        out.append(matcher.mask_words().copy())
        assert matcher.is_accepting(), x
    return out


@pytest.mark.parametrize("indent", [None, 2])
def test_masks_are_the_same_with_every_shortcut_off(tiny_bpe_vocab, indent):
    fast = Compiler(tiny_bpe_vocab)
    plain = Compiler(tiny_bpe_vocab, shortcuts=())
    with_shortcuts, walked = _masks(fast, indent), _masks(plain, indent)
    assert len(with_shortcuts) == len(walked)
    for step, (a, b) in enumerate(zip(with_shortcuts, walked, strict=True)):
        assert np.array_equal(a, b), f"mask {step} differs"
    used = fast.stats().scans
    assert used.get("walk", 0) < sum(used.values())  # some shortcut made scans there
    assert set(plain.stats().scans) == {"walk"}  # and none here


def test_stats_count_entries_bytes_and_scans_and_clear_empties(tiny_bpe_vocab):
    compiler = Compiler(tiny_bpe_vocab)
    empty = compiler.stats()
    assert isinstance(empty, CacheStats)
    assert (empty.entries, empty.bytes, empty.evicted, dict(empty.scans)) == (0, 0, 0, {})
    _masks(compiler)
    full = compiler.stats()
    # (entries also hold what scans share: whitespace-led tokens, rows per code count)
    assert full.bytes > 0 and 0 < sum(full.scans.values()) <= full.entries
    assert full.limit_bytes == 256 << 20
    compiler.clear()
    assert (compiler.stats().entries, compiler.stats().bytes) == (0, 0)
    first = _masks(compiler)  # grammars go on after a clear, making their scans again
    assert compiler.stats().entries == full.entries
    assert all(np.array_equal(a, b) for a, b in zip(first, _masks(Compiler(tiny_bpe_vocab)),
                                                    strict=True))


def test_the_size_limit_holds_by_dropping_the_oldest_scans(tiny_bpe_vocab):
    small = Compiler(tiny_bpe_vocab, cache_limit_bytes=20_000)
    masks = _masks(small)
    stats = small.stats()
    assert stats.bytes <= 20_000 and stats.evicted > 0
    assert all(np.array_equal(a, b) for a, b in zip(masks, _masks(Compiler(tiny_bpe_vocab)),
                                                    strict=True))


def test_a_full_cache_frees_the_oldest_entries_a_little_at_a_time():
    # Freeing a quarter of the shared scans at once was one step of 130-180 ms; a full
    # cache now frees a 32nd of its budget (and room for the new entry), oldest first.
    cache = BoundedCache(3200)
    for i in range(32):
        cache.put(i, f"scan {i}", 100)
    assert len(cache) == 32 and cache.used == 3200 and cache.evicted == 0
    cache.put(32, "scan 32", 100)
    assert cache.evicted == 2 and 0 not in cache and 1 not in cache
    assert list(cache)[:2] == [2, 3] and cache.used == 3100 and cache[32] == "scan 32"
    cache.recent(2)  # just used: no longer the oldest
    cache.put(33, "scan 33", 150)
    assert 2 in cache and 3 not in cache and cache.used <= 3200


def test_a_cache_and_its_costs_stay_out_of_the_collectors_sight():
    # Keys are fresh tuples, which the collector tracks until its next pass; inserting one
    # tracks a dict again. The shared scans' cost table (100k+ entries late in a MaskBench
    # run) was walked by every full collection that way: 26 ms each after 3,000 schemas.
    import gc

    cache = BoundedCache(1 << 20)
    for i in range(3):
        key = (i, [i][0] + 1)  # built at run time: a tracked tuple
        assert gc.is_tracked(key)
        cache.put(key, f"scan {i}", 100)
        assert not gc.is_tracked(cache) and not gc.is_tracked(cache._costs)
        cache.recent(key)
        assert not gc.is_tracked(cache)


def test_compile_uses_the_vocabularys_default_compiler(tiny_bpe_vocab):
    compiled = compile(Grammar.from_regex("[a-z]+"), tiny_bpe_vocab)
    assert compiled.compiler is compiler_for(tiny_bpe_vocab)
    assert compiled.root is compiled.compiler.tokens
    own = Compiler(tiny_bpe_vocab)
    assert own.compile(Grammar.from_regex("[a-z]+")).compiler is own


def test_unknown_shortcuts_and_non_grammars_are_refused(tiny_bpe_vocab):
    with pytest.raises(ValueError, match="unknown shortcut.*gapp"):
        Compiler(tiny_bpe_vocab, shortcuts=["gapp"])
    assert Compiler(tiny_bpe_vocab, shortcuts=SHORTCUTS - {"gap"}).scans.shortcuts == \
        SHORTCUTS - {"gap"}
    with pytest.raises(TypeError, match="takes a Grammar"):
        Compiler(tiny_bpe_vocab).compile("[a-z]+")
