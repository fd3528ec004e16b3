"""The model side of the explorer: logits after any token sequence, from one runner slot.

Why: the explorer jumps around (undo, roll back to any step, steer), while a
runner's slot only grows. :class:`ModelCursor` keeps one slot of a
:class:`~automask.generation.runners.BatchRunner` (the same runners
``automask serve`` uses: llama.cpp for GGUF files, transformers otherwise)
holding the last sequence asked for. Asking for a continuation feeds only the
new tokens; asking for anything else closes the slot and opens it again with
the new sequence as its prompt, which the runner's prefix cache serves from
the old KV cache up to where the two differ (llama.cpp), so a rollback costs
one short prefill rather than the whole prompt again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class ModelCursor:
    """Logits after token sequences, through one slot of a runner."""

    def __init__(self, runner: Any):
        self.runner = runner
        self._slot: int | None = None
        self._held: list[int] = []  # what the slot holds
        self._last: np.ndarray | None = None  # the logits after _held

    @property
    def width(self) -> int:
        return int(self.runner.width)

    @property
    def max_context(self) -> int:
        return int(self.runner.max_context)

    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """The logits after ``ids`` (one row, float32); ``ids`` must not be empty."""
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError("a model needs at least one token to predict the next")
        if self._last is not None and self._holds(ids):
            return self._last
        if len(ids) > 1 and self._holds(ids[:-1]):
            return self.extend(ids[:-1], ids[-1:])[-1]
        self.close()
        self._slot = self.runner.open(ids)
        cached = self.runner.length(self._slot)
        self._feed(ids[cached:], 1)
        self._held = ids
        assert self._last is not None
        return self._last

    def extend(self, base: Sequence[int], new: Sequence[int]) -> np.ndarray:
        """The logits after each of ``new`` appended to ``base`` (not empty), one row per new
        token, in one forward pass (fast-forwarded tokens are fed this way)."""
        base, new = [int(t) for t in base], [int(t) for t in new]
        if not new:
            raise ValueError("nothing to feed")
        if not self._holds(base):
            self.logits(base)
        rows = self._feed(new, len(new))
        self._held = base + new
        return rows

    def _feed(self, ids: list[int], keep: int) -> np.ndarray:
        """Feed the open slot; a failure the runner did not undo (not its all-or-nothing
        checks) leaves the slot closed, so the next call starts clean."""
        from automask.generation.runners import ContextFull

        try:
            rows = self.runner.feed([(self._slot, ids, keep)])[0]
        except (ContextFull, ValueError):
            raise
        except BaseException:
            self.close()
            raise
        self._last = rows[-1]
        return rows

    def _holds(self, ids: list[int]) -> bool:
        return self._slot is not None and self._held == ids

    def close(self) -> None:
        """Give the slot back (its KV cache stays with the runner for the next open)."""
        if self._slot is not None:
            self.runner.close(self._slot)
        self._slot, self._held, self._last = None, [], None
