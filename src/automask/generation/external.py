"""The decode loop of :func:`automask.generate` driven by another engine's matcher.

Benchmarks compare engines *inside the same loop* (same prompt ids, same
sampler, same fast-forwarding, same stopping rules), so that the only thing
that differs is where the masks come from. :func:`generate_with_matcher`
takes a factory of matcher-like objects instead of a grammar; anything with
the methods of :class:`automask.Matcher` that the loop calls will do (see
:class:`MatcherLike`). Beam search is not offered here: it forks matchers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from automask.generation.decoder import as_decoder
from automask.generation.loop import _sample
from automask.generation.params import GenerationParams
from automask.generation.prepare import prompt_ids, vocabulary_for
from automask.generation.results import GenerationResult
from automask.generation.session import OnToken, Session
from automask.vocab import Vocabulary


class MatcherLike(Protocol):
    """What the greedy/sampling loop asks of a matcher."""

    def fill_bitmask(self, bitmask: np.ndarray) -> Any: ...

    def accept_token(self, token: int) -> bool: ...

    def accept_tokens(self, tokens: Sequence[int]) -> int: ...

    def forced_tokens(self, max_tokens: int) -> list[int]: ...

    def is_terminated(self) -> bool: ...

    def is_accepting(self) -> bool: ...

    def allowed_token_ids(self) -> np.ndarray: ...


class _ExternalSession(Session):
    """A session whose matchers come from a factory instead of a CompiledGrammar."""

    def __init__(self, new_matcher: Callable[[], MatcherLike], *args: Any) -> None:
        super().__init__(*args)
        self._new_matcher = new_matcher

    def matcher(self) -> Any:
        return self._new_matcher()


def loop_vocabulary(model: Any, tokenizer: Any) -> tuple[Any, Vocabulary]:
    """(decoder, Vocabulary) exactly as :func:`automask.generate` sizes them for ``model``,
    so an external engine can be built for the same ids and logits width."""
    decoder = as_decoder(model)
    vocab = vocabulary_for(tokenizer, getattr(decoder, "width", None),
                           getattr(decoder, "eos_token_ids", ()))
    return decoder, vocab


def generate_with_matcher(model: Any, tokenizer: Any, prompt: str | Sequence[int],
                          new_matcher: Callable[[], MatcherLike],
                          params: GenerationParams | None = None, *,
                          on_token: OnToken | None = None,
                          **overrides: Any) -> GenerationResult:
    """Greedy or sampled generation, masks from ``new_matcher()`` (one call per generation).

    The result is that of :func:`automask.generate` with ``constrained`` True
    and ``value`` None (no automask grammar says the output is JSON).
    """
    params = replace(params or GenerationParams(), **overrides)
    if params.num_beams > 1:
        raise ValueError("generate_with_matcher does not do beam search")
    started = time.perf_counter()
    decoder, vocab = loop_vocabulary(model, tokenizer)
    ids = prompt_ids(tokenizer, prompt, chat_template=params.chat_template,
                     system_prompt=params.system_prompt)
    session = _ExternalSession(new_matcher, decoder, vocab, None, ids, params, on_token)
    result = _sample(session, started)
    result.constrained = True
    return result
