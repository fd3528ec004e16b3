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

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from automask.bitmask import allocate_bitmask
from automask.engine.compiled import CompiledGrammar
from automask.generation.decoder import as_decoder
from automask.generation.params import GenerationParams
from automask.generation.prepare import compiled_for, prompt_ids, vocabulary_for
from automask.generation.results import FINISH_LENGTH, FINISH_STOP, GenerationResult, StepRecord
from automask.generation.session import OnToken, Session
from automask.grammar.ir import Grammar
from automask.sampling import Sampler

__all__ = ["GenerationParams", "generate"]


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


def _sample(s: Session, started: float) -> GenerationResult:
    """Greedy or sampled decoding of one sequence."""
    p = s.params
    sampler = Sampler(p.sampling(), seed=p.seed)
    matcher = s.matcher()
    tokens: list[int] = []
    trace: list[StepRecord] = []

    state, logits = s.begin(matcher, tokens, trace)
    bitmask = allocate_bitmask(1, s.width)
    penalized: list[int] = []  # what the repetition penalty looks at (see _penalizable)

    while True:
        if s.only_eos_left(matcher):
            return s.finish(tokens, trace, matcher, FINISH_STOP, started)
        if len(tokens) >= p.max_tokens:
            return s.finish(tokens, trace, matcher, FINISH_LENGTH, started)
        if matcher is not None:
            matcher.fill_bitmask(bitmask)
        (token,), (stats,) = sampler.step(logits[None], bitmask if matcher else None,
                                          [penalized])
        trace.append(s.record(len(trace), stats))
        if token in s.eos:
            if matcher is not None:
                matcher.accept_token(token)
            return s.finish(tokens, trace, matcher, FINISH_STOP, started)
        if matcher is not None and not matcher.accept_token(token):
            raise AssertionError(f"the sampler chose token {token}, which the mask refuses")
        tokens.append(token)
        if _penalizable(s.vocab.tokens[token] if token < len(s.vocab.tokens) else b""):
            penalized.append(token)
        if s.on_token is not None:
            s.on_token(len(tokens))
        forced = s.forced_after(matcher, p.max_tokens - len(tokens))
        if not forced and (len(tokens) >= p.max_tokens or s.only_eos_left(matcher)):
            continue  # finished: no forward pass for logits nobody would read
        state, logits = s.advance(state, token, forced, tokens, trace)


_STRUCTURE = frozenset(b'{}[],:" \t\n\r')


def _penalizable(data: bytes) -> bool:
    """Whether a sampled token counts for the repetition penalty.

    JSON repeats its punctuation, quotes and whitespace by design; penalizing
    them pushes a small model to close strings and arrays early. Content
    tokens (words, digits) are what loops are made of. Forced tokens never
    count: the model did not choose them.
    """
    return bool(data) and not set(data) <= _STRUCTURE
