"""automask inside ``llama-cpp-python``: a logits processor for ``Llama`` completions.

::

    from llama_cpp import Llama, LogitsProcessorList
    from automask import Grammar
    from automask.integrations.llamacpp import LogitsProcessor

    llm = Llama(model_path="model.gguf")
    processor = LogitsProcessor(Grammar.from_json_schema(schema), llm)
    out = llm.create_chat_completion(messages, logits_processor=LogitsProcessorList([processor]))

The vocabulary comes from the loaded model itself (llama.cpp's token pieces,
its control tokens and its end-of-generation tokens), so it matches the ids
llama.cpp samples, whatever the GGUF's tokenizer type. It is built once per
``Llama`` object.

EOS: an end-of-generation token is allowed exactly where the output so far is
complete in the grammar; once the grammar has nothing more to accept, only
EOS is. One processor serves one generation: the first call fixes where the
prompt ends, and a call whose ids do not extend what it has seen (a second
completion) is refused.

Failure is never an unconstrained token. ``llama-cpp-python`` 0.3 runs
processors inside a llama.cpp sampler callback, where a raised exception is
printed and swallowed and the logits would be sampled as they are. So on any
error (reuse, a mask past its time limit, a token the grammar refuses) the
processor allows only EOS, which ends the output, keeps the error in
``processor.error`` and warns. Check ``processor.error`` (or call
:meth:`LogitsProcessor.raise_error`) after a completion whose output must parse.
"""

from __future__ import annotations

import ctypes
import threading
import warnings
import weakref
from typing import Any

import numpy as np

from automask.bitmask import apply_bitmask
from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.errors import AutomaskError
from automask.generation.prepare import compiled_for
from automask.grammar.ir import Grammar
from automask.vocab import Vocabulary

# llama.cpp's token attributes (llama.h, enum llama_token_attr): these ids never spell
# output text, so the engine treats them as special.
_ATTR_UNKNOWN, _ATTR_UNUSED, _ATTR_CONTROL = 1 << 0, 1 << 1, 1 << 3
_SPECIAL_ATTRS = _ATTR_UNKNOWN | _ATTR_UNUSED | _ATTR_CONTROL

_vocabularies: weakref.WeakKeyDictionary[Any, Vocabulary] = weakref.WeakKeyDictionary()
_vocab_lock = threading.Lock()


class ProcessorError(AutomaskError):
    """A logits processor could not constrain a step (reused, or its grammar refused)."""


def vocabulary_from_llama(llama: Any) -> Vocabulary:
    """The :class:`Vocabulary` of a ``llama_cpp.Llama``, read from the loaded model.

    Token bytes are llama.cpp's own pieces (what sampling the id appends to the
    output); control, unknown and unused tokens are special; EOS ids are every
    end-of-generation token. The encoder is the model's tokenizer (no BOS, special
    names read as text), which fast-forwarding uses. Cached per ``Llama`` object.
    """
    with _vocab_lock:
        hit = _vocabularies.get(llama)
    if hit is not None:
        return hit
    import llama_cpp as lib

    vocab = llama._model.vocab
    size = int(lib.llama_vocab_n_tokens(vocab))
    room = 256
    buf = ctypes.create_string_buffer(room)
    tokens: list[bytes] = []
    special: list[int] = []
    eos: list[int] = []
    for t in range(size):
        # A special token's piece is its name (a grammar may name it, as in a GGUF file).
        is_special = bool(lib.llama_vocab_get_attr(vocab, t) & _SPECIAL_ATTRS)
        n = lib.llama_token_to_piece(vocab, t, buf, room, 0, is_special)
        if n < 0:  # -n is the room needed (a piece longer than any seen so far)
            room = -n
            buf = ctypes.create_string_buffer(room)
            n = lib.llama_token_to_piece(vocab, t, buf, room, 0, is_special)
        tokens.append(buf.raw[:max(n, 0)])
        if is_special:
            special.append(t)
        if lib.llama_vocab_is_eog(vocab, t):
            eos.append(t)

    def encode(text: str) -> list[int]:
        return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    result = Vocabulary(tokens, special_ids=special, eos_token_ids=eos, size=size,
                        encoder=encode, name=str(getattr(llama, "model_path", "llama.cpp")))
    with _vocab_lock:
        _vocabularies[llama] = result
    return result


class LogitsProcessor:
    """Masks a ``Llama`` completion's logits to ``grammar`` (see the module docstring).

    ``grammar`` is an :class:`automask.Grammar` (compiled here, for this model's
    vocabulary, so a bad grammar fails now rather than mid-generation) or a
    :class:`CompiledGrammar` made with :func:`vocabulary_from_llama`'s vocabulary.
    """

    def __init__(self, grammar: Grammar | CompiledGrammar, llama: Any):
        if not isinstance(grammar, (Grammar, CompiledGrammar)):
            raise TypeError(f"LogitsProcessor takes a Grammar or CompiledGrammar, "
                            f"not {type(grammar).__name__}")
        self.vocab = vocabulary_from_llama(llama)
        if isinstance(grammar, CompiledGrammar) and grammar.vocab_size != self.vocab.size:
            raise ValueError(f"the grammar was compiled for {grammar.vocab_size} tokens; "
                             f"this model has {self.vocab.size}")
        self.compiled = compiled_for(grammar, self.vocab)
        self.matcher = Matcher(self.compiled)
        self.error: AutomaskError | None = None
        self._seen: list[int] | None = None  # prompt + output ids at the last call
        self._prompt_length = 0
        self._bitmask = np.zeros((1, (self.vocab.size + 31) // 32), dtype=np.int32)
        self._eos = np.asarray(self.compiled.eos_token_ids, dtype=np.int64)

    @property
    def output_ids(self) -> list[int]:
        """The ids generated so far under this processor (the prompt excluded)."""
        return [] if self._seen is None else self._seen[self._prompt_length:]

    def raise_error(self) -> None:
        """Raise the error that ended the output early, if there was one."""
        if self.error is not None:
            raise self.error

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.error is None:
            try:
                self._advance([int(t) for t in input_ids])
                self.matcher.fill_bitmask(self._bitmask, 0)
                return apply_bitmask(scores, self._bitmask)
            except AutomaskError as e:
                self.error = e
                warnings.warn(f"automask: {e}; the output ends here", RuntimeWarning,
                              stacklevel=2)
        return self._only_eos(scores)

    def _advance(self, ids: list[int]) -> None:
        """Accept the ids generated since the last call (the first call marks the prompt)."""
        seen = self._seen
        if seen is None:
            self._prompt_length = len(ids)
        elif len(ids) <= len(seen) or ids[:len(seen)] != seen:
            raise ProcessorError(
                "this LogitsProcessor already served another generation: its ids do not "
                "extend the ones it saw (make one processor per completion)")
        else:
            for token in ids[len(seen):]:
                if not self.matcher.accept_token(token):
                    raise ProcessorError(
                        f"token {token} ({self.vocab.token_bytes(token)!r}) is outside the "
                        "grammar (another processor or sampler chose it)")
        self._seen = ids

    def _only_eos(self, scores: np.ndarray) -> np.ndarray:
        keep = scores[self._eos].copy()
        scores[:] = -np.inf
        scores[self._eos] = keep
        return scores
