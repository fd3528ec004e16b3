"""fill_bitmasks: many matchers into one bitmask, row for row what each matcher fills alone."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import automask
from automask import Grammar, Matcher, fill_bitmasks

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def compiled(llama):
    return {
        "json": automask.compile(Grammar.from_json_schema(SCHEMA, whitespace="compact"), llama),
        "regex": automask.compile(Grammar.from_regex(r"[a-z]{2,5}-\d{3}"), llama),
    }


def _walk(compiled, text: str, steps: int) -> Matcher:
    """A matcher after the first ``steps`` tokens of ``text`` (tokenised alone)."""
    m = Matcher(compiled)
    for t in compiled.vocab.encode(text)[:steps]:
        assert m.accept_token(t)
    return m


def _matchers(compiled):
    doc = json.dumps({"name": "Ann", "age": 41}, separators=(",", ":"))
    out = [_walk(compiled["json"], doc, k) for k in range(6)]
    out += [_walk(compiled["regex"], "ab-123", k) for k in range(3)]
    done = _walk(compiled["regex"], "ab-123", 99)
    assert done.is_accepting() and done.accept_token(compiled["regex"].eos_token_ids[0])
    return out + [done]


def _alone(m: Matcher, words: int) -> np.ndarray:
    row = np.zeros((1, words), dtype=np.int32)
    m.fill_bitmask(row, 0)
    return row[0]


def test_rows_equal_each_matcher_alone_and_none_rows_are_left(compiled):
    matchers = _matchers(compiled)
    words = automask.allocate_bitmask(1, compiled["json"].vocab_size).shape[1]
    entries = [*matchers[:4], None, *matchers[4:]]
    rows = [2 * i + 1 for i in range(len(entries))]  # scattered rows, gaps between
    bitmask = np.full((2 * len(entries) + 1, words), 7, dtype=np.int32)
    fill_bitmasks(entries, bitmask, rows)
    for m, r in zip(entries, rows, strict=True):
        expected = np.full(words, 7, dtype=np.int32) if m is None else _alone(m, words)
        assert np.array_equal(bitmask[r], expected), r
    for r in range(0, bitmask.shape[0], 2):  # rows nobody named are untouched
        assert (bitmask[r] == 7).all()
    # the terminated matcher's row allows EOS only
    eos_row = automask.unpack_bitmask(bitmask[rows[-1]], compiled["regex"].vocab_size)
    assert set(np.flatnonzero(eos_row)) == set(compiled["regex"].eos_token_ids)


def test_default_rows_torch_tensor_in_place(compiled):
    torch = pytest.importorskip("torch")
    matchers = _matchers(compiled)[:3]
    words = (compiled["json"].vocab_size + 31) // 32
    bitmask = torch.zeros((3, words), dtype=torch.int32)
    fill_bitmasks(matchers, bitmask)
    for i, m in enumerate(matchers):
        assert np.array_equal(bitmask[i].numpy(), _alone(m, words))


def test_bad_arguments_are_typed(compiled):
    m = Matcher(compiled["json"])
    words = (compiled["json"].vocab_size + 31) // 32
    with pytest.raises(ValueError, match="2-D"):
        fill_bitmasks([m], np.zeros(words, dtype=np.int32))
    with pytest.raises(ValueError, match="row indices"):
        fill_bitmasks([m, m], np.zeros((2, words), dtype=np.int32), [0])
    with pytest.raises(IndexError, match="outside"):
        fill_bitmasks([m], np.zeros((2, words), dtype=np.int32), [2])
    with pytest.raises(ValueError, match="int32"):
        fill_bitmasks([m], np.zeros((1, words), dtype=np.int64))


def test_threads_sharing_a_compiled_grammar_fill_what_one_thread_fills(llama):
    """Four threads, each with its own matchers over ONE compiled grammar (cold: the
    masks are computed while other threads compute theirs), fill their rows of a shared
    bitmask; every row equals a single-threaded replay on a fresh compile."""
    schema = {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}
    docs = [json.dumps([{"id": i, "tags": ["x" * i, "y"]}] * (1 + i % 3)) for i in range(8)]
    shared = automask.compile(Grammar.from_json_schema(schema), llama)
    words = (shared.vocab_size + 31) // 32
    bitmask = np.zeros((8, words), dtype=np.int32)
    seen: list[np.ndarray] = [None] * 8  # type: ignore[list-item]
    errors: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            mine = [2 * worker, 2 * worker + 1]
            ms = [Matcher(shared) for _ in mine]
            ids = [llama.encode(docs[r]) for r in mine]
            for step in range(max(map(len, ids))):
                fill_bitmasks(ms, bitmask, mine)
                for m, toks in zip(ms, ids, strict=True):
                    if step < len(toks):
                        assert m.accept_token(toks[step])
            seen[mine[0]], seen[mine[1]] = bitmask[mine[0]].copy(), bitmask[mine[1]].copy()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    replay = automask.compile(Grammar.from_json_schema(schema), llama)
    for r, doc in enumerate(docs):
        m = Matcher(replay)
        ids = llama.encode(doc)
        for t in ids[:-1]:
            assert m.accept_token(t)
        if len(ids) < max(len(llama.encode(docs[r ^ 1])), len(ids)):
            assert m.accept_token(ids[-1])  # the pair ran longer: this row took every token
        assert np.array_equal(seen[r], _alone(m, words)), r
