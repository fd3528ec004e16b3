"""Continuous batching: every running sequence advances one step per batched forward pass.

One thread owns the model runner. Each turn of its loop:

1. **admit**: waiting jobs join while the runner has free slots (a job's
   ``n`` sequences join together); a new sequence's first feed is its
   prompt, less the prefix its slot already holds (the runner's prefix
   cache), plus the tokens its grammar forces at the start (prefill rides in
   the same forward pass as the others' decode tokens);
2. **forward**: one ``runner.feed`` for all running sequences;
3. **choose**: per sequence, the grammar's mask goes into its row of one
   shared bitmask, the sequence's own sampler picks a token, the matcher
   accepts it, and the tokens the grammar forces next join the next feed
   (fast-forward); text, finish and errors go back to the request as events.

Grammars are compiled (and their first mask computed) before a job is
submitted, on another thread, so a cold compile never stalls the batch.
The loop talks to requests only through ``job.emit`` (thread-safe) and the
``job.cancelled`` flag, so a request that goes away (client disconnect,
time limit) frees its slots at the next step.

Finish reasons: ``stop`` (EOS in an accepting state, nothing but EOS left,
or a stop string), ``length`` (``max_tokens`` or the context ran out: the
text is a valid prefix, not a valid document).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.errors import AutomaskError
from automask.generation.session import forced_after, only_eos_left
from automask.sampling import Sampler, SamplingParams
from automask.serve.metrics import Metrics
from automask.serve.protocol import RequestError

log = logging.getLogger("automask.serve")

STOP = "stop"
LENGTH = "length"


@dataclass
class Delta:
    """New text of choice ``index`` (and the logprobs of the tokens that made it)."""

    index: int
    text: str
    logprobs: list[dict] = field(default_factory=list)


@dataclass
class Finished:
    """Choice ``index`` is done: its whole text, why it stopped, its diagnostics."""

    index: int
    reason: str
    text: str
    tokens: int
    complete: bool
    diagnostics: dict[str, Any] | None = None


@dataclass
class JobDone:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens the first choice found in the prefix cache


@dataclass
class JobFailed:
    error: RequestError


Event = Delta | Finished | JobDone | JobFailed


@dataclass
class Job:
    """One request: ``n`` sequences from one prompt under one compiled grammar (or none)."""

    prompt: list[int]
    compiled: CompiledGrammar | None
    emit: Callable[[Event], object]  # (its result is ignored)
    max_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    n: int = 1
    stops: list[str] = field(default_factory=list)
    top_logprobs: int | None = None  # None: no logprobs
    diagnostics: bool = False
    deadline: float = math.inf  # time.monotonic() past which the job fails
    cancelled: bool = False
    completion_tokens: int = 0
    cached_tokens: int = 0
    finished: int = 0

    def cancel(self) -> None:
        self.cancelled = True


class _Sequence:
    """One choice of a job: its slot, matcher, sampler and output so far."""

    def __init__(self, job: Job, index: int, slot: int, eos: frozenset[int]):
        self.job = job
        self.index = index
        self.slot = slot
        self.eos = eos
        self.matcher = Matcher(job.compiled) if job.compiled is not None else None
        seed = None if job.seed is None else job.seed + index
        self.sampler = Sampler(job.sampling, seed=seed)
        self.tokens: list[int] = []
        self.penalized: list[int] = []
        self.data = bytearray()  # the output's bytes
        self.sent = 0  # bytes of ``data`` already sent as text
        self.feed: list[int] = []  # what the next step feeds
        self.queue: list[int] = []  # forced tokens chosen but not fed yet (one per step)
        self.fixed = 1  # leading ids of ``feed`` that cannot wait (the prompt's rest)
        self.keep = 1
        self.forced = 0
        self.stats: list[tuple[float, float, bool, bool]] = []  # (kl, legal mass, forced, top)
        self.pending_logprobs: list[dict] = []

    @property
    def wants_rows(self) -> bool:
        """Whether forced tokens need their logits (logprobs or diagnostics asked)."""
        return self.job.top_logprobs is not None or self.job.diagnostics


class Scheduler:
    """The batching loop over a runner (see the module docstring)."""

    def __init__(self, runner: Any, vocab: Any, *, metrics: Metrics | None = None,
                 max_queue: int = 64):
        self.runner = runner
        self.vocab = vocab
        self.metrics = metrics or Metrics()
        self.max_queue = max_queue
        self.eos = frozenset(int(t) for t in vocab.eos_token_ids)
        self._waiting: deque[Job] = deque()
        self._running: list[_Sequence] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.steps = 0
        self.metrics.gauge("queue_depth", lambda: len(self._waiting))
        self.metrics.gauge("running_sequences", lambda: len(self._running))

    # ---- the request side (any thread)
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="automask-scheduler",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the loop; every job still waiting or running fails with 503 (idempotent)."""
        with self._wake:
            self._stopping = True
            waiting = list(self._waiting)
            self._waiting.clear()
            self._wake.notify()
        for job in waiting:
            self._fail(job, RequestError(503, "the server is shutting down",
                                         type="server_error"))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def submit(self, job: Job) -> None:
        """Queue ``job``; 429 when the queue is full, 400 when the prompt cannot fit."""
        context = self.runner.max_context
        if len(job.prompt) >= context:
            raise RequestError(400, f"the prompt has {len(job.prompt)} tokens; this server "
                               f"holds {context} per sequence", param="messages",
                               code="context_length_exceeded")
        if job.n > self.runner.max_sequences:
            raise RequestError(400, f"n is at most {self.runner.max_sequences} here", param="n")
        job.max_tokens = min(job.max_tokens, context - len(job.prompt))
        with self._wake:
            if self._stopping:
                raise RequestError(503, "the server is shutting down", type="server_error")
            if len(self._waiting) >= self.max_queue:
                raise RequestError(429, "too many requests are waiting; retry shortly",
                                   type="rate_limit_error", code="queue_full",
                                   headers={"Retry-After": "1"})
            self._waiting.append(job)
            self._wake.notify()

    # ---- the loop (its own thread)
    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and not self._waiting and not self._running:
                    self._wake.wait()
                if self._stopping:
                    break
            try:
                self._admit()
                if self._running:
                    self._step()
            except Exception:  # noqa: BLE001 - a bug must fail its jobs, not the server
                log.exception("the batch step failed; failing its requests")
                for seq in list(self._running):
                    self._fail(seq.job, RequestError(500, "internal error in the decode step",
                                                     type="server_error"))
        for seq in list(self._running):
            self._fail(seq.job, RequestError(503, "the server is shutting down",
                                             type="server_error"))

    def _admit(self) -> None:
        free = self.runner.max_sequences - len(self._running)
        while True:
            with self._wake:
                if not self._waiting or self._waiting[0].n > free:
                    return
                job = self._waiting.popleft()
            if job.cancelled:
                continue
            for index in range(job.n):
                seq = _Sequence(job, index, self.runner.open(job.prompt), self.eos)
                cached = self.runner.length(seq.slot)  # a prefix cache's hit (< len(prompt))
                self.metrics.count("prompt_tokens_cached_total", value=cached)
                if index == 0:
                    job.cached_tokens = cached
                forced = self._forced(seq)
                for token in forced:
                    self._append(seq, token)
                seq.feed = job.prompt[cached:] + forced
                seq.fixed = len(job.prompt) - cached
                seq.keep = len(forced) + 1 if seq.wants_rows else 1
                self._running.append(seq)
            free -= job.n

    def _step(self) -> None:
        batch = list(self._running)  # finishing sequences leave _running as we go
        if len(batch) > 1:
            # Fast-forwarded tokens (also those forced at the start, after a prompt found
            # in the prefix cache) go one per step beside other sequences: llama.cpp splits
            # a step into equal shares per sequence, so one sequence's extra tokens would
            # cost a second pass over the weights for the whole step.
            for seq in batch:
                if len(seq.feed) > seq.fixed:
                    seq.queue = seq.feed[seq.fixed:] + seq.queue
                    seq.feed = seq.feed[:seq.fixed]
                    seq.keep = 1  # the row after the last id kept: it predicts queue[0]
        started = time.perf_counter()
        rows = self.runner.feed([(s.slot, s.feed, s.keep) for s in batch])
        self.metrics.observe("forward", time.perf_counter() - started)
        self.steps += 1
        nwords = (max(self.vocab.size, self.runner.width) + 31) // 32  # padded ids: 0 bits
        bitmask = np.zeros((len(batch), nwords), dtype=np.int32)
        now = time.monotonic()
        for i, (seq, logits) in enumerate(zip(batch, rows, strict=True)):
            try:
                self._advance(seq, logits, bitmask, i, now)
            except AutomaskError as e:  # e.g. a mask past its time limit
                self._fail(seq.job, RequestError(500, f"{type(e).__name__}: {e}",
                                                 type="server_error", code="decode_failed"))

    def _advance(self, seq: _Sequence, rows: np.ndarray, bitmask: np.ndarray, i: int,
                 now: float) -> None:
        job = seq.job
        seq.fixed = 1
        if job.cancelled:
            self._close(seq)
            return
        if now > job.deadline:
            self._fail(job, RequestError(504, "the request ran past the server's time limit",
                                         type="timeout_error", code="request_timeout"))
            return
        fed_forced = seq.feed[len(seq.feed) - len(rows) + 1:] if len(rows) > 1 else []
        for row, token in zip(rows[:-1], fed_forced, strict=True):
            self._record_forced(seq, row, token)
        logits = rows[-1]
        if seq.queue:  # the next token is forced and chosen already: feed it
            if seq.wants_rows:
                self._record_forced(seq, logits, seq.queue[0])
            seq.feed, seq.queue = seq.queue, []
            seq.keep = len(seq.feed) if seq.wants_rows else 1
            return
        matcher = seq.matcher
        if only_eos_left(matcher, self.eos):
            return self._finish(seq, STOP)
        if len(seq.tokens) >= job.max_tokens:
            return self._finish(seq, LENGTH)
        started = time.perf_counter()
        if matcher is not None:
            matcher.fill_bitmask(bitmask, i)
        self.metrics.observe("mask", time.perf_counter() - started)
        (token,), stats = seq.sampler.step(
            logits[None], bitmask[i:i + 1] if matcher is not None else None, [seq.penalized],
            with_stats=job.diagnostics)
        for st in stats:
            seq.stats.append((st.kl, st.legal_mass, st.forced, st.raw_argmax_legal))
        if job.top_logprobs is not None:
            seq.pending_logprobs.append(self._logprob_entry(logits, token, job.top_logprobs))
        if token in self.eos:
            return self._finish(seq, STOP)
        if matcher is not None and not matcher.accept_token(token):
            raise AssertionError(f"token {token} was sampled outside its mask")
        self._append(seq, token)
        seq.penalized.append(token)
        if self._stopped_by_string(seq):
            return
        forced = self._forced(seq)
        for t in forced:
            self._append(seq, t)
        if self._stopped_by_string(seq):
            return
        self._send(seq)
        seq.feed = [token, *forced]
        seq.keep = len(seq.feed) if seq.wants_rows else 1

    def _forced(self, seq: _Sequence) -> list[int]:
        """Tokens the grammar forces next (accepted into the matcher), within max_tokens."""
        forced = forced_after(seq.matcher, seq.job.max_tokens - len(seq.tokens))
        seq.forced += len(forced)
        return forced

    def _append(self, seq: _Sequence, token: int) -> None:
        seq.tokens.append(token)
        seq.data += self.vocab.token_bytes(token)
        seq.job.completion_tokens += 1

    def _record_forced(self, seq: _Sequence, row: np.ndarray, token: int) -> None:
        """Diagnostics and logprobs of a fast-forwarded token (one legal token: KL = -log p)."""
        if seq.job.diagnostics:
            logprob = float(_log_softmax_at(row, token))
            seq.stats.append((-logprob, math.exp(logprob), True, int(np.argmax(row)) == token))
        if seq.job.top_logprobs is not None:
            seq.pending_logprobs.append(self._logprob_entry(row, token, seq.job.top_logprobs))

    def _logprob_entry(self, logits: np.ndarray, token: int, top: int) -> dict[str, Any]:
        """OpenAI's logprob object, under the model's raw distribution (before the mask)."""
        x = logits.astype(np.float64)
        logz = float(np.logaddexp.reduce(x[np.isfinite(x)])) if np.isfinite(x).any() else 0.0
        entry = self._token_entry(token, float(x[token]) - logz)
        if top:
            best = np.argpartition(-x, top - 1)[:top]
            best = best[np.argsort(-x[best], kind="stable")]
            entry["top_logprobs"] = [self._token_entry(int(t), float(x[t]) - logz)
                                     for t in best]
        else:
            entry["top_logprobs"] = []
        return entry

    def _token_entry(self, token: int, logprob: float) -> dict[str, Any]:
        data = self.vocab.token_bytes(token)
        return {"token": data.decode("utf-8", errors="replace"), "logprob": logprob,
                "bytes": list(data)}

    def _stopped_by_string(self, seq: _Sequence) -> bool:
        """Finish at the first stop string in the output (the text ends before it)."""
        if not seq.job.stops:
            return False
        text = seq.data.decode("utf-8", errors="replace")
        cut = min((k for k in (text.find(s) for s in seq.job.stops) if k >= 0), default=-1)
        if cut < 0:
            return False
        seq.data = bytearray(text[:cut].encode("utf-8"))
        self._finish(seq, STOP)
        return True

    def _send(self, seq: _Sequence, final: bool = False) -> None:
        """Emit the output's new text: complete UTF-8 only, and (unless final) not the tail
        that could still become a stop string."""
        end = len(seq.data) if final else _complete_utf8(seq.data)
        text = bytes(seq.data[seq.sent:end]).decode("utf-8", errors="replace")
        if not final and seq.job.stops:
            held = max((k for s in seq.job.stops for k in range(1, len(s))
                        if text.endswith(s[:k])), default=0)
            text = text[:len(text) - held]
            end = seq.sent + len(text.encode("utf-8"))
        if text or seq.pending_logprobs:
            seq.job.emit(Delta(seq.index, text, seq.pending_logprobs))
            seq.pending_logprobs = []
            seq.sent = end

    def _finish(self, seq: _Sequence, reason: str) -> None:
        self._send(seq, final=True)
        job = seq.job
        complete = seq.matcher.is_accepting() if seq.matcher is not None else reason == STOP
        job.emit(Finished(seq.index, reason, seq.data.decode("utf-8", errors="replace"),
                          len(seq.tokens), complete,
                          _diagnostics(seq) if job.diagnostics else None))
        self.metrics.count("completion_tokens_total", value=len(seq.tokens))
        self._close(seq)
        job.finished += 1
        if job.finished == job.n:
            job.emit(JobDone(len(job.prompt), job.completion_tokens, job.cached_tokens))

    def _fail(self, job: Job, error: RequestError) -> None:
        if not job.cancelled:
            job.emit(JobFailed(error))
        job.cancel()
        for seq in [s for s in self._running if s.job is job]:
            self._close(seq)

    def _close(self, seq: _Sequence) -> None:
        if seq in self._running:
            self._running.remove(seq)
            self.runner.close(seq.slot)


