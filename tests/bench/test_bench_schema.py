"""``automask bench maskbench`` and ``automask bench jsts``, run in-process on tiny inputs.

Fast tests use a hand-made MaskBench file and a hand-made suite folder with
the tiny byte-level BPE trained by conftest; the data-tier tests run the real
MaskBench sample and two files of the official suite with Llama-3.1.
"""

from __future__ import annotations

import gc
import gzip
import importlib.util
import json
import signal
import time
from array import array
from pathlib import Path

import pytest

from automask.bench import jsts
from automask.bench import maskbench as mb
from automask.bench.peers import Engine, GrammarSpec, PeerError, SequenceOps
from automask.cli import main
from automask.engine import COMPILED

HAS_LLGUIDANCE = importlib.util.find_spec("llguidance") is not None

PERSON = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name"]}

# One schema per outcome. Tests that are labelled wrongly on purpose are marked: they
# are how a validation error and an invalidation error are produced on a correct engine.
RECORDS = [
    {"id": "Github_easy---o1", "schema": PERSON, "tests": [
        {"data": {"name": "Ada", "age": 36}, "valid": True, "description": ""},
        {"data": {"name": "x"}, "valid": True, "description": ""},
        {"data": {"age": 3}, "valid": False, "description": "no name"},
        {"data": {"name": "Ada", "age": -1}, "valid": False, "description": "negative"},
    ]},
    {"id": "BFCL_simple_7", "schema": {"type": "array", "items": {"enum": ["a", "b"]}},
     "tests": [
         {"data": ["a", "b", "a"], "valid": True, "description": ""},
         {"data": [], "valid": True, "description": ""},
         {"data": ["c"], "valid": False, "description": "not in enum"},
     ]},
    {"id": "Kubernetes---kb_1", "schema": {"type": "array", "items": {"type": "string"},
                                           "uniqueItems": True},
     "tests": [{"data": ["a", "b"], "valid": True, "description": ""}]},
    {"id": "Glaiveai2K---mislabelled_valid", "schema": {"type": "integer"}, "tests": [
        {"data": 5, "valid": True, "description": ""},
        {"data": "five", "valid": True, "description": "mislabelled: a string"},
    ]},
    {"id": "Glaiveai2K---mislabelled_invalid", "schema": {"type": "integer"}, "tests": [
        {"data": 7, "valid": False, "description": "mislabelled: an integer"},
    ]},
    {"id": "JME_3", "schema": {"type": "integer", "minimum": 5, "maximum": 3}, "tests": [
        {"data": 4, "valid": False, "description": "nothing is valid"},
    ]},
]


def _run(args: list) -> int:
    return main([str(a) for a in args])


