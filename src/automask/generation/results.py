"""What a generation returns: the output, why it stopped, and a per-step trace (plain data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FINISH_STOP = "stop"  # EOS accepted in an accepting state, or nothing but EOS was legal
FINISH_LENGTH = "length"  # max_tokens ran out first: the output is a prefix of the language


@dataclass(frozen=True)
class StepRecord:
    """One generated token and what the constraint did at that step.

    ``legal_count``, ``rejection_mass`` (probability the model put on illegal
    tokens) and ``kl`` (``KL(constrained || raw) = -log(legal mass)``) are
    measured on the model's raw distribution (softmax of the logits,
    temperature 1). A ``forced`` token was appended without sampling
    (fast-forward): its step counts one legal token, so ``kl`` is
    ``-log p(token)``. ``raw_argmax_legal`` says whether the model's own top
    choice was allowed. ``logprob`` is ``log p(token)`` under the raw distribution.
    """

    step: int
    token: int
    text: str
    legal_count: int
    rejection_mass: float
    kl: float
    forced: bool
    raw_argmax: int
    raw_argmax_legal: bool
    logprob: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BeamSummary:
    """One final hypothesis of a beam search (best first in the result)."""

    text: str
    tokens: list[int]
    score: float
    complete: bool
    finish_reason: str


@dataclass
class GenerationResult:
    """The output of :func:`automask.generate`.

    ``complete`` is True when the output is a whole string of the language
    (the matcher accepts it); with ``finish_reason == "length"`` it is usually
    False: the output is then a valid *prefix*, not a valid document. ``value``
    is the parsed JSON for a JSON Schema grammar when the output is complete,
    else None. ``tokens`` are the generated ids without the final EOS.
    ``forced_tokens`` counts the tokens appended because the grammar forced
    them (``Matcher.forced_tokens``); ``forward_passes_saved`` the passes
    fast-forwarding them avoided (one per forced token). Trace steps marked
    ``forced`` are those, plus any sampled step that had a single legal token.
    With beams, the counts cover every beam.
    """

    text: str
    value: Any
    tokens: list[int]
    finish_reason: str
    complete: bool
    trace: list[StepRecord]
    prompt_tokens: int
    forward_passes: int
    forward_passes_saved: int
    forced_tokens: int
    seconds: float
    constrained: bool
    beams: list[BeamSummary] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready plain data."""
        return asdict(self)
