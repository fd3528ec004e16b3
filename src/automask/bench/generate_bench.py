"""``automask bench generate``: end-to-end JSON generation from MaskBench schemas (issue 4).

MaskBench (``bench maskbench``) checks masks against given instances; this
benchmark lets a real model *write* the instances, so it measures what a user
sees: does the output validate, does it finish, and what do masks cost per
token against the same model unconstrained.

Per schema, through the one decode loop of :func:`automask.generate`:

* the prompt is :data:`PROMPT_TEMPLATE` with the schema as compact JSON, the
  same for every run, wrapped in the tokenizer's chat template (the
  ``automask generate`` default);
* **unconstrained**: no mask (``grammar=None``), same loop, same prompt;
* **automask**: the schema compiled with ``automask generate``'s defaults,
  read from its own argument parser so they cannot drift (compact whitespace,
  an absent ``additionalProperties`` is false, greedy, 256 tokens);
* **llguidance** (``--vs llguidance``): the same loop with llguidance's masks
  and its fast-forward tokens (:mod:`automask.generation.external`). Its JSON
  options are set to match ours: ``whitespace_flexible: false`` and separators
  ``","``/``":"`` (compact), and, since llguidance has no strict option,
  ``additionalProperties: false`` is written into every object schema that
  lacks it and has no ``allOf``/``anyOf``/``oneOf``/``$ref`` beside it and is
  not itself an ``allOf`` branch (there, JSON Schema's additionalProperties
  would also forbid the keys of the sibling schemas, which our merged
  ``allOf`` does not). See :func:`close_objects`.

Reported per engine: declared coverage (the schema compiled), empirical
coverage (the output validates with ``jsonschema``, formats checked),
compliance (valid among compiled outputs that finished with ``"stop"``),
finish reasons, mean output tokens, forced-token share, forward passes saved
by fast-forwarding (saved / (passes + saved)), and time per output token
constrained vs unconstrained on the same schemas. Time per output token is
the generation time after the prompt's forward pass (prefill, identical in
both runs) divided by the output tokens, so a short output is not charged the
whole prompt; model load and schema compile are outside it (compile time is
reported apart; automask builds masks lazily, so most of its work is inside).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import numpy as np

from automask._version import __version__
from automask.bench.progress import Progress
from automask.bench.stats import text_table
from automask.errors import AutomaskError

PROMPT_TEMPLATE = (
    "Here is a JSON Schema:\n{schema}\n\n"
    "Write one JSON value that is valid under this schema, with realistic values. "
    "Reply with the JSON only."
)
ENGINES = ("automask", "llguidance")
UNCONSTRAINED = "unconstrained"
DEFAULT_TIMEOUT_S = 120.0


def make_prompt(schema: Any) -> str:
    """The fixed prompt for one schema (compact JSON: fewer prompt tokens, same content)."""
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return PROMPT_TEMPLATE.format(schema=text)


def generate_defaults() -> dict[str, Any]:
    """``automask generate``'s defaults, from its own arguments (whitespace, strict, decoding)."""
    from automask.generation.command import add_arguments

    parser = argparse.ArgumentParser(prog="automask generate")
    add_arguments(parser)
    args = parser.parse_args(["-", "--schema", "-"])
    return {"whitespace": args.whitespace, "strict": args.strict,
            "max_tokens": args.max_tokens, "temperature": args.temperature,
            "top_k": args.top_k, "top_p": args.top_p,
            "repetition_penalty": args.repetition_penalty,
            "chat_template": not args.no_chat_template}


# ----------------------------------------------------------------------------- rows


