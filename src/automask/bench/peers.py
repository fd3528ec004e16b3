"""Engine adapters: automask and its peers behind one interface, so one loop times them all.

Every adapter splits its work the same way, so the numbers line up:

* ``prepare``: the one-off cost per vocabulary (our root token index,
  llguidance's tokenizer trie), timed by the caller and reported apart;
* ``parse``: grammar text to the engine's grammar object (not compile time);
* ``compile``: what the engine needs before the first mask of any sequence;
* ``new_sequence``: a fresh per-sequence matcher sharing the compiled state,
  returned as bound callables so the timed loop pays no adapter overhead.

Adding a peer means writing one subclass and adding it to :data:`PEERS`;
nothing else changes.

JSON Schemas (``GrammarSpec.kind == "json"``, the text is the schema as JSON)
are compiled with the MaskBench protocol's choices: whitespace between JSON
tokens is free, so ``json.dumps``' ``", "`` and ``": "`` are accepted, and an
absent ``additionalProperties`` allows other properties (JSON Schema's own
meaning). Each adapter reports its exact settings in :attr:`Engine.options`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from automask._version import __version__
from automask.errors import AutomaskError


class PeerError(AutomaskError):
    """A peer engine is missing, or refused a grammar or tokenizer."""


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar as text plus its format: ``gbnf``, ``lark``, ``regex`` or ``json`` (a schema)."""

    kind: str
    text: str
    label: str


class SequenceOps(NamedTuple):
    """One sequence's operations, as bound callables (cheap to call in a hot loop)."""

    fill: Callable[[np.ndarray], Any]
    accept: Callable[[int], Any]
    is_accepting: Callable[[], Any]
    error: Callable[[], str | None]


class Engine:
    """Base adapter; see the module docstring for what each step covers."""

    name = "?"

    @property
    def version(self) -> str:
        return "?"

    @property
    def options(self) -> dict[str, Any]:
        """The settings this adapter compiles JSON Schemas with (reported with results)."""
        return {}

    def prepare(self, tokenizer_path: str, vocab: Any) -> None:
        raise NotImplementedError

    def parse(self, spec: GrammarSpec) -> Any:
        raise NotImplementedError

    def compile(self, parsed: Any) -> Any:
        raise NotImplementedError

    def new_sequence(self, compiled: Any) -> SequenceOps:
        raise NotImplementedError

    def allocate_bitmask(self) -> np.ndarray:
        raise NotImplementedError

    def memory(self, compiled: Any) -> dict[str, Any] | None:
        """Memory held by ``compiled`` (after use, caches included), or None if unknown."""
        return None


