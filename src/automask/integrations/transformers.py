"""A ``transformers`` logits processor, for users who keep ``model.generate``.

::

    processor = LogitsProcessor(grammar, tokenizer)
    out = model.generate(**inputs, logits_processor=[processor], max_new_tokens=200)

One matcher per row, created lazily at the first call, which also fixes the
prompt length (``input_ids.shape[1]`` then; pass ``prompt_length`` when the
first call is not the first step). Rows are not tracked by position: every
call re-derives each row's state from its generated suffix
``input_ids[row, prompt_length:]``. Matchers are cached by that suffix (a
tuple of ids), and a new suffix is its parent's matcher forked plus one token,
so beam search (which reorders and duplicates rows between steps) costs one
token per row per step, like plain decoding. Only the previous step's
matchers are kept.

EOS and padding: EOS is allowed exactly when the row's output is accepted;
once a row has emitted EOS (``generate`` then pads it), only EOS and the pad
token are allowed. Logits wider than the tokenizer (padded embedding
matrices) have the extra columns masked off. A row holding a token the
grammar refuses (another processor chose it) is ended: only EOS/pad allowed.
Use one processor per ``generate`` call. ``eos_token_ids`` adds end-of-output
ids the tokenizer does not name (pass ``model.generation_config.eos_token_id``
when it lists several).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import transformers

from automask.bitmask import apply_bitmask
from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.generation.prepare import compiled_for, vocabulary_for
from automask.grammar.ir import Grammar

_DEAD = None  # cache value of a suffix the grammar refuses


class LogitsProcessor(transformers.LogitsProcessor):
    """Masks ``scores`` so that every row stays inside ``grammar`` (see the module docstring)."""

    def __init__(self, grammar: Grammar | CompiledGrammar, tokenizer: Any, *,
                 prompt_length: int | None = None, eos_token_ids: Sequence[int] = ()):
        if not isinstance(grammar, (Grammar, CompiledGrammar)):
            raise TypeError(f"LogitsProcessor takes a Grammar or CompiledGrammar, "
                            f"not {type(grammar).__name__}")
        self.grammar = grammar
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.extra_eos = tuple(eos_token_ids)
        self.compiled: CompiledGrammar | None = grammar if isinstance(
            grammar, CompiledGrammar) else None
        self._matchers: dict[tuple[int, ...], Matcher | None] = {}
        self._end_ids: list[int] = []
        self._bitmask: np.ndarray | None = None

    def _setup(self, width: int) -> None:
        if self.compiled is None:
            vocab = vocabulary_for(self.tokenizer, width, self.extra_eos)
            self.compiled = compiled_for(self.grammar, vocab)
        ends = list(self.compiled.eos_token_ids)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if isinstance(pad, int) and 0 <= pad < width:
            ends.append(pad)
        self._end_ids = list(dict.fromkeys(ends))

    def _matcher_for(self, suffix: tuple[int, ...],
                     previous: dict[tuple[int, ...], Matcher | None]) -> Matcher | None:
        """The matcher after ``suffix`` (None if the grammar refused some token of it)."""
        if suffix in self._matchers:
            return self._matchers[suffix]
        if suffix[:-1] in previous and suffix:
            parent = previous[suffix[:-1]]
            if parent is None:
                return _DEAD
            matcher = parent.fork()
            tail = suffix[-1:]
        else:  # first call, or a row we never saw: replay the whole suffix
            matcher = Matcher(self.compiled)  # type: ignore[arg-type]  # set by _setup
            tail = suffix
        for token in tail:
            if matcher.is_terminated():
                break  # after EOS, generate pads: the row is finished
            if not matcher.accept_token(int(token)):
                return _DEAD
        return matcher

    def __call__(self, input_ids: torch.LongTensor,
                 scores: torch.FloatTensor) -> torch.FloatTensor:
        batch, width = scores.shape
        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
        if not self._end_ids:
            self._setup(width)
        words = (width + 31) // 32
        if self._bitmask is None or self._bitmask.shape != (batch, words):
            self._bitmask = np.zeros((batch, words), dtype=np.int32)
        bitmask = self._bitmask
        previous, self._matchers = self._matchers, {}
        rows = input_ids[:, self.prompt_length:].tolist()
        for b, row in enumerate(rows):
            suffix = tuple(row)
            matcher = self._matcher_for(suffix, previous)
            self._matchers[suffix] = matcher
            bitmask[b] = 0
            if matcher is None or matcher.is_terminated():
                self._allow_ends(bitmask[b])
            else:
                matcher.fill_bitmask(bitmask, b)
        return apply_bitmask(scores.clone(), bitmask)

    def _allow_ends(self, row: np.ndarray) -> None:
        bits = row.view(np.uint32)
        for t in self._end_ids:
            if t < 32 * bits.shape[0]:
                bits[t >> 5] |= np.uint32(1 << (t & 31))
