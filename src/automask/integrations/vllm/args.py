"""Per-request constraints from vLLM's ``SamplingParams.extra_args``, and the compile caches.

Nothing here imports vLLM: the logits processor and the structured-output
backend both build on it, and the backend's tests run without vLLM.

A request names at most one constraint, each value a string so that it also
travels over HTTP as ``vllm_xargs`` (whose values are strings, numbers or
lists):

=========================  ==============================================================
``automask_json_schema``   a JSON Schema, as JSON text (offline: a dict or bool too)
``automask_regex``         a regular expression (the whole output matches it)
``automask_choice``        a JSON list of strings, as text (offline or over HTTP: a list)
``automask_gbnf``          a llama.cpp GBNF grammar (``root`` is the start rule)
``automask_lark``          a Lark grammar (``start`` is the start rule)
``automask_options``       JSON object text: ``whitespace`` ("flexible", "compact" or an
                           indent), ``strict``, ``lenient``: the options of
                           :meth:`Grammar.from_json_schema`; only with a JSON Schema
=========================  ==============================================================

Anything else that starts with ``automask_``, two constraints, text that is
not JSON where JSON is expected, or options without a JSON Schema is a
``ValueError`` (vLLM answers it with HTTP 400).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from automask.engine.compiled import CompiledGrammar, compile
from automask.errors import AutomaskError
from automask.grammar.ir import Grammar

# ConstraintSpec / build_grammar are shared with `automask serve` (same kinds, same options).
from automask.serve.constraints import ConstraintSpec, build_grammar

PREFIX = "automask_"
#: extra_args key -> ConstraintSpec kind
CONSTRAINT_KEYS = {
    "automask_json_schema": "json_schema",
    "automask_regex": "regex",
    "automask_choice": "choice",
    "automask_gbnf": "gbnf",
    "automask_lark": "lark",
}
OPTIONS_KEY = "automask_options"
#: the options a JSON Schema constraint takes, and their types
SCHEMA_OPTIONS = {"whitespace": (str, int), "strict": (bool,), "lenient": (bool,)}
WHITESPACE_MODES = ("flexible", "compact")


def _json(text: Any, key: str) -> Any:
    if not isinstance(text, str):
        raise ValueError(f"{key} must be a string of JSON text, not {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"{key} is not valid JSON: {e}") from None


def spec_from_extra_args(extra_args: Mapping[str, Any] | None) -> ConstraintSpec | None:
    """The request's constraint (None: no ``automask_*`` key); ``ValueError`` when malformed."""
    if not extra_args:
        return None
    ours = {k: v for k, v in extra_args.items() if isinstance(k, str) and k.startswith(PREFIX)}
    if not ours:
        return None
    unknown = sorted(set(ours) - set(CONSTRAINT_KEYS) - {OPTIONS_KEY})
    if unknown:
        raise ValueError(f"unknown automask argument(s) {', '.join(unknown)}; expected one of "
                         f"{', '.join(CONSTRAINT_KEYS)} (plus {OPTIONS_KEY})")
    named = [k for k in CONSTRAINT_KEYS if k in ours]
    if len(named) > 1:
        raise ValueError(f"{' and '.join(named)} both constrain the output: send one")
    if not named:
        raise ValueError(f"{OPTIONS_KEY} without a constraint: add automask_json_schema")
    key = named[0]
    kind = CONSTRAINT_KEYS[key]
    value = ours[key]
    options: dict[str, Any] = {}
    if kind == "json_schema":
        schema = value if isinstance(value, (dict, bool)) else _json(value, key)
        if not isinstance(schema, (dict, bool)):
            raise ValueError(f"{key} must be a JSON Schema (an object or a boolean), not "
                             f"{type(schema).__name__}")
        value = schema
        if OPTIONS_KEY in ours:
            options = _schema_options(ours[OPTIONS_KEY])
    else:
        if OPTIONS_KEY in ours:
            raise ValueError(f"{OPTIONS_KEY} applies to automask_json_schema only, not {key}")
        if kind == "choice":
            choices = value if isinstance(value, list) else _json(value, key)
            if not isinstance(choices, list) or not choices \
                    or not all(isinstance(c, str) for c in choices):
                raise ValueError(f"{key} must be a non-empty JSON list of strings")
            value = choices
        elif not isinstance(value, str) or not value:
            raise ValueError(f"{key} must be a non-empty string")
    return ConstraintSpec(kind, value, options)