class AutomaskEngine(Engine):
    """automask itself: ``compile`` is :func:`automask.compile`, sequences are Matchers."""

    name = "automask"

    # The MaskBench protocol: json.dumps' separators accepted, additionalProperties open.
    SCHEMA_OPTIONS: dict[str, Any] = {"whitespace": "flexible", "strict": False}

    def __init__(self, schema_options: dict[str, Any] | None = None, *,
                 warm_up: bool = False) -> None:
        self.vocab: Any = None
        self.compiler: Any = None
        self.root: Any = None
        self.schema_options = dict(self.SCHEMA_OPTIONS, **(schema_options or {}))
        #: prepare as a server starts: the compiler warmed up for JSON grammars
        #: (engine/warm_up.py), so the first schema's masks are not charged with it
        self.warm_up = warm_up

    @property
    def version(self) -> str:
        return __version__

    @property
    def options(self) -> dict[str, Any]:
        from automask.engine import COMPILED

        out: dict[str, Any] = {"json_schema": dict(self.schema_options)}
        if self.warm_up:
            out["warm_up"] = True
        out["engine"] = "compiled" if COMPILED else "python"
        return out

    def prepare(self, tokenizer_path: str, vocab: Any) -> None:
        from automask.engine.compiled import compiler_for

        self.vocab = vocab
        self.compiler = compiler_for(vocab)
        self.root = self.compiler.tokens
        if self.warm_up:
            from automask.engine.warm_up import warm_up

            warm_up(self.compiler, whitespace=self.schema_options["whitespace"])

    def parse(self, spec: GrammarSpec) -> Any:
        return grammar_of(spec, self.schema_options)

    def compile(self, parsed: Any) -> Any:
        return self.compiler.compile(parsed)

    def new_sequence(self, compiled: Any) -> SequenceOps:
        from automask.engine.matcher import Matcher

        m = Matcher(compiled)
        return SequenceOps(m.fill_bitmask, m.accept_token, m.is_accepting, _no_error)

    def allocate_bitmask(self) -> np.ndarray:
        from automask.bitmask import allocate_bitmask

        return allocate_bitmask(1, self.vocab.size)

    def memory(self, compiled: Any) -> dict[str, Any]:
        """Bytes reachable from the CompiledGrammar, minus what the vocabulary shares.

        The vocabulary and its compiler (the root token index, the shared scans) serve
        every grammar compiled for that vocabulary, so the index is reported on its own.
        """
        from automask.bench.stats import reachable, total_bytes

        shared = reachable([self.vocab, self.compiler])
        own = reachable([compiled], exclude=set(shared))
        root_only = reachable([self.root], exclude={id(self.vocab)})
        return {
            "memory_mb": total_bytes(own) / 2**20,
            "vocab_index_mb": total_bytes(root_only) / 2**20,
            "method": "reachable objects (sys.getsizeof; ndarray data counted at its owner) "
                      "from the CompiledGrammar after the walk, excluding the Vocabulary and "
                      "its shared root token index",
        }


def _no_error() -> None:
    return None


def grammar_of(spec: GrammarSpec, schema_options: dict[str, Any]) -> Any:
    """``spec`` as an automask Grammar (a module function: a MatcherPool's workers call it)."""
    from automask.grammar.ir import Grammar

    if spec.kind == "json":
        return Grammar.of("json_schema", json.loads(spec.text), **schema_options)
    return Grammar.of(spec.kind, spec.text)


