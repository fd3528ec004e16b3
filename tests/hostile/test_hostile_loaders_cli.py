"""Issue 29, hostile input: vocabulary loaders and the command line.

Loaders: an id space far wider than the tokens in a file (a 3 KB tiktoken file
whose last rank is 500,000,000) fails fast with a located ``VocabularyError``
instead of padding gigabytes; string, float and shared ids, and nesting deep
enough to overflow Python's stack, are typed errors with a location too.

CLI: hostile constraints give one line on stderr and exit 2 (never a
traceback), a bench's ``--json OUT`` is checked before the bench runs, and
long benches print progress lines when stderr is not a terminal.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from automask import Vocabulary
from automask.bench import progress
from automask.bench.progress import Progress, progress_log_interval
from automask.cli import OutputPathError, _write_json, check_output_path, main
from automask.errors import AutomaskError, VocabularyError
from automask.vocab.vocabulary import MAX_TOKEN_IDS, id_space_limit

CAP_BYTES = 1_500_000_000  # address space of the subprocesses: the old loaders hit it at once

# One subprocess, memory-capped: load each path, print one JSON line per path.
LOAD_CAPPED = textwrap.dedent("""
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (%d, %d))
    from automask import Vocabulary
    for path in sys.argv[1:]:
        t = time.process_time()
        try:
            Vocabulary.from_file(path)
            out = {"error": None, "message": ""}
        except Exception as e:  # MemoryError included: the test names what it got
            out = {"error": type(e).__name__, "message": str(e)}
        out["cpu"] = time.process_time() - t
        print(json.dumps(out), flush=True)
""") % (CAP_BYTES, CAP_BYTES)

CLI_CAPPED = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (%d, %d))
    from automask.cli import main
    sys.exit(main(sys.argv[1:]))
""") % (CAP_BYTES, CAP_BYTES)

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _capped(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def _tokenizer_json(path: Path, vocab, added=None, **extra) -> Path:
    data = {"model": {"type": "BPE", "vocab": vocab, "merges": []}, **extra}
    if added is not None:
        data["added_tokens"] = added
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _tiktoken(path: Path, last_rank: int) -> Path:
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(200)]
    lines.append(f"{base64.b64encode(b'zz').decode()} {last_rank}")
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- id space


def test_huge_ids_fail_fast_with_a_located_typed_error(tmp_path):
    """Before: 34 s and 5.9 GB, then MemoryError (here, under the cap: MemoryError)."""
    tik = _tiktoken(tmp_path / "big.tiktoken", 500_000_000)
    assert tik.stat().st_size < 4000
    tj = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "b": 1, "c": 4_000_000_000})
    proc = _capped(LOAD_CAPPED, str(tik), str(tj))
    assert proc.returncode == 0, proc.stderr
    (r_tik, r_tj) = [json.loads(line) for line in proc.stdout.splitlines()]
    for r in (r_tik, r_tj):
        assert r["error"] == "VocabularyError", r
        assert r["cpu"] < 5
    assert "big.tiktoken:201:" in r_tik["message"] and "500,000,000" in r_tik["message"]
    assert "tokenizer.json" in r_tj["message"] and "model.vocab['c']" in r_tj["message"]
    assert "4,000,000,000" in r_tj["message"]


def test_huge_added_token_id(tmp_path):
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0},
                           added=[{"id": 3 * 10**9, "content": "<x>", "special": True}])
    with pytest.raises(VocabularyError, match=r"added_tokens\[0\] \('<x>'\).*3,000,000,000"):
        Vocabulary.from_file(path)


def test_the_id_space_rule():
    assert id_space_limit(1) == 4 + 2**20
    assert id_space_limit(262_144) == 4 * 262_144 + 2**20  # Gemma-3 with 4x room to spare
    assert id_space_limit(10**7) == MAX_TOKEN_IDS == 2**24


def test_holes_within_the_rule_still_load(tmp_path):
    v = Vocabulary.from_file(_tiktoken(tmp_path / "holes.tiktoken", 2**20))
    assert v.size == 2**20 + 1 and v.token_bytes(2**20) == b"zz" and v.token_bytes(500) == b""
    with pytest.raises(VocabularyError, match="holes.tiktoken:201"):
        Vocabulary.from_file(_tiktoken(tmp_path / "holes.tiktoken", id_space_limit(201)))


def test_caller_ids_are_bounded_too(tmp_path):
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "b": 1})
    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary.from_file(path, vocab_size=2**40)
    with pytest.raises(VocabularyError, match="special token '<s>'"):
        Vocabulary.from_file(path, special_tokens={"<s>": 2**40})
    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary([b"a"], size=MAX_TOKEN_IDS + 1)


