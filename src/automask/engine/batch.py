"""Batch mask fill: the masks of many sequences into one bitmask, in one call.

An engine's step (vLLM's logits processor, SGLang's batch, our scheduler)
holds one bitmask for the whole batch; rows that carry no constraint (or
whose request finished) are left for the caller. The bitmask is turned into
a NumPy view once, not once per row, so the per-row cost is the mask itself.

Matchers that share a :class:`~automask.engine.compiled.CompiledGrammar` may
be filled from different threads at once (the compiled grammar's caches are
safe to share); one matcher must not be used by two threads at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from automask.bitmask import row_index, writable_words
from automask.engine.matcher import Matcher


def fill_bitmasks(matchers: Sequence[Matcher | None], bitmask: Any,
                  indices: Sequence[int] | None = None) -> None:
    """Fill row ``indices[i]`` of ``bitmask`` from ``matchers[i]`` (rows ``0..n-1`` by default).

    ``bitmask``: int32 ``(batch, ceil(V/32))``, a NumPy array or a CPU torch
    tensor (filled in place). ``None`` entries are skipped, their rows left
    as they are (an unconstrained row: the caller keeps it all-ones, or does
    not apply it). A terminated matcher (EOS accepted) writes the EOS-only
    row. Raises what :meth:`Matcher.fill_bitmask` raises (the same checks of type,
    dtype, shape and row index).
    """
    words, rows = batch_rows(bitmask, len(matchers), indices, "matchers")
    batch = words.shape[0]
    for matcher, row in zip(matchers, rows, strict=True):
        if matcher is None:
            continue
        matcher.write_row(words[row_index(row, batch)])


def batch_rows(bitmask: Any, count: int, indices: Sequence[int] | None,
               what: str) -> tuple[np.ndarray, Sequence[int]]:
    """What a batch fill checks before it writes any row: ``bitmask`` as 2-D int32 words
    to fill in place, and the row of each of ``count`` entries (``indices``, or
    ``0..count-1``); ``what`` names the entries in the error."""
    words = writable_words(bitmask)
    if words.ndim != 2:
        raise ValueError(f"bitmask must be 2-D (batch, words), not shape {words.shape}")
    rows = range(count) if indices is None else indices
    if len(rows) != count:
        raise ValueError(f"{count} {what} but {len(rows)} row indices")
    return words, rows