class LLGuidanceEngine(Engine):
    """llguidance through its Python API (``LLTokenizer``, ``LLMatcher``).

    Compile is creating an ``LLMatcher`` (grammar to parser, lexer set up).
    Each sequence is a ``deep_copy()`` of that compiled matcher, which is
    what "compile once, one fresh matcher per sequence" means for
    llguidance (the copies share its lexer caches); creating a new
    ``LLMatcher`` per sequence would add a full compile to every sequence.
    """

    name = "llguidance"

    # JsonCompileOptions given as ``defaults`` (a schema's own "x-guidance" overrides them).
    # whitespace_flexible is llguidance's default too; it is set here so that the choice
    # does not depend on the installed version: without it, json.dumps' ", " and ": "
    # would be refused. additionalProperties keeps llguidance's JSON Schema meaning
    # (absent: allowed), and unimplemented keywords stay errors (lenient off), as for us.
    JSON_DEFAULTS: dict[str, Any] = {"whitespace_flexible": True}

    def __init__(self) -> None:
        try:
            import llguidance
            import llguidance.numpy
        except ImportError as e:
            raise PeerError(
                "llguidance is not installed (pip install 'automask[bench]')") from e
        self._ll = llguidance
        self._np = llguidance.numpy
        self.tokenizer: Any = None

    @property
    def version(self) -> str:
        return str(getattr(self._ll, "__version__", "?"))

    @property
    def options(self) -> dict[str, Any]:
        return {"json_schema": {"defaults": dict(self.JSON_DEFAULTS), "lenient": False}}

    def prepare(self, tokenizer_path: str, vocab: Any) -> None:
        with open(tokenizer_path, encoding="utf-8") as f:
            text = f.read()
        eos = list(vocab.eos_token_ids) or None
        try:
            self.tokenizer = self._ll.LLTokenizer(text, n_vocab=vocab.size, eos_token=eos)
        except Exception as e:  # the Rust side raises plain ValueError/RuntimeError
            raise PeerError(f"llguidance cannot load {tokenizer_path}: {e}") from e

    def parse(self, spec: GrammarSpec) -> Any:
        try:
            if spec.kind == "json":
                # Options can only be attached to an object schema (not to true/false).
                defaults = self.JSON_DEFAULTS if spec.text.lstrip().startswith("{") else None
                return self._ll.LLMatcher.grammar_from_json_schema(  # (JsonCompileOptions keys)
                    spec.text, defaults=defaults)  # type: ignore[arg-type]
            return self._ll.grammar_from(spec.kind, spec.text)  # type: ignore[arg-type]
        except Exception as e:
            raise PeerError(f"llguidance cannot read the {spec.kind} grammar: {e}") from e

    def compile(self, parsed: Any) -> Any:
        try:
            m = self._ll.LLMatcher(self.tokenizer, parsed, log_level=0)
        except Exception as e:
            raise PeerError(f"llguidance rejects the grammar: {_one_line(str(e))}") from e
        if m.is_error():
            raise PeerError(f"llguidance rejects the grammar: {_one_line(m.get_error())}")
        return m

    def new_sequence(self, compiled: Any) -> SequenceOps:
        m = compiled.deep_copy()
        fill = functools.partial(self._np.fill_next_token_bitmask, m)
        return SequenceOps(fill, m.consume_token, m.is_accepting,
                        lambda: _one_line(m.get_error()) if m.is_error() else None)

    def allocate_bitmask(self) -> np.ndarray:
        return self._np.allocate_token_bitmask(1, self.tokenizer.vocab_size)