def test_vocabulary_tokens_must_be_bytes():
    """An int token would make bytes(n) allocate n zero bytes (10^12: MemoryError)."""
    assert Vocabulary([b"a", None, bytearray(b"c")]).tokens == [b"a", b"", b"c"]
    with pytest.raises(VocabularyError, match="token 1 is a int, not bytes"):
        Vocabulary([b"a", 10**12])
    with pytest.raises(VocabularyError, match="token 0 is a str"):
        Vocabulary(["a"])


# ----------------------------------------------------------------------------- id types, shared ids


@pytest.mark.parametrize(("vocab", "added", "where"), [
    ({"a": "0", "b": "1"}, None, r"model\.vocab\['a'\]: token id '0' is not an integer"),
    ({"a": 0, "b": 1.0}, None, r"model\.vocab\['b'\]: token id 1\.0 is not an integer"),
    ({"a": 0, "b": True}, None, r"model\.vocab\['b'\]: token id True"),
    ({"a": 0, "b": -3}, None, r"model\.vocab\['b'\]: negative token id -3"),
    ({"a": 0}, [{"id": 1.5, "content": "<x>"}], r"added_tokens\[0\] \('<x>'\): token id 1\.5"),
    ({"a": 0}, [{"id": "x", "content": "<x>"}], r"added_tokens\[0\] \('<x>'\): token id 'x'"),
    ({"a": 0}, [{"id": None, "content": "<x>"}], r"added_tokens\[0\] \('<x>'\): token id None"),
    ({"a": 0}, [{"id": 1}], r"added_tokens\[0\]: 'content' None is not a string"),
    ({"a": 0}, ["<x>"], r"added_tokens\[0\] is not an object"),
    ({"a": 0}, {"id": 1}, r"'added_tokens' is not a list"),
])
def test_malformed_ids_are_located(tmp_path, vocab, added, where):
    path = _tokenizer_json(tmp_path / "tokenizer.json", vocab, added)
    with pytest.raises(VocabularyError, match=where) as e:
        Vocabulary.from_file(path)
    assert str(path) in str(e.value)


def test_shared_ids_are_rejected(tmp_path):
    """Before: three tokens on id 0 loaded as a vocabulary of size 1."""
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "b": 0, "c": 0})
    with pytest.raises(VocabularyError, match=r"model\.vocab\['b'\]: id 0 is also the id of 'a'"):
        Vocabulary.from_file(path)
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0},
                           added=[{"id": 1, "content": "<x>"}, {"id": 1, "content": "<y>"}])
    with pytest.raises(VocabularyError, match=r"added_tokens\[1\] \('<y>'\): id 1 .*'<x>'"):
        Vocabulary.from_file(path)


def test_added_tokens_may_mark_model_pieces(tmp_path):
    """The usual way files mark a piece special (GPT-2's <|endoftext|>), and exact repeats."""
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "<|endoftext|>": 1},
                           added=[{"id": 1, "content": "<|endoftext|>", "special": True},
                                  {"id": 1, "content": "<|endoftext|>", "special": True}])
    v = Vocabulary.from_file(path)
    assert v.size == 2 and v.special_ids == {1} and v.eos_token_ids == (1,)


def test_malformed_shapes_are_typed(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": [1, 2]}))
    with pytest.raises(VocabularyError, match="'model' is not an object"):
        Vocabulary.from_file(path)
    _tokenizer_json(path, {"a": 0}, decoder=["ByteLevel"])
    with pytest.raises(VocabularyError, match="decoder is not an object"):
        Vocabulary.from_file(path)
    _tokenizer_json(path, {"a": 0}, decoder={"type": "Replace", "pattern": {"String": 5},
                                             "content": " "})
    with pytest.raises(VocabularyError, match="tokenizer.json"):
        Vocabulary.from_file(path)
    path.write_text(json.dumps({"model": {"type": "Unigram", "vocab": [["a", 0.0], 7]}}))
    with pytest.raises(VocabularyError, match=r"model\.vocab\[1\] is not a \[piece, score\]"):
        Vocabulary.from_file(path)


# ----------------------------------------------------------------------------- nesting


def test_deeply_nested_tokenizer_json(tmp_path):
    """Before: RecursionError from the JSON reader."""
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},\n "x": '
                    + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(VocabularyError, match=r"nested 100,001 levels deep \(deepest at line 2"):
        Vocabulary.from_file(path)