@dataclass
class Row:
    """One schema under one engine (or unconstrained); the JSON file holds these."""

    id: str
    compiled: bool = False
    error: str | None = None
    finish_reason: str | None = None  # stop, length, error, timeout
    valid: bool | None = None
    validation: str | None = None
    tokens: int = 0
    forced: int = 0
    forward_passes: int = 0
    saved: int = 0
    seconds: float = 0.0
    prompt_seconds: float = 0.0  # the prompt's forward pass (prefill), inside ``seconds``
    compile_ms: float | None = None
    output: str = ""
    unconstrained_seconds: float | None = None
    unconstrained_prompt_seconds: float | None = None
    unconstrained_tokens: int | None = None

    @property
    def decode_seconds(self) -> float:
        return max(self.seconds - self.prompt_seconds, 0.0)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(rows: Sequence[Row], baseline: Sequence[Row] | None = None) -> dict[str, Any]:
    """The report of one engine's rows (``baseline``: the unconstrained rows, same order).

    Ratios are over all the rows given (empirical coverage) or the compiled
    ones (stop share, compliance); time per token compares the engine with the
    unconstrained runs of the schemas it compiled.
    """
    n = len(rows)
    compiled = [r for r in rows if r.compiled]
    ran = [r for r in compiled if r.finish_reason in ("stop", "length")]
    stops = [r for r in compiled if r.finish_reason == "stop"]
    valid = [r for r in rows if r.valid]
    tokens = sum(r.tokens for r in ran)
    forced = sum(r.forced for r in ran)
    passes = sum(r.forward_passes for r in ran)
    saved = sum(r.saved for r in ran)
    out: dict[str, Any] = {
        "schemas": n,
        "compiled": len(compiled),
        "declared_coverage": _ratio(len(compiled), n),
        "valid": len(valid),
        "empirical_coverage": _ratio(len(valid), n),
        "stop": len(stops),
        "stop_share": _ratio(len(stops), len(compiled)),
        "compliance": _ratio(sum(1 for r in stops if r.valid), len(stops)),
        "finish_reasons": dict(Counter(r.finish_reason or "not compiled" for r in rows)
                               .most_common()),
        "mean_tokens": _ratio(tokens, len(ran)),
        "forced_share": _ratio(forced, tokens),
        "forward_passes": passes,
        "forward_passes_saved": saved,
        "saved_share": _ratio(saved, passes + saved),
        "ms_per_token": _per_token_ms(ran),
        "unconstrained_ms_per_token": None,
        "time_ratio": None,
    }
    if baseline is not None:
        base = {b.id: b for b in baseline}
        pairs = [(r, base[r.id]) for r in ran if r.id in base
                 and base[r.id].finish_reason in ("stop", "length")]
        mine = _per_token_ms([r for r, _ in pairs])
        theirs = _per_token_ms([b for _, b in pairs])
        out["ms_per_token"] = mine
        out["unconstrained_ms_per_token"] = theirs
        out["time_ratio"] = _ratio(mine, theirs) if mine is not None else None
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _per_token_ms(rows: Sequence[Row]) -> float | None:
    tokens = sum(r.tokens for r in rows)
    return _ratio(sum(r.decode_seconds for r in rows) * 1e3, tokens)


# ----------------------------------------------------------------------------- llguidance