class XGrammarEngine(Engine):
    """XGrammar through its Python API (``GrammarCompiler``, ``GrammarMatcher``).

    Compile is ``GrammarCompiler.compile_*`` (XGrammar precomputes its
    adaptive token mask cache there); each sequence is a new
    ``GrammarMatcher`` over the compiled grammar. JSON Schemas use
    ``any_whitespace=True`` (json.dumps' separators must pass) and
    ``strict_mode=False`` (absent additionalProperties allows extra keys, as
    the spec and the MaskBench protocol say). XGrammar fills torch bitmasks;
    the adapter fills a torch view of a NumPy array, so the bench reads bits
    the same way for every engine. Installing it: ``pip install --no-deps
    xgrammar apache-tvm-ffi`` next to the CPU torch (its declared dependencies
    pull CUDA packages).
    """

    name = "xgrammar"
    JSON_OPTIONS: dict[str, Any] = {"any_whitespace": True, "strict_mode": False}

    def __init__(self) -> None:
        try:
            import torch
            import xgrammar
        except ImportError as e:
            raise PeerError("xgrammar is not installed (pip install --no-deps xgrammar "
                            "apache-tvm-ffi, with torch)") from e
        self._xgr = xgrammar
        self._torch = torch
        self.compiler: Any = None
        self.size = 0

    @property
    def version(self) -> str:
        from importlib.metadata import version

        return version("xgrammar")

    @property
    def options(self) -> dict[str, Any]:
        return {"json_schema": dict(self.JSON_OPTIONS)}

    def prepare(self, tokenizer_path: str, vocab: Any) -> None:
        try:
            from transformers import PreTrainedTokenizerFast

            path = tokenizer_path
            if not path.endswith(".json"):
                path = path.rstrip("/") + "/tokenizer.json"
            hf = PreTrainedTokenizerFast(tokenizer_file=path)
            info = self._xgr.TokenizerInfo.from_huggingface(
                hf, vocab_size=vocab.size, stop_token_ids=list(vocab.eos_token_ids) or None)
            # One thread, like the other engines here; no cache of compiled grammars (each
            # schema is compiled once, and the cache grew past 8 GB over MaskBench).
            self.compiler = self._xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        except Exception as e:
            raise PeerError(f"xgrammar cannot load {tokenizer_path}: {_one_line(str(e))}") from e
        self.size = vocab.size

    def parse(self, spec: GrammarSpec) -> Any:
        return spec

    def compile(self, parsed: GrammarSpec) -> Any:
        c = self.compiler
        try:
            if parsed.kind == "json":
                return c.compile_json_schema(parsed.text, **self.JSON_OPTIONS)
            if parsed.kind == "gbnf":
                return c.compile_grammar(parsed.text)
            if parsed.kind == "regex":
                return c.compile_grammar(self._xgr.Grammar.from_regex(parsed.text))
        except Exception as e:
            raise PeerError(f"xgrammar rejects the grammar: {_one_line(str(e))[:200]}") from e
        raise PeerError(f"xgrammar has no {parsed.kind} front-end here")

    def new_sequence(self, compiled: Any) -> SequenceOps:
        m = self._xgr.GrammarMatcher(compiled)
        view = self._view

        def fill(_bitmask: np.ndarray) -> None:
            m.fill_next_token_bitmask(view, 0)

        return SequenceOps(fill, m.accept_token, m.is_completed, _no_error)

    def allocate_bitmask(self) -> np.ndarray:
        out = np.full((1, (self.size + 31) // 32), -1, dtype=np.int32)
        self._view = self._torch.from_numpy(out)  # shares memory with ``out``
        return out


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


PEERS: dict[str, type[Engine]] = {"llguidance": LLGuidanceEngine, "xgrammar": XGrammarEngine}


def make_peer(name: str) -> Engine:
    """Instantiate the adapter for ``--vs name`` (raises PeerError when unavailable)."""
    try:
        cls = PEERS[name]
    except KeyError:
        raise PeerError(f"unknown peer {name!r}; known: {', '.join(sorted(PEERS))}") from None
    return cls()


def prepare_engines(peers: Sequence[str], tokenizer_path: str, vocab: Any,
                    say: Callable[[str], Any]) -> tuple[dict[str, Engine], dict[str, dict]]:
    """automask and each named peer, prepared for ``vocab``, for a bench that runs them all.

    Returns the engines that are ready, and one report entry per engine asked
    for (``engine``, ``version``, ``options``, ``error``, ``prepare_ms``). A
    peer that is missing or cannot load the tokenizer gets its error in its
    entry and is left out; the bench goes on with the others. ``say`` prints
    one line per engine.
    """
    import time

    # (JSON Schema benches: automask prepares as a server starts, its compiler warmed up)
    asked: list[tuple[str, Engine | None, str | None]] = [
        ("automask", AutomaskEngine(warm_up=True), None)]
    for name in dict.fromkeys(peers):
        try:
            asked.append((name, make_peer(name), None))
        except PeerError as e:
            asked.append((name, None, str(e)))
    ready: dict[str, Engine] = {}
    entries: dict[str, dict] = {}
    for name, engine, error in asked:
        entry: dict[str, Any] = {"engine": name, "version": None, "options": None,
                                 "error": error, "prepare_ms": None}
        entries[name] = entry
        if engine is not None:
            entry["version"], entry["options"] = engine.version, engine.options
            try:
                t0 = time.perf_counter()
                engine.prepare(tokenizer_path, vocab)
                entry["prepare_ms"] = (time.perf_counter() - t0) * 1e3
            except AutomaskError as e:
                entry["error"] = error = str(e)
        if error is not None:
            say(f"== {name}: not run: {error}")
            continue
        say(f"== {name} {entry['version']}  options {json.dumps(entry['options'])}  "
            f"prepare {entry['prepare_ms']:.0f} ms")
        ready[name] = engine  # type: ignore[assignment]  # an engine is None only with an error
    return ready, entries
