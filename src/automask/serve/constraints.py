"""What a request constrains, as a canonical spec, and the bounded cache of compiled specs.

A request names at most one constraint: ``response_format``, vLLM's
``structured_outputs``, or ``tools`` with a ``tool_choice`` that calls for
them. :func:`spec_for` reads it into a :class:`ConstraintSpec`: plain JSON
data whose canonical text (sorted keys, no spaces) is the cache key, so two
requests with the same schema written in a different key order compile
once. :class:`GrammarCache` compiles a spec for the model's vocabulary,
computes its first mask (so errors surface as HTTP 400 before decoding, and
the cold first mask is not paid inside a shared batch step), and keeps the
result, or the error, in a bounded LRU.

Tool calls use one markup whatever the chat template: a call is
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, the
Hermes/Qwen convention that ChatML models are trained on. With
``tool_choice="auto"`` the model writes free text, and once it writes
``<tool_call>`` the call is constrained by the tools' schemas; ``required``
allows only calls (one or more, one without ``parallel_tool_calls``), and a
named function exactly one call of it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from automask.engine.compiled import CompiledGrammar, compile
from automask.engine.matcher import Matcher
from automask.errors import (
    AutomaskError,
    EmptyLanguage,
    GrammarError,
    LimitExceeded,
    NoLegalContinuation,
    UnsupportedFeature,
)
from automask.grammar.ir import Grammar
from automask.grammar.segments import Tag
from automask.serve.protocol import ChatCompletionRequest, RequestError, SamplingFields

TOOL_BEGIN = "<tool_call>\n"
TOOL_TRIGGER = "<tool_call>"
TOOL_END = "\n</tool_call>"

log = logging.getLogger("automask.serve")
_GBNF_RULE = re.compile(r"^\s*[A-Za-z0-9_.-]+\s*::=", re.MULTILINE)


@dataclass(frozen=True)
class ConstraintSpec:
    """A constraint as plain JSON data: ``kind``, its ``value`` and the ``options``."""

    kind: str  # json_schema | regex | choice | gbnf | lark | tools
    value: Any
    options: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return json.dumps([self.kind, self.value, self.options], sort_keys=True,
                          separators=(",", ":"), ensure_ascii=False)

    @property
    def is_json(self) -> bool:
        return self.kind == "json_schema"


@dataclass(frozen=True)
class ToolChoice:
    """Which tools a request may call: ``mode`` none/auto/required/named, and their specs."""

    mode: str
    tools: tuple[dict, ...] = ()

    @property
    def active(self) -> bool:
        return self.mode != "none" and bool(self.tools)


def tool_choice_of(request: SamplingFields) -> ToolChoice:
    """The tools the request offers and how it wants them used (400 on a malformed one)."""
    if not isinstance(request, ChatCompletionRequest) or not request.tools:
        if isinstance(request, ChatCompletionRequest) and request.tool_choice not in (None,
                                                                                      "none"):
            raise RequestError(400, "tool_choice needs tools", param="tool_choice")
        return ToolChoice("none")
    functions = []
    for i, tool in enumerate(request.tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type", "function") != "function" or not isinstance(fn, dict) \
                or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestError(400, "each tool must be {type: function, function: {name, ...}}",
                               param=f"tools.{i}")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, (dict, bool)):
            raise RequestError(400, "function parameters must be a JSON Schema object",
                               param=f"tools.{i}.function.parameters")
        functions.append({"name": fn["name"], "parameters": params,
                          "strict": bool(fn.get("strict")),
                          "description": fn.get("description")})
    choice = request.tool_choice if request.tool_choice is not None else "auto"
    if choice in ("none", "auto", "required"):
        return ToolChoice(choice, tuple(functions))
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    picked = [f for f in functions if f["name"] == name]
    if not picked:
        raise RequestError(400, f"tool_choice names no offered function ({name!r})",
                           param="tool_choice")
    return ToolChoice("named", (picked[0],))


def spec_for(request: SamplingFields, *, whitespace: str = "flexible",
             reasoning: tuple[str, str] | None = None) -> ConstraintSpec | None:
    """The request's constraint (None: unconstrained text); 400 on conflicting fields.

    ``reasoning``: the model's (begin, end) reasoning markers; the constraint
    then applies after the reasoning block.
    """
    tools = tool_choice_of(request)
    named = []
    if tools.active:
        named.append("tools")
    fmt = request.response_format
    if fmt is not None and fmt.get("type", "text") != "text":
        named.append("response_format")
    so = request.structured_outputs
    if so is not None and so.kinds():
        named.append("structured_outputs")
    if len(named) > 1:
        raise RequestError(400, f"{' and '.join(named)} both constrain the output: send one",
                           param=named[1])
    if so is not None and so.disable_any_whitespace:
        whitespace = "compact"
    spec = None
    if tools.active:
        spec = _tools_spec(tools, request, whitespace)
    elif fmt is not None:
        spec = _response_format_spec(fmt, whitespace)
    elif so is not None and so.kinds():
        spec = _structured_outputs_spec(request, whitespace)
    if spec is not None and reasoning is not None:
        spec = ConstraintSpec(spec.kind, spec.value, {**spec.options, "reasoning": reasoning})
    return spec


def _response_format_spec(fmt: dict, whitespace: str) -> ConstraintSpec | None:
    kind = fmt.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        return ConstraintSpec("json_schema", {"type": "object"}, {"whitespace": whitespace})
    if kind == "json_schema":
        body = fmt.get("json_schema")
        if not isinstance(body, dict) or "schema" not in body:
            raise RequestError(400, "response_format.json_schema needs a 'schema'",
                               param="response_format.json_schema")
        schema = body["schema"]
        if not isinstance(schema, (dict, bool)):
            raise RequestError(400, "response_format.json_schema.schema must be a JSON Schema",
                               param="response_format.json_schema.schema")
        return ConstraintSpec("json_schema", schema, {"whitespace": whitespace,
                                                      "strict": bool(body.get("strict"))})
    raise RequestError(400, f"response_format.type {kind!r} is not one of text, json_object, "
                       "json_schema", param="response_format.type")


def _structured_outputs_spec(request: SamplingFields, whitespace: str) -> ConstraintSpec:
    so = request.structured_outputs
    assert so is not None
    kinds = so.kinds()
    if len(kinds) != 1:
        raise RequestError(400, f"structured_outputs takes exactly one of json, regex, choice, "
                           f"grammar, json_object (got {', '.join(kinds)})",
                           param="structured_outputs")
    kind = kinds[0]
    if kind == "json":
        schema = so.json_
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise RequestError(400, f"structured_outputs.json is not JSON: {e}",
                                   param="structured_outputs.json") from None
        return ConstraintSpec("json_schema", schema, {"whitespace": whitespace})
    if kind == "json_object":
        return ConstraintSpec("json_schema", {"type": "object"}, {"whitespace": whitespace})
    if kind == "regex":
        return ConstraintSpec("regex", so.regex)
    if kind == "choice":
        if not so.choice:
            raise RequestError(400, "structured_outputs.choice is empty",
                               param="structured_outputs.choice")
        return ConstraintSpec("choice", so.choice)
    text = so.grammar or ""
    syntax = request.automask.grammar_syntax if request.automask else None
    return ConstraintSpec(syntax or grammar_syntax(text), text)


def grammar_syntax(text: str) -> str:
    """GBNF when a line defines a rule with ``::=`` (Lark never uses it), else Lark."""
    return "gbnf" if _GBNF_RULE.search(text) else "lark"


def _tools_spec(tools: ToolChoice, request: SamplingFields, whitespace: str) -> ConstraintSpec:
    parallel = getattr(request, "parallel_tool_calls", True) and tools.mode != "named"
    return ConstraintSpec("tools", [{"name": f["name"], "parameters": f["parameters"]}
                                    for f in tools.tools],
                          {"whitespace": whitespace, "mode": tools.mode,
                           "strict": all(f["strict"] for f in tools.tools),
                           "parallel": bool(parallel)})


def call_schema(functions: list[dict]) -> dict:
    """The JSON Schema of one call ``{"name": ..., "arguments": {...}}`` of any function."""
    branches = [{"type": "object", "properties": {"name": {"const": f["name"]},
                                                  "arguments": f["parameters"]},
                 "required": ["name", "arguments"], "additionalProperties": False}
                for f in functions]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def build_grammar(spec: ConstraintSpec) -> Grammar:
    """The grammar of a spec (raises the engine's typed errors)."""
    opts = spec.options
    if spec.kind == "json_schema":
        grammar = Grammar.of("json_schema", spec.value,
                             whitespace=opts.get("whitespace", "flexible"),
                             strict=opts.get("strict", False))
    elif spec.kind == "tools":
        call = Grammar.from_json_schema(call_schema(spec.value), whitespace=opts["whitespace"],
                                        strict=opts["strict"])
        calls_only = opts["mode"] != "auto"
        grammar = Grammar.from_tags([Tag(TOOL_BEGIN, call, TOOL_END)], triggers=[TOOL_TRIGGER],
                                    free_text=not calls_only, min_segments=int(calls_only),
                                    max_segments=None if opts["parallel"] else 1)
    else:  # (the request's "choice" is the front end's "choices")
        grammar = Grammar.of("choices" if spec.kind == "choice" else spec.kind, spec.value)
    reasoning = opts.get("reasoning")
    if reasoning is not None:
        grammar = Grammar.after_reasoning(grammar, begin=reasoning[0], end=reasoning[1])
    return grammar


#: our error types -> the ``code`` of OpenAI's error object (subclasses before bases)
ERROR_CODES: tuple[tuple[type[Exception], str], ...] = (
    (UnsupportedFeature, "unsupported_feature"),
    (EmptyLanguage, "empty_language"),
    (GrammarError, "grammar_error"),
    (LimitExceeded, "limit_exceeded"),
    (NoLegalContinuation, "empty_language"),
    (AutomaskError, "grammar_error"),
)


def request_error(e: Exception, param: str | None) -> RequestError:
    """HTTP 400 with the typed error's message (keyword and JSON pointer included)."""
    code = next(c for t, c in ERROR_CODES if isinstance(e, t))
    return RequestError(400, f"{type(e).__name__}: {e}", code=code, param=param)


def spec_param(spec: ConstraintSpec, request: SamplingFields) -> str:
    """The request field a spec came from (the ``param`` of an error about it)."""
    if spec.kind == "tools":
        return "tools"
    return "response_format" if request.response_format is not None else "structured_outputs"


class GrammarCache:
    """Compiled specs for one vocabulary, least recently used first out; errors cached too.

    Thread-safe. Two threads asking for the same new spec may both compile it
    (the first to finish is kept): simpler than a per-key lock, and compiles
    are bounded in time anyway. ``on_compile(seconds)`` reports each compile.
    """

    def __init__(self, vocab: Any, *, capacity: int = 256,
                 on_compile: Callable[[float], None] | None = None):
        self.vocab = vocab
        self.capacity = capacity
        self.on_compile = on_compile
        self._entries: OrderedDict[str, CompiledGrammar | RequestError] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, spec: ConstraintSpec, param: str) -> CompiledGrammar:
        """The compiled grammar of ``spec``, or the :class:`RequestError` its compile raised."""
        key = spec.key
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
        if hit is None:
            self.misses += 1
            hit = self._compile(spec, param)
            with self._lock:
                self._entries[key] = hit
                self._entries.move_to_end(key)
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
        if isinstance(hit, RequestError):
            raise hit
        return hit

    def _compile(self, spec: ConstraintSpec, param: str) -> CompiledGrammar | RequestError:
        started = time.process_time()
        try:
            compiled = compile(build_grammar(spec), self.vocab)
            # The first mask, off the decode step: it is the coldest, and an error in it
            # belongs in this request's 400, not in a half-streamed answer.
            bitmask = np.zeros((1, (compiled.vocab_size + 31) // 32), dtype=np.int32)
            Matcher(compiled).fill_bitmask(bitmask)
            return compiled
        except AutomaskError as e:
            return request_error(e, param)
        except RecursionError:
            return RequestError(400, "the constraint is nested too deeply", param=param,
                                code="limit_exceeded")
        except Exception as e:  # noqa: BLE001 - a compiler bug must not become a 500
            log.exception("compiling %s failed unexpectedly", spec.kind)
            return RequestError(400, f"cannot compile this constraint ({type(e).__name__}: "
                                f"{e})", param=param, code="grammar_error")
        finally:
            if self.on_compile is not None:
                self.on_compile(time.process_time() - started)