def close_objects(schema: Any, in_all_of: bool = False) -> Any:
    """A copy of ``schema`` with ``additionalProperties: false`` where it is absent (our
    ``strict`` default, for an engine without that option); see the module docstring.

    Only schema positions are visited (subschema keywords), never ``enum``,
    ``const``, ``default`` or ``examples`` values, nor property *names*.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: close_objects(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [close_objects(v, in_all_of=key == "allOf") for v in value]
        elif key in _SCHEMA_ONE and isinstance(value, (dict, list)):
            out[key] = ([close_objects(v) for v in value] if isinstance(value, list)
                        else close_objects(value))
        else:
            out[key] = value
    types = schema.get("type")
    is_object = "properties" in schema or types == "object" or \
        (isinstance(types, list) and "object" in types)
    combined = any(k in schema for k in ("allOf", "anyOf", "oneOf", "$ref"))
    if is_object and not in_all_of and not combined and "additionalProperties" not in schema \
            and "unevaluatedProperties" not in schema:
        out["additionalProperties"] = False
    return out


_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions",
                          "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset({"items", "additionalItems", "additionalProperties", "contains",
                         "not", "if", "then", "else", "propertyNames",
                         "unevaluatedItems", "unevaluatedProperties"})


class LLGuidanceMatcher:
    """An llguidance ``LLMatcher`` with the methods of :class:`automask.Matcher` the loop
    calls (:class:`automask.generation.external.MatcherLike`)."""

    def __init__(self, compiled: Any, fill: Callable[[Any, np.ndarray], None], width: int):
        self.m = compiled.deep_copy()
        self._fill = fill
        self._width = width

    def fill_bitmask(self, bitmask: np.ndarray) -> None:
        self._fill(self.m, bitmask if bitmask.ndim == 2 else bitmask[None])

    def accept_token(self, token: int) -> bool:
        return bool(self.m.consume_token(int(token)))

    def accept_tokens(self, tokens: Sequence[int]) -> int:
        return int(self.m.try_consume_tokens([int(t) for t in tokens]))

    def forced_tokens(self, max_tokens: int) -> list[int]:
        return list(self.m.compute_ff_tokens())[:max_tokens]

    def is_terminated(self) -> bool:
        return bool(self.m.is_stopped())

    def is_accepting(self) -> bool:
        return bool(self.m.is_accepting())

    def allowed_token_ids(self) -> np.ndarray:
        mask = np.zeros((1, (self._width + 31) // 32), dtype=np.int32)
        self.fill_bitmask(mask)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self._width]
        return np.flatnonzero(bits)


class LLGuidanceGenerator:
    """llguidance set up for one model's vocabulary, with options equivalent to ours."""

    name = "llguidance"
    # compact layout, as automask generate's default "compact" whitespace
    JSON_OPTIONS: dict[str, Any] = {"whitespace_flexible": False, "item_separator": ",",
                                    "key_separator": ":"}

    def __init__(self, tokenizer: Any, vocab: Any):
        try:
            import llguidance
            import llguidance.numpy
        except ImportError as e:
            from automask.bench.peers import PeerError

            raise PeerError("llguidance is not installed (pip install 'automask[bench]')") from e
        self._ll = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.vocab = vocab
        self.version = str(getattr(llguidance, "__version__", "?"))
        self.tokenizer = self._tokenizer(tokenizer, vocab)

    @property
    def options(self) -> dict[str, Any]:
        return {"json_schema": {"defaults": dict(self.JSON_OPTIONS), "lenient": False,
                                "additionalProperties": "false where absent (close_objects)"},
                "fast_forward": "compute_ff_tokens"}

    def _tokenizer(self, tokenizer: Any, vocab: Any) -> Any:
        """From the transformers tokenizer (llguidance's own route), else from the
        Vocabulary's token bytes; sized and EOS'd as our Vocabulary is."""
        eos = list(vocab.eos_token_ids) or None
        if hasattr(tokenizer, "backend_tokenizer"):
            import llguidance.hf

            return llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab.size, eos_token=eos)
        wrapper = self._ll.TokenizerWrapper(_VocabForLLG(vocab))
        return self._ll.LLTokenizer(wrapper, n_vocab=vocab.size, eos_token=eos)

    def compile(self, schema: Any) -> Any:
        from automask.bench.peers import PeerError

        text = json.dumps(close_objects(schema))
        defaults = self.JSON_OPTIONS if isinstance(schema, dict) else None
        try:
            grammar = self._ll.LLMatcher.grammar_from_json_schema(  # (JsonCompileOptions keys)
                text, defaults=defaults)  # type: ignore[arg-type]
            m = self._ll.LLMatcher(self.tokenizer, grammar, log_level=0)
        except Exception as e:  # the Rust side raises plain ValueError/RuntimeError
            raise PeerError(f"llguidance: {' '.join(str(e).split())}") from e
        if m.is_error():
            raise PeerError(f"llguidance: {' '.join(m.get_error().split())}")
        return m

    def matcher_factory(self, compiled: Any) -> Callable[[], LLGuidanceMatcher]:
        return lambda: LLGuidanceMatcher(compiled, self._fill, self.vocab.size)


class _VocabForLLG:
    """The attributes llguidance's TokenizerWrapper reads, from an automask Vocabulary."""

    def __init__(self, vocab: Any):
        self.tokens = [vocab.token_bytes(i) for i in range(len(vocab.tokens))]
        self.eos_token_id = vocab.eos_token_ids[0] if vocab.eos_token_ids else None
        self.bos_token_id = None
        self.special_token_ids = sorted(vocab.special_ids)
        self._vocab = vocab

    def __call__(self, text: str | bytes) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return self._vocab.encode(text)


# ----------------------------------------------------------------------------- the run