def test_deeply_nested_decoder_sequences(tmp_path):
    dec: dict = {"type": "ByteLevel"}
    for _ in range(300):
        dec = {"type": "Sequence", "decoders": [dec]}
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0}, decoder=dec)
    with pytest.raises(VocabularyError, match="decoder.*Sequence nested more than"):
        Vocabulary.from_file(path)


def _gstr(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf(path: Path, kvs: list[tuple[str, bytes]]) -> Path:
    """A GGUF v3 file with these key-values (each value: its type id, then the value)."""
    body = b"".join(_gstr(k) + v for k, v in kvs)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body)
    return path


def _gguf_tokenizer(tokens: list[bytes]) -> list[tuple[str, bytes]]:
    items = b"".join(struct.pack("<Q", len(t)) + t for t in tokens)
    return [("tokenizer.ggml.model", struct.pack("<I", 8) + _gstr("gpt2")),
            ("tokenizer.ggml.tokens", struct.pack("<IIQ", 9, 8, len(tokens)) + items),
            ("tokenizer.ggml.eos_token_id", struct.pack("<II", 4, len(tokens) - 1))]


def test_gguf_written_here_loads(tmp_path):
    v = Vocabulary.from_file(_gguf(tmp_path / "ok.gguf", _gguf_tokenizer([b"a", b"b", b"c"])))
    assert v.tokens == [b"a", b"b", b"c"] and v.eos_token_ids == (2,)


def test_deeply_nested_gguf_array(tmp_path):
    """Before: RecursionError at 5,000 arrays of arrays."""
    nested = struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQ", 0, 0)
    path = _gguf(tmp_path / "nested.gguf",
                 [("general.hostile", nested), *_gguf_tokenizer([b"a", b"b"])])
    with pytest.raises(VocabularyError,
                       match=r"nested\.gguf: key 'general\.hostile' at byte 24: arrays nested"):
        Vocabulary.from_file(path)


def test_gguf_token_that_is_not_a_string(tmp_path):
    kvs = _gguf_tokenizer([b"a", b"b"])
    kvs[1] = ("tokenizer.ggml.tokens", struct.pack("<IIQ", 9, 9, 2)  # array of arrays
              + struct.pack("<IQ", 8, 1) + _gstr("a") + struct.pack("<IQ", 4, 1) + b"\0" * 4)
    with pytest.raises(VocabularyError, match="has no token list|tokens\\[1\\] is not a string"):
        Vocabulary.from_file(_gguf(tmp_path / "odd.gguf", kvs))


def test_tiktoken_ranks_are_plain_integers(tmp_path):
    path = tmp_path / "r.tiktoken"
    for rank in ("-1", "1_0", "+3", "0x10"):
        path.write_text(f"YQ== 0\nYg== {rank}\n")
        with pytest.raises(VocabularyError, match="r.tiktoken:2"):
            Vocabulary.from_file(path)
    path.write_text("YQ== 0\nYg== 0\n")
    with pytest.raises(VocabularyError, match=r"r\.tiktoken:2: rank 0 is repeated \(line 1\)"):
        Vocabulary.from_file(path)


# ----------------------------------------------------------------------------- automask generate


@pytest.fixture
def no_model(monkeypatch):
    """A constraint that compiles would reach the model: make that a known typed error."""
    from automask.generation import models

    def load_model(*args, **kwargs):
        raise AutomaskError("NO-MODEL-IN-TESTS")

    monkeypatch.setattr(models, "load_model", load_model)


def _generate(capsys, *argv) -> tuple[int, str]:
    code = main(["generate", "hi", *map(str, argv)])
    err = capsys.readouterr().err
    return code, err


