"""``automask bench batch`` on a few MaskBench schemas and the real Llama-3.1 tokenizer."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from automask.bench import batch_bench
from automask.cli import main

HAS_LLGUIDANCE = importlib.util.find_spec("llguidance") is not None


def _bench(shared_data, tmp_path, *extra: str) -> dict:
    out = tmp_path / "batch.json"
    code = main(["bench", "batch", "--data", str(shared_data / "maskbench-dev.jsonl.gz"),
                 "--tokenizer", str(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json"),
                 "--batch", "1,4", "--steps", "12", "--pool", "10", "--json", str(out),
                 *extra])
    assert code == 0
    return json.loads(out.read_text())


def test_levels_keep_the_batch_full_and_walk_valid_instances(shared_data, tmp_path, capsys):
    result = _bench(shared_data, tmp_path, "--vs", "none")
    levels = {(s["engine"], s["batch"]): s for s in result["levels"]}
    assert set(levels) == {("automask", 1), ("automask", 4)}
    for (_, batch), s in levels.items():
        assert s["refused"] == 0  # every token of a valid instance is allowed and accepted
        assert 0 < s["steps"] <= 12
        assert s["fill_ms"]["count"] == s["steps"] and s["fill_ms"]["p50"] > 0
        assert s["sequences"] >= batch  # finished sequences gave their rows to new schemas
    assert levels[("automask", 4)]["mean_rows"] > 1
    assert result["ratios"] == {} and result["targets"] == []  # no peer, no B=64
    assert "fill p50" in capsys.readouterr().out


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
def test_llguidance_fills_the_same_batches(shared_data, tmp_path):
    result = _bench(shared_data, tmp_path, "--vs", "llguidance", "--threads", "1")
    engines = {s["engine"] for s in result["levels"]}
    assert engines == {"automask", "llguidance"}
    assert set(result["ratios"]) == {"1", "4"}  # JSON keys
    for s in result["levels"]:
        assert s["refused"] == 0, s


def test_targets_at_b64_are_judged():
    ours = {"engine": "automask", "batch": 64, "fill_ms": {"p50": 3.0, "p99": 25.0}}
    theirs = {"engine": "llguidance", "batch": 64, "fill_ms": {"p50": 1.0, "p99": 5.0}}
    ratios = batch_bench._ratios([ours, theirs])
    assert ratios[64]["p50"] == pytest.approx(3.0)
    targets = batch_bench._targets([ours, theirs], ratios)
    assert [t["met"] for t in targets] == [False, False]
    assert batch_bench.failed_targets({"targets": targets}) == [t["text"] for t in targets]
    ours["fill_ms"] = {"p50": 1.5, "p99": 12.0}
    assert all(t["met"] for t in batch_bench._targets([ours, theirs],
                                                      batch_bench._ratios([ours, theirs])))


def test_refused_tokens_are_counted_not_hidden(llama):
    """A walk whose tokens leave the language is refused, and its row goes to the next."""
    from automask.bench.peers import AutomaskEngine, GrammarSpec

    engine = AutomaskEngine()
    engine.prepare("", llama)
    schema = json.dumps({"type": "integer"})
    walks = [batch_bench.Walk("bad", GrammarSpec("json", schema, "bad"),
                              tuple(llama.encode('"x"'))),
             batch_bench.Walk("good", GrammarSpec("json", schema, "good"),
                              tuple(llama.encode("123")))]
    level = batch_bench.run_level("automask", batch_bench._AutomaskBatch(engine), walks,
                                  1, 10, llama.size)
    assert level.refused == ["bad"] and level.sequences == 2
    assert np.sum(level.rows) == level.summary()["steps"]
