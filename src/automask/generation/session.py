"""One generation's working set: decoder, vocabulary, matcher factory, and the shared steps.

The greedy/sampling loop and beam search both start the same way (prompt
plus forced prefix in one pass), advance the same way (a chosen token plus
the forced tokens after it in one pass), trace forced tokens the same way,
and finish the same way; those steps live here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.generation.decoder import Decoder
from automask.generation.params import GenerationParams
from automask.generation.results import FINISH_STOP, GenerationResult, StepRecord
from automask.sampling import StepStats, step_stats
from automask.vocab import Vocabulary

OnToken = Callable[[int], None]


def forced_after(matcher: Matcher | None, budget: int) -> list[int]:
    """Forced tokens to fast-forward (accepted into ``matcher``), at most ``budget``."""
    if matcher is None or budget <= 0 or matcher.is_terminated():
        return []
    forced = matcher.forced_tokens(max_tokens=budget)
    accepted = matcher.accept_tokens(forced)
    return forced[:accepted]


def only_eos_left(matcher: Matcher | None, eos: frozenset[int]) -> bool:
    """Accepting, and no token but EOS is legal: the output cannot grow any further."""
    if matcher is None:
        return False
    if matcher.is_terminated():
        return True
    if not matcher.is_accepting():
        return False
    return all(int(t) in eos for t in matcher.allowed_token_ids())


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

    def begin(self, matcher: Matcher | None, tokens: list[int],
              trace: list[StepRecord]) -> tuple[Any, np.ndarray]:
        """Run the prompt and the forced prefix; (state, logits of the first free step)."""
        forced = self.forced_after(matcher, self.params.max_tokens)
        now = forced if self.params.fast_forward else []
        state, rows = self.decoder.start(self.prompt + now, keep=len(now) + 1)
        self._check_width(rows)
        return self._take_forced(state, rows, forced, now, tokens, trace)

    def advance(self, state: Any, token: int, forced: list[int], tokens: list[int],
                trace: list[StepRecord]) -> tuple[Any, np.ndarray]:
        """Feed a chosen token and the forced tokens after it (already accepted by the
        matcher); (state, logits of the next free step)."""
        now = forced if self.params.fast_forward else []
        state, rows = self.decoder.extend(state, [token, *now])
        return self._take_forced(state, rows, forced, now, tokens, trace)

    def _check_width(self, rows: np.ndarray) -> None:
        width = rows.shape[-1]
        if width < self.vocab.size:
            raise ValueError(f"the model's logits have {width} columns but the vocabulary has "
                             f"{self.vocab.size} ids: wrong tokenizer for this model?")
        self.width = width

    def _take_forced(self, state: Any, rows: np.ndarray, forced: list[int], fed: list[int],
                     tokens: list[int], trace: list[StepRecord]) -> tuple[Any, np.ndarray]:
        """Append and trace the forced tokens; return (state, logits of the next free step).

        ``rows[i]`` is the distribution before ``fed[i]`` and ``rows[-1]`` the one
        after the last fed token. Forced tokens not fed yet (fast-forward off) are
        fed here one forward pass each, so both modes see the same logits.
        """
        parts = [rows]
        for token in forced[len(fed):]:
            state, more = self.decoder.extend(state, [token])
            parts.append(more)
        rows = np.concatenate(parts) if len(parts) > 1 else rows
        trace.extend(self.forced_records(len(trace), rows[: len(forced)], forced))
        tokens.extend(forced)
        self.forced += len(forced)
        if forced and self.on_token is not None:
            self.on_token(len(tokens))
        return state, rows[-1]

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
        return forced_after(matcher, budget)

    def only_eos_left(self, matcher: Matcher | None) -> bool:
        return only_eos_left(matcher, self.eos)

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
