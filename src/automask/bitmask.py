"""Token bitmasks: allocation, application to logits, and conversions.

Layout (shared with xgrammar and llguidance, so their kernels accept ours):
``int32`` words, shape ``(batch, ceil(vocab_size / 32))``; token ``t`` is bit
``t % 32`` of word ``t // 32``, least-significant bit first; 1 = allowed.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def allocate_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """A ``(batch, ceil(vocab_size/32))`` int32 bitmask, every token allowed (-1 words)."""
    return np.full((batch, bitmask_words(vocab_size)), -1, dtype=np.int32)


def writable_words(bitmask: Any) -> np.ndarray:
    """A bitmask to fill in place, as a NumPy int32 view of its memory (1-D or 2-D).

    Takes NumPy arrays and CPU torch tensors; refuses what a fill could not
    write through (:class:`TypeError`: a list, whose copy would be filled and
    lost) or would write bit patterns into (:class:`ValueError`: a float or any
    other dtype than int32).
    """
    if type(bitmask) is not np.ndarray:  # (a NumPy array, the common case, skips these)
        if _is_torch(bitmask):
            if bitmask.device.type != "cpu":
                raise ValueError(f"a bitmask is filled on the CPU (it is on {bitmask.device}): "
                                 "fill a CPU tensor, then move it")
        elif not isinstance(bitmask, np.ndarray):
            raise TypeError("a bitmask is filled in place: it must be a NumPy array or a CPU "
                            f"torch tensor of int32, not {type(bitmask).__name__}")
    words = np.asarray(bitmask)
    if words.dtype != np.int32:
        raise ValueError(f"a bitmask is int32 words, not {getattr(bitmask, 'dtype', words.dtype)}"
                        " (see automask.allocate_bitmask)")
    if words.ndim not in (1, 2):
        raise ValueError(f"a bitmask is (W,) or (batch, W), not shape {words.shape}")
    return words


def row_index(index: object, rows: int) -> int:
    """``index`` as a row of a bitmask with ``rows`` rows: an integer in ``[0, rows)``
    (negative indices are refused, not counted from the end)."""
    if type(index) is int and 0 <= index < rows:  # (the common case, first)
        return index
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"a bitmask row index is an integer, not {type(index).__name__}")
    if not 0 <= index < rows:
        raise IndexError(f"row {index} is outside the bitmask's {rows} "
                         f"row{'s' if rows != 1 else ''}")
    return int(index)


def unpack_bitmask(bitmask: Any, width: int) -> np.ndarray:
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


def apply_bitmask(logits: Any, bitmask: Any) -> Any:
    """Set disallowed logits to ``-inf``, in place; returns ``logits``.

    Works on NumPy arrays and torch tensors (any device: the mask is moved to
    the logits' device). ``logits`` is ``(batch, V)`` or ``(V,)`` and may be
    wider than the mask (the padding ids are disallowed). ``bitmask`` is
    integer words, ``(batch, W)`` (one row per row of logits; a single row,
    or a 1-D mask, applies to every row).

    Raises :class:`TypeError` for logits that cannot be masked in place (a
    list), :class:`ValueError` for a dtype that cannot be (integer logits; a
    float or boolean mask is not integer words) and for shapes that do not
    match.
    """
    if _is_torch(logits):
        return _apply_torch(logits, bitmask)
    if not isinstance(logits, np.ndarray):
        raise TypeError("apply_bitmask masks logits in place: they must be a NumPy array or "
                        f"a torch tensor, not {type(logits).__name__}")
    if not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(f"logits must be floating point (masked ones become -inf), "
                        f"not {logits.dtype}")
    words = np.asarray(bitmask.cpu() if _is_torch(bitmask) else bitmask)
    _check_mask(logits.shape, words.shape, words.dtype.kind)
    allowed = unpack_bitmask(words, logits.shape[-1])
    if allowed.ndim == 2 and (logits.ndim == 1 or allowed.shape[0] == 1):
        allowed = allowed[0]
    logits[np.broadcast_to(~allowed, logits.shape)] = -np.inf
    return logits


def _is_torch(x: object) -> bool:
    return type(x).__module__.startswith("torch")


def _check_mask(logits_shape: tuple, mask_shape: tuple, kind: str) -> None:
    """Refuse a mask that is not integer words, or whose shape does not fit the logits."""
    if kind not in "iu":
        raise ValueError(f"a bitmask is integer words (int32), not {kind!r}-kind values "
                        "(a float or boolean array is not a packed mask)")
    if len(logits_shape) not in (1, 2):
        raise ValueError(f"logits must be (V,) or (batch, V), not shape {tuple(logits_shape)}")
    if len(mask_shape) not in (1, 2):
        raise ValueError(f"a bitmask is (W,) or (batch, W), not shape {tuple(mask_shape)}")
    if len(mask_shape) == 2:
        rows = mask_shape[0]
        batch = 1 if len(logits_shape) == 1 else logits_shape[0]
        if rows not in (1, batch):
            raise ValueError(f"the bitmask has {rows} rows but the logits (shape "
                             f"{tuple(logits_shape)}) have {batch}: a mask needs one row per "
                             "row of logits, or a single row")


def _apply_torch(logits: Any, bitmask: Any) -> Any:
    import torch

    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point (masked ones become -inf), "
                        f"not {logits.dtype}")
    if isinstance(bitmask, torch.Tensor):
        kind = "i" if not bitmask.is_floating_point() and not bitmask.is_complex() and \
            bitmask.dtype != torch.bool else "f"
        shape = tuple(bitmask.shape)
    else:
        bitmask = np.asarray(bitmask)
        kind, shape = bitmask.dtype.kind, bitmask.shape
    _check_mask(tuple(logits.shape), shape, kind)
    width = logits.shape[-1]
    mask = torch.as_tensor(np.asarray(bitmask.cpu() if hasattr(bitmask, "cpu") else bitmask),
                           dtype=torch.int32).to(logits.device)
    mask = mask.reshape(-1, mask.shape[-1])
    ids = torch.arange(width, device=logits.device)
    words = ids >> 5
    in_range = words < mask.shape[1]
    bits = (mask[:, words.clamp(max=mask.shape[1] - 1)] >> (ids & 31)) & 1
    allowed = (bits == 1) & in_range
    if logits.dim() == 1:
        allowed = allowed[0]
    elif allowed.shape[0] == 1:
        allowed = allowed.expand(logits.shape[0], -1)
    logits.masked_fill_(~allowed, float("-inf"))
    return logits
