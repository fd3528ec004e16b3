"""Beam search with one matcher per beam, so every beam stays inside the language.

Each beam owns a :class:`Matcher` (``fork`` on a split, which copies a list
of interned states) and a decoder state (the KV cache, deep-copied on a
split). Candidates are the legal tokens of each live beam, scored by the sum
of legal log-probabilities (``automask.sampling.legal_log_probs``: the
model's distribution renormalised over the legal tokens, so a forced token
costs nothing). EOS, legal only in an accepting state, moves a beam to the
finished pool without taking a live slot; so does an accepting state where
only EOS is legal. The search stops when ``num_beams`` hypotheses are
finished and none of the live beams can beat the best one (raw scores only
fall; with length normalisation this is the usual heuristic),
or when no beam is live, or at ``max_tokens``. The best finished hypothesis
wins; only when none finished does the best live beam (a valid prefix) win,
with ``finish_reason == "length"``.

Beams run one forward pass each per step (no batching): simple, and any
:class:`Decoder` works. Forced tokens are fast-forwarded per beam as in the
greedy loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from automask.bitmask import allocate_bitmask
from automask.engine.matcher import Matcher
from automask.generation.results import (
    FINISH_LENGTH,
    FINISH_STOP,
    BeamSummary,
    GenerationResult,
    StepRecord,
)
from automask.generation.session import Session
from automask.sampling import legal_log_probs, step_stats


@dataclass
class _Beam:
    tokens: list[int]
    matcher: Matcher | None
    state: Any
    logits: np.ndarray | None  # distribution of the next token (None once finished)
    score: float
    trace: list[StepRecord] = field(default_factory=list)
    reason: str = ""


def _normalised(session: Session, beam: _Beam) -> float:
    if session.params.length_normalize:
        return beam.score / max(1, len(beam.tokens))
    return beam.score


def beam_search(s: Session, started: float) -> GenerationResult:
    """Beam search over ``s`` (see the module docstring)."""
    p = s.params
    width_beams = p.num_beams
    matcher = s.matcher()
    tokens: list[int] = []
    trace: list[StepRecord] = []
    state, logits = s.begin(matcher, tokens, trace)
    live = [_Beam(tokens, matcher, state, logits, 0.0, trace)]
    done: list[_Beam] = []
    bitmask = allocate_bitmask(1, s.width)

    while live:
        candidates: list[tuple[float, int, int, np.ndarray | None]] = []
        still: list[_Beam] = []
        for beam in live:
            if s.only_eos_left(beam.matcher):
                beam.reason = FINISH_STOP
                done.append(beam)
                continue
            if len(beam.tokens) >= p.max_tokens:
                beam.reason = FINISH_LENGTH
                done.append(beam)
                continue
            still.append(beam)
            mask = None
            if beam.matcher is not None:
                beam.matcher.fill_bitmask(bitmask)
                mask = bitmask.copy()
            # a live beam: its logits are set (None once finished)
            logp = legal_log_probs(beam.logits[None], mask)[0]  # type: ignore[index]
            finite = np.flatnonzero(np.isfinite(logp))
            top = finite[np.argsort(-logp[finite], kind="stable")[:width_beams]]
            for t in top:
                candidates.append((beam.score + float(logp[t]), len(still) - 1, int(t), mask))
        live = still
        if not candidates:
            break
        candidates.sort(key=lambda c: -c[0])
        chosen: list[tuple[float, int, int, np.ndarray | None]] = []
        for cand in candidates:
            if len(chosen) >= width_beams:
                break
            score, i, t, mask = cand
            if t in s.eos:
                done.append(_finish_eos(s, live[i], t, score, mask))
            else:
                chosen.append(cand)
        live = _expand(s, live, chosen)
        stopping = [b for b in done if b.reason == FINISH_STOP]
        if len(stopping) >= width_beams and live:
            best_done = max(_normalised(s, b) for b in stopping)
            if best_done >= max(_normalised(s, b) for b in live):
                break
    return _result(s, done, live, started)


def _finish_eos(s: Session, beam: _Beam, token: int, score: float, mask) -> _Beam:
    """A finished copy of ``beam`` ending with EOS (the EOS is traced, not in the tokens)."""
    (stats,) = step_stats(beam.logits[None], mask, [token], forced=False)  # type: ignore[index]  # live
    matcher = beam.matcher.fork() if beam.matcher is not None else None
    if matcher is not None:
        matcher.accept_token(token)
    trace = [*beam.trace, s.record(len(beam.trace), stats)]
    return _Beam(list(beam.tokens), matcher, None, None, score, trace, FINISH_STOP)


def _expand(s: Session, parents: list[_Beam], chosen: list) -> list[_Beam]:
    """The new live beams: each chosen (parent, token), with forced tokens fast-forwarded."""
    p = s.params
    uses = [sum(1 for c in chosen if c[1] == i) for i in range(len(parents))]
    out = []
    for score, i, token, mask in chosen:
        parent = parents[i]
        uses[i] -= 1
        last_use = uses[i] == 0
        matcher = parent.matcher
        state = parent.state
        if not last_use:  # the last child takes the parent's matcher and cache over
            matcher = matcher.fork() if matcher is not None else None
            state = s.decoder.fork(state)
        (stats,) = step_stats(parent.logits[None], mask, [token], forced=False)
        trace = [*parent.trace, s.record(len(parent.trace), stats)]
        tokens = [*parent.tokens, token]
        if matcher is not None and not matcher.accept_token(token):
            raise AssertionError(f"beam token {token} is refused by its matcher")
        forced = s.forced_after(matcher, p.max_tokens - len(tokens))
        beam = _Beam(tokens, matcher, state, None, score, trace)
        if not forced and (len(tokens) >= p.max_tokens or s.only_eos_left(matcher)):
            out.append(beam)  # decided at the next round; its logits are never read
            continue
        beam.state, beam.logits = s.advance(state, token, forced, beam.tokens, beam.trace)
        out.append(beam)
    if s.on_token is not None and out:
        s.on_token(max(len(b.tokens) for b in out))
    return out


def _result(s: Session, done: list[_Beam], live: list[_Beam], started: float) -> GenerationResult:
    finished = [b for b in done if b.reason == FINISH_STOP]
    rest = [b for b in done if b.reason != FINISH_STOP] + [
        _Beam(b.tokens, b.matcher, None, None, b.score, b.trace, FINISH_LENGTH) for b in live]
    ranked = sorted(finished, key=lambda b: -_normalised(s, b)) + \
        sorted(rest, key=lambda b: -_normalised(s, b))
    if not ranked:
        raise AssertionError("beam search ended without any hypothesis")
    best = ranked[0]
    summaries = []
    for b in ranked:
        text = s.vocab.decode_bytes(b.tokens).decode("utf-8", errors="replace")
        complete = b.matcher.is_accepting() if b.matcher is not None else \
            b.reason == FINISH_STOP
        summaries.append(BeamSummary(text, list(b.tokens), _normalised(s, b), complete,
                                     b.reason))
    return s.finish(best.tokens, best.trace, best.matcher, best.reason, started,
                    beams=summaries)
