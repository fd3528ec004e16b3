"""MatcherPool: sequences in worker processes fill the same rows and accept the same
tokens as Matchers in this process, and its errors arrive typed, with nothing half-done."""

from __future__ import annotations

import json

import numpy as np
import pytest

import automask
from automask import Grammar, Matcher
from automask.engine.pool import MatcherPool, PoolClosed
from automask.errors import GrammarError

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                                           "when": {"type": "string", "format": "date-time"}},
          "required": ["name", "when"], "additionalProperties": False}
DOC = json.dumps({"name": "Ann", "tags": ["b"], "when": "2024-02-29T23:59:60Z"})
PATTERN = r"[a-z]{2,5}-\d{3}"


@pytest.fixture(scope="module")
def pool(llama):
    with MatcherPool(llama, workers=2, max_batch=8) as pool:
        yield pool


def _row(matcher: Matcher, words: int) -> np.ndarray:
    row = np.zeros((1, words), dtype=np.int32)
    matcher.fill_bitmask(row, 0)
    return row[0]


def test_rows_and_commits_equal_matchers_in_this_process(pool, llama):
    recipes = [(Grammar.from_json_schema, (SCHEMA,), {}), (Grammar.from_regex, (PATTERN,), {}),
               (Grammar.from_json_schema, (SCHEMA,), {"whitespace": "compact"})]
    texts = [DOC, "abc-123", json.dumps(json.loads(DOC), separators=(",", ":"))]
    handles = [pool.add(build, *args, **kwargs) for build, args, kwargs in recipes]
    assert len(pool) == 3
    local = [Matcher(automask.compile(build(*args, **kwargs), llama))
             for build, args, kwargs in recipes]
    tokens = [llama.encode(t) + [llama.eos_token_ids[0]] for t in texts]
    words = automask.allocate_bitmask(1, llama.size).shape[1]
    rows = [5, 0, 3]  # scattered rows; the others are nobody's
    step = 0
    while any(step < len(t) for t in tokens):
        bitmask = np.full((6, words), 7, dtype=np.int32)
        pool.fill(bitmask, handles, rows)
        for m, r in zip(local, rows, strict=True):
            assert np.array_equal(bitmask[r], _row(m, words)), (r, step)
        assert (bitmask[[1, 2, 4]] == 7).all()
        moving = [i for i, t in enumerate(tokens) if step < len(t)]
        accepted = pool.accept([(handles[i], tokens[i][step]) for i in moving])
        assert accepted == [local[i].accept_token(tokens[i][step]) for i in moving]
        assert all(accepted)
        step += 1
    pool.remove(handles)
    assert len(pool) == 0


def test_the_pools_own_bitmask_is_filled_in_place_with_the_same_rows(pool, llama):
    handles = [pool.add(Grammar.from_regex, PATTERN), pool.add(Grammar.from_json_schema, SCHEMA)]
    words = automask.allocate_bitmask(1, llama.size).shape[1]
    copied = np.zeros((4, words), dtype=np.int32)
    pool.fill(copied, [handles[1], None, handles[0]], [3, 0, 1])
    own = pool.allocate_bitmask(4)
    own[:] = 7
    pool.fill(own, [handles[1], None, handles[0]], [3, 0, 1])
    assert np.array_equal(own[[1, 3]], copied[[1, 3]]) and (own[[0, 2]] == 7).all()
    with pytest.raises(ValueError, match="as allocate_bitmask returned it"):
        pool.fill(own[1:], handles)
    with pytest.raises(ValueError, match="max_batch"):
        pool.allocate_bitmask(9)
    pool.remove(handles)


def test_a_worker_done_with_its_rows_fills_anothers_after_catching_up(llama, tmp_path):
    """The work sharing, in this process: worker 1 has no rows of its own, so it takes
    worker 0's (from the back) until none is left, its copy of a sequence first taking
    the queued tokens (a refused one refused again)."""
    from multiprocessing import Lock, RawArray

    from automask.engine.pool import _Worker

    words = automask.allocate_bitmask(1, llama.size).shape[1]
    path = tmp_path / "rows"
    np.zeros((3, words), dtype=np.int32).tofile(path)
    bounds = RawArray("i", 4)
    worker = _Worker(llama, str(path), (3, words), None, bounds, Lock(), 1)
    for handle in (5, 6):  # not its own: compiled, no first mask
        worker.add((handle, False, Grammar.from_regex, (PATTERN,), {}, None))
    steps = llama.encode("ab-1") + llama.encode("x")  # the last one is refused
    assert worker.accept(([], [(5, t) for t in steps])) == []
    assert worker.behind[5] == steps
    bounds[:] = [0, 1, 2, 1]  # worker 0: positions 0 and 1; worker 1: none
    worker.fill([(6, 0), (5, 2)])
    # both taken from worker 0's back (its front, 0, is where worker 0 itself would go on)
    assert bounds[:] == [0, -1, 2, 1] and worker.behind[5] == []
    local = Matcher(automask.compile(Grammar.from_regex(PATTERN), llama))
    assert [local.accept_token(t) for t in steps] == [True] * (len(steps) - 1) + [False]
    fresh = Matcher(automask.compile(Grammar.from_regex(PATTERN), llama))
    rows = np.fromfile(path, dtype=np.int32).reshape(3, words)
    assert np.array_equal(rows[2], _row(local, words))
    assert np.array_equal(rows[0], _row(fresh, words)) and (rows[1] == 0).all()
    np.zeros((3, words), dtype=np.int32).tofile(path)
    worker.fill([(6, 0), (5, 2)])  # nothing left to take: nothing written
    assert not np.fromfile(path, dtype=np.int32).any()