def _schema_options(raw: Any) -> dict[str, Any]:
    options = raw if isinstance(raw, dict) else _json(raw, OPTIONS_KEY)
    if not isinstance(options, dict):
        raise ValueError(f"{OPTIONS_KEY} must be a JSON object")
    unknown = sorted(set(options) - set(SCHEMA_OPTIONS))
    if unknown:
        raise ValueError(f"unknown {OPTIONS_KEY} key(s) {', '.join(unknown)}; expected "
                         f"{', '.join(SCHEMA_OPTIONS)}")
    for name, value in options.items():
        types = SCHEMA_OPTIONS[name]
        if not isinstance(value, types) or (bool in types) != isinstance(value, bool):
            raise ValueError(f"{OPTIONS_KEY}.{name} has the wrong type ({type(value).__name__})")
    ws = options.get("whitespace")
    if isinstance(ws, str) and ws not in WHITESPACE_MODES:
        raise ValueError(f"{OPTIONS_KEY}.whitespace must be one of {', '.join(WHITESPACE_MODES)} "
                         "or an indent width")
    if isinstance(ws, int) and not 0 <= ws <= 16:
        raise ValueError(f"{OPTIONS_KEY}.whitespace indent must be between 0 and 16")
    return dict(sorted(options.items()))


def error_message(e: BaseException) -> str:
    """An error as the request's 400 shows it: our type and message (keyword, JSON pointer)."""
    if isinstance(e, RecursionError):
        return "LimitExceeded: the constraint is nested too deeply"
    return f"{type(e).__name__}: {e}"


class LRUCache:
    """A small thread-safe LRU by count (values may be exceptions: errors are cached too)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Any) -> Any:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return hit

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class ConstraintError(ValueError):
    """A constraint that does not compile; the message is :func:`error_message`'s."""


#: grammars by spec key, shared by every processor and backend of the process (a grammar
#: does not depend on the vocabulary): validate_params builds it, the engine reuses it
_grammars = LRUCache(256)


def _build(spec: ConstraintSpec) -> Grammar:
    if spec.kind == "json_schema":  # every option (serve's build_grammar passes two of them)
        return Grammar.from_json_schema(spec.value, **spec.options)
    return build_grammar(spec)


def grammar_for(spec: ConstraintSpec) -> Grammar:
    """The grammar of ``spec``, built once per process; :class:`ConstraintError` if it fails."""
    key = spec.key
    hit = _grammars.get(key)
    if hit is None:
        try:
            hit = _build(spec)
        except (AutomaskError, RecursionError) as e:
            hit = ConstraintError(error_message(e))
        except (TypeError, ValueError) as e:  # bad option values reaching the compiler
            hit = ConstraintError(f"{type(e).__name__}: {e}")
        _grammars.put(key, hit)
    if isinstance(hit, ConstraintError):
        raise hit
    return hit


class CompiledCache:
    """Compiled grammars for one tokenizer and logits width, by (spec, stop tokens); LRU.

    ``vocab_for(stops)`` gives the vocabulary whose EOS ids are the
    tokenizer's plus ``stops`` (built by the owner, cached there); compiling
    is cheap (automata are built lazily), and the cached object keeps its
    warm mask caches for the next request with the same constraint.
    """

    def __init__(self, vocab_for, capacity: int = 64):
        self.vocab_for = vocab_for
        self._compiled = LRUCache(capacity)

    def __len__(self) -> int:
        return len(self._compiled)

    @property
    def hits(self) -> int:
        return self._compiled.hits

    @property
    def misses(self) -> int:
        return self._compiled.misses

    def get(self, spec: ConstraintSpec, stops: Iterable[int] = ()) -> CompiledGrammar:
        stop_key = tuple(sorted({int(t) for t in stops}))
        key = (spec.key, stop_key)
        hit = self._compiled.get(key)
        if hit is None:
            try:
                grammar = grammar_for(spec)
                hit = compile(grammar, self.vocab_for(stop_key))
            except ConstraintError as e:
                hit = e
            except (AutomaskError, RecursionError) as e:
                hit = ConstraintError(error_message(e))
            self._compiled.put(key, hit)
        if isinstance(hit, ConstraintError):
            raise hit
        return hit

    def clear(self) -> None:
        self._compiled.clear()
