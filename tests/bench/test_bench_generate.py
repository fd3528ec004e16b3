"""``automask bench generate``: the report logic on a tiny fake model (fast), and the real
default model on two schemas (slow; skipped with the reason when it is not installed)."""

from __future__ import annotations

import importlib.util
import io
import json
import re

import numpy as np
import pytest

from automask.bench import generate_bench as gb
from automask.bench.generate_bench import Row, close_objects, summarize
from automask.cli import build_parser
from automask.generation import CallableLM, GenerationParams
from automask.generation.external import generate_with_matcher

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = [
    {"type": "object", "properties": {"ok": {"type": "boolean"},
                                      "kind": {"enum": ["a", "bc"]}},
     "required": ["ok", "kind"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}},
     "required": ["name"]},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3},
    {"$ref": "https://example.com/remote.json"},  # remote refs: unsupported
]


def records() -> list[dict]:
    return [{"id": f"Test---s{i}", "schema": s, "tests": []} for i, s in enumerate(SCHEMAS)]


def fake_model(width: int, eos: list[int], seed: int = 0, eos_bias: float = 4.0):
    """Logits that depend only on the ids (consistent across passes), EOS somewhat likely."""

    def fn(ids: list[int]) -> np.ndarray:
        rng = np.random.default_rng([seed, len(ids), *ids[-8:]])
        logits = rng.normal(0.0, 3.0, width).astype(np.float32)
        logits[eos] += eos_bias
        return logits

    return fn


def has_llguidance() -> bool:
    return importlib.util.find_spec("llguidance") is not None


def run_fake(vocab, vs=(), max_tokens: int = 40) -> tuple[dict, str]:
    model = CallableLM(fake_model(vocab.size, list(vocab.eos_token_ids)), width=vocab.size)
    out = io.StringIO()
    result = gb.run_generate_bench(records(), model, vocab, vs=vs, max_tokens=max_tokens,
                                   timeout_s=None, model_name="fake", stream=out)
    return result, out.getvalue()


# ----------------------------------------------------------------------------- pieces


def test_prompt_is_fixed_and_shows_the_schema():
    prompt = gb.make_prompt(SCHEMAS[0])
    assert prompt == gb.make_prompt(json.loads(json.dumps(SCHEMAS[0])))
    assert '"required":["ok","kind"]' in prompt and "JSON only" in prompt


def test_defaults_are_those_of_automask_generate():
    d = gb.generate_defaults()
    assert d["whitespace"] == "compact" and d["strict"] is True
    assert d["temperature"] == 0 and d["max_tokens"] == 256 and d["chat_template"]


def test_cli_registers_bench_generate():
    args = build_parser().parse_args([
        "bench", "generate", "--data", "x.jsonl.gz", "--split", "Glaiveai2K", "--sample", "5",
        "--vs", "llguidance", "--max-tokens", "64", "--json", "out.json"])
    assert args.bench_command == "generate" and args.sample == 5 and args.max_tokens == 64
    assert args.vs == ["llguidance"] and args.json == "out.json" and args.seed == 0


