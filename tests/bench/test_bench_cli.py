"""The ``automask`` CLI and the grammar/compile benchmarks, run in-process on tiny inputs.

Fast tests use the tiny byte-level BPE tokenizer trained by conftest (saved as a
tokenizer.json, since the CLI takes a path); the data-tier test runs the real
json.gbnf + Llama-3.1 + MaskBench combination on a few instances.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from automask import __version__
from automask.cli import main

HAS_LLGUIDANCE = importlib.util.find_spec("llguidance") is not None

QUOTED = '"[a-z ]{0,30}"'
VALID_QUOTED = ['"hello world"', '"the cat"', '"quick brown fox"']
INVALID_QUOTED = ['"Hello"', '"abc']  # masked at some token; not accepting at the end

# A flat JSON object of small ints, as json.dumps writes it (", " and ": ").
FLAT_OBJECT_GBNF = r'''
root ::= "{" ( pair ( ", " pair )* )? "}"
pair ::= "\"" [a-z]+ "\": " [0-9]+
'''


def _run(args: list[str]) -> int:
    return main([str(a) for a in args])


def _bench_grammar(tokenizer: Path, instances: Path, out: Path, *extra: str) -> dict:
    code = _run(["bench", "grammar", *extra, "--tokenizer", tokenizer,
                 "--instances", instances, "--json", out])
    assert code == 0
    return json.loads(out.read_text())


def _lines(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "instances.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_a_command_is_required(capsys):
    for argv in ([], ["bench"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_bench_grammar_regex_json_fields(tiny_bpe_path, tmp_path, capsys):
    instances = _lines(tmp_path, VALID_QUOTED + INVALID_QUOTED)
    result = _bench_grammar(tiny_bpe_path, instances, tmp_path / "out.json",
                            "--regex", QUOTED, "--repeat-compile", "3")
    ours = result["engines"][0]
    assert ours["engine"] == "automask" and ours["error"] is None
    assert ours["instances"] == 5
    assert ours["accepted"] == len(VALID_QUOTED)
    assert ours["rejected"] == len(INVALID_QUOTED)
    assert len(ours["compile_ms"]["all"]) == 3
    for key in ("cold", "median", "p99"):
        assert ours["compile_ms"][key] > 0
    assert ours["grammar_parse_ms"] > 0 and ours["vocab_index_build_ms"] > 0
    assert ours["tokens"] > 0
    assert ours["mask_commit_us"]["count"] == ours["tokens"]
    for key in ("mean", "p50", "p99", "max"):
        assert ours["mask_commit_us"][key] > 0
    assert ours["first_mask_us"]["count"] == 5
    assert ours["memory"]["memory_mb"] > 0 and ours["memory"]["method"]
    assert ours["gc_during_walk"]["collections"] >= 0

    by_label = {r["instance"]: r for r in ours["rejections"]}
    assert set(by_label) == {"line 4", "line 5"}
    assert by_label["line 4"]["reason"] == "masked"
    from automask.vocab import Vocabulary

    n_tokens = len(Vocabulary.from_file(tiny_bpe_path).encode('"abc'))
    assert by_label["line 5"] == {"instance": "line 5", "position": n_tokens,
                                  "reason": "not accepting"}

    table = capsys.readouterr().out
    assert "automask" in table and "mean µs" in table and "compile cold ms" in table


def test_bench_grammar_json_list_and_limit(tiny_bpe_path, tmp_path):
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps(["", "abc", "ABC", "xyz"]))
    result = _bench_grammar(tiny_bpe_path, instances, tmp_path / "out.json",
                            "--regex", "[a-z]*", "--limit", "3")
    ours = result["engines"][0]
    assert ours["instances"] == 3
    assert ours["accepted"] == 2  # the empty string and "abc"
    assert [r["instance"] for r in ours["rejections"]] == ["#2"]


def test_bench_grammar_gbnf_on_maskbench_records(tiny_bpe_path, tmp_path):
    grammar = tmp_path / "flat.gbnf"
    grammar.write_text(FLAT_OBJECT_GBNF)
    records = [
        {"id": "one", "schema": {}, "tests": [
            {"data": {"a": 1}, "valid": True, "description": ""},
            {"data": {"a": "x"}, "valid": False, "description": "skipped: invalid"},
        ]},
        {"id": "two", "schema": {}, "tests": [
            {"data": {"bc": 22, "d": 3}, "valid": True, "description": ""},
            {"data": [1, 2], "valid": True, "description": "valid, but not an object"},
        ]},
    ]
    instances = tmp_path / "mini.jsonl.gz"
    with gzip.open(instances, "wt", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    result = _bench_grammar(tiny_bpe_path, instances, tmp_path / "out.json",
                            "--grammar", grammar)
    ours = result["engines"][0]
    assert result["grammar"]["kind"] == "gbnf"
    assert ours["instances"] == 3
    assert ours["accepted"] == 2
    assert ours["rejections"] == [{"instance": "two#1", "position": 0, "reason": "masked"}]


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
def test_bench_grammar_vs_llguidance_agrees(tiny_bpe_path, tmp_path, capsys):
    # No forced leading bytes here: where bytes are forced, llguidance allows only its own
    # tokenization of them, and it does not undo this tokenizer's add_prefix_space.
    valid = ["hello world", "the cat", "quick brown fox"]
    instances = _lines(tmp_path, [*valid, "Hello", "abc "])
    result = _bench_grammar(tiny_bpe_path, instances, tmp_path / "out.json",
                            "--regex", "[a-z]+( [a-z]+)*", "--vs", "llguidance")
    ours, theirs = result["engines"]
    assert theirs["engine"] == "llguidance" and theirs["error"] is None
    assert theirs["accepted"] == ours["accepted"] == len(valid)
    assert theirs["rejected"] == ours["rejected"] == 2
    assert theirs["tokens"] == ours["tokens"]
    assert result["agreement"]["llguidance"]["disagreements"] == 0
    assert "llguidance" in capsys.readouterr().out


def test_bad_regex_exits_2_with_one_line(tiny_bpe_path, tmp_path, capsys):
    instances = _lines(tmp_path, ["a"])
    code = _run(["bench", "grammar", "--regex", "a(b", "--tokenizer", tiny_bpe_path,
                 "--instances", instances])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("automask: error:")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("problem", ["grammar extension", "missing instances", "tokenizer"])
def test_input_errors_exit_2(problem, tiny_bpe_path, tmp_path, capsys):
    instances = _lines(tmp_path, ["a"])
    tokenizer = tiny_bpe_path
    source = ["--regex", "a"]
    if problem == "grammar extension":
        grammar = tmp_path / "g.txt"
        grammar.write_text('root ::= "a"')
        source = ["--grammar", grammar]
    elif problem == "missing instances":
        instances = tmp_path / "nope.txt"
    else:
        tokenizer = tmp_path / "no-tokenizer.json"
    code = _run(["bench", "grammar", *source, "--tokenizer", tokenizer,
                 "--instances", instances])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("automask: error:") and "Traceback" not in err


def test_bench_compile(tiny_bpe_path, tmp_path, capsys):
    grammar = tmp_path / "flat.gbnf"
    grammar.write_text(FLAT_OBJECT_GBNF)
    out = tmp_path / "compile.json"
    code = _run(["bench", "compile", "--tokenizer", tiny_bpe_path, "--regex", QUOTED,
                 "--grammar", grammar, "--repeat", "3", "--max-compile-ms", "1e9",
                 "--json", out])
    assert code == 0
    result = json.loads(out.read_text())
    assert [r["kind"] for r in result["results"]] == ["regex", "gbnf"]  # command-line order
    for r in result["results"]:
        assert r["error"] is None
        assert len(r["compile_ms"]["all"]) == 3
        assert r["compile_ms"]["cold"] > 0 and r["compile_ms"]["warm_median"] > 0
        assert r["first_mask_ms"]["cold"] > 0 and r["reused_first_mask_ms"]["cold"] > 0
    assert result["vocab_index_build_ms"]["automask"] > 0
    assert result["check_failures"] == []
    assert "compile cold ms" in capsys.readouterr().out


def test_bench_compile_budget_and_errors(tiny_bpe_path, tmp_path, capsys):
    code = _run(["bench", "compile", "--tokenizer", tiny_bpe_path, "--regex", "[a-z]+",
                 "--max-first-mask-ms", "0"])
    assert code == 1
    assert "check failed" in capsys.readouterr().err

    out = tmp_path / "compile.json"
    code = _run(["bench", "compile", "--tokenizer", tiny_bpe_path, "--regex", "a(b",
                 "--regex", "[a-z]+", "--json", out])
    assert code == 2
    assert "automask: error: regex a(b" in capsys.readouterr().err
    results = json.loads(out.read_text())["results"]
    assert results[0]["error"] and results[1]["error"] is None

    assert _run(["bench", "compile", "--tokenizer", tiny_bpe_path]) == 2


@pytest.mark.data
def test_json_gbnf_on_maskbench_llama(shared_data, tmp_path):
    extra = ["--vs", "llguidance"] if HAS_LLGUIDANCE else []
    result = _bench_grammar(
        shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json",
        shared_data / "maskbench-dev.jsonl.gz", tmp_path / "out.json",
        "--grammar", shared_data / "grammars" / "gbnf" / "json.gbnf", "--limit", "20", *extra)
    assert len(result["engines"]) == 1 + len(extra) // 2
    for engine in result["engines"]:
        assert engine["error"] is None
        assert engine["instances"] == 20
        assert engine["accepted"] == 20, engine["rejections"]
        assert engine["tokens"] > 100
