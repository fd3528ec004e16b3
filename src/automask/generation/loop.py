"""``generate``: the constrained decode loop (greedy and sampling) over any :class:`Decoder`.

One step: the matcher's bitmask, the sampler's token, then the tokens the
grammar forces next (``Matcher.forced_tokens``) appended in the *same* forward
pass as the sampled token (fast-forward): a forward pass over ``k + 1``
tokens returns the logits at each of them, so the model's raw distribution of
every forced token is known and its step is traced like any other (one legal
token, ``KL = -log p(token)``).

Stopping: EOS accepted in an accepting state, or an accepting state where
nothing but EOS is legal (no forward pass is spent on it), is ``"stop"``;
``max_tokens`` running out first is ``"length"``, and the output is then a
valid prefix. ``grammar=None`` runs the same loop unconstrained, for
side-by-side comparison.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from automask.bitmask import allocate_bitmask
from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.generation.decoder import Decoder, as_decoder
from automask.generation.prepare import compiled_for, prompt_ids, vocabulary_for
from automask.generation.results import (
    FINISH_LENGTH,
    FINISH_STOP,
    GenerationResult,
    StepRecord,
)
from automask.grammar.ir import Grammar
from automask.sampling import Sampler, SamplingParams, StepStats, step_stats
from automask.vocab import Vocabulary

OnToken = Callable[[int], None]


@dataclass(frozen=True)
class GenerationParams:
    """Decoding settings; the defaults favour small models (see ``automask generate --help``).

    ``temperature == 0`` is greedy. ``repetition_penalty`` (HF/CTRL form) acts
    on the tokens generated so far, not on the prompt (a prompt that quotes a
    schema would otherwise penalise the very keys the output needs).
    ``num_beams > 1`` is beam search: deterministic, scored by the sum of legal
    log-probabilities (divided by the length when ``length_normalize``); the
    sampling settings and the penalty do not apply to it. ``chat_template``
    wraps a text prompt in the tokenizer's chat template as one user turn
    (after ``system_prompt`` if given). ``fast_forward=False`` feeds forced
    tokens one forward pass at a time (for comparison; same tokens).
    """

    max_tokens: int = 256
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    num_beams: int = 1
    length_normalize: bool = False
    chat_template: bool = True
    system_prompt: str | None = None
    fast_forward: bool = True

    def __post_init__(self) -> None:
        if self.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {self.max_tokens}")
        if self.num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")
        self.sampling()  # validates the sampling fields

    def sampling(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                              repetition_penalty=self.repetition_penalty)


class Session:
    """What one generation works with: decoder, vocabulary, compiled grammar, prompt ids."""

    def __init__(self, decoder: Decoder, vocab: Vocabulary, compiled: CompiledGrammar | None,
                 prompt: list[int], params: GenerationParams, on_token: OnToken | None):
        self.decoder = decoder
        self.vocab = vocab
        self.compiled = compiled
        self.prompt = prompt
        self.params = params
        self.on_token = on_token
        self.eos = frozenset(vocab.eos_token_ids)
        self.width = vocab.size
        self.forced = 0  # tokens appended because the grammar forced them
        self.passes_before = decoder.forward_passes  # a Decoder may be reused across calls

    def matcher(self) -> Matcher | None:
        return Matcher(self.compiled) if self.compiled is not None else None

    def token_text(self, token: int) -> str:
        return self.vocab.token_bytes(token).decode("utf-8", errors="backslashreplace")

    def record(self, step: int, stats: StepStats) -> StepRecord:
        return StepRecord(step=step, token=stats.token, text=self.token_text(stats.token),
                          legal_count=stats.legal_count, rejection_mass=stats.rejection_mass,
                          kl=stats.kl, forced=stats.forced, raw_argmax=stats.raw_argmax,
                          raw_argmax_legal=stats.raw_argmax_legal, logprob=stats.token_logprob)

    def forced_records(self, first_step: int, rows: np.ndarray,
                       forced: Sequence[int]) -> list[StepRecord]:
        """Trace records of fast-forwarded tokens: row ``i`` holds the logits before ``forced[i]``.

        Each is measured as a step with one legal token (itself), so its KL is
        ``-log p(token)`` under the model's raw distribution.
        """
        out = []
        for i, token in enumerate(forced):
            mask = np.zeros((1, (self.width + 31) // 32), dtype=np.int32)
            mask.view(np.uint32)[0, token >> 5] = np.uint32(1 << (token & 31))
            (stats,) = step_stats(rows[i][None], mask, [token], forced=True)
            out.append(self.record(first_step + i, stats))
        return out

    def forced_after(self, matcher: Matcher | None, budget: int) -> list[int]:
        """Forced tokens to fast-forward (accepted into ``matcher``), at most ``budget``."""
        if matcher is None or budget <= 0 or matcher.is_terminated():
            return []
        forced = matcher.forced_tokens(max_tokens=budget)
        accepted = matcher.accept_tokens(forced)
        return forced[:accepted]

    def only_eos_left(self, matcher: Matcher | None) -> bool:
        """Accepting, and no token but EOS is legal: the output cannot grow any further."""
        if matcher is None:
            return False
        if matcher.is_terminated():
            return True
        if not matcher.is_accepting():
            return False
        return all(int(t) in self.eos for t in matcher.allowed_token_ids())

    def finish(self, tokens: list[int], trace: list[StepRecord], matcher: Matcher | None,
               reason: str, started: float, beams: list | None = None) -> GenerationResult:
        text = self.vocab.decode_bytes(tokens).decode("utf-8", errors="replace")
        if matcher is None:
            complete = reason == FINISH_STOP
        else:
            complete = matcher.is_accepting()
        value = None
        if complete and self.compiled is not None and \
                self.compiled.grammar.source == "json-schema":
            try:
                value = json.loads(text)
            except ValueError:
                value = None
        return GenerationResult(
            text=text, value=value, tokens=list(tokens), finish_reason=reason,
            complete=complete, trace=trace, prompt_tokens=len(self.prompt),
            forward_passes=self.decoder.forward_passes - self.passes_before,
            forward_passes_saved=self.forced if self.params.fast_forward else 0,
            forced_tokens=self.forced,
            seconds=time.perf_counter() - started, constrained=self.compiled is not None,
            beams=beams or [])


def generate(model: Any, tokenizer: Any, prompt: str | Sequence[int],
             grammar: Grammar | CompiledGrammar | None = None,
             params: GenerationParams | None = None, *, on_token: OnToken | None = None,
             **overrides: Any) -> GenerationResult:
    """Generate from ``model`` under ``grammar`` (None: unconstrained, through the same loop).

    ``model``: a Hugging Face causal LM, a callable ``ids -> logits``, or a
    :class:`~automask.generation.decoder.Decoder`. ``tokenizer``: a
    transformers tokenizer or an automask :class:`Vocabulary`. ``prompt``:
    text (chat-templated when the tokenizer has a template) or token ids.
    Keyword ``overrides`` replace fields of ``params`` (``max_tokens=64``).
    ``on_token`` is called with the number of tokens generated so far.
    """
    params = replace(params or GenerationParams(), **overrides)
    started = time.perf_counter()
    decoder = as_decoder(model)
    if isinstance(grammar, CompiledGrammar):
        vocab = grammar.vocab
    else:
        vocab = vocabulary_for(tokenizer, getattr(decoder, "width", None),
                               getattr(decoder, "eos_token_ids", ()))
    compiled = compiled_for(grammar, vocab) if grammar is not None else None
    ids = prompt_ids(tokenizer, prompt, chat_template=params.chat_template,
                     system_prompt=params.system_prompt)
    session = Session(decoder, vocab, compiled, ids, params, on_token)
    if params.num_beams > 1:
        from automask.generation.beams import beam_search

        return beam_search(session, started)
    return _sample(session, started)


def _check_width(session: Session, rows: np.ndarray) -> None:
    width = rows.shape[-1]
    if width < session.vocab.size:
        raise ValueError(f"the model's logits have {width} columns but the vocabulary has "
                         f"{session.vocab.size} ids: wrong tokenizer for this model?")
    session.width = width


def _sample(s: Session, started: float) -> GenerationResult:
    """Greedy or sampled decoding of one sequence."""
    p = s.params
    sampler = Sampler(p.sampling(), seed=p.seed)
    matcher = s.matcher()
    tokens: list[int] = []
    trace: list[StepRecord] = []

    forced = s.forced_after(matcher, p.max_tokens)
    now = forced if p.fast_forward else []
    state, rows = s.decoder.start(s.prompt + now, keep=len(now) + 1)
    _check_width(s, rows)
    state, logits = _take_forced(s, state, rows, forced, now, tokens, trace)
    bitmask = allocate_bitmask(1, s.width)

    while True:
        if s.only_eos_left(matcher):
            return s.finish(tokens, trace, matcher, FINISH_STOP, started)
        if len(tokens) >= p.max_tokens:
            return s.finish(tokens, trace, matcher, FINISH_LENGTH, started)
        if matcher is not None:
            matcher.fill_bitmask(bitmask)
        (token,), (stats,) = sampler.step(logits[None], bitmask if matcher else None, [tokens])
        trace.append(s.record(len(trace), stats))
        if token in s.eos:
            if matcher is not None:
                matcher.accept_token(token)
            return s.finish(tokens, trace, matcher, FINISH_STOP, started)
        if matcher is not None and not matcher.accept_token(token):
            raise AssertionError(f"the sampler chose token {token}, which the mask refuses")
        tokens.append(token)
        if s.on_token is not None:
            s.on_token(len(tokens))
        forced = s.forced_after(matcher, p.max_tokens - len(tokens))
        if not forced and (len(tokens) >= p.max_tokens or s.only_eos_left(matcher)):
            continue  # finished: no forward pass for logits nobody would read
        now = forced if p.fast_forward else []
        state, rows = s.decoder.extend(state, [token, *now])
        state, logits = _take_forced(s, state, rows, forced, now, tokens, trace)


def _take_forced(s: Session, state: Any, rows: np.ndarray, forced: list[int], fed: list[int],
                 tokens: list[int], trace: list[StepRecord]) -> tuple[Any, np.ndarray]:
    """Append and trace the forced tokens; return (state, logits of the next free step).

    ``rows[i]`` is the distribution before ``fed[i]`` and ``rows[-1]`` the one
    after the last fed token. Forced tokens not fed yet (fast-forward off) are
    fed here one forward pass each, so both modes see the same logits.
    """
    parts = [rows]
    for token in forced[len(fed):]:
        state, more = s.decoder.extend(state, [token])
        parts.append(more)
    rows = np.concatenate(parts) if len(parts) > 1 else rows
    trace.extend(s.forced_records(len(trace), rows[: len(forced)], forced))
    tokens.extend(forced)
    s.forced += len(forced)
    if forced and s.on_token is not None:
        s.on_token(len(tokens))
    return state, rows[-1]