def test_close_objects_adds_false_only_where_our_strict_default_would():
    schema = {
        "type": "object",
        "properties": {
            "properties": {"type": "object", "properties": {"x": {"const": {"a": 1}}}},
            "open": {"type": "object", "additionalProperties": True},
            "list": {"type": "array", "items": {"properties": {"y": {"type": "integer"}}}},
            "both": {"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]},
            "ref": {"$ref": "#/$defs/d"},
        },
        "$defs": {"d": {"type": ["object", "null"], "enum": [{"type": "object"}, None]}},
    }
    out = close_objects(schema)
    assert out["additionalProperties"] is False
    props = out["properties"]
    assert props["properties"]["additionalProperties"] is False  # a property named so
    assert props["properties"]["properties"]["x"] == {"const": {"a": 1}}  # values untouched
    assert props["open"]["additionalProperties"] is True
    assert props["list"]["items"]["additionalProperties"] is False
    assert all("additionalProperties" not in b for b in props["both"]["allOf"])
    assert "additionalProperties" not in props["both"] and "additionalProperties" not in \
        props["ref"]
    assert out["$defs"]["d"]["additionalProperties"] is False
    assert out["$defs"]["d"]["enum"] == [{"type": "object"}, None]
    assert "additionalProperties" not in schema  # a copy
    assert close_objects(True) is True


def test_summarize_counts_coverage_compliance_and_time_ratio():
    rows = [
        Row("a", compiled=True, finish_reason="stop", valid=True, tokens=10, forced=4,
            forward_passes=6, saved=4, seconds=1.5, prompt_seconds=0.5),
        Row("b", compiled=True, finish_reason="length", valid=False, tokens=20, forced=2,
            forward_passes=18, saved=2, seconds=2.5, prompt_seconds=0.5),
        Row("c", compiled=True, finish_reason="error", error="boom"),
        Row("d", error="unsupported"),
    ]
    base = [Row(i, compiled=True, finish_reason="length", tokens=30, seconds=3.5,
                prompt_seconds=0.5) for i in "abcd"]
    s = summarize(rows, base)
    assert (s["schemas"], s["compiled"], s["valid"], s["stop"]) == (4, 3, 1, 1)
    assert s["declared_coverage"] == 0.75 and s["empirical_coverage"] == 0.25
    assert s["stop_share"] == pytest.approx(1 / 3) and s["compliance"] == 1.0
    assert s["finish_reasons"] == {"stop": 1, "length": 1, "error": 1, "not compiled": 1}
    assert s["mean_tokens"] == 15 and s["forced_share"] == pytest.approx(6 / 30)
    assert s["saved_share"] == pytest.approx(6 / 30)
    # (1 + 2) s over 30 tokens vs (3 + 3) s over 60 tokens, the same two schemas
    assert s["ms_per_token"] == pytest.approx(100.0)
    assert s["unconstrained_ms_per_token"] == pytest.approx(100.0)
    assert s["time_ratio"] == pytest.approx(1.0)
    empty = summarize([Row("x", error="unsupported")])
    assert empty["compliance"] is None and empty["time_ratio"] is None


def test_targets_and_table_show_every_engine():
    good = summarize([Row("a", compiled=True, finish_reason="stop", valid=True, tokens=10,
                          forced=5, forward_passes=5, saved=5, seconds=1.0)],
                     [Row("a", compiled=True, finish_reason="stop", tokens=10, seconds=1.0)])
    engines = [{"engine": "unconstrained", "summary": good},
               {"engine": "automask", "summary": good},
               {"engine": "llguidance", "summary": good},
               {"engine": "other", "error": "not installed", "summary": None}]
    table = gb.format_table(engines)
    assert table.splitlines()[0].split()[:3] == ["engine", "schemas", "compiled"]
    assert "1.00x" in table and "not run: not installed" in table
    met = dict(gb.targets(engines))
    assert met == {"compliance 100% of stop outputs": True, "stop share >= 80%": True,
                   "stop share >= llguidance's": True,
                   "constrained time/token <= 1.10x unconstrained": True,
                   "fast-forward saves >= 10% of forward passes": True}


# ----------------------------------------------------------------------------- fake model


def test_run_with_a_fake_model(tiny_bpe_vocab):
    result, printed = run_fake(tiny_bpe_vocab)
    json.dumps(result, allow_nan=False)
    by = {e["engine"]: e for e in result["engines"]}
    assert list(by) == ["unconstrained", "automask"]
    ours = by["automask"]
    rows = [Row(**r) for r in ours["schemas"]]
    assert [r.id for r in rows] == [r["id"] for r in records()]
    assert [r.compiled for r in rows] == [True, True, True, False]
    assert "$ref" in (rows[3].error or "")
    for row, schema in zip(rows[:3], SCHEMAS[:3], strict=True):
        assert row.finish_reason in ("stop", "length")
        assert row.saved == row.forced and row.forced > 0  # every schema forces its start
        assert row.unconstrained_tokens is not None and row.unconstrained_seconds > 0
        if row.finish_reason == "stop":
            jsonschema.validate(json.loads(row.output), schema)
            assert row.valid is True
    s = ours["summary"]
    assert s["compiled"] == 3 and s["compliance"] in (1.0, None)
    assert s["saved_share"] > 0 and s["time_ratio"] is not None
    assert result["prompt_template"] == gb.PROMPT_TEMPLATE
    assert result["params"]["max_tokens"] == 40 and result["params"]["temperature"] == 0
    assert "automask" in printed and "target: compliance 100% of stop outputs" in printed


def test_a_crashing_generation_is_a_row_not_the_end_of_the_run(tiny_bpe_vocab):
    base = fake_model(tiny_bpe_vocab.size, list(tiny_bpe_vocab.eos_token_ids))
    seen = {"last": [], "starts": 0}

    def flaky(ids: list[int]) -> np.ndarray:
        ids = list(ids)
        if ids[: len(seen["last"])] != seen["last"] or not seen["last"]:
            seen["starts"] += 1  # a new generation (not an extension of the last call)
            if seen["starts"] == 3:  # the warm-up is the first: this one is a real row
                seen["last"] = []
                raise RuntimeError("device lost")
        seen["last"] = ids
        return base(ids)

    out = io.StringIO()
    result = gb.run_generate_bench(records()[:2], CallableLM(flaky, width=tiny_bpe_vocab.size),
                                   tiny_bpe_vocab, max_tokens=30, timeout_s=None, stream=out)
    rows = [r for e in result["engines"] for r in e["schemas"]]
    assert len(rows) == 4
    errors = [r for r in rows if r["finish_reason"] == "error"]
    assert len(errors) == 1 and errors[0]["error"] == "RuntimeError: device lost"
    assert errors[0]["valid"] is None


@pytest.mark.skipif(not has_llguidance(), reason="llguidance is not installed")
def test_llguidance_runs_in_the_same_loop(tiny_bpe_vocab):
    result, printed = run_fake(tiny_bpe_vocab, vs=["llguidance"])
    by = {e["engine"]: e for e in result["engines"]}
    assert list(by) == ["unconstrained", "automask", "llguidance"]
    theirs = by["llguidance"]
    assert theirs["options"]["json_schema"]["defaults"]["item_separator"] == ","
    for r, schema in zip(theirs["schemas"], SCHEMAS, strict=True):
        if r["finish_reason"] == "stop":
            value = json.loads(r["output"])
            jsonschema.validate(value, schema)
            outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', r["output"])
            assert not re.search(r"\s", outside_strings)  # compact, as ours
    assert "stop share >= llguidance's" in printed


@pytest.mark.skipif(not has_llguidance(), reason="llguidance is not installed")
def test_llguidance_matcher_outputs_strict_compact_json(tiny_bpe_vocab):
    peer = gb.LLGuidanceGenerator(tiny_bpe_vocab, tiny_bpe_vocab)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    new = peer.matcher_factory(peer.compile(schema))
    eos = list(tiny_bpe_vocab.eos_token_ids)
    for seed in range(3):
        model = CallableLM(fake_model(tiny_bpe_vocab.size, eos, seed, eos_bias=0.0),
                           width=tiny_bpe_vocab.size)
        r = generate_with_matcher(model, tiny_bpe_vocab, [5, 6, 7], new,
                                  GenerationParams(max_tokens=30))
        assert r.constrained
        if r.finish_reason == "stop":
            assert set(json.loads(r.text)) <= {"ok"}  # additionalProperties closed
        assert r.forward_passes_saved == r.forced_tokens


# ----------------------------------------------------------------------------- slow


@pytest.mark.slow
def test_default_model_on_two_schemas(smollm):
    loaded = smollm
    recs = [{"id": "Mini---person", "schema": {
                "type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                "required": ["name", "age"]}, "tests": []},
            {"id": "Mini---unit", "schema": {
                "type": "object", "properties": {"unit": {"enum": ["metric", "imperial"]}},
                "required": ["unit"]}, "tests": []}]
    vs = ["llguidance"] if has_llguidance() else []
    out = io.StringIO()
    result = gb.run_generate_bench(recs, loaded.model, loaded.tokenizer, vs=vs,
                                   max_tokens=24, model_name=loaded.name, stream=out)
    by = {e["engine"]: e for e in result["engines"]}
    ours = by["automask"]["summary"]
    assert ours["compiled"] == 2 and ours["finish_reasons"].get("error", 0) == 0
    assert ours["compliance"] in (1.0, None)
    assert ours["forward_passes_saved"] > 0
    for row in by["automask"]["schemas"]:
        assert row["finish_reason"] in ("stop", "length") and row["tokens"] > 0
        assert row["unconstrained_tokens"] > 0
    if vs:
        assert by["llguidance"]["summary"]["compiled"] == 2
    assert "automask" in out.getvalue()
