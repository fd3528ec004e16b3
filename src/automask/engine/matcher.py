"""The Matcher: the state of one sequence being decoded under a grammar."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from automask.bitmask import row_index, writable_words
from automask.budget import time_budget
from automask.engine.compiled import CompiledGrammar
from automask.engine.masks import Mask
from automask.engine.state import ParseState
from automask.engine.tokens import prefix_rows
from automask.errors import NoLegalContinuation, VocabularyError
from automask.gc_pause import paused_gc


class Matcher:
    """Tracks one sequence: masks, token acceptance, rollback and fork.

    The state is a stack of interned configurations (one per accepted
    token), so ``rollback`` is a pop and ``fork`` a list copy. Many matchers
    may share one :class:`CompiledGrammar`; a single matcher is not meant to
    be used from two threads at once.
    """

    # compiled's parts read on every step are slots of their own (each saves attribute
    # reads per token: the per-step cost around a cached mask is mostly such reads)
    __slots__ = ("compiled", "_history", "_terminated", "_states", "_tokens", "_masks",
                 "_eos_ids", "_special_ids", "_vocab_size")

    def __init__(self, compiled: CompiledGrammar):
        self.compiled = compiled
        self._states = compiled.states
        self._tokens = compiled.vocab.tokens
        self._masks = compiled.masks
        self._eos_ids = compiled.eos_id_set
        self._special_ids = compiled.vocab.special_ids
        self._vocab_size = compiled.vocab.size
        self._history: list[ParseState] = [self._states.initial]
        self._terminated: list[bool] = [False]

    # ---- state
    def is_accepting(self) -> bool:
        """Whether the output so far is a complete string of the language."""
        return self._history[-1].accepting

    def is_terminated(self) -> bool:
        """Whether an EOS token has been accepted."""
        return self._terminated[-1]

    def reset(self) -> None:
        del self._history[1:]
        del self._terminated[1:]

    def fork(self) -> Matcher:
        """An independent copy (for beams, speculation)."""
        other = Matcher(self.compiled)
        other._history = list(self._history)
        other._terminated = list(self._terminated)
        return other

    @property
    def num_accepted(self) -> int:
        return len(self._history) - 1

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens."""
        if n < 0 or n > len(self._history) - 1:
            raise ValueError(f"cannot roll back {n} tokens; {len(self._history) - 1} accepted")
        if n:
            del self._history[-n:]
            del self._terminated[-n:]

    # ---- tokens
    def _check_id(self, token_id: int) -> int:
        """``token_id`` as an int in range: an integer (``int``, a NumPy integer, a torch
        integer scalar), not a float or a bool."""
        if type(token_id) is not int:
            if isinstance(token_id, (bool, np.bool_)):
                raise TypeError(f"a token id is an integer, not a bool ({token_id!r})")
            try:
                token_id = operator.index(token_id)
            except TypeError:
                raise TypeError(f"a token id is an integer, not {type(token_id).__name__} "
                                f"({token_id!r})") from None
        if not 0 <= token_id < self._vocab_size:
            raise VocabularyError(
                f"token id {token_id} is out of range [0, {self._vocab_size})")
        return token_id

    def _after(self, token_id: int) -> ParseState | None:
        """The parse state after ``token_id`` (checked by the caller: :meth:`_check_id`),
        or None if it is not allowed (no change)."""
        if self._terminated[-1]:
            return None
        config = self._history[-1]
        if token_id in self._eos_ids:
            return config if config.accepting else None
        if token_id in self._special_ids or token_id >= len(self._tokens):
            return None
        data = self._tokens[token_id]
        if not data:
            return None
        after = self._states.memoized(config, data)  # the common case: no budget to set up
        if after is None:
            after = self._advance(config, data, "accepting a token")
        return None if after is self._states.dead else after

    def _advance(self, config: ParseState, data: bytes, what: str) -> ParseState:
        """:meth:`StateTable.advance` under the mask time limit, with the collector paused
        as for a mask: it makes interned objects only, no garbage."""
        with paused_gc(), time_budget(self.compiled.limits.max_mask_seconds, what):
            return self._states.advance(config, data)

    def accept_token(self, token_id: int) -> bool:
        """Advance on an allowed token; return False (state unchanged) otherwise."""
        token_id = self._check_id(token_id)
        after = self._after(token_id)
        if after is None:
            return False
        self._history.append(after)
        self._terminated.append(token_id in self._eos_ids)
        return True

    def accept_tokens(self, token_ids: Iterable[int]) -> int:
        """Accept tokens in order until one is refused; return how many were accepted."""
        n = 0
        for t in token_ids:
            if not self.accept_token(t):
                break
            n += 1
        return n

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes as one step (rollback counts it as one token); ``data`` is
        ``bytes``, ``bytearray`` or a ``memoryview``."""
        if type(data) is not bytes:
            if isinstance(data, (bytearray, memoryview)):
                data = bytes(data)
            elif isinstance(data, bytes):
                data = bytes(data)  # a subclass: plain bytes, as the memo tables key them
            elif isinstance(data, str):
                raise TypeError("accept_bytes takes bytes, not str: encode the text "
                                "(text.encode('utf-8'))")
            else:
                raise TypeError(f"accept_bytes takes bytes, not {type(data).__name__}")
        if self._terminated[-1]:
            return False
        after = self._advance(self._history[-1], data, "accepting bytes")
        if after is self._states.dead:
            return False
        self._history.append(after)
        self._terminated.append(False)
        return True

    # ---- masks
    def _mask(self) -> Mask:
        masks = self._masks
        mask = masks.cached(self._history[-1])  # the common case: no budget to set up
        if mask is None:
            with paused_gc(), time_budget(self.compiled.limits.max_mask_seconds,
                                          "computing a token mask"):
                mask = masks.mask(self._history[-1])
        if mask.empty and not self._history[-1].accepting:
            raise NoLegalContinuation(
                "no token can continue the output here (the vocabulary cannot spell what the "
                "grammar needs next)")
        return mask

    def mask_words(self) -> np.ndarray:
        """The mask as a fresh array of uint32 words (for inspection; see fill_bitmask)."""
        if self._terminated[-1]:
            words: np.ndarray = self.compiled.masks.eos_words.copy()
            return words
        out = np.empty(self.compiled.masks.nwords, dtype=np.uint32)
        self._mask().write(out)
        return out

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed tokens into ``bitmask`` (int32, ``(batch, ceil(size/32))`` or 1-D).

        Token ``t`` is bit ``t % 32`` of word ``t // 32``; EOS is allowed exactly
        when the output so far is accepted (and is all that is allowed once an
        EOS was accepted). Takes NumPy arrays and CPU torch tensors (in place), of
        dtype int32; ``index`` is a row in ``[0, batch)``, and 0 for a 1-D bitmask.
        Raises :class:`TypeError` for another type (a list) or a row index that
        is not an integer, :class:`ValueError` for another dtype or a bad shape,
        :class:`IndexError` for a row outside the bitmask.
        """
        words = writable_words(bitmask)
        index = row_index(index, words.shape[0] if words.ndim == 2 else 1)
        self._write(words[index] if words.ndim == 2 else words)

    def write_row(self, row: np.ndarray) -> None:
        """:meth:`fill_bitmask` on one row already given as a NumPy int32 array (a view)."""
        if not isinstance(row, np.ndarray):
            raise TypeError(f"a bitmask row is a 1-D NumPy int32 array, not "
                            f"{type(row).__name__}")
        if row.dtype != np.int32 or row.ndim != 1:
            raise ValueError(f"a bitmask row is a 1-D NumPy int32 array, not a {row.ndim}-D "
                             f"{row.dtype} array")
        self._write(row)

    def _write(self, row: np.ndarray) -> None:
        """:meth:`write_row` on a row known to be a 1-D int32 array."""
        masks = self._masks
        nwords = masks.nwords
        width = row.shape[0]
        if width < nwords:
            raise ValueError(f"bitmask row must be int32 with at least {nwords} words, "
                             f"not {width}")
        out = (row if width == nwords else row[:nwords]).view(np.uint32)
        if self._terminated[-1]:
            np.copyto(out, masks.eos_words)
        else:
            self._mask().write(out)
        if width > nwords:
            row[nwords:] = 0

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed token ids, ascending (for inspection and tests)."""
        bits = np.unpackbits(self.mask_words().view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.compiled.vocab.size])

    def single_allowed_token(self) -> int | None:
        """The one allowed token id, or None when none or several are allowed (reads the
        mask words: no id list over the vocabulary is built)."""
        words = self.mask_words()
        nonzero = np.flatnonzero(words)
        if nonzero.size != 1:
            return None
        word = int(words[nonzero[0]])
        if word & (word - 1):
            return None
        return int(nonzero[0]) * 32 + word.bit_length() - 1

    def is_allowed(self, token_id: int) -> bool:
        token_id = self._check_id(token_id)
        words = self.mask_words()
        return bool((int(words[token_id >> 5]) >> (token_id & 31)) & 1)

    # ---- forcing
    def forced_bytes(self) -> bytes:
        """The bytes every continuation must start with (empty at a choice or an accept)."""
        states = self._states
        config = self._history[-1]
        out = bytearray()
        limit = self.compiled.limits.max_forced_bytes
        while not config.accepting and len(out) < limit:
            live = states.live_bytes(config)
            if live == 0 or live & (live - 1):
                break
            byte = live.bit_length() - 1
            out.append(byte)
            config = states.step(config, byte)
        return bytes(out)

    def _last_is_final(self, tokens: list[int]) -> bool:
        """Whether the last of ``tokens`` (forced bytes, encoded) can be forced too.

        More text follows, so the last token could merge with it; it cannot
        when, after the tokens before it, no legal token is a longer string
        starting with its bytes (``":"`` before a string value, when no legal
        token spells ``":"`` plus more).
        """
        head = self.fork()
        if head.accept_tokens(tokens[:-1]) != len(tokens) - 1:
            return False
        root = self.compiled.root
        last = self._tokens[tokens[-1]]
        rows = prefix_rows(root.texts(), last)[1]
        longer = [r for r in rows if int(root.lengths[r]) > len(last)]
        if not longer:
            return True
        words = head.mask_words()
        ids = root.ids_for_rows(np.asarray(longer, dtype=np.int64))
        return not np.any((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1)

    def forced_tokens(self, max_tokens: int = 64) -> list[int]:
        """The tokens the grammar forces next (possibly none), without accepting them.

        Forced bytes are encoded the way the model's tokenizer would encode
        them when the vocabulary can encode; the last token is held back while
        more text may follow (it could merge with what comes next). Where
        nothing encodes, or encoding gives nothing safe, a mask with a single
        legal token forces that token.
        """
        probe = self.fork()
        out: list[int] = []
        vocab = self.compiled.vocab
        while len(out) < max_tokens and not probe.is_terminated():
            tokens: list[int] = []
            data = probe.forced_bytes()
            if data and getattr(vocab, "can_encode", False):
                text = data.decode("utf-8", errors="ignore")
                cut = len(text.encode("utf-8"))
                ends_here = cut == len(data) and not probe._states.advance(
                    probe._history[-1], data).threads
                tokens = vocab.encode(text) if text else []
                if not ends_here and tokens and not probe._last_is_final(tokens):
                    tokens = tokens[:-1]
            if not tokens:
                if probe.is_accepting():
                    break
                only = probe.single_allowed_token()
                if only is None:
                    break
                tokens = [only]
            accepted = probe.accept_tokens(tokens[: max_tokens - len(out)])
            out.extend(tokens[:accepted])
            if accepted < len(tokens) or accepted == 0:
                break
        return out


def parse_state(matcher: Matcher) -> ParseState:
    """The parse state ``matcher`` is in: engine-internal, for automask's own tools (the
    explorer reads what the grammar expects next from it) and tests, not the public API."""
    return matcher._history[-1]
