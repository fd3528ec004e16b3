"""automask as an SGLang grammar backend: ``--grammar-backend automask``.

Written against **SGLang 0.5.23** (``sglang/srt/constrained/base_grammar_backend.py``
and the scheduler code that drives it); other versions may differ.

::

    python -m automask.integrations.sglang --model-path Qwen/Qwen3-8B   # SGLang's own flags

or, in your own launcher or ``sgl.Engine`` script, at module level (not under
``if __name__ == "__main__"``: SGLang starts its scheduler processes with
``spawn``, and each must register again)::

    import automask.integrations.sglang
    automask.integrations.sglang.register()

SGLang's way in for a third-party backend is ``register_grammar_backend(name,
init_func)``: ``create_grammar_backend`` looks the ``--grammar-backend`` name up
in that registry first and calls ``init_func(server_args, tokenizer, vocab_size,
eos_token_ids)`` (base_grammar_backend.py lines 367-384). :func:`register`
does that and adds the name to ``--grammar-backend``'s argparse choices
(``add_grammar_backend_choices``), which the CLI checks. The registry lives in
each process, so registration must run in every SGLang process: SGLang's
plugin entry points (group ``sglang.srt.plugins``, run by ``load_plugins()``
in the launcher and in each scheduler process) do that, as does the launcher
here (see :func:`main`).

What the backend does, as SGLang expects of a backend:

* ``dispatch_json`` (a JSON Schema; ``$$ANY$$`` is any JSON value),
  ``dispatch_regex``, ``dispatch_ebnf`` (GBNF, llama.cpp's dialect, which is
  the EBNF SGLang's default xgrammar backend reads; ``root`` is the start
  rule) and ``dispatch_structural_tag`` (the legacy form, ``structures`` +
  ``triggers`` + ``at_least_one``, as ``Grammar.from_tags``; ``at_least_one``
  is one or more calls and no free text) compile on
  SGLang's compile threads and return an :class:`AutomaskGrammar`; on failure
  they return SGLang's ``InvalidGrammarObject(error_message)`` with automask's
  message, which SGLang reports as ``Failed to compile <type> grammar: ...``.
  The first mask is computed there too.
* The grammar cache SGLang keeps on the backend (``self.cache``, a plain dict
  in SGLang) is bounded here: least recently used entries beyond
  ``cache_size`` are dropped.
* Masks are int32 bitmasks ``(batch, ceil(V/32))`` (xgrammar's layout),
  allocated on the CPU (pinned when CUDA is available, as xgrammar does),
  filled there, moved to the device by ``move_vocab_mask`` and applied in
  place on the logits' device (torch operations, no copy back). EOS is
  allowed only where the output so far is complete; after EOS, only EOS.
* ``accept_token`` raises ``ValueError`` for a token the grammar refuses (the
  scheduler catches ``ValueError`` and aborts the request); after
  termination it is a no-op, as in the xgrammar backend. ``rollback(k)``
  undoes ``k`` accepted tokens, EOS included (speculative decoding's tree
  walk accepts and rolls back one token at a time).
* With ``--reasoning-parser``, the backend is wrapped in SGLang's
  ``ReasonerGrammarBackend`` as the built-in backends are (the grammar then
  applies after the reasoning block); ``create_grammar_backend`` skips that
  step for registered backends, so :func:`init_backend` does it. Token
  filters (``set_token_filter``) are supported, so ``--enable-strict-thinking``
  works too.

Subclassing or duck typing: SGLang checks ``isinstance(value,
InvalidGrammarObject)`` (grammar_manager.py lines 190, 315) and calls base-class
methods on backends and grammars that this module does not define
(``get_request_grammar_key``, ``maybe_init_reasoning``, ...). So when SGLang
is importable the classes here subclass its ``BaseGrammarBackend`` and
``BaseGrammarObject`` and failures are its own ``InvalidGrammarObject``;
without SGLang they stand on small local stand-ins with the same methods, so
the module imports (and its harness runs) anywhere.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from automask.bitmask import bitmask_words
from automask.engine.compiled import CompiledGrammar, compile, compiler_for
from automask.engine.matcher import Matcher
from automask.engine.warm_up import warm_up
from automask.errors import AutomaskError
from automask.generation.prepare import vocabulary_for
from automask.grammar.ir import Grammar
from automask.grammar.segments import Tag

logger = logging.getLogger(__name__)

#: the SGLang release this module's interface follows
SGLANG_VERSION = "0.5.23"
#: the ``--grammar-backend`` name :func:`register` uses by default
BACKEND_NAME = "automask"
#: compiled grammars kept per backend (least recently used dropped first)
DEFAULT_CACHE_SIZE = 64
#: SGLang's key for "any JSON value" (``response_format`` json_object in older releases)
ANY_JSON = "$$ANY$$"

_INSTALL_HINT = (
    f"automask's SGLang backend needs SGLang (written against sglang=={SGLANG_VERSION}, "
    f"which needs a CUDA machine): pip install 'sglang=={SGLANG_VERSION}'"
)

try:  # SGLang's own base classes when it is installed (see the module docstring)
    from sglang.srt.constrained.base_grammar_backend import (
        BaseGrammarBackend,
        BaseGrammarObject,
        InvalidGrammarObject,
    )

    try:
        from sglang.srt.constrained.base_grammar_backend import GrammarStats
    except ImportError:  # older releases
        GrammarStats = None
    SGLANG_BASES = True
except ImportError:
    SGLANG_BASES = False
    GrammarStats = None

    class BaseGrammarObject:  # type: ignore[no-redef]
        """Stand-in for SGLang's BaseGrammarObject (0.5.23) when SGLang is not installed."""

        def __init__(self):
            self._finished = False
            self.grammar_stats = None
            self.current_token = None

        def maybe_init_reasoning(self, reasoning: bool) -> None:
            pass

        @staticmethod
        def fill_vocab_mask_batched(entries, vocab_mask) -> None:
            for entry in entries:
                entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

        @property
        def finished(self) -> bool:
            return self._finished

        @finished.setter
        def finished(self, finished: bool) -> None:
            self._finished = finished

    class InvalidGrammarObject(BaseGrammarObject):  # type: ignore[no-redef]
        """Stand-in for SGLang's InvalidGrammarObject: a grammar that failed to compile."""

        def __init__(self, error_message: str = "Unknown grammar error"):
            super().__init__()
            self.error_message = error_message

        def __repr__(self) -> str:
            return f"InvalidGrammarObject(error_message={self.error_message!r})"

    class BaseGrammarBackend:  # type: ignore[no-redef]
        """Stand-in for SGLang's BaseGrammarBackend (0.5.23): the compile pool, the cache
        and the dispatch by key type."""

        def __init__(self):
            self.executor = ThreadPoolExecutor()
            self.cache: dict = {}

        def dispatch_fallback(self, key_type: str, key_string: str):
            raise ValueError(f"Invalid key_type: {key_type}={key_string}")

        def _init_value_dispatch(self, key: tuple[str, str], require_reasoning: bool):
            key_type, key_string = key
            if key_type == "json":
                return self.dispatch_json(key_string)  # type: ignore[attr-defined]  # defined by the subclass (AutomaskGrammarBackend)
            if key_type == "regex":
                return self.dispatch_regex(key_string)  # type: ignore[attr-defined]  # defined by the subclass (AutomaskGrammarBackend)
            if key_type in ("ebnf", "full_assistant_ebnf"):
                return self.dispatch_ebnf(key_string)  # type: ignore[attr-defined]  # defined by the subclass (AutomaskGrammarBackend)
            if key_type == "structural_tag":
                return self.dispatch_structural_tag(key_string)  # type: ignore[attr-defined]  # defined by the subclass (AutomaskGrammarBackend)
            return self.dispatch_fallback(key_type, key_string)

        def get_cached_or_future_value(self, key: tuple[str, str], require_reasoning: bool):
            value = self.cache.get(key)
            if value:
                copied = value.copy()
                copied.maybe_init_reasoning(require_reasoning)
                return copied, True
            future: Future = self.executor.submit(self._init_value_dispatch, key,
                                                  require_reasoning)
            return future, False

        def set_cache(self, key: tuple[str, str], value) -> None:
            self.cache[key] = value

        def reset(self) -> None:
            self.cache.clear()


