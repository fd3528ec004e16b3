"""``AutomaskBackend`` / ``AutomaskGrammar``: vLLM's structured-output backend interface.

vLLM (0.32.0 and 0.33.0: ``vllm/v1/structured_output/backend_types.py`` is the
same in both) drives a
backend from its ``StructuredOutputManager``: one backend per engine,
``compile_grammar`` per request (in a thread pool), then per step
``fill_bitmask`` into one int32 bitmask for the batch, ``accept_tokens`` for
sampled tokens, and for speculative decoding ``validate_tokens`` (without
advancing) and ``rollback``. vLLM has no plugin hook for backends, so these
classes are what an upstream ``backend == "automask"`` branch of
``StructuredOutputManager.grammar_init`` would construct::

    self.backend = AutomaskBackend(self.vllm_config, tokenizer=self.tokenizer,
                                   vocab_size=vocab_size)

The module imports without vLLM (the classes then derive from ``object``;
with vLLM they subclass vLLM's ABCs), so the interface is tested without it.

Mapping of request types (``StructuredOutputOptions``): ``JSON`` (schema text;
``structured_outputs_config.disable_any_whitespace`` selects compact JSON),
``JSON_OBJECT``, ``REGEX``, ``CHOICE`` (a JSON list of strings),
``GRAMMAR`` (GBNF when a line defines a rule with ``::=``, else Lark) and
``STRUCTURAL_TAG`` in its ``{"structures": [{begin, schema, end}],
"triggers": [...]}`` form. ``stop_token_ids`` (the request's
``all_stop_token_ids``) are EOS for the grammar, with the tokenizer's own:
masked until the output is complete, the only tokens allowed after.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.errors import AutomaskError
from automask.generation.prepare import vocabulary_for
from automask.grammar.ir import Grammar
from automask.grammar.segments import Tag
from automask.integrations.vllm.args import (
    CompiledCache,
    ConstraintError,
    LRUCache,
    error_message,
)
from automask.serve.constraints import ConstraintSpec, grammar_syntax

log = logging.getLogger("automask.vllm")

try:
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as _BackendBase,
    )
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputGrammar as _GrammarBase,
    )
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputOptions,
    )
except ImportError:  # no vLLM: the same interface, on plain classes
    _BackendBase = object
    _GrammarBase = object

    class StructuredOutputOptions(enum.Enum):  # type: ignore[no-redef]
        """Mirror of vLLM's enum (same member names), used when vLLM is absent."""

        JSON = enum.auto()
        JSON_OBJECT = enum.auto()
        REGEX = enum.auto()
        GRAMMAR = enum.auto()
        CHOICE = enum.auto()
        STRUCTURAL_TAG = enum.auto()


@dataclass
class AutomaskGrammar(_GrammarBase):
    """One request's grammar state (a :class:`~automask.Matcher`) behind vLLM's interface."""

    matcher: Matcher
    vocab_size: int
    num_processed_tokens: int = field(default=0, init=False)

    @property
    def compiled(self) -> CompiledGrammar:
        return self.matcher.compiled

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance on ``tokens``; False (state kept up to the refused token) on a refusal.
        Tokens after the grammar terminated (an EOS/stop token accepted) are ignored."""
        matcher = self.matcher
        for token in tokens:
            if matcher.is_terminated():
                return True
            try:
                ok = matcher.accept_token(int(token))
            except AutomaskError:
                ok = False
            if not ok:
                log.error("automask: request %s: the grammar refuses token %s", request_id,
                          token)
                return False
            self.num_processed_tokens += 1
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar accepts (up to and including a
        terminating stop token); the state is left as it was."""
        matcher = self.matcher
        accepted: list[int] = []
        for token in tokens:
            if matcher.is_terminated():
                break
            try:
                ok = matcher.accept_token(int(token))
            except AutomaskError:
                ok = False
            if not ok:
                break
            accepted.append(token)
        if accepted:
            matcher.rollback(len(accepted))
        return accepted

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (rejected speculative tokens)."""
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Write row ``idx`` of ``bitmask`` (int32 CPU tensor or NumPy array, in place)."""
        self.matcher.fill_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0

    def find_jump_string(self) -> str | None:
        """The text the grammar forces next (older vLLM interfaces ask for it), or None."""
        data = self.matcher.forced_bytes()
        text = data.decode("utf-8", errors="ignore")
        return text or None


