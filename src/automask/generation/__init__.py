"""Generation: a constrained decode loop over a causal LM, and loading the default model.

``generate(model, tokenizer, prompt, grammar, params)`` runs greedy,
sampled or beam-search decoding with one matcher per sequence, fast-forwards
forced tokens in one forward pass, and returns the output with a per-step
trace. ``load_model()`` loads the default SmolLM2 GGUF (or a named model)
through transformers.
"""

from automask.generation.decoder import CallableLM, Decoder, HFCausalLM, as_decoder
from automask.generation.loop import GenerationParams, generate
from automask.generation.models import LoadedModel, ModelUnavailable, load_model
from automask.generation.results import (
    FINISH_LENGTH,
    FINISH_STOP,
    BeamSummary,
    GenerationResult,
    StepRecord,
)

__all__ = [
    "FINISH_LENGTH",
    "FINISH_STOP",
    "BeamSummary",
    "CallableLM",
    "Decoder",
    "GenerationParams",
    "GenerationResult",
    "HFCausalLM",
    "LoadedModel",
    "ModelUnavailable",
    "StepRecord",
    "as_decoder",
    "generate",
    "load_model",
]