class _TimedDecoder:
    """A Decoder that times its prompt passes (``start``), so prefill can be taken out."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.width = getattr(inner, "width", None)
        self.eos_token_ids = getattr(inner, "eos_token_ids", ())
        self.start_seconds = 0.0

    @property
    def forward_passes(self) -> int:
        return self.inner.forward_passes

    def start(self, ids: Sequence[int], keep: int = 1) -> tuple[Any, np.ndarray]:
        t0 = time.perf_counter()
        try:
            return self.inner.start(ids, keep)
        finally:
            self.start_seconds += time.perf_counter() - t0

    def extend(self, state: Any, ids: Sequence[int]) -> tuple[Any, np.ndarray]:
        return self.inner.extend(state, ids)

    def fork(self, state: Any) -> Any:
        return self.inner.fork(state)


def check_output(schema: Any, result: Any) -> tuple[bool | None, str]:
    """``automask generate``'s schema check; a schema jsonschema itself cannot use is
    reported (valid None), not raised."""
    from automask.generation.command import check_schema

    if not result.complete:
        return False, f"invalid (output incomplete: finish {result.finish_reason})"
    try:
        return check_schema(schema, result)  # None only when jsonschema is missing
    except Exception as e:  # unresolvable $ref, a bad pattern for Python's re, ...
        return None, f"not checked (jsonschema: {_one_line(e)})"


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:200]


def _run_one(row: Row, schema: Any, call: Callable[[], Any], timed: _TimedDecoder,
             timeout_s: float | None) -> None:
    """One generation into ``row``; errors and timeouts become the row's finish reason."""
    from automask.bench.maskbench import SchemaTimeout, time_limit

    timed.start_seconds = 0.0
    try:
        with time_limit(timeout_s) as disarm:
            try:
                result = call()
            finally:
                disarm()
    except SchemaTimeout:
        row.finish_reason, row.error = "timeout", f"over {timeout_s:g} s"
        return
    except Exception as e:  # one schema's failure is a result, never the end of the run
        row.finish_reason, row.error = "error", _one_line(e)
        return
    row.finish_reason = result.finish_reason
    row.tokens = len(result.tokens)
    row.forced = result.forced_tokens
    row.forward_passes = result.forward_passes
    row.saved = result.forward_passes_saved
    row.seconds = result.seconds
    row.prompt_seconds = timed.start_seconds
    row.output = result.text
    row.valid, row.validation = check_output(schema, result)