@dataclass
class AutomaskBackend(_BackendBase):
    """Engine-level backend: compiles request grammars for the model's vocabulary, cached."""

    vllm_config: Any
    tokenizer: Any
    vocab_size: int
    #: compiled grammars kept (LRU by count), per backend
    cache_capacity: int = 128

    def __post_init__(self) -> None:
        so_config = getattr(self.vllm_config, "structured_outputs_config", None)
        self.disable_any_whitespace = bool(getattr(so_config, "disable_any_whitespace", False))
        self._cache = CompiledCache(self._vocab_for, self.cache_capacity)
        self._specs = LRUCache(self.cache_capacity)

    def _vocab_for(self, stops):
        return vocabulary_for(self.tokenizer, self.vocab_size, stops)

    def spec_for(self, request_type: Any, grammar_spec: str) -> ConstraintSpec:
        """The :class:`ConstraintSpec` of a vLLM request type and its text."""
        name = getattr(request_type, "name", request_type)
        ws = {"whitespace": "compact" if self.disable_any_whitespace else "flexible"}
        if name == "JSON":
            schema = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
            return ConstraintSpec("json_schema", schema, ws)
        if name == "JSON_OBJECT":
            return ConstraintSpec("json_schema", {"type": "object"}, ws)
        if name == "REGEX":
            return ConstraintSpec("regex", grammar_spec)
        if name == "CHOICE":
            choices = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
            return ConstraintSpec("choice", list(choices))
        if name == "GRAMMAR":
            return ConstraintSpec(grammar_syntax(grammar_spec), grammar_spec)
        if name == "STRUCTURAL_TAG":
            tag = json.loads(grammar_spec)
            if not isinstance(tag, dict) or "structures" not in tag:
                raise ValueError("automask takes structural tags in the {structures, triggers} "
                                 "form only")
            return ConstraintSpec("structural_tag", tag, ws)
        raise ValueError(f"unsupported structured output request type {request_type!s}")

    def compile_grammar(self, request_type: Any, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> AutomaskGrammar:
        """A fresh :class:`AutomaskGrammar`; ``ValueError`` with our error's message when the
        constraint does not compile (vLLM then fails this request only)."""
        spec = self.spec_for(request_type, grammar_spec)
        stops = sorted(stop_token_ids or ())
        if spec.kind == "structural_tag":
            compiled = self._compile_tags(spec, stops)
        else:
            compiled = self._cache.get(spec, stops)
        return AutomaskGrammar(matcher=Matcher(compiled), vocab_size=self.vocab_size)

    def _compile_tags(self, spec: ConstraintSpec, stops: list[int]) -> CompiledGrammar:
        from automask.engine.compiled import compile

        key = (spec.key, tuple(stops))
        hit = self._specs.get(key)
        if hit is None:
            try:
                tag = spec.value
                tags = [Tag(s["begin"], Grammar.from_json_schema(
                    s["schema"], whitespace=spec.options["whitespace"]), s["end"])
                        for s in tag["structures"]]
                hit = compile(Grammar.from_tags(tags, triggers=tag.get("triggers")),
                              self._vocab_for(stops))
            except (AutomaskError, RecursionError) as e:
                hit = ConstraintError(error_message(e))
            except (KeyError, TypeError) as e:
                hit = ConstraintError(f"malformed structural tag ({type(e).__name__}: {e})")
            self._specs.put(key, hit)
        if isinstance(hit, ConstraintError):
            raise hit
        return hit

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """An int32 ``(max_num_seqs, ceil(vocab_size / 32))`` CPU tensor, all allowed (-1)."""
        import torch

        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)

    def destroy(self) -> None:
        self._cache.clear()
        self._specs.clear()