# --------------------------------------------------------------------------- masks

def _pin_memory() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def allocate_vocab_mask(width: int, batch_size: int):
    """A ``(batch_size, ceil(width/32))`` int32 CPU tensor, every token allowed (-1 words).

    SGLang leaves the rows it does not fill (requests without a grammar, finished
    or terminated ones) as allocated, so "allowed" is the right fill.
    """
    import torch

    return torch.full((batch_size, bitmask_words(width)), -1, dtype=torch.int32,
                      pin_memory=_pin_memory())


def move_vocab_mask(vocab_mask, device):
    """The mask on ``device`` (asynchronous from pinned memory, as xgrammar's backend does)."""
    return vocab_mask.to(device, non_blocking=True)


def apply_vocab_mask(logits, vocab_mask) -> None:
    """Set the logits of disallowed tokens to ``-inf``, in place, on the logits' device.

    The bits are unpacked there with torch operations (no copy back to the host);
    logits wider than the mask (padded vocabularies) have the extra ids disallowed.
    Same result as :func:`automask.apply_bitmask`, several times faster on the CPU
    for one vocabulary-wide row, and one code path for every device.
    """
    import torch

    width = logits.shape[-1]
    mask = vocab_mask.to(logits.device, non_blocking=True)
    if mask.dim() == 1:
        mask = mask.unsqueeze(0)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = ((mask.unsqueeze(-1) >> shifts) & 1).reshape(mask.shape[0], -1).bool()
    if bits.shape[1] >= width:
        allowed = bits[:, :width]
    else:
        allowed = torch.nn.functional.pad(bits, (0, width - bits.shape[1]))
    if logits.dim() == 1:
        allowed = allowed[0]
    logits.masked_fill_(~allowed, float("-inf"))