def run_generate_bench(records: Sequence[dict], model: Any, tokenizer: Any, *,
                       vs: Sequence[str] = (), max_tokens: int | None = None,
                       seed: int | None = None, timeout_s: float | None = DEFAULT_TIMEOUT_S,
                       model_name: str = "?", stream: TextIO | None = None,
                       progress_stream: TextIO | None = None) -> dict[str, Any]:
    """Every schema unconstrained, under automask, and under each ``vs`` engine.

    ``model``/``tokenizer`` are what :func:`automask.generate` takes (a fake
    callable model and a Vocabulary in tests). Prints the table; returns the
    JSON-ready result (per-engine summaries and per-schema rows).
    """
    from automask.engine.compiled import compile as compile_grammar
    from automask.generation.external import generate_with_matcher, loop_vocabulary
    from automask.generation.loop import GenerationParams, generate
    from automask.grammar.ir import Grammar

    out = stream if stream is not None else sys.stdout
    unknown = [n for n in vs if n not in ENGINES[1:]]
    if unknown:
        from automask.bench.peers import PeerError

        raise PeerError(f"unknown engine(s) {', '.join(unknown)}; known: llguidance")
    d = generate_defaults()
    params = GenerationParams(
        max_tokens=d["max_tokens"] if max_tokens is None else max_tokens,
        temperature=d["temperature"], top_k=d["top_k"], top_p=d["top_p"],
        repetition_penalty=d["repetition_penalty"], seed=seed,
        chat_template=d["chat_template"])
    decoder, vocab = loop_vocabulary(model, tokenizer)
    timed = _TimedDecoder(decoder)

    peers: dict[str, Any] = {}
    peer_errors: dict[str, str] = {}
    for name in dict.fromkeys(vs):
        try:
            peers[name] = LLGuidanceGenerator(tokenizer, vocab)
        except AutomaskError as e:
            peer_errors[name] = str(e)

    names = [UNCONSTRAINED, "automask", *peers]
    rows: dict[str, list[Row]] = {n: [] for n in names}
    if records:  # warm up the model (first-call allocations) outside every timing
        generate(timed, tokenizer, make_prompt(records[0]["schema"]), None, params,
                 max_tokens=min(2, params.max_tokens))
    bar = Progress("bench generate", len(records), progress_stream)
    t_all = time.perf_counter()
    try:
        for n, record in enumerate(records):
            bar.update(n)
            schema, prompt = record["schema"], make_prompt(record["schema"])
            base = Row(record["id"], compiled=True)
            _run_one(base, schema, lambda p=prompt: generate(timed, tokenizer, p, None, params),  # type: ignore[misc]  # (default-argument lambda)
                     timed, timeout_s)
            rows[UNCONSTRAINED].append(base)

            row = Row(record["id"])
            t0 = time.perf_counter()
            try:
                grammar = Grammar.from_json_schema(schema, whitespace=d["whitespace"],
                                                   strict=d["strict"])
                compiled = compile_grammar(grammar, vocab)
                row.compiled, row.compile_ms = True, (time.perf_counter() - t0) * 1e3
            except Exception as e:  # AutomaskError: unsupported; anything else: a crash
                row.error = " ".join(str(e).split())[:200] if isinstance(e, AutomaskError) \
                    else "crash: " + _one_line(e)
            if row.compiled:
                _run_one(row, schema, lambda p=prompt, c=compiled: generate(  # type: ignore[misc]
                    timed, tokenizer, p, c, params), timed, timeout_s)
            rows["automask"].append(_with_base(row, base))

            for name, peer in peers.items():
                row = Row(record["id"])
                t0 = time.perf_counter()
                try:
                    factory = peer.matcher_factory(peer.compile(schema))
                    row.compiled, row.compile_ms = True, (time.perf_counter() - t0) * 1e3
                except Exception as e:
                    row.error = str(e)[:200] if isinstance(e, AutomaskError) \
                        else "crash: " + _one_line(e)
                if row.compiled:
                    _run_one(row, schema, lambda p=prompt, f=factory: generate_with_matcher(  # type: ignore[misc]
                        timed, tokenizer, p, f, params), timed, timeout_s)
                rows[name].append(_with_base(row, base))
    finally:
        bar.close()
    wall = time.perf_counter() - t_all

    engines = []
    for name in names:
        summary = summarize(rows[name], None if name == UNCONSTRAINED else rows[UNCONSTRAINED])
        if name == UNCONSTRAINED:
            summary["ms_per_token"] = _per_token_ms(
                [r for r in rows[name] if r.finish_reason in ("stop", "length")])
        entry: dict[str, Any] = {"engine": name, "summary": summary,
                                 "schemas": [r.as_dict() for r in rows[name]]}
        if name == "automask":
            entry["version"] = __version__
            entry["options"] = {"json_schema": {"whitespace": d["whitespace"],
                                                "strict": d["strict"]}}
        elif name in peers:
            entry["version"], entry["options"] = peers[name].version, peers[name].options
        engines.append(entry)
    for name, error in peer_errors.items():
        engines.append({"engine": name, "error": error, "summary": None, "schemas": []})

    result: dict[str, Any] = {
        "command": "bench generate",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "model": model_name,
        "vocab_size": vocab.size,
        "prompt_template": PROMPT_TEMPLATE,
        "params": {k: v for k, v in vars(params).items()},
        "timeout_s": timeout_s,
        "records": len(records),
        "wall_s": wall,
        "time_per_token": "(generation seconds - the prompt's forward pass) / output tokens, "
                          "summed over the schemas both runs finished; model load and "
                          "compile excluded",
        "engines": engines,
    }
    print(format_report(result), file=out, flush=True)
    return result


def _with_base(row: Row, base: Row) -> Row:
    row.unconstrained_seconds = base.seconds
    row.unconstrained_prompt_seconds = base.prompt_seconds
    row.unconstrained_tokens = base.tokens
    return row


