"""The continuous-batching scheduler over a fake runner: batching must not change any output.

The fake runner's logits depend only on a sequence's own ids, so a sequence
decoded in a batch with others, joining midway, must produce exactly what
it produces alone; a shared-bitmask or slot mix-up would show as a
different or invalid output.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from automask import Grammar, compile
from automask.sampling import SamplingParams
from automask.serve.protocol import RequestError
from automask.serve.scheduler import (
    Delta,
    Finished,
    Job,
    JobDone,
    JobFailed,
    Scheduler,
    _complete_utf8,
)

REGEX = r"[a-z]{2,12}@(mail|web)\.(com|org)"


class FakeRunner:
    """The BatchRunner protocol over a function of each slot's ids (no KV cache needed)."""

    def __init__(self, width: int, *, max_sequences: int = 4, max_context: int = 256,
                 seed: int = 0):
        self.name = "fake"
        self.width = width
        self.eos_token_ids: list[int] = []
        self.max_sequences = max_sequences
        self.max_context = max_context
        self.seed = seed
        self.slots: dict[int, list[int]] = {}
        self.batches: list[int] = []  # sequences per feed call
        self.banned: list[int] = []  # ids with -inf logits (a model that never ends)

    def open(self, prompt=()) -> int:
        slot = next(i for i in range(self.max_sequences) if i not in self.slots)
        self.slots[slot] = []
        return slot

    def length(self, slot: int) -> int:
        return len(self.slots[slot])

    def close(self, slot: int) -> None:
        self.slots.pop(slot, None)

    def logits(self, ids: list[int]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, len(ids), *ids[-6:]])
        row = rng.normal(0.0, 3.0, self.width).astype(np.float32)
        row[self.banned] = -np.inf
        return row

    def feed(self, feeds):
        self.batches.append(len(feeds))
        out = []
        for slot, ids, keep in feeds:
            seq = self.slots[slot]
            seq.extend(ids)
            assert len(seq) <= self.max_context
            out.append(np.stack([self.logits(seq[:len(seq) - keep + i + 1])
                                 for i in range(keep)]))
        return out


@pytest.fixture(scope="module")
def compiled(tiny_bpe_vocab):
    return compile(Grammar.from_regex(REGEX), tiny_bpe_vocab)


class Collector:
    """A job's events, and a wait for its end."""

    def __init__(self):
        self.events: list = []
        self.done = threading.Event()

    def __call__(self, event) -> None:
        self.events.append(event)
        if isinstance(event, (JobDone, JobFailed)):
            self.done.set()

    def finished(self) -> dict[int, Finished]:
        return {e.index: e for e in self.events if isinstance(e, Finished)}

    def streamed(self, index: int) -> str:
        return "".join(e.text for e in self.events if isinstance(e, Delta) and e.index == index)


def job(compiled, emit, *, prompt=(5, 6, 7), max_tokens=40, temperature=1.0, seed=1, **kw):
    return Job(prompt=list(prompt), compiled=compiled, emit=emit, max_tokens=max_tokens,
               sampling=SamplingParams(temperature=temperature), seed=seed, **kw)


def run_alone(vocab, compiled, **kw) -> Collector:
    """One job on its own scheduler, stepped by hand to the end."""
    sched = Scheduler(FakeRunner(vocab.size), vocab)
    c = Collector()
    sched.submit(job(compiled, c, **kw))
    while not c.done.is_set():
        sched._admit()
        sched._step()
    return c


def test_batched_sequences_match_solo_runs_and_join_midway(tiny_bpe_vocab, compiled):
    import re

    runner = FakeRunner(tiny_bpe_vocab.size, max_sequences=4)
    sched = Scheduler(runner, tiny_bpe_vocab)
    jobs = [(Collector(), dict(prompt=(5 + i, 6, 7), seed=i)) for i in range(5)]
    sched.submit(job(compiled, jobs[0][0], **jobs[0][1]))
    sched.submit(job(compiled, jobs[1][0], **jobs[1][1]))
    for _ in range(3):  # two sequences run a few steps before the others arrive
        sched._admit()
        sched._step()
    for c, kw in jobs[2:]:
        sched.submit(job(compiled, c, **kw))
    while not all(c.done.is_set() for c, _ in jobs):
        sched._admit()
        if sched._running:
            sched._step()
    assert max(runner.batches) == 4  # the fifth waited for a free slot
    assert not runner.slots  # every slot was given back
    for c, kw in jobs:
        (f,) = c.finished().values()
        alone = run_alone(tiny_bpe_vocab, compiled, **kw).finished()[0]
        assert f.text == alone.text and f.reason == alone.reason
        assert c.streamed(0) == f.text
        if f.reason == "stop":
            assert f.complete and re.fullmatch(REGEX, f.text)


def test_n_sequences_differ_and_each_is_valid(tiny_bpe_vocab, compiled):
    import re

    c = run_alone(tiny_bpe_vocab, compiled, n=3, seed=7)
    finished = c.finished()
    assert sorted(finished) == [0, 1, 2]
    assert len({f.text for f in finished.values()}) > 1  # seeds seed + index
    for f in finished.values():
        assert f.reason == "length" or re.fullmatch(REGEX, f.text)
    done = [e for e in c.events if isinstance(e, JobDone)]
    assert done[0].completion_tokens == sum(f.tokens for f in finished.values())