def _diagnostics(seq: _Sequence) -> dict[str, Any]:
    """The per-choice summary of what the constraint did (the ``automask`` response object)."""
    stats = seq.stats
    sampled = [s for s in stats if not s[2]]
    kls = [s[0] for s in stats if math.isfinite(s[0])]
    return {
        "steps": len(stats),
        "forced_tokens": seq.forced,
        "forced_share": seq.forced / len(seq.tokens) if seq.tokens else 0.0,
        "legal_mass_mean": float(np.mean([s[1] for s in sampled])) if sampled else 1.0,
        "legal_mass_min": float(min(s[1] for s in sampled)) if sampled else 1.0,
        "kl_mean": float(np.mean(kls)) if kls else 0.0,
        "kl_max": float(max(kls)) if kls else 0.0,
        "top_choice_changed": sum(1 for s in sampled if not s[3]),
    }


def _log_softmax_at(row: np.ndarray, token: int) -> float:
    x = row.astype(np.float64)
    finite = x[np.isfinite(x)]
    return float(x[token] - np.logaddexp.reduce(finite)) if finite.size else -math.inf


def _complete_utf8(data: bytearray) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 character."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b < 0x80:
            return n
        if b >= 0xC0:  # a lead byte: is its character complete?
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return n if back >= need else n - back
    return n