def _numpy_words(vocab_mask) -> np.ndarray:
    """The mask as a NumPy int32 array sharing its memory (a CPU tensor or an array)."""
    words = np.asarray(vocab_mask)
    if words.dtype.itemsize != 4:
        raise ValueError(f"the vocab mask must be int32 words, not {words.dtype}")
    return words


# --------------------------------------------------------------------------- grammar

class AutomaskGrammar(BaseGrammarObject):
    """One request's grammar state for SGLang: an automask :class:`Matcher`.

    Implements SGLang 0.5.23's ``BaseGrammarObject``: ``accept_token``,
    ``rollback``, ``is_terminated``, ``allocate_vocab_mask``,
    ``fill_vocab_mask`` (and ``fill_vocab_mask_batched``), ``reset_vocab_mask``,
    ``move_vocab_mask``, ``apply_vocab_mask``, ``copy``, ``finished`` and the
    jump-forward trio.
    """

    def __init__(self, matcher: Matcher, key_type: str, key_string: str, *,
                 mask_width: int | None = None, grammar_stats: Any = None):
        super().__init__()
        self.matcher = matcher
        self.key_type = key_type
        self.key_string = key_string
        self.mask_width = max(mask_width or 0, matcher.compiled.vocab.size)
        self.grammar_stats = grammar_stats
        self._error: str | None = None  # a mask that could not be computed (see fill)

    @property
    def compiled(self) -> CompiledGrammar:
        return self.matcher.compiled

    # ---- tokens
    def accept_token(self, token: int) -> None:
        """Advance on ``token``; ``ValueError`` if the grammar refuses it (SGLang then aborts
        the request). After EOS nothing changes, as in SGLang's xgrammar backend."""
        if self.matcher.is_terminated():
            return
        self.current_token = token
        if self._error is not None:
            raise ValueError(self._error)
        try:
            accepted = self.matcher.accept_token(int(token))
        except AutomaskError as e:  # a time limit, an id out of range: end this request only
            raise ValueError(f"automask: token {token} could not be accepted: "
                             f"{type(e).__name__}: {e}") from e
        if not accepted:
            raise ValueError(f"automask: token {token} is not allowed by the grammar after "
                             f"{self.matcher.num_accepted} tokens ({self._key_summary()})")

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (an accepted EOS counts as one)."""
        if k <= 0:
            return
        self.matcher.rollback(k)
        self._error = None

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    # ---- masks
    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device=None):
        """An all-allowed int32 CPU bitmask; ``device`` is where it will go
        (:meth:`move_vocab_mask` takes it there), as in SGLang's xgrammar backend."""
        return allocate_vocab_mask(max(vocab_size, self.mask_width), batch_size)

    def fill_vocab_mask(self, vocab_mask, idx: int) -> None:
        self._fill_row(_numpy_words(vocab_mask)[idx])

    @staticmethod
    def fill_vocab_mask_batched(entries, vocab_mask) -> None:
        """Fill the listed rows (SGLang's ``GrammarRow(row, grammar)``), one NumPy view for
        the whole mask; rows not listed keep their value."""
        if not all(isinstance(e.grammar, AutomaskGrammar) for e in entries):
            BaseGrammarObject.fill_vocab_mask_batched(entries, vocab_mask)
            return
        words = _numpy_words(vocab_mask)
        for entry in entries:
            entry.grammar._fill_row(words[entry.row])

    def _fill_row(self, row: np.ndarray) -> None:
        try:
            self.matcher.write_row(row)
        except AutomaskError as e:
            # No mask here (a time limit, or nothing legal can follow): let only EOS through,
            # and have accept_token refuse whatever comes, so SGLang aborts this request with
            # the reason instead of the scheduler dying on an exception it does not catch.
            self._error = f"automask: no mask for this request: {type(e).__name__}: {e}"
            logger.error("%s (%s)", self._error, self._key_summary())
            eos = self.compiled.masks.eos_words
            nwords = eos.shape[0]
            if eos.any():
                np.copyto(row[:nwords].view(np.uint32), eos)
                row[nwords:] = 0
            else:
                row[:] = -1

    @staticmethod
    def reset_vocab_mask(vocab_mask) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        return move_vocab_mask(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask) -> None:
        apply_vocab_mask(logits, vocab_mask)

    # ---- copies
    def copy(self) -> AutomaskGrammar:
        """An independent grammar in the same state (SGLang copies the cached, untouched one
        for each request; a fork costs a list copy, the compiled grammar is shared)."""
        stats = self.grammar_stats
        if stats is not None and dataclasses.is_dataclass(stats):
            # an instance (SGLang's GrammarStats), never a dataclass type
            stats = dataclasses.replace(stats, is_cache_hit=True,  # type: ignore[type-var]
                                        tree_traversal_time=[])
        other = AutomaskGrammar(self.matcher.fork(), self.key_type, self.key_string,
                                mask_width=self.mask_width, grammar_stats=stats)
        other._error = self._error
        return other

    # ---- jump forward (SGLang 0.5.23's scheduler does not call these; kept for the interface)
    def try_jump_forward(self, tokenizer) -> tuple[list[int], str] | None:
        """``([], text)`` where the grammar forces ``text`` next (whole characters), else None."""
        if self.matcher.is_terminated():
            return None
        text = codecs.getincrementaldecoder("utf-8")().decode(self.matcher.forced_bytes())
        return ([], text) if text else None

    def jump_forward_str_state(self, helper: tuple[list[int], str]) -> tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: list[int], new_output_ids: list[int],
                            next_state: int) -> None:
        """Roll back to where the old and new ids part, then accept the new ones."""
        k = 0
        for old, new in zip(old_output_ids, new_output_ids, strict=False):
            if old != new:
                break
            k += 1
        if k < len(old_output_ids):
            self.rollback(len(old_output_ids) - k)
        for i in range(k, len(new_output_ids)):
            self.accept_token(new_output_ids[i])

    def _key_summary(self) -> str:
        text = self.key_string if len(self.key_string) <= 120 else self.key_string[:117] + "..."
        return f"{self.key_type}: {text}"

    def __repr__(self) -> str:
        return (f"AutomaskGrammar({self._key_summary()!r}, accepted={self.matcher.num_accepted}, "
                f"terminated={self.is_terminated()})")