def test_max_tokens_is_length_and_a_valid_prefix(tiny_bpe_vocab, compiled):
    f = run_alone(tiny_bpe_vocab, compiled, max_tokens=2).finished()[0]
    assert f.reason == "length" and f.tokens <= 2 and not f.complete
    m = compile(Grammar.from_regex(REGEX), tiny_bpe_vocab)
    from automask import Matcher

    assert Matcher(m).accept_bytes(f.text.encode())


def test_stop_string_cuts_the_text(tiny_bpe_vocab):
    grammar = compile(Grammar.from_regex(r"ab(c|d)+@x"), tiny_bpe_vocab)
    c = run_alone(tiny_bpe_vocab, grammar, stops=["@"], max_tokens=60)
    f = c.finished()[0]
    assert "@" not in f.text and f.reason == "stop"
    assert c.streamed(0) == f.text  # a held-back stop prefix is never sent


def test_unconstrained_job_runs_to_max_tokens(tiny_bpe_vocab):
    f = run_alone(tiny_bpe_vocab, None, max_tokens=12).finished()[0]
    assert f.tokens == 12 and f.reason == "length"


def test_logprobs_and_diagnostics(tiny_bpe_vocab, compiled):
    c = run_alone(tiny_bpe_vocab, compiled, top_logprobs=3, diagnostics=True)
    f = c.finished()[0]
    entries = [e for d in c.events if isinstance(d, Delta) for e in d.logprobs]
    assert len(entries) == f.tokens  # one per token, forced ones included
    assert "".join(e["token"] for e in entries) == f.text
    for e in entries:
        assert e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
        tops = [t["logprob"] for t in e["top_logprobs"]]
        assert tops == sorted(tops, reverse=True) and e["logprob"] <= tops[0] + 1e-9
    d = f.diagnostics
    assert d["forced_tokens"] <= f.tokens and 0 <= d["forced_share"] <= 1
    assert 0 < d["legal_mass_min"] <= d["legal_mass_mean"] <= 1 and d["kl_max"] >= d["kl_mean"]


def test_forced_tokens_go_one_per_step_in_a_batch(tiny_bpe_vocab, compiled):
    """Beside other sequences, fast-forwarded tokens are fed one per step (no second pass
    for one sequence's extra tokens), with the same text, logprobs and diagnostics as a
    sequence run alone that feeds them all at once."""
    kw = dict(top_logprobs=2, diagnostics=True, seed=4)
    batched, alone = run_alone(tiny_bpe_vocab, compiled, n=3, **kw), \
        run_alone(tiny_bpe_vocab, compiled, **kw)
    mine, solo = batched.finished()[0], alone.finished()[0]
    assert mine.text == solo.text and mine.diagnostics == solo.diagnostics
    assert solo.diagnostics["forced_tokens"] > 0  # the case this is about

    def entries(c, index):
        return [e for d in c.events if isinstance(d, Delta) and d.index == index
                for e in d.logprobs]

    assert entries(batched, 0) == entries(alone, 0)
    for index, f in batched.finished().items():
        got = entries(batched, index)
        assert len(got) == f.tokens and "".join(e["token"] for e in got) == f.text


def test_queue_full_is_429_and_long_prompt_is_400(tiny_bpe_vocab, compiled):
    sched = Scheduler(FakeRunner(tiny_bpe_vocab.size, max_context=16), tiny_bpe_vocab,
                      max_queue=2)
    sched.submit(job(compiled, Collector()))
    sched.submit(job(compiled, Collector()))
    with pytest.raises(RequestError) as e:
        sched.submit(job(compiled, Collector()))
    assert e.value.status == 429 and e.value.headers["Retry-After"]
    with pytest.raises(RequestError) as e:
        sched.submit(job(compiled, Collector(), prompt=range(3, 20)))
    assert e.value.status == 400 and e.value.code == "context_length_exceeded"
    short = job(compiled, Collector(), prompt=(5, 6, 7), max_tokens=100)
    sched._waiting.clear()
    sched.submit(short)
    assert short.max_tokens == 16 - 3  # capped to what the slot holds


def test_thread_loop_cancel_and_deadline(tiny_bpe_vocab, compiled):
    runner = FakeRunner(tiny_bpe_vocab.size, max_context=10**9)
    runner.banned = list(tiny_bpe_vocab.eos_token_ids)
    sched = Scheduler(runner, tiny_bpe_vocab)
    sched.start()
    try:
        ok = Collector()
        sched.submit(job(compiled, ok))
        assert ok.done.wait(30) and ok.finished()
        late = Collector()
        sched.submit(job(None, late, max_tokens=10_000, deadline=time.monotonic() + 0.2))
        assert late.done.wait(30)
        failed = [e for e in late.events if isinstance(e, JobFailed)]
        assert failed and failed[0].error.status == 504
        gone = Collector()
        j = job(None, gone, max_tokens=10_000)
        sched.submit(j)
        time.sleep(0.1)
        j.cancel()
        deadline = time.monotonic() + 10
        while runner.slots and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not runner.slots  # the cancelled sequence gave its slot back
    finally:
        sched.stop()


@pytest.mark.parametrize("data, n", [
    (b"abc", 3), ("é".encode(), 2), ("é".encode()[:1], 0), (b"a" + "€".encode()[:2], 1),
    (b"a" + "😀".encode()[:3], 1), ("😀".encode(), 4), (b"", 0),
])
def test_complete_utf8_prefix(data, n):
    assert _complete_utf8(bytearray(data)) == n
