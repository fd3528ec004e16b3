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


def refused_alone(shared_data, llama, record_ids) -> set[str]:
    """The schemas among ``record_ids`` whose walk (the bench's pool, seed 0) a lone
    matcher refuses: a valid instance out of the generated property order is refused
    (docs/json-schema.md), in a batch and alone alike."""
    import automask
    from automask import Grammar

    walks = batch_bench.load_walks(str(shared_data / "maskbench-dev.jsonl.gz"), llama, 10, 0)
    out = set()
    for walk in walks:
        if walk.record_id in record_ids:
            grammar = Grammar.from_json_schema(json.loads(walk.spec.text))
            matcher = automask.Matcher(automask.compile(grammar, llama))
            if matcher.accept_tokens(walk.ids) < len(walk.ids):
                out.add(walk.record_id)
    return out


def test_levels_keep_the_batch_full_and_walk_valid_instances(shared_data, tmp_path, capsys,
                                                             llama):
    result = _bench(shared_data, tmp_path, "--vs", "none", "--workers", "0")
    levels = {(s["engine"], s["batch"]): s for s in result["levels"]}
    assert set(levels) == {("automask", 1), ("automask", 4)}
    for (_, batch), s in levels.items():
        # every token of a valid instance is allowed and accepted, but where a lone
        # matcher refuses it too (a valid instance out of property order)
        refused = set(s["refused_ids"])
        assert s["refused"] == len(refused) and refused == refused_alone(shared_data, llama,
                                                                         refused)
        assert 0 < s["steps"] <= 12
        assert s["fill_ms"]["count"] == s["steps"] and s["fill_ms"]["p50"] > 0
        assert s["sequences"] >= batch  # finished sequences gave their rows to new schemas
    assert levels[("automask", 4)]["mean_rows"] > 1
    assert result["ratios"] == [] and result["targets"] == []  # no peer, no B=64
    assert "fill p50" in capsys.readouterr().out


def test_the_pool_walks_the_same_schemas_with_the_same_outcomes(shared_data, tmp_path):
    result = _bench(shared_data, tmp_path, "--vs", "none", "--workers", "2")
    levels = {(s["engine"], s["batch"]): s for s in result["levels"]}
    assert set(levels) == {(e, b) for e in batch_bench.OURS for b in (1, 4)}
    assert result["workers"] == 2
    for batch in (1, 4):
        one, pool = levels["automask", batch], levels[batch_bench.POOL_ENGINE, batch]
        # the same walks, step for step: what the pool's workers accept and refuse is
        # what the matchers in this process do
        for key in ("steps", "mean_rows", "sequences", "refused_ids", "compile_errors"):
            assert one[key] == pool[key], key


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
def test_llguidance_fills_the_same_batches(shared_data, tmp_path, llama):
    result = _bench(shared_data, tmp_path, "--vs", "llguidance", "--threads", "1",
                    "--workers", "0")
    engines = {s["engine"] for s in result["levels"]}
    assert engines == {"automask", "llguidance"}
    assert {(r["engine"], r["batch"]) for r in result["ratios"]} == {("automask", 1),
                                                                     ("automask", 4)}
    for s in result["levels"]:
        if s["engine"] == "llguidance":
            assert s["refused"] == 0, s
        else:
            assert set(s["refused_ids"]) == refused_alone(shared_data, llama, s["refused_ids"])


def test_targets_at_b64_are_judged_per_automask_row():
    ours = {"engine": "automask", "batch": 64, "fill_ms": {"p50": 3.0, "p99": 25.0}}
    pool = {"engine": batch_bench.POOL_ENGINE, "batch": 64,
            "fill_ms": {"p50": 2.5, "p99": 15.0}}
    theirs = {"engine": "llguidance", "batch": 64, "fill_ms": {"p50": 1.0, "p99": 5.0}}
    ratios = batch_bench._ratios([ours, theirs])
    assert ratios["automask", 64]["p50"] == pytest.approx(3.0)
    targets = batch_bench._targets([ours, theirs], ratios)
    assert [t["met"] for t in targets] == [False, False]
    assert batch_bench.failed_targets({"targets": targets}) == [t["text"] for t in targets]
    # the pool meets p99 but not p50: the failure is the pool's p50 (the row that
    # misses fewest), not the one-thread row's p99
    both = [ours, pool, theirs]
    targets = batch_bench._targets(both, batch_bench._ratios(both))
    assert [(t["engine"], t["target"], t["met"]) for t in targets] == [
        ("automask", "p99", False), ("automask", "p50_ratio", False),
        (batch_bench.POOL_ENGINE, "p99", True), (batch_bench.POOL_ENGINE, "p50_ratio", False)]
    assert batch_bench.failed_targets({"targets": targets}) == [targets[3]["text"]]
    # one row meeting both is enough, the other row's misses notwithstanding
    pool["fill_ms"] = {"p50": 1.9, "p99": 15.0}
    targets = batch_bench._targets(both, batch_bench._ratios(both))
    assert batch_bench.failed_targets({"targets": targets}) == []
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