# --------------------------------------------------------------------------- backend

class _LRUCache(OrderedDict):
    """SGLang's grammar cache with a bound: ``get`` refreshes, setting past the bound
    drops the least recently used entries."""

    def __init__(self, maxsize: int):
        super().__init__()
        if maxsize < 1:
            raise ValueError(f"cache_size must be at least 1, not {maxsize}")
        self.maxsize = maxsize

    def get(self, key, default=None):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)


class AutomaskGrammarBackend(BaseGrammarBackend):
    """SGLang 0.5.23's ``BaseGrammarBackend`` on automask.

    ``tokenizer`` is what SGLang passes (a Hugging Face tokenizer), or an automask
    :class:`~automask.Vocabulary`; ``vocab_size`` the model's logits width;
    ``eos_token_ids`` the model's end ids (SGLang's ``hf_eos_token_id``), added to
    the tokenizer's. JSON options: ``whitespace`` (``"flexible"``, ``"compact"`` or
    an indent), ``max_whitespace`` (``None``: automask's default bound),
    ``strict_json`` (absent ``additionalProperties`` read as false). ``cache_size``
    bounds SGLang's grammar cache on this backend.
    """

    def __init__(self, tokenizer: Any, vocab_size: int | None = None,
                 eos_token_ids: int | Iterable[int] | None = None, *,
                 whitespace: str | int = "flexible", max_whitespace: int | None = None,
                 strict_json: bool = False, cache_size: int = DEFAULT_CACHE_SIZE):
        super().__init__()
        if isinstance(eos_token_ids, int):
            eos_token_ids = [eos_token_ids]
        self.eos_token_ids = sorted(set(eos_token_ids or ()))
        self.vocab = vocabulary_for(tokenizer, vocab_size, self.eos_token_ids)
        self.vocab_size = max(vocab_size or 0, self.vocab.size)
        self.json_options: dict[str, Any] = {"whitespace": whitespace, "strict": strict_json}
        if max_whitespace is not None:
            self.json_options["max_whitespace"] = max_whitespace
        self.cache = _LRUCache(cache_size)

    # ---- dispatch (SGLang runs these on its compile threads)
    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        def build() -> Grammar:
            schema = {} if key_string == ANY_JSON else json.loads(key_string)
            return Grammar.from_json_schema(schema, **self.json_options)

        return self._compile("json", key_string, "the JSON schema", build)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, "the regex",
                             lambda: Grammar.from_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._compile("ebnf", key_string, "the EBNF (GBNF) grammar",
                             lambda: Grammar.from_gbnf(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._compile("structural_tag", key_string, "the structural tag",
                             lambda: self._structural_tag(key_string))

    def _structural_tag(self, key_string: str) -> Grammar:
        tag = json.loads(key_string)
        if not isinstance(tag, dict) or tag.get("structures") is None:
            raise ValueError("only the legacy structural tag is supported (structures, "
                             "triggers, at_least_one); the 'format' form is xgrammar's")
        triggers = tag.get("triggers")
        if not triggers:
            raise ValueError("a structural tag needs triggers")
        tags = [Tag(s["begin"], Grammar.from_json_schema(
                    {} if s.get("schema") is None else s["schema"], **self.json_options),
                    s["end"])
                for s in tag["structures"]]
        # at_least_one is tool_choice required/named: "forces at least one tool call (no free
        # text allowed)" (function_call_parser.py lines 269-270), automask's free_text=False
        required = bool(tag.get("at_least_one"))
        return Grammar.from_tags(tags, triggers=triggers, free_text=not required,
                                 min_segments=1 if required else 0)

    def _compile(self, key_type: str, key_string: str, what: str,
                 build: Callable[[], Grammar]) -> BaseGrammarObject:
        try:
            matcher = Matcher(compile(build(), self.vocab))
            matcher.mask_words()  # the first mask, here on the compile thread
        except Exception as e:  # every failure is this request's, reported with our message
            message = f"automask could not compile {what}: {type(e).__name__}: {e}"
            logger.error("Hit invalid %s: %r: %s", key_type, key_string[:200], message)
            return InvalidGrammarObject(message)
        stats = GrammarStats(dispatch_type=key_type) if GrammarStats is not None else None
        return AutomaskGrammar(matcher, key_type, key_string, mask_width=self.vocab_size,
                               grammar_stats=stats)

    # ---- token filters (--enable-strict-thinking: ReasonerGrammarBackend needs them)
    @property
    def is_support_token_filter(self) -> bool:
        return True

    @staticmethod
    def set_token_filter(vocab_mask, token_ids, batch_idx, is_allowed=True,
                         reset_vocab_mask=True) -> None:
        """Allow (``is_allowed``) or disallow ``token_ids`` in row ``batch_idx``, after
        clearing the row to none (or all) allowed when ``reset_vocab_mask``: SGLang's
        ``set_token_filter_torch``, on the CPU row the grammar fills."""
        row = _numpy_words(vocab_mask)[batch_idx].view(np.uint32)
        if reset_vocab_mask:
            row[:] = 0 if is_allowed else 0xFFFFFFFF
        for token in token_ids:
            if 0 <= token < 32 * row.shape[0]:
                bit = np.uint32(1 << (token & 31))
                if is_allowed:
                    row[token >> 5] |= bit
                else:
                    row[token >> 5] &= ~bit

    # ---- masks at the backend level (SGLang's ReasonerGrammarBackend asks the backend)
    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device=None):
        return allocate_vocab_mask(max(vocab_size, self.vocab_size), batch_size)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        return move_vocab_mask(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask) -> None:
        apply_vocab_mask(logits, vocab_mask)


# --------------------------------------------------------------------------- registration

def _serving_option(server_args: Any, name: str, default: Any) -> Any:
    """A serving option as SGLang's built-in backends read it (``get_serving()``), else from
    ``server_args``."""
    try:
        from sglang.srt.runtime_context import get_serving

        return getattr(get_serving(), name)
    except Exception:
        return getattr(server_args, name, default)


def init_backend(server_args: Any, tokenizer: Any, vocab_size: int,
                 eos_token_ids: Iterable[int] | None = None, **options: Any):
    """SGLang's ``init_func``: ``create_grammar_backend`` calls it as
    ``init_func(server_args, tokenizer, vocab_size, eos_token_ids)``.

    Reads ``--constrained-json-disable-any-whitespace`` and
    ``--constrained-json-max-whitespace-cnt`` (``options`` override them), warms the
    vocabulary's compiler up for JSON grammars (:func:`automask.warm_up`), and
    wraps the backend in SGLang's ``ReasonerGrammarBackend`` under
    ``--reasoning-parser`` (``reasoning=False`` in ``options`` turns that off).
    """
    wrap_reasoning = options.pop("reasoning", True)
    if "whitespace" not in options:
        compact = _serving_option(server_args, "constrained_json_disable_any_whitespace", False)
        options["whitespace"] = "compact" if compact else "flexible"
    if "max_whitespace" not in options:
        options["max_whitespace"] = _serving_option(
            server_args, "constrained_json_max_whitespace_cnt", None)
    if _serving_option(server_args, "constrained_json_whitespace_pattern", None):
        logger.warning("automask ignores --constrained-json-whitespace-pattern (JSON "
                       "whitespace is --constrained-json-disable-any-whitespace and "
                       "--constrained-json-max-whitespace-cnt)")
    backend = AutomaskGrammarBackend(tokenizer, vocab_size, eos_token_ids, **options)
    # SGLang makes its grammar backend as the server starts: the first request should not
    # wait for what every JSON grammar's first masks need (engine/warm_up.py).
    warm_up(compiler_for(backend.vocab), whitespace=options["whitespace"])
    parser_name = _serving_option(server_args, "reasoning_parser", None)
    if wrap_reasoning and parser_name:
        return _with_reasoning(backend, server_args, tokenizer, parser_name)
    return backend


def _with_reasoning(backend: AutomaskGrammarBackend, server_args: Any, tokenizer: Any,
                    parser_name: str):
    """What ``create_grammar_backend`` does for built-in backends under a reasoning parser
    (base_grammar_backend.py lines 448-464; the scheduler's think_end_ids test, scheduler.py
    lines 940-950)."""
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    parser = ReasoningParser(model_type=parser_name, stream_reasoning=False,
                             tokenizer=tokenizer)
    if not parser.detector.get_think_end_token_ids(tokenizer):
        return backend  # the scheduler disables grammar-gated reasoning then (and warns)
    wrapped = ReasonerGrammarBackend(
        backend, parser, tokenizer,
        enable_strict_thinking=_serving_option(server_args, "enable_strict_thinking", False))
    wrapped.cache = _LRUCache(backend.cache.maxsize)  # the cache SGLang uses is the wrapper's
    return wrapped


def register(name: str = BACKEND_NAME, **options: Any) -> None:
    """Register automask with SGLang as ``--grammar-backend <name>`` (in this process).

    ``options`` go to :class:`AutomaskGrammarBackend` (``cache_size``,
    ``strict_json``, ``whitespace``, ``max_whitespace``) and ``reasoning``
    (see :func:`init_backend`). Raises ImportError, saying how to install it,
    when SGLang is not installed.
    """
    try:
        from sglang.srt.constrained.base_grammar_backend import register_grammar_backend
    except ImportError as e:
        raise ImportError(f"{_INSTALL_HINT} ({e})") from e
    if not SGLANG_BASES:
        raise ImportError("automask.integrations.sglang was imported before SGLang could be; "
                          "import it again in a process where sglang imports")
    _warn_on_version()

    def init_func(server_args, tokenizer, vocab_size, eos_token_ids=None):
        return init_backend(server_args, tokenizer, vocab_size, eos_token_ids,
                            **dict(options))

    init_func.__qualname__ = f"register.<locals>.init_func[{name}]"
    register_grammar_backend(name, init_func)
    _add_cli_choice(name)


def _add_cli_choice(name: str) -> None:
    """Let ``--grammar-backend <name>`` through argparse (its choices are this list)."""
    try:
        from sglang.srt.arg_groups.choices import (
            GRAMMAR_BACKEND_CHOICES,
            add_grammar_backend_choices,
        )
    except ImportError:
        try:
            from sglang.srt.server_args import (
                GRAMMAR_BACKEND_CHOICES,
                add_grammar_backend_choices,
            )
        except ImportError:
            logger.warning("could not add %r to SGLang's --grammar-backend choices", name)
            return
    if name not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([name])


def _warn_on_version() -> None:
    try:
        from importlib.metadata import version

        found = version("sglang")
    except Exception:
        return
    if found != SGLANG_VERSION:
        logger.warning("automask's SGLang backend follows sglang %s; this is sglang %s",
                       SGLANG_VERSION, found)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m automask.integrations.sglang [SGLang server flags]``: SGLang's
    ``launch_server`` with automask registered (``--grammar-backend automask`` unless the
    flags name another backend)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--grammar-backend" or a.startswith("--grammar-backend=") for a in argv):
        argv += ["--grammar-backend", BACKEND_NAME]
    register()
    from sglang.launch_server import run_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    load_plugins()
    server_args = prepare_server_args(argv)
    try:
        run_server(server_args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


if __name__ == "__mp_main__" and SGLANG_BASES:
    # A process SGLang spawned from `python -m automask.integrations.sglang`: multiprocessing
    # runs this module again under this name before the process's target (the scheduler),
    # so the backend is registered there too.
    register()

if __name__ == "__main__":
    main()