def _write_records(path: Path, records: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    return path


@pytest.fixture()
def records_path(tmp_path) -> Path:
    return _write_records(tmp_path / "mini.jsonl.gz", RECORDS)


# ----------------------------------------------------------------------------- maskbench


@pytest.mark.parametrize(("record_id", "split"), [
    ("Github_easy---o1234", "Github_easy"),
    ("Github_ultra---o9", "Github_ultra"),
    ("Kubernetes---kb_0_Normalized", "Kubernetes"),
    ("Glaiveai2K---analyze_health_data_4ad104b4", "Glaiveai2K"),
    ("Synthesized---draft2019_09_nonvalid_additionalItems_id2", "Synthesized"),
    ("JsonSchemaStore---0.5.2", "JsonSchemaStore"),
    ("BFCL_simple_12", "BFCL"),
    ("BFCL_parallel_multiple_0", "BFCL"),
    ("BFCL_java_10", "BFCL"),
    ("JME_0", "JME"),
])
def test_split_of(record_id, split):
    assert mb.split_of(record_id) == split


def test_load_records_split_and_sample(records_path):
    assert [r["id"] for r in mb.load_records(str(records_path), split="Glaiveai2K")] == [
        "Glaiveai2K---mislabelled_valid", "Glaiveai2K---mislabelled_invalid"]
    assert [r["id"] for r in mb.load_records(str(records_path), split="BFCL_simple")] == [
        "BFCL_simple_7"]
    one = mb.load_records(str(records_path), sample=2, seed=3)
    assert len(one) == 2 and one == mb.load_records(str(records_path), sample=2, seed=3)


def test_maskbench_counts_and_json(tiny_bpe_path, records_path, tmp_path, capsys):
    out = tmp_path / "mb.json"
    assert _run(["bench", "maskbench", "--data", records_path, "--tokenizer", tiny_bpe_path,
                 "--json", out]) == 0
    result = json.loads(out.read_text())
    assert result["records"] == len(RECORDS)
    assert result["tests"] == sum(len(r["tests"]) for r in RECORDS)
    ours = result["engines"][0]
    assert ours["engine"] == "automask" and ours["error"] is None
    # prepared as a server starts: the compiler warmed up for JSON grammars; and the report
    # says which engine ran, the compiled one or the Python it is built from
    assert ours["options"] == {"json_schema": {"whitespace": "flexible", "strict": False},
                               "warm_up": True,
                               "engine": "compiled" if COMPILED else "python"}
    total = ours["splits"]["total"]
    assert list(ours["splits"])[-1] == "total"
    assert total["schemas"] == 6
    assert total["passing"] == 3  # PERSON, the enum array, the empty schema
    assert total["compile_errors"] == 1
    assert total["validation_errors"] == 1
    assert total["invalidation_errors"] == 1
    assert total["timeouts"] == total["crashes"] == 0
    assert total["compile_error_keywords"] == {
        "uniqueItems on items with infinitely many values": 1}
    assert total["tbm_us"]["count"] == total["tokens"] > 0
    assert total["ttfm_ms"]["count"] == 5  # every schema but the one that does not compile
    assert total["tests"] == 11  # the instances of the five schemas that compiled
    splits = ours["splits"]
    assert splits["Github_easy"]["passing"] == splits["BFCL"]["passing"] == 1
    assert splits["Kubernetes"]["compile_errors"] == 1
    assert splits["Glaiveai2K"]["validation_errors"] == 1
    assert splits["Glaiveai2K"]["invalidation_errors"] == 1
    assert splits["JME"]["passing"] == 1

    by_id = {s["id"]: s for s in ours["schemas"]}
    assert [s["id"] for s in ours["schemas"]] == [r["id"] for r in RECORDS]
    assert by_id["Kubernetes---kb_1"]["error"].startswith("uniqueItems")
    (bad,) = by_id["Glaiveai2K---mislabelled_invalid"]["failures"]
    assert bad["kind"] == "invalidation" and bad["instance"] == "7"
    assert bad["reason"] == "" and bad["position"] > 0
    (rejected,) = by_id["Glaiveai2K---mislabelled_valid"]["failures"]
    assert rejected["kind"] == "validation" and rejected["instance"] == '"five"'
    assert rejected["position"] == 0 and rejected["reason"] == "masked"
    assert by_id["JME_3"]["outcome"] == "pass"
    for row in ours["schemas"]:  # where the slowest step was, for a replay
        at = row["tbm_max_at"]
        assert (at is None) == (row["tbm_max_us"] is None), row["id"]
        if at is not None:
            assert 0 <= at["test"] < row["tests"] and at["step"] >= 0

    text = capsys.readouterr().out
    assert "top compile errors (automask, 1 schemas)" in text and "uniqueItems" in text
    assert "INVALID INSTANCE ACCEPTED: Glaiveai2K---mislabelled_invalid" in text
    assert "Github_easy" in text and "total" in text


def test_maskbench_split_sample_and_errors(tiny_bpe_path, records_path, tmp_path, capsys):
    out = tmp_path / "mb.json"
    assert _run(["bench", "maskbench", "--data", records_path, "--tokenizer", tiny_bpe_path,
                 "--split", "Glaiveai2K", "--sample", "1", "--seed", "1", "--json", out]) == 0
    result = json.loads(out.read_text())
    assert result["records"] == 1 and result["split"] == "Glaiveai2K"
    assert set(result["engines"][0]["splits"]) == {"Glaiveai2K", "total"}
    capsys.readouterr()

    assert _run(["bench", "maskbench", "--data", tmp_path / "missing.jsonl",
                 "--tokenizer", tiny_bpe_path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("automask: error:") and err.count("\n") == 1
    assert _run(["bench", "maskbench", "--data", records_path, "--tokenizer", tiny_bpe_path,
                 "--vs", "nosuchpeer"]) == 2
    assert "unknown peer" in capsys.readouterr().err
    assert _run(["bench", "maskbench", "--data", records_path, "--tokenizer", tiny_bpe_path,
                 "--split", "NoSuchSplit"]) == 2
    assert "no records" in capsys.readouterr().err


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
def test_maskbench_vs_llguidance(tiny_bpe_path, records_path, tmp_path, capsys):
    out = tmp_path / "mb.json"
    assert _run(["bench", "maskbench", "--data", records_path, "--tokenizer", tiny_bpe_path,
                 "--vs", "llguidance", "--json", out]) == 0
    result = json.loads(out.read_text())
    ours, theirs = result["engines"]
    assert theirs["engine"] == "llguidance" and theirs["error"] is None
    assert theirs["options"]["json_schema"]["defaults"] == {"whitespace_flexible": True}
    total = theirs["splits"]["total"]
    assert total["schemas"] == len(RECORDS)
    assert total["crashes"] == total["timeouts"] == 0
    assert len(theirs["schemas"]) == len(RECORDS)
    c = result["comparison"]["llguidance"]
    assert c["both_pass"] + c["only_ours_pass"] + c["only_theirs_pass"] + c["neither_pass"] == 6
    assert "automask vs llguidance" in capsys.readouterr().out


class _FakeEngine(Engine):
    """Compiles anything; ``behaviour`` says how it misbehaves on schemas named after it."""

    name = "fake"

    def prepare(self, tokenizer_path, vocab):
        self.size = vocab.size

    def parse(self, spec: GrammarSpec):
        return spec.label

    def compile(self, parsed):
        if "crash" in parsed:
            raise RuntimeError("engine bug")
        if "slow" in parsed:
            time.sleep(5)
        return parsed

    def new_sequence(self, compiled):
        def fill(bitmask):
            bitmask[...] = -1

        return SequenceOps(fill, lambda tid: True, lambda: True, lambda: None)

    def allocate_bitmask(self):
        import automask

        return automask.allocate_bitmask(1, self.size)


def test_run_engine_crash_and_timeout_restore_the_alarm(tiny_bpe_vocab):
    def sentinel(signum, frame):
        raise AssertionError("the previous handler must not run")

    records = [
        {"id": "A---crash", "schema": {}, "tests": [{"data": 1, "valid": True}]},
        {"id": "A---slow", "schema": {}, "tests": [{"data": 1, "valid": True}]},
        {"id": "B---fine", "schema": {}, "tests": [{"data": 1, "valid": True},
                                                   {"data": 2, "valid": False}]},
    ]
    engine = _FakeEngine()
    engine.prepare("", tiny_bpe_vocab)
    old = signal.signal(signal.SIGALRM, sentinel)
    try:
        details: list = []
        t0 = time.monotonic()
        stats = mb.run_engine(engine, tiny_bpe_vocab, records, timeout_s=0.2, details=details)
        assert time.monotonic() - t0 < 3
        assert signal.getsignal(signal.SIGALRM) is sentinel
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, old)
    total = stats["total"]
    assert (total.schemas, total.crashes, total.timeouts, total.invalidation_errors) == (3, 1, 1, 1)
    assert [d.outcome for d in details] == ["crash", "timeout", "invalidation"]
    assert details[0].error == "RuntimeError: engine bug"
    assert total.error_keywords == {"crash: RuntimeError: engine bug": 1}
    assert stats["A"].schemas == 2 and stats["B"].schemas == 1


class _LoggedEngine(_FakeEngine):
    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def compile(self, parsed):
        self.log.append((self.name, parsed))
        return super().compile(parsed)


def test_run_engines_interleaves_schemas_and_turns_who_goes_first(tiny_bpe_vocab):
    """Every engine runs a schema before any runs the next, and the first one turns, so a
    machine slowing down over the run slows both alike."""
    log: list = []
    engines = {name: _LoggedEngine(name, log) for name in ("a", "b", "c")}
    for engine in engines.values():
        engine.prepare("", tiny_bpe_vocab)
    records = [{"id": f"S---{i}", "schema": {}, "tests": [{"data": i, "valid": True}]}
               for i in range(4)]
    runs = mb.run_engines(engines, tiny_bpe_vocab, records, timeout_s=None)
    assert log == [("a", "S---0"), ("b", "S---0"), ("c", "S---0"),
                   ("b", "S---1"), ("c", "S---1"), ("a", "S---1"),
                   ("c", "S---2"), ("a", "S---2"), ("b", "S---2"),
                   ("a", "S---3"), ("b", "S---3"), ("c", "S---3")]
    for run in runs.values():  # each engine's rows and stats are its own, in record order
        assert [r.id for r in run.rows] == [r["id"] for r in records]
        assert run.stats["total"].passing == run.stats["S"].passing == 4
        assert run.wall_s > 0
        # Finished rows are out of the collector's sight: a full collection set off inside
        # a timed step must not walk the harness's own results.
        assert not any(gc.is_tracked(r) or gc.is_tracked(r.failures) for r in run.rows)


def test_keyword_of():
    from automask.bench.peers import PeerError
    from automask.errors import LimitExceeded, UnsupportedFeature

    assert mb.keyword_of(UnsupportedFeature("format 'url' is not supported", "#/format")) == \
        "format 'url'"
    assert mb.keyword_of(UnsupportedFeature("$ref to a schema that is not embedded: 'x'",
                                            "#/$ref")) == \
        "UnsupportedFeature: $ref to a schema that is not embedded"
    assert mb.keyword_of(LimitExceeded("too many states: 123")) == \
        "LimitExceeded: too many states"
    assert mb.keyword_of(PeerError("llguidance rejects the grammar: Unknown format: url")) == \
        "Unknown format: url"


# ----------------------------------------------------------------------------- jsts


def _write_suite(folder: Path) -> Path:
    folder.mkdir()
    (folder / "type.json").write_text(json.dumps([
        {"description": "integers", "schema": {"type": "integer"}, "tests": [
            {"description": "an int", "data": 1, "valid": True},
            {"description": "a string", "data": "a", "valid": False},
            {"description": "mislabelled: an int", "data": 2, "valid": False},
            {"description": "mislabelled: null", "data": None, "valid": True},
        ]},
        {"description": "nothing", "schema": {"allOf": [{"type": "string"}, {"type": "null"}]},
         "tests": [{"description": "null", "data": None, "valid": False}]},
    ]))
    (folder / "uniqueItems.json").write_text(json.dumps([
        {"description": "unique strings", "schema": {"items": {"type": "string"},
                                                      "uniqueItems": True},
         "tests": [{"description": "x", "data": ["a"], "valid": True},
                   {"description": "y", "data": ["a", "a"], "valid": False}]},
    ]))
    (folder / "optional").mkdir()
    (folder / "optional" / "ignored.json").write_text("not json: never read")
    return folder


def test_jsts_counts_and_json(tiny_bpe_path, tmp_path, capsys):
    suite = _write_suite(tmp_path / "suite")
    out = tmp_path / "jsts.json"
    assert _run(["bench", "jsts", "--suite", suite, "--tokenizer", tiny_bpe_path,
                 "--json", out]) == 0
    result = json.loads(out.read_text())
    [ours] = result["engines"]
    assert ours["engine"] == "automask" and ours["error"] is None
    assert list(ours["files"]) == ["type", "uniqueItems"]
    t = ours["files"]["type"]
    assert (t["cases"], t["passed"], t["wrong_accepts"], t["wrong_rejects"],
            t["unsupported"], t["crashes"]) == (5, 3, 1, 1, 0, 0)
    assert {f["kind"] for f in t["failures"]} == {"wrong accept", "wrong reject"}
    i = ours["files"]["uniqueItems"]
    assert (i["cases"], i["unsupported"], i["passed"]) == (2, 2, 0)
    assert ours["totals"] == {"cases": 7, "passed": 3, "wrong_accepts": 1,
                              "wrong_rejects": 1, "unsupported": 2, "crashes": 0}
    assert ours["top_unsupported_reasons"][0]["cases"] == 2
    assert "uniqueItems" in ours["top_unsupported_reasons"][0]["reason"]
    assert ours["wall_s"] == pytest.approx(sum(f["seconds"] for f in ours["files"].values()))
    text = capsys.readouterr().out
    assert "keyword file" in text and "TOTAL" in text and "top unsupported reasons" in text
    assert "WRONG ACCEPT: type: integers / mislabelled: an int" in text
    assert "side by side" not in text  # only with peers


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
def test_jsts_vs_llguidance(tiny_bpe_path, tmp_path, capsys):
    suite = _write_suite(tmp_path / "suite")
    out = tmp_path / "jsts.json"
    assert _run(["bench", "jsts", "--suite", suite, "--tokenizer", tiny_bpe_path,
                 "--vs", "llguidance", "--json", out]) == 0
    ours, theirs = json.loads(out.read_text())["engines"]
    assert (ours["engine"], theirs["engine"]) == ("automask", "llguidance")
    assert theirs["error"] is None and theirs["version"]
    assert list(theirs["files"]) == ["type", "uniqueItems"]
    t = theirs["totals"]
    assert t["cases"] == 7 and t["crashes"] == 0
    assert t["passed"] + t["wrong_accepts"] + t["wrong_rejects"] + t["unsupported"] == 7
    # The mislabelled cases fail for any engine that gets integers right.
    integers = theirs["files"]["type"]["failures"]
    assert {(f["test"], f["kind"]) for f in integers} >= {
        ("mislabelled: an int", "wrong accept"), ("mislabelled: null", "wrong reject")}
    text = capsys.readouterr().out
    assert "== llguidance" in text and "side by side" in text
    assert "llguidance pass/wrong-acc/unsup" in text


def test_jsts_counts_a_peers_crash_timeout_and_refusal(tiny_bpe_vocab, tmp_path):
    """A peer's crash or timeout costs the group's cases, a refusal makes them unsupported."""
    suite = tmp_path / "suite"
    suite.mkdir()
    cases = [{"description": "x", "data": 1, "valid": True},
             {"description": "y", "data": "a", "valid": False}]
    (suite / "kinds.json").write_text(json.dumps([
        {"description": name, "schema": {"type": "integer"}, "tests": cases}
        for name in ("crash", "slow", "refuse", "fine")]))

    class Refusing(_FakeEngine):
        def compile(self, parsed):
            if "refuse" in parsed:
                raise PeerError("fake rejects the grammar: no")
            return super().compile(parsed)

    engine = Refusing()
    engine.prepare("", tiny_bpe_vocab)
    results = jsts.run_suite(str(suite), tiny_bpe_vocab, {"fake": engine}, timeout_s=0.5)
    s = results["fake"]["kinds"]
    # "fine" accepts everything: the valid case passes, the invalid one is a wrong accept.
    assert (s.cases, s.crashes, s.unsupported, s.passed, s.wrong_accepts) == (8, 4, 2, 1, 1)
    assert s.reasons["timeout"] == 2 and s.reasons["fake rejects the grammar: no"] == 2
    assert any(r.startswith("crash: RuntimeError") for r in s.reasons)


def test_jsts_files_and_errors(tiny_bpe_path, tmp_path, capsys):
    suite = _write_suite(tmp_path / "suite")
    out = tmp_path / "jsts.json"
    assert _run(["bench", "jsts", "--suite", suite, "--tokenizer", tiny_bpe_path,
                 "--files", "type", "--json", out]) == 0
    assert list(json.loads(out.read_text())["engines"][0]["files"]) == ["type"]
    capsys.readouterr()
    assert _run(["bench", "jsts", "--suite", suite, "--tokenizer", tiny_bpe_path,
                 "--files", "nosuchfile"]) == 2
    assert "no test file 'nosuchfile'" in capsys.readouterr().err
    assert _run(["bench", "jsts", "--suite", tmp_path / "nowhere",
                 "--tokenizer", tiny_bpe_path]) == 2
    assert "not a folder" in capsys.readouterr().err


# ----------------------------------------------------------------------------- data tier


@pytest.mark.data
def test_maskbench_sample_llama(shared_data, tmp_path):
    out = tmp_path / "mb.json"
    extra = ["--vs", "llguidance"] if HAS_LLGUIDANCE else []
    assert _run(["bench", "maskbench", "--data", shared_data / "maskbench-dev.jsonl.gz",
                 "--tokenizer", shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json",
                 "--sample", "30", "--seed", "1", "--timeout", "5", *extra,
                 "--json", out]) == 0
    result = json.loads(out.read_text())
    assert result["records"] == 30 and len(result["engines"]) == 1 + len(extra) // 2
    for engine in result["engines"]:
        assert engine["error"] is None
        total = engine["splits"]["total"]
        assert total["schemas"] == 30
        assert sum(total[k] for k in ("passing", "compile_errors", "validation_errors",
                                      "invalidation_errors", "timeouts", "crashes")) == 30
        assert total["passing"] >= 15, total
    ours = result["engines"][0]["splits"]["total"]
    bad = [s for s in result["engines"][0]["schemas"] if s["outcome"] == "invalidation"]
    assert ours["invalidation_errors"] == 0, bad  # soundness: no invalid instance accepted


@pytest.mark.data
def test_jsts_two_files_llama(shared_data, tmp_path):
    out = tmp_path / "jsts.json"
    suite = shared_data / "json-schema-test-suite" / "tests" / "draft2020-12"
    assert _run(["bench", "jsts", "--suite", suite,
                 "--tokenizer", shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json",
                 "--files", "enum,required", "--json", out]) == 0
    [ours] = json.loads(out.read_text())["engines"]
    assert list(ours["files"]) == ["enum", "required"]
    totals = ours["totals"]
    assert totals["cases"] > 40
    assert totals["wrong_accepts"] == 0, ours["files"]
    assert totals["passed"] + totals["unsupported"] + totals["wrong_rejects"] == totals["cases"]


def test_the_slowest_step_is_named_by_its_test_and_position():
    result = mb.SchemaResult("x", "s")
    assert result.slowest_step() is None
    # test 0 takes three steps, test 1 the next three
    result.test_starts.extend([0, 3])
    result.tbm_us = array("d", [5.0, 9.0, 1.0, 2.0, 30.0, 4.0])
    assert result.slowest_step() == {"test": 1, "step": 1}
    result.tbm_us[0] = 99.0
    assert result.as_dict()["tbm_max_at"] == {"test": 0, "step": 0}
