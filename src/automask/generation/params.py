"""Decoding settings of :func:`automask.generate` (one frozen dataclass)."""

from __future__ import annotations

from dataclasses import dataclass

from automask.sampling import SamplingParams


@dataclass(frozen=True)
class GenerationParams:
    """Decoding settings; the defaults favour small models (see ``automask generate --help``).

    ``temperature == 0`` is greedy. ``repetition_penalty`` (HF/CTRL form) acts
    on the content tokens the model sampled so far: not on the prompt (a prompt
    that quotes a schema would otherwise penalise the very keys the output
    needs), not on forced tokens, and not on JSON punctuation, quotes or
    whitespace, which JSON repeats by design.
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