def _one_line(err: str) -> str:
    assert err.startswith("automask: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_generate_schema_not_utf8(tmp_path, capsys, no_model):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"type": "string", "description": "caf\xe9"}')
    code, err = _generate(capsys, "--schema", path)
    assert code == 2
    assert "latin1.json: not UTF-8 text (byte 0xe9 at offset 38" in _one_line(err)


def test_generate_schema_5000_deep(tmp_path, capsys, no_model):
    path = tmp_path / "deep.json"
    path.write_text('{"type": "array", "items": ' * 5000 + "{}" + "}" * 5000)
    code, err = _generate(capsys, "--schema", path)
    assert code == 2 and "NO-MODEL" not in _one_line(err)
    assert "deep" in err


def test_generate_schema_lone_surrogate(tmp_path, capsys, no_model):
    path = tmp_path / "surrogate.json"
    path.write_text('{"properties": {"k": {"const": "a\\ud800b"}}}')
    code, err = _generate(capsys, "--schema", path)
    assert code == 2 and "NO-MODEL" not in _one_line(err)
    assert "surrogate" in err and "/properties/k/const" in err


def test_generate_gbnf_2000_nested_parentheses(tmp_path, capsys, no_model):
    path = tmp_path / "parens.gbnf"
    path.write_text("root ::= " + "(" * 2000 + '"a"' + ")" * 2000 + "\n")
    code, err = _generate(capsys, "--grammar", path)
    assert code == 2 and "NO-MODEL" not in _one_line(err)
    assert "parens.gbnf" in err or "deep" in err


def test_generate_min_items_1e10_in_a_capped_process(tmp_path):
    """Before: a MemoryError traceback and exit 1. Now one line, exit 2: a typed error, or
    (were 10^10 items compiled without copies) the missing model named in one line."""
    path = tmp_path / "many.json"
    path.write_text('{"type": "array", "minItems": 1e10}')
    proc = _capped(CLI_CAPPED, "generate", "hi", "--schema", str(path),
                   "--model", str(tmp_path / "no-model.gguf"))
    assert proc.returncode == 2, proc.stderr
    _one_line(proc.stderr)


# The library may catch these itself (typed, with a location); where it does not, the CLI must.
@pytest.mark.parametrize(("error", "expect"), [
    (RecursionError("maximum recursion depth exceeded"),
     r"s\.json: JSON arrays and objects nested 5 deep \(deepest at line 1, column 35\)"),
    (MemoryError(), r"s\.json: compiling it ran out of memory"),
    (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
     r"s\.json: lone surrogate U\+DC00 at /properties/a~1b/items/0/const "),
])
def test_generate_turns_untyped_schema_failures_into_one_line(
        tmp_path, capsys, monkeypatch, no_model, error, expect):
    from automask import Grammar

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(Grammar, "from_json_schema", fail)
    path = tmp_path / "s.json"
    path.write_text('{"properties": {"a/b": {"items": [{"const": "x\\udc00"}]}}}')
    code, err = _generate(capsys, "--schema", path)
    assert code == 2
    assert re.search(expect, _one_line(err)), err


def test_generate_turns_untyped_grammar_failures_into_one_line(
        tmp_path, capsys, monkeypatch, no_model):
    from automask import Grammar

    def fail(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Grammar, "from_gbnf", fail)
    monkeypatch.setattr(Grammar, "from_lark", fail)
    monkeypatch.setattr(Grammar, "from_regex", fail)
    gbnf = tmp_path / "g.gbnf"
    gbnf.write_text('root ::= ("(" [(] ((x)))  # ((((\nx ::= "a"\n')
    code, err = _generate(capsys, "--grammar", gbnf)
    assert code == 2 and "g.gbnf: groups nested 3 deep (deepest at line 1, column 20)" in err
    lark = tmp_path / "g.lark"
    lark.write_text('start: ["(" /[(]/ (x)]  // ((((\nx: "a"\n')
    code, err = _generate(capsys, "--grammar", lark)
    assert code == 2 and "g.lark: groups nested 2 deep (deepest at line 1, column 19)" in err
    code, err = _generate(capsys, "--regex", "a")
    assert code == 2 and "--regex: nested too deeply" in _one_line(err)


@pytest.mark.parametrize("error", [RecursionError(), MemoryError(),
                                   UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad")])
def test_main_turns_untyped_input_failures_into_one_line(capsys, monkeypatch, error):
    from automask.generation import command

    def fail(args):
        raise error

    monkeypatch.setattr(command, "run", fail)
    code, err = _generate(capsys, "--regex", "a")
    assert code == 2
    _one_line(err)


def test_generate_with_a_good_schema_still_reaches_the_model(tmp_path, capsys, no_model):
    path = tmp_path / "ok.json"
    path.write_text('{"type": "string", "description": "café"}', encoding="utf-8")
    code, err = _generate(capsys, "--schema", path)
    assert code == 2 and "NO-MODEL-IN-TESTS" in _one_line(err)


# ----------------------------------------------------------------------------- --json OUT


BENCH_COMMANDS = {
    "grammar": ["--regex", "a", "--tokenizer", "t.json", "--instances", "i.txt"],
    "compile": ["--tokenizer", "t.json", "--regex", "a"],
    "maskbench": ["--data", "d.jsonl", "--tokenizer", "t.json"],
    "jsts": ["--suite", "suite", "--tokenizer", "t.json"],
    "generate": ["--data", "d.jsonl"],
    "batch": [],
    "serve": [],
}


@pytest.mark.parametrize("bench", sorted(BENCH_COMMANDS))
def test_every_bench_checks_its_output_before_the_work(bench, capsys, monkeypatch):
    """Before: the whole bench ran, then writing the results failed."""
    import automask.cli as cli

    ran = []
    monkeypatch.setattr(cli, f"_cmd_bench_{bench}", lambda args: ran.append(bench) or 0)
    t0 = time.perf_counter()
    code = main(["bench", bench, *BENCH_COMMANDS[bench], "--json", "/nonexistent/dir/out.json"])
    err = capsys.readouterr().err
    assert code == 2 and not ran and time.perf_counter() - t0 < 5
    assert "--json /nonexistent/dir/out.json: directory /nonexistent/dir does not exist" \
        in _one_line(err)


def test_maskbench_with_a_missing_output_folder_returns_at_once(capsys):
    t0 = time.perf_counter()
    code = main(["bench", "maskbench", "--data", "../shared/data/maskbench-dev.jsonl.gz",
                 "--tokenizer", "../shared/data/tokenizers/llama-3.1",
                 "--json", "/nonexistent/dir/out.json"])
    assert code == 2 and time.perf_counter() - t0 < 2
    _one_line(capsys.readouterr().err)


def test_output_path_checks(tmp_path):
    check_output_path(str(tmp_path / "new.json"))
    (tmp_path / "old.json").write_text("{}")
    check_output_path(str(tmp_path / "old.json"))
    with pytest.raises(OutputPathError, match="is a directory"):
        check_output_path(str(tmp_path))
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputPathError, match="is not a directory"):
        check_output_path(str(tmp_path / "file" / "out.json"))
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OutputPathError, match="is not writable"):
            check_output_path(str(locked / "out.json"))


def test_results_survive_a_failed_write(tmp_path):
    gone = tmp_path / "gone"
    with pytest.raises(OutputPathError, match="the results are in ") as e:
        _write_json(str(gone / "out.json"), {"n": 1})
    spare = str(e.value).rsplit("the results are in ", 1)[1]
    try:
        assert json.loads(Path(spare).read_text()) == {"n": 1}
    finally:
        os.unlink(spare)


# ----------------------------------------------------------------------------- progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_when_not_a_terminal():
    log = io.StringIO()
    bar = Progress("bench x", 4, log, interval=0)
    for n in range(4):
        bar.update(n)
    bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in log.getvalue()
    assert lines[0].startswith("bench x: 0/4 (0%), 0 s elapsed")
    assert lines[2].startswith("bench x: 2/4 (50%)") and "left" in lines[2]
    quiet = io.StringIO()
    bar = Progress("bench x", 4, quiet, interval=10)
    for n in range(4):
        bar.update(n)
    bar.close()
    assert quiet.getvalue() == ""  # a run shorter than the interval prints nothing


def test_progress_on_a_terminal_is_a_counter():
    tty = _Tty()
    bar = Progress("bench x", 2, tty, interval=0)
    bar.update(1)
    bar.update(2)
    bar.close()
    assert tty.getvalue().startswith("\rbench x: 1/2") and tty.getvalue().endswith("\r")
    assert "\n" not in tty.getvalue()


def test_progress_interval_from_the_environment(monkeypatch):
    monkeypatch.delenv("AUTOMASK_PROGRESS_SECONDS", raising=False)
    assert progress_log_interval() == 10.0
    for raw, value in [("2.5", 2.5), ("0", 0.0), ("off", None), ("-1", None), ("x", 10.0)]:
        monkeypatch.setenv("AUTOMASK_PROGRESS_SECONDS", raw)
        assert progress_log_interval() == value


def test_a_bench_logs_progress_to_a_non_terminal(tiny_bpe_path, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUTOMASK_PROGRESS_SECONDS", "0")
    instances = tmp_path / "instances.txt"
    instances.write_text("\n".join(['"ab"', '"cd"', '"e"']) + "\n")
    code = main(["bench", "grammar", "--regex", '"[a-z]*"', "--tokenizer", str(tiny_bpe_path),
                 "--instances", str(instances), "--repeat-compile", "1"])
    assert code == 0
    err = capsys.readouterr().err
    assert "bench grammar: automask walk: 3/3 (100%)" in err
    assert progress.PROGRESS_ENV == "AUTOMASK_PROGRESS_SECONDS"