def test_a_copy_too_far_behind_is_left_to_its_owner(llama, tmp_path):
    from multiprocessing import Lock, RawArray

    from automask.engine.pool import MAX_LAG, _Worker

    words = automask.allocate_bitmask(1, llama.size).shape[1]
    path = tmp_path / "rows"
    np.zeros((2, words), dtype=np.int32).tofile(path)
    bounds = RawArray("i", 4)
    worker = _Worker(llama, str(path), (2, words), None, bounds, Lock(), 1)
    worker.add((5, False, Grammar.from_regex, ("a*",), {}, None))
    a = llama.encode("a")[0]
    worker.accept(([], [(5, a)] * (MAX_LAG + 1)))
    bounds[:] = [0, 0, 1, 0]  # worker 0: position 0 (handle 5); worker 1: none
    worker.fill([(5, 1)])
    assert bounds[:] == [0, 0, 1, 0] and len(worker.behind[5]) == MAX_LAG + 1
    assert not np.fromfile(path, dtype=np.int32).any()  # nothing written
    worker.behind[5].pop()  # MAX_LAG behind: taken, after the catch-up
    worker.fill([(5, 1)])
    assert bounds[:] == [0, -1, 1, 0] and worker.behind[5] == []
    assert np.fromfile(path, dtype=np.int32).reshape(2, words)[1].any()


def test_a_cpu_torch_bitmask_is_filled_in_place(pool, llama):
    torch = pytest.importorskip("torch")
    handle = pool.add(Grammar.from_regex, PATTERN)
    words = automask.allocate_bitmask(1, llama.size).shape[1]
    bitmask = torch.full((3, words), 7, dtype=torch.int32)
    pool.fill(bitmask, [None, handle], [0, 2])
    local = Matcher(automask.compile(Grammar.from_regex(PATTERN), llama))
    assert np.array_equal(bitmask[2].numpy(), _row(local, words))
    assert bool((bitmask[:2] == 7).all())
    pool.remove([handle])


def test_a_refused_token_leaves_its_sequence_and_none_rows_are_skipped(pool, llama):
    handle = pool.add(Grammar.from_regex, PATTERN)
    words = automask.allocate_bitmask(1, llama.size).shape[1]
    before = np.zeros((2, words), dtype=np.int32)
    pool.fill(before, [handle, None])
    assert pool.accept([(handle, llama.encode("9")[0])]) == [False]
    after = np.zeros((2, words), dtype=np.int32)
    pool.fill(after, [handle, None])
    assert np.array_equal(before, after) and (after[1] == 0).all() and after[0].any()
    pool.remove([handle])


def test_bad_input_is_refused_typed_before_anything_moves(pool, llama):
    with pytest.raises(GrammarError, match="missing '\\)'"):
        pool.add(Grammar.from_regex, "(ab")
    with pytest.raises(TypeError, match="returns a Grammar"):
        pool.add(str, "not a grammar")
    assert len(pool) == 0
    handle = pool.add(Grammar.from_regex, PATTERN)
    words = automask.allocate_bitmask(1, llama.size).shape[1]
    first = np.zeros((1, words), dtype=np.int32)
    pool.fill(first, [handle])
    with pytest.raises(IndexError):  # a token id outside the vocabulary: nothing advances
        pool.accept([(handle, llama.encode("ab")[0]), (handle, llama.size)])
    with pytest.raises(KeyError, match="no sequence"):
        pool.accept([(handle + 1000, 1)])
    with pytest.raises(ValueError, match="max_batch"):
        pool.fill(np.zeros((9, words), dtype=np.int32), [handle] * 9)
    with pytest.raises(ValueError, match="2-D"):
        pool.fill(np.zeros(words, dtype=np.int32), [handle])
    again = np.zeros((1, words), dtype=np.int32)
    pool.fill(again, [handle])
    assert np.array_equal(first, again)  # the refused calls moved nothing
    pool.remove([handle])


class _FailsToUnpickle:
    """Pickles here, raises where it is unpickled (as a recipe whose module the worker
    cannot import would)."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise ImportError("not importable in this process")


def test_recipes_that_cannot_cross_are_refused_and_the_pool_goes_on(pool):
    with pytest.raises(TypeError, match="must be picklable"):
        pool.add(lambda: Grammar.from_regex(PATTERN))
    with pytest.raises(ImportError, match="not importable"):
        pool.add(Grammar.from_regex, _FailsToUnpickle())
    assert len(pool) == 0
    handle = pool.add(Grammar.from_regex, PATTERN)  # the workers still answer in turn
    assert len(pool) == 1
    pool.remove([handle])


def test_a_worker_that_dies_closes_the_pool(llama):
    pool = MatcherPool(llama, workers=1, max_batch=1)
    handle = pool.add(Grammar.from_regex, PATTERN)
    pool._procs[0].kill()
    pool._procs[0].join()
    with pytest.raises(PoolClosed, match="worker ended"):
        pool.accept([(handle, 1)])
    with pytest.raises(PoolClosed, match="closed"):
        pool.add(Grammar.from_regex, PATTERN)
    pool.close()  # closing twice is fine


def test_a_closed_pool_refuses_calls_and_its_workers_are_gone(llama):
    pool = MatcherPool(llama, workers=2, max_batch=1)
    procs = list(pool._procs)
    pool.close()
    assert not any(p.is_alive() for p in procs)
    with pytest.raises(PoolClosed):
        pool.add(Grammar.from_regex, PATTERN)
