"""The model side of the decode loop: a tiny protocol over "give me logits after these ids".

The loop needs three things from a model: run a prompt, extend a sequence by
one *or several* tokens in one forward pass (fast-forwarding forced tokens),
and copy a sequence's state (beams). :class:`Decoder` is that protocol;
:func:`as_decoder` adapts what users have:

* a Hugging Face causal LM, or any object with its forward signature
  (``model(input_ids=..., past_key_values=..., use_cache=True)`` returning
  ``.logits`` and ``.past_key_values``; from transformers 5.24 the cache is
  named ``cache`` both ways, and the old name is deprecated): :class:`HFCausalLM`,
  which keeps the KV cache, so a step costs one token of compute;
* a plain callable ``fn(ids) -> logits (V,)`` (tests, toy models; no torch
  needed): :class:`CallableLM`, one call per position;
* an object that already has ``start``/``extend``/``fork``.

Logits come back as host ``float32`` NumPy rows: the sampler works on the
host anyway, and one row is ``4 * V`` bytes.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Decoder(Protocol):
    """Logits after a sequence of ids, with an opaque per-sequence state (a KV cache).

    Optional attributes the loop reads when present: ``width`` (the logits
    width, to size the vocabulary before the first pass) and ``eos_token_ids``
    (end-of-output ids beyond the tokenizer's own).
    """

    forward_passes: int

    def start(self, ids: Sequence[int], keep: int = 1) -> tuple[Any, np.ndarray]:
        """Run ``ids`` from scratch; (state, logits of the last ``keep`` positions, (keep, V))."""
        ...

    def extend(self, state: Any, ids: Sequence[int]) -> tuple[Any, np.ndarray]:
        """Append ``ids`` in one forward pass; (state, logits at each of them, (len(ids), V)).

        The returned state may be ``state`` itself, updated in place.
        """
        ...

    def fork(self, state: Any) -> Any:
        """An independent copy of ``state`` (for beams)."""
        ...


def logits_width(model: Any) -> int | None:
    """The logits width a model announces (config, output embeddings), or None."""
    width = getattr(model, "vocab_size", None)
    if isinstance(width, int):
        return width
    config = getattr(model, "config", None)
    for cfg in (getattr(config, "text_config", None), config):
        width = getattr(cfg, "vocab_size", None)
        if isinstance(width, int):
            return width
    get = getattr(model, "get_output_embeddings", None)
    if callable(get):
        try:
            head = get()
            return int(head.weight.shape[0])
        except Exception:  # models without a plain linear head
            return None
    return None


def model_eos_ids(model: Any) -> list[int]:
    """End-of-output ids a model's generation config (or config) names."""
    ids: list[int] = []
    for cfg in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        value = getattr(cfg, "eos_token_id", None)
        if isinstance(value, int) and not isinstance(value, bool):
            ids.append(value)
        elif isinstance(value, (list, tuple)):
            ids.extend(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    return list(dict.fromkeys(ids))


class HFCausalLM:
    """A Hugging Face causal LM (or anything with its forward signature) with a KV cache."""

    def __init__(self, model: Any):
        self.model = model
        self.forward_passes = 0
        self.width = logits_width(model)
        self.eos_token_ids = model_eos_ids(model)
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError, AttributeError):
            params = {}
        self._keep_arg = next((n for n in ("logits_to_keep", "num_logits_to_keep")
                               if n in params), None)
        # The KV cache's argument: "cache" where the forward names it so (the old name
        # warns there, and goes away in transformers 5.40), "past_key_values" before.
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._device = _device_of(model)

    def _run(self, ids: Sequence[int], cache: Any, keep: int) -> tuple[Any, np.ndarray]:
        import torch

        kwargs: dict[str, Any] = {
            "input_ids": torch.tensor([list(ids)], dtype=torch.long, device=self._device),
            self._cache_arg: cache,
            "use_cache": True,
        }
        if self._keep_arg is not None:
            kwargs[self._keep_arg] = keep
        with torch.no_grad():  # no_grad, not inference_mode: beams deep-copy the cache
            out = self.model(**kwargs)
        self.forward_passes += 1
        logits = out.logits[0, -keep:]
        rows = logits.detach().to(device="cpu", dtype=torch.float32).numpy()
        found = getattr(out, "cache", None)  # (transformers >= 5.24; the old name still works)
        return (out.past_key_values if found is None else found), rows

    def start(self, ids: Sequence[int], keep: int = 1) -> tuple[Any, np.ndarray]:
        if not ids:
            raise ValueError("the prompt is empty: a causal LM needs at least one input token")
        return self._run(ids, None, keep)

    def extend(self, state: Any, ids: Sequence[int]) -> tuple[Any, np.ndarray]:
        return self._run(ids, state, len(ids))

    def fork(self, state: Any) -> Any:
        return copy.deepcopy(state)


class CallableLM:
    """A plain function ``fn(ids) -> logits (V,)`` as a decoder (no cache: one call a position).

    One :meth:`extend` still counts as one forward pass, since a real model
    would do the same work in one.
    """

    def __init__(self, fn: Callable[[list[int]], Any], width: int | None = None):
        self.fn = fn
        self.forward_passes = 0
        self.width = width if width is not None else logits_width(fn)

    def _rows(self, seq: list[int], n: int) -> np.ndarray:
        out = [np.asarray(self.fn(seq[: len(seq) - n + i + 1]), dtype=np.float32).reshape(-1)
               for i in range(n)]
        return np.stack(out)

    def start(self, ids: Sequence[int], keep: int = 1) -> tuple[Any, np.ndarray]:
        seq = list(ids)
        self.forward_passes += 1
        return seq, self._rows(seq, keep)

    def extend(self, state: Any, ids: Sequence[int]) -> tuple[Any, np.ndarray]:
        state.extend(ids)
        self.forward_passes += 1
        return state, self._rows(state, len(ids))

    def fork(self, state: Any) -> Any:
        return list(state)


def as_decoder(model: Any) -> Decoder:
    """Adapt ``model`` (see the module docstring for what is accepted)."""
    if all(callable(getattr(model, n, None)) for n in ("start", "extend", "fork")):
        return model
    if hasattr(model, "forward") or hasattr(model, "config"):
        return HFCausalLM(model)
    if callable(model):
        return CallableLM(model)
    raise TypeError(f"cannot use {type(model).__name__} as a model: expected a Hugging Face "
                    "causal LM, a callable ids -> logits, or a Decoder")


def _device_of(model: Any) -> Any:
    device = getattr(model, "device", None)
    if device is not None:
        return device
    params = getattr(model, "parameters", None)
    if callable(params):
        for p in params():
            return p.device
    return "cpu"
