"""The official JSON Schema Test Suite, walked token by token.

Each group's schema is compiled once; each instance is serialized with
``json.dumps(data, ensure_ascii=False)``, tokenized, and walked with mask +
commit; it counts as accepted when every token was allowed and the walk ends
accepting. A case passes when accepted == valid. A schema that does not
compile counts its cases as unsupported (never as passed); one our compiler
proves empty (``EmptyLanguage``) rejects every case. An unexpected exception
or a timeout counts the group's remaining cases as crashes, and the run goes on.

Peers (``--vs``) run through the same adapters as in MaskBench, on the same
tokens; a schema a peer refuses counts as unsupported for it. A peer that
compiles a schema but ignores one of its keywords shows up as wrong accepts.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from automask.bench.maskbench import (
    SchemaResult,
    SchemaTimeout,
    bitmask_and_row,
    time_limit,
    walk_instance,
)
from automask.bench.peers import Engine, GrammarSpec
from automask.bench.progress import Progress
from automask.bench.stats import printer, text_table
from automask.errors import AutomaskError, EmptyLanguage

MAX_INSTANCE_CHARS = 500
MAX_WRONG_SHOWN = 30  # wrong accepts printed per engine (the JSON has every one)


class SuiteInputError(AutomaskError):
    """The suite folder or one of its files cannot be read."""


@dataclass
class FileStats:
    cases: int = 0
    passed: int = 0
    wrong_accepts: int = 0
    wrong_rejects: int = 0
    unsupported: int = 0
    crashes: int = 0
    seconds: float = 0.0  # compiles and walks, this engine, this file
    reasons: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)  # every wrong accept and wrong reject

    def as_dict(self) -> dict:
        return {"cases": self.cases, "passed": self.passed,
                "wrong_accepts": self.wrong_accepts, "wrong_rejects": self.wrong_rejects,
                "unsupported": self.unsupported, "crashes": self.crashes,
                "seconds": self.seconds, "unsupported_reasons": dict(self.reasons.most_common()),
                "failures": self.failures}


def suite_files(suite_dir: str, files: list[str] | None = None) -> list[Path]:
    """The top-level ``*.json`` files of ``suite_dir`` (``optional/`` is not required),
    or the named ones (a stem such as ``enum``, or a relative path like ``optional/format/email``).
    """
    root = Path(suite_dir)
    if not root.is_dir():
        raise SuiteInputError(f"{suite_dir}: not a folder")
    if not files:
        paths = sorted(root.glob("*.json"))
        if not paths:
            raise SuiteInputError(f"{suite_dir}: no *.json test files")
        return paths
    paths = []
    for name in files:
        path = root / (name if name.endswith(".json") else name + ".json")
        if not path.is_file():
            raise SuiteInputError(f"{suite_dir}: no test file {name!r}")
        paths.append(path)
    return paths


def run_suite(suite_dir: str, vocab, engines: dict[str, Engine],
              files: list[str] | None = None, *, timeout_s: float | None = 30.0,
              progress=None) -> dict[str, dict[str, FileStats]]:
    """Run the suite's files (see :func:`suite_files`) under every (prepared) engine.

    Returns stats per engine, then per file name. Each group is run by every
    engine in turn before the next group, each under its own time limit.
    """
    root = Path(suite_dir)
    bitmasks = {name: bitmask_and_row(engine) for name, engine in engines.items()}
    results: dict[str, dict[str, FileStats]] = {name: {} for name in engines}
    encoded: dict[str, tuple[int, ...]] = {}
    for n, path in enumerate(suite_files(suite_dir, files)):
        if progress:
            progress(n)
        file_name = path.relative_to(root).with_suffix("").as_posix()
        try:
            groups = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SuiteInputError(f"cannot read {path}: {e}") from e
        for name, engine in engines.items():
            stats = results[name][file_name] = FileStats()
            for group in groups:
                stats.cases += len(group["tests"])
                t0 = time.perf_counter()
                try:
                    with time_limit(timeout_s) as disarm:
                        try:
                            _run_group(engine, group, vocab, bitmasks[name], encoded, stats)
                        finally:
                            disarm()
                except SchemaTimeout:
                    _crashed(stats, group, "timeout")
                except Exception as e:  # a bug is a result, not the end of the run
                    _crashed(stats, group, f"crash: {type(e).__name__}: {str(e)[:60]}")
                stats.seconds += time.perf_counter() - t0
    return results


def _crashed(stats: FileStats, group: dict, reason: str) -> None:
    """Count the group's cases not counted yet as crashes."""
    counted = (stats.passed + stats.wrong_accepts + stats.wrong_rejects + stats.unsupported
               + stats.crashes)
    left = stats.cases - counted
    stats.crashes += left
    stats.reasons[reason] += left
    stats.failures.append({"group": group.get("description", ""), "kind": reason,
                           "cases": left})


