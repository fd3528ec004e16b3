"""The official JSON Schema Test Suite, walked token by token.

Each group's schema is compiled once; each instance is serialized with
``json.dumps(data, ensure_ascii=False)``, tokenized, and walked with mask +
commit; it counts as accepted when every token was allowed and the walk ends
accepting. A case passes when accepted == valid. A schema that does not
compile counts its cases as unsupported (never as passed); one our compiler
proves empty (``EmptyLanguage``) rejects every case. An unexpected exception
or a timeout counts the group's remaining cases as crashes, and the run goes on.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from automask.errors import AutomaskError, EmptyLanguage, NoLegalContinuation

MAX_INSTANCE_CHARS = 500


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
    reasons: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)  # every wrong accept and wrong reject

    def as_dict(self) -> dict:
        return {"cases": self.cases, "passed": self.passed,
                "wrong_accepts": self.wrong_accepts, "wrong_rejects": self.wrong_rejects,
                "unsupported": self.unsupported, "crashes": self.crashes,
                "unsupported_reasons": dict(self.reasons.most_common()),
                "failures": self.failures}


def walk(compiled, vocab, text: str, bitmask) -> bool:
    """Whether ``text`` is accepted token by token under masks, ending accepting."""
    from automask.engine.matcher import Matcher

    m = Matcher(compiled)
    row = bitmask[0]
    for tid in vocab.encode(text):
        try:
            m.fill_bitmask(bitmask)
        except NoLegalContinuation:  # an empty mask refuses this token too
            return False
        if not (int(row[tid >> 5]) >> (tid & 31)) & 1 or not m.accept_token(tid):
            return False
    return m.is_accepting()


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


def run_suite(suite_dir: str, vocab, files: list[str] | None = None, *,
              timeout_s: float | None = 30.0, progress=None,
              **schema_options) -> dict[str, FileStats]:
    """Run the suite's files (see :func:`suite_files`); returns stats per file name."""
    import automask
    from automask.bench.maskbench import SchemaTimeout, time_limit

    root = Path(suite_dir)
    bitmask = automask.allocate_bitmask(1, vocab.size)
    results: dict[str, FileStats] = {}
    for n, path in enumerate(suite_files(suite_dir, files)):
        if progress:
            progress(n)
        name = path.relative_to(root).with_suffix("").as_posix()
        stats = results[name] = FileStats()
        try:
            groups = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SuiteInputError(f"cannot read {path}: {e}") from e
        for group in groups:
            tests = group["tests"]
            stats.cases += len(tests)
            try:
                with time_limit(timeout_s) as disarm:
                    try:
                        _run_group(group, vocab, bitmask, stats, schema_options)
                    finally:
                        disarm()
            except SchemaTimeout:
                _crashed(stats, group, "timeout")
            except Exception as e:  # a bug of ours is a result, not the end of the run
                _crashed(stats, group, f"crash: {type(e).__name__}: {str(e)[:60]}")
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


def _run_group(group: dict, vocab, bitmask, stats: FileStats, schema_options: dict) -> None:
    import automask

    tests = group["tests"]
    try:
        grammar = automask.Grammar.from_json_schema(group["schema"], **schema_options)
        compiled = automask.compile(grammar, vocab)
    except EmptyLanguage:
        compiled = None  # the schema admits nothing: every instance is rejected
    except AutomaskError as e:
        stats.unsupported += len(tests)
        stats.reasons[_reason(e)] += len(tests)
        return
    for test in tests:
        text = json.dumps(test["data"], ensure_ascii=False)
        try:
            accepted = compiled is not None and walk(compiled, vocab, text, bitmask)
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
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]

    def fmt(r) -> str:
        return "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                         for i, (v, w) in enumerate(zip(r, widths, strict=True)))

    return "\n".join([fmt(cols), *(fmt(r) for r in rows)])


def run_jsts(suite_dir: str, tokenizer_path: str, *, files: list[str] | None = None,
             timeout_s: float | None = 30.0, stream=None, progress_stream=None) -> dict:
    """The whole ``bench jsts`` run: prints the table and the top reasons; returns the JSON."""
    import sys
    import time

    from automask.bench.grammar_bench import Progress
    from automask.bench.peers import AutomaskEngine
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    vocab = Vocabulary.from_file(tokenizer_path)
    options = dict(AutomaskEngine.SCHEMA_OPTIONS)
    paths = suite_files(suite_dir, files)
    bar = Progress("jsts", len(paths), progress_stream)
    t0 = time.perf_counter()
    try:
        results = run_suite(suite_dir, vocab, files, timeout_s=timeout_s, progress=bar.update,
                            **options)
    finally:
        bar.close()
    wall_s = time.perf_counter() - t0
    reasons = top_reasons(results)
    print(format_table(results), file=out)
    print(f"wall {wall_s:.1f} s; schema options {json.dumps(options)}", file=out)
    if reasons:
        print("top unsupported reasons (cases):", file=out)
        for reason, n in reasons:
            print(f"  {n:5d}  {reason}", file=out)
    wrong = [(name, f) for name, s in results.items() for f in s.failures
             if f["kind"] == "wrong accept"]
    for name, f in wrong:
        print(f"  WRONG ACCEPT: {name}: {f['group']} / {f['test']}: {f['instance'][:200]}",
              file=out)
    return {
        "command": "bench jsts", "suite": suite_dir, "tokenizer": tokenizer_path,
        "vocab_size": vocab.size, "schema_options": options, "timeout_s": timeout_s,
        "wall_s": wall_s, "totals": totals(results),
        "top_unsupported_reasons": [{"reason": r, "cases": n} for r, n in reasons],
        "files": {name: s.as_dict() for name, s in results.items()},
    }