# ----------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def format_table(engines: Sequence[dict]) -> str:
    """One line per engine: coverage, finish, compliance, tokens, fast-forward, time."""
    cols = ["engine", "schemas", "compiled", "valid", "stop", "length", "error", "compliance",
            "tok/out", "forced", "ff saved", "ms/tok", "vs unconstr."]
    rows = []
    for e in engines:
        s = e.get("summary")
        if s is None:
            rows.append([e["engine"], "not run: " + str(e.get("error", "?"))[:60],
                         *[""] * (len(cols) - 2)])
            continue
        fin = s["finish_reasons"]
        unconstrained = e["engine"] == UNCONSTRAINED
        rows.append([
            e["engine"], s["schemas"],
            "-" if unconstrained else f"{s['compiled']} ({_pct(s['declared_coverage'])})",
            f"{s['valid']} ({_pct(s['empirical_coverage'])})",
            f"{s['stop']} ({_pct(s['stop_share'])})", fin.get("length", 0),
            fin.get("error", 0) + fin.get("timeout", 0),
            _pct(s["compliance"]), _num(s["mean_tokens"]),
            "-" if unconstrained else _pct(s["forced_share"]),
            "-" if unconstrained else _pct(s["saved_share"]),
            _num(s["ms_per_token"], 2),
            "-" if unconstrained else (_num(s["time_ratio"], 2) + "x"
                                       if s["time_ratio"] is not None else "-"),
        ])
    return text_table(cols, rows)


def targets(engines: Sequence[dict]) -> list[tuple[str, bool | None]]:
    """Issue 4's targets for automask (shown, not enforced): (description, met?)."""
    by = {e["engine"]: e.get("summary") for e in engines}
    ours = by.get("automask")
    if not ours:
        return []
    out: list[tuple[str, bool | None]] = []

    def met(x: float | None, ok: Callable[[float], bool]) -> bool | None:
        return None if x is None else ok(x)

    out.append(("compliance 100% of stop outputs", met(ours["compliance"], lambda v: v >= 1)))
    out.append(("stop share >= 80%", met(ours["stop_share"], lambda v: v >= 0.8)))
    theirs = by.get("llguidance")
    if theirs:
        out.append(("stop share >= llguidance's",
                    None if ours["stop_share"] is None or theirs["stop_share"] is None
                    else ours["stop_share"] >= theirs["stop_share"]))
    out.append(("constrained time/token <= 1.10x unconstrained",
                met(ours["time_ratio"], lambda v: v <= 1.10)))
    out.append(("fast-forward saves >= 10% of forward passes",
                met(ours["saved_share"], lambda v: v >= 0.10)))
    return out


def format_report(result: dict) -> str:
    """The printed report: header, table, targets, the notes that explain the columns."""
    lines = [f"bench generate: {result['records']} schemas, model {result['model']}, "
             f"max {result['params']['max_tokens']} tokens, greedy"
             if result["params"]["temperature"] == 0 else
             f"bench generate: {result['records']} schemas, model {result['model']}",
             format_table(result["engines"]),
             "(compiled: declared coverage; valid: empirical coverage, jsonschema; compliance: "
             "valid among compiled outputs that stopped; tok/out: mean output tokens; forced: "
             "share of output tokens fast-forwarded; ff saved: forward passes saved / "
             "(passes + saved); ms/tok: after the prompt pass, vs the unconstrained runs of "
             "the same schemas)"]
    for text, ok in targets(result["engines"]):
        mark = "n/a" if ok is None else ("met" if ok else "NOT met")
        lines.append(f"  target: {text}: {mark}")
    lines.append(f"wall {result['wall_s']:.1f} s (model load excluded)")
    return "\n".join(lines)


def run_command(data: str, *, split: str | None, sample: int | None, seed: int,
                model: str | None, max_tokens: int | None, vs: Sequence[str],
                timeout_s: float | None, stream: TextIO | None = None) -> dict[str, Any]:
    """``automask bench generate`` after argparse: load records and model, run, report."""
    from automask.bench.maskbench import MaskBenchInputError, load_records
    from automask.generation.command import Progress as Line
    from automask.generation.models import load_model

    records = load_records(data, split=split, sample=sample, seed=seed)
    if not records:
        raise MaskBenchInputError(f"{data}: no records" + (f" in split {split!r}" if split
                                                           else ""))
    line = Line()
    t0 = time.perf_counter()
    loaded = load_model(model, progress=lambda msg: line.show(f"automask: {msg}…"))
    line.clear()
    load_s = time.perf_counter() - t0
    result = run_generate_bench(records, loaded.model, loaded.tokenizer, vs=vs,
                                max_tokens=max_tokens, seed=seed, timeout_s=timeout_s,
                                model_name=loaded.name, stream=stream)
    result.update({"data": data, "split": split, "sample": sample, "seed": seed,
                   "model_load_s": load_s})
    return result