def _run_group(engine: Engine, group: dict, vocab, bitmasks, encoded, stats: FileStats) -> None:
    """Compile the group's schema once, then walk each instance from a fresh sequence."""
    bitmask, row = bitmasks
    tests = group["tests"]
    spec = GrammarSpec("json", json.dumps(group["schema"]), group.get("description", ""))
    try:
        compiled = engine.compile(engine.parse(spec))
    except EmptyLanguage:
        compiled = None  # the schema admits nothing: every instance is rejected
    except AutomaskError as e:  # unsupported, over a limit, or a peer's refusal
        stats.unsupported += len(tests)
        stats.reasons[_reason(e)] += len(tests)
        return
    scratch = SchemaResult("", "")  # walk_instance's mask timings, not reported here
    for test in tests:
        text = json.dumps(test["data"], ensure_ascii=False)
        ids = encoded.get(text)
        if ids is None:
            ids = encoded[text] = tuple(vocab.encode(text))
        try:
            accepted = compiled is not None and walk_instance(engine.new_sequence(compiled), ids,
                                                      bitmask, row, scratch)[0]
        except AutomaskError as e:
            stats.unsupported += 1
            stats.reasons[_reason(e)] += 1
            continue
        if accepted == test["valid"]:
            stats.passed += 1
            continue
        if accepted:
            stats.wrong_accepts += 1
        else:
            stats.wrong_rejects += 1
        stats.failures.append({"group": group.get("description", ""),
                               "test": test.get("description", ""),
                               "kind": "wrong accept" if accepted else "wrong reject",
                               "instance": text[:MAX_INSTANCE_CHARS]})


def _reason(error: Exception) -> str:
    return " ".join(str(error).split())[:90]


def totals(results: dict[str, FileStats]) -> dict[str, int]:
    keys = ("cases", "passed", "wrong_accepts", "wrong_rejects", "unsupported", "crashes")
    return {k: sum(getattr(s, k) for s in results.values()) for k in keys}


def top_reasons(results: dict[str, FileStats], n: int = 15) -> list[tuple[str, int]]:
    counter: Counter = Counter()
    for s in results.values():
        counter.update(s.reasons)
    return counter.most_common(n)


def format_table(results: dict[str, FileStats]) -> str:
    cols = ["keyword file", "cases", "passed", "wrong accepts", "wrong rejects", "unsupported",
            "crashes"]
    rows = [[k, s.cases, s.passed, s.wrong_accepts, s.wrong_rejects, s.unsupported, s.crashes]
            for k, s in results.items()]
    rows.append(["TOTAL", *totals(results).values()])
    return text_table(cols, rows)


def format_comparison(results: dict[str, dict[str, FileStats]]) -> str:
    """One row per keyword file: each engine's passed / wrong accepts / unsupported."""
    names = list(results)
    files = list(next(iter(results.values()), {}))
    cols = ["keyword file", "cases", *(f"{n} pass/wrong-acc/unsup" for n in names)]

    def cell(counts: dict) -> str:
        return f"{counts['passed']}/{counts['wrong_accepts']}/{counts['unsupported']}"

    rows = [[f, results[names[0]][f].cases, *(cell(vars(results[n][f])) for n in names)]
            for f in files]
    sums = [totals(results[n]) for n in names]
    rows.append(["TOTAL", sums[0]["cases"], *(cell(t) for t in sums)])
    return text_table(cols, rows)


def run_jsts(suite_dir: str, tokenizer_path: str, *, peers: Sequence[str] = (),
             files: list[str] | None = None, timeout_s: float | None = 30.0, stream=None,
             progress_stream=None) -> dict:
    """The whole ``bench jsts`` run, for automask and each peer on the same tokens.

    Prints one table per engine with its top unsupported reasons and its wrong
    accepts, then the engines side by side when there are peers; returns the
    JSON-ready result.
    """
    import sys

    from automask.bench.peers import prepare_engines
    from automask.vocab import Vocabulary

    say = printer(stream if stream is not None else sys.stdout)
    vocab = Vocabulary.from_file(tokenizer_path)
    paths = suite_files(suite_dir, files)
    ready, entries = prepare_engines(peers, tokenizer_path, vocab, say)
    bar = Progress(f"bench jsts ({' + '.join(ready)})", len(paths), progress_stream)
    t0 = time.perf_counter()
    try:
        results = run_suite(suite_dir, vocab, ready, files, timeout_s=timeout_s,
                            progress=bar.update)
    finally:
        bar.close()
    wall_s = time.perf_counter() - t0
    for name, by_file in results.items():
        reasons = top_reasons(by_file)
        entry = entries[name]
        entry.update(wall_s=sum(s.seconds for s in by_file.values()), totals=totals(by_file),
                     top_unsupported_reasons=[{"reason": r, "cases": n} for r, n in reasons],
                     files={f: s.as_dict() for f, s in by_file.items()})
        say("")
        say(f"== {name}")
        say(format_table(by_file))
        say(f"{entry['wall_s']:.1f} s")
        if reasons:
            say("top unsupported reasons (cases):")
            for reason, n in reasons:
                say(f"  {n:5d}  {reason}")
        wrong = [(f, x) for f, s in by_file.items() for x in s.failures
                 if x["kind"] == "wrong accept"]
        for f, x in wrong[:MAX_WRONG_SHOWN]:
            say(f"  WRONG ACCEPT: {f}: {x['group']} / {x['test']}: {x['instance'][:200]}")
        if len(wrong) > MAX_WRONG_SHOWN:
            say(f"  ... and {len(wrong) - MAX_WRONG_SHOWN} more wrong accepts ({name})")
    if len(results) > 1:
        say("")
        say("side by side (passed/wrong accepts/unsupported; the rest: wrong rejects, crashes)")
        say(format_comparison(results))
    return {
        "command": "bench jsts", "suite": suite_dir, "tokenizer": tokenizer_path,
        "vocab_size": vocab.size, "timeout_s": timeout_s, "wall_s": wall_s,
        "engines": list(entries.values()),
    }
