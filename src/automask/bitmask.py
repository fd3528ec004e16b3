"""Token bitmasks: allocation, application to logits, and conversions.

Layout (shared with xgrammar and llguidance, so their kernels accept ours):
``int32`` words, shape ``(batch, ceil(vocab_size / 32))``; token ``t`` is bit
``t % 32`` of word ``t // 32``, least-significant bit first; 1 = allowed.
"""

from __future__ import annotations

import numpy as np


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def allocate_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """A ``(batch, ceil(vocab_size/32))`` int32 bitmask, every token allowed (-1 words)."""
    return np.full((batch, bitmask_words(vocab_size)), -1, dtype=np.int32)


def unpack_bitmask(bitmask, width: int) -> np.ndarray:
    """Boolean ``(batch, width)`` (or ``(width,)``) array of allowed tokens; bits past the
    mask are disallowed."""
    words = np.ascontiguousarray(np.asarray(bitmask), dtype=np.int32)
    squeeze = words.ndim == 1
    words = words.reshape(-1, words.shape[-1])
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little").astype(bool)
    if bits.shape[1] < width:
        bits = np.pad(bits, ((0, 0), (0, width - bits.shape[1])))
    bits = bits[:, :width]
    return bits[0] if squeeze else bits


def apply_bitmask(logits, bitmask):
    """Set disallowed logits to ``-inf``, in place; returns ``logits``.

    Works on NumPy arrays and torch tensors (any device: the mask is moved to
    the logits' device). ``logits`` is ``(batch, V)`` or ``(V,)`` and may be
    wider than the mask (the padding ids are disallowed).
    """
    if type(logits).__module__.startswith("torch"):
        return _apply_torch(logits, bitmask)
    logits = np.asarray(logits)
    allowed = unpack_bitmask(bitmask, logits.shape[-1])
    if logits.ndim == 1 and allowed.ndim == 2:
        allowed = allowed[0]
    logits[~allowed] = -np.inf
    return logits


def _apply_torch(logits, bitmask):
    import torch

    width = logits.shape[-1]
    mask = torch.as_tensor(np.asarray(bitmask.cpu() if hasattr(bitmask, "cpu") else bitmask),
                           dtype=torch.int32).to(logits.device)
    squeeze = mask.dim() == 1
    mask = mask.reshape(-1, mask.shape[-1])
    ids = torch.arange(width, device=logits.device)
    words = ids >> 5
    in_range = words < mask.shape[1]
    bits = (mask[:, words.clamp(max=mask.shape[1] - 1)] >> (ids & 31)) & 1
    allowed = (bits == 1) & in_range
    if logits.dim() == 1:
        allowed = allowed[0]
    elif squeeze and allowed.shape[0] == 1:
        allowed = allowed.expand(logits.shape[0], -1)
    logits.masked_fill_(~allowed, float("-inf"))
    return logits
