"""Prefix caching for the batch runners: a prompt that starts like an earlier one is
prefilled only from where they differ.

Requests to one server share long prefixes: the chat template's head, a system
prompt, a tool preamble, the schema a client sends every time, the previous
turns of a conversation. Two tiers keep their KV caches, as llama.cpp's server
does with slot reuse and ``--cache-ram`` (vLLM and SGLang share KV blocks
between sequences instead, which needs a paged KV cache llama.cpp does not
expose):

* :class:`SlotTable`: a closed slot keeps its KV cache and the tokens in it; a
  new prompt takes the free slot that shares the longest prefix with it and
  the runner trims the cache past that prefix. Nothing is copied.
* :class:`PromptStore`: KV states copied out of slots into host memory, at
  most ``capacity`` bytes, least recently used first out. A slot's tokens are
  saved only when they are about to be cut (lazily: a slot that is reused
  as is costs nothing), and a stored state is copied back into a slot when it
  covers more of a new prompt than the slot it gets (so does another idle slot's
  cache, copied across, when the slot that holds the prompt is not one the
  new sequence may take). A slot whose new prompt
  keeps at least half of its tokens is not copied: what would be lost is the
  tail (typically the last answer), not the shared prefix.

Reuse stops one token short of the whole prompt: the last prompt token must be
fed for its logits to come back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def reusable(prompt: Sequence[int]) -> np.ndarray:
    """The part of ``prompt`` a cache may supply: all but its last token."""
    return np.asarray(prompt, dtype=np.int64)[:max(len(prompt) - 1, 0)]


def common_prefix(held: Sequence[int] | np.ndarray, want: np.ndarray) -> int:
    """How many leading ids ``held`` and ``want`` share."""
    n = min(len(held), len(want))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(held[:n], dtype=np.int64) != want[:n])
    return int(differ[0]) if differ.size else n


class SlotTable:
    """Which slots are open, the tokens each slot's KV cache holds (open or idle), and
    which free slot a new prompt takes.

    With ``reuse``, :meth:`choose` picks the free slot whose tokens share the
    longest prefix with the prompt; ties go to an empty slot, else to the one
    closed longest ago, so recent prompts stay. Without it a closed slot is
    emptied and the lowest free id is taken.
    """

    def __init__(self, count: int, *, reuse: bool):
        self.count = count
        self.reuse = reuse
        self.lengths: dict[int, int] = {}  # open slot -> tokens its KV cache holds
        self.held: dict[int, list[int]] = {}  # slot (open or idle) -> the tokens in its cache
        self._closed_at = [0] * count
        self._clock = 0

    def choose(self, want: np.ndarray) -> tuple[int, int] | None:
        """(free slot, how many leading ids of ``want`` it holds); None when every slot is
        open.

        Only slots that keep the open ones one run of consecutive ids are candidates
        (next to the run, or any slot when none is open; the lowest free slot when
        the run is already broken): llama.cpp decodes each run of consecutive
        sequence ids of a batch as a separate pass over the weights, so six
        sequences spread over sixteen slots cost six times one.
        """
        free = [s for s in range(self.count) if s not in self.lengths]
        if not free:
            return None
        if not self.reuse:
            return free[0], 0
        candidates = free
        if self.lengths:
            low, high = min(self.lengths), max(self.lengths)
            if high - low + 1 == len(self.lengths):  # one run: grow it at either end
                candidates = [s for s in (low - 1, high + 1) if 0 <= s < self.count]
            else:
                candidates = free[:1]
        best, choice = (-1, False, 0), (candidates[0], 0)
        for slot in candidates:
            held = self.held.get(slot, ())
            common = common_prefix(held, want)
            rank = (common, not held, -self._closed_at[slot])
            if rank > best:
                best, choice = rank, (slot, common)
        return choice

    def best_held(self, want: np.ndarray) -> tuple[int | None, int]:
        """The free slot, wherever it is, holding the longest prefix of ``want``, and that
        length: a source to copy from when :meth:`choose` may not pick it."""
        best: tuple[int | None, int] = (None, 0)
        for slot, held in self.held.items():
            if slot not in self.lengths:
                common = common_prefix(held, want)
                if common > best[1]:
                    best = (slot, common)
        return best

    def assign(self, slot: int, tokens: list[int]) -> None:
        """Open ``slot`` holding ``tokens`` (what the runner left in its cache)."""
        self.held[slot] = tokens
        self.lengths[slot] = len(tokens)

    def advance(self, slot: int, ids: Sequence[int] | np.ndarray) -> None:
        self.lengths[slot] += len(ids)
        self.held[slot].extend(int(t) for t in ids)

    def move(self, src: int, dst: int) -> None:
        """Open slot ``src``'s sequence now runs in free slot ``dst``; ``src`` is free and,
        with reuse, keeps a copy of its tokens (a cache like any closed slot's)."""
        self.lengths[dst] = self.lengths.pop(src)
        self.held[dst] = list(self.held[src]) if self.reuse else self.held.pop(src)
        self._clock += 1
        self._closed_at[src] = self._clock

    def close(self, slot: int) -> bool:
        """Close ``slot``; True when its cache must be emptied now (no reuse)."""
        if self.lengths.pop(slot, None) is None:
            return False
        self._clock += 1
        self._closed_at[slot] = self._clock
        if self.reuse:
            return False
        self.held.pop(slot, None)
        return True

    def clear(self) -> None:
        self.lengths.clear()
        self.held.clear()


@dataclass
class StoredPrompt:
    """A KV state copied out of a slot, and the tokens it holds."""

    tokens: np.ndarray
    state: Any  # a bytes-like object the runner can copy back


class PromptStore:
    """KV states in host memory, bounded by ``capacity`` bytes, least recently used out.

    States of fewer than ``min_tokens`` tokens are not kept (copying them back
    costs about what prefilling them does), nor is one whose tokens are a prefix
    of a stored state's (that one serves every prompt it would); a new state
    replaces the stored ones that are prefixes of it.
    """

    def __init__(self, capacity: int, *, min_tokens: int = 32):
        self.capacity = capacity
        self.min_tokens = min_tokens
        self.size = 0
        self._entries: OrderedDict[int, StoredPrompt] = OrderedDict()
        self._next = 0

    def __len__(self) -> int:
        return len(self._entries)

    def best(self, want: np.ndarray) -> tuple[StoredPrompt | None, int]:
        """The stored state sharing the longest prefix with ``want``, and that length
        (marked as used: the last to go)."""
        found, length, key = None, 0, -1
        for k, entry in self._entries.items():
            common = common_prefix(entry.tokens, want)
            if common > length:
                found, length, key = entry, common, k
        if found is not None:
            self._entries.move_to_end(key)
        return found, length

    def wants(self, tokens: Sequence[int]) -> bool:
        """Whether :meth:`put` would keep a state of ``tokens`` (checked before copying it)."""
        if len(tokens) < self.min_tokens or self.capacity <= 0:
            return False
        ids = np.asarray(tokens, dtype=np.int64)
        return not any(len(e.tokens) >= len(ids) and common_prefix(e.tokens, ids) == len(ids)
                       for e in self._entries.values())

    def put(self, tokens: Sequence[int], state: Any) -> None:
        nbytes = len(memoryview(state).cast("B"))
        if nbytes > self.capacity or not self.wants(tokens):
            return
        ids = np.asarray(tokens, dtype=np.int32)
        for k in [k for k, e in self._entries.items()
                  if common_prefix(e.tokens, ids.astype(np.int64)) == len(e.tokens)]:
            self._drop(k)
        while self._entries and self.size + nbytes > self.capacity:
            self._drop(next(iter(self._entries)))
        self._entries[self._next] = StoredPrompt(ids, state)
        self._next += 1
        self.size += nbytes

    def _drop(self, key: int) -> None:
        entry = self._entries.pop(key)
        self.size -= len(memoryview(entry.state).cast("B"))

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0
