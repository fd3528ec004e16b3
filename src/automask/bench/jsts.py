"""The official JSON Schema Test Suite, walked token by token.

Each group's schema is compiled once; each instance is serialized with
``json.dumps(data, ensure_ascii=False)``, tokenized, and walked with mask +
commit; it counts as accepted when every token was allowed and the walk ends
accepting. A case passes when accepted == valid. A schema that does not
compile counts its cases as unsupported (never as passed).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from automask.errors import AutomaskError, EmptyLanguage


@dataclass
class FileStats:
    cases: int = 0
    passed: int = 0
    wrong_accepts: int = 0
    wrong_rejects: int = 0
    unsupported: int = 0
    reasons: Counter = field(default_factory=Counter)


def walk(compiled, vocab, text: str, bitmask) -> bool:
    """Whether ``text`` is accepted token by token under masks, ending accepting."""
    from automask.engine.matcher import Matcher

    m = Matcher(compiled)
    row = bitmask[0]
    for tid in vocab.encode(text):
        m.fill_bitmask(bitmask)
        if not (int(row[tid >> 5]) >> (tid & 31)) & 1 or not m.accept_token(tid):
            return False
    return m.is_accepting()


def run_suite(suite_dir: str, vocab, files: list[str] | None = None,
              **schema_options) -> dict[str, FileStats]:
    """Run every top-level ``*.json`` file of ``suite_dir`` (``optional/`` is not required)."""
    import automask

    bitmask = automask.allocate_bitmask(1, vocab.size)
    results: dict[str, FileStats] = {}
    for path in sorted(Path(suite_dir).glob("*.json")):
        name = path.stem
        if files and name not in files:
            continue
        stats = results[name] = FileStats()
        for group in json.loads(path.read_text(encoding="utf-8")):
            tests = group["tests"]
            stats.cases += len(tests)
            try:
                grammar = automask.Grammar.from_json_schema(group["schema"], **schema_options)
                compiled = automask.compile(grammar, vocab)
            except EmptyLanguage:
                # The schema admits nothing: every instance is rejected.
                for test in tests:
                    if test["valid"]:
                        stats.wrong_rejects += 1
                    else:
                        stats.passed += 1
                continue
            except AutomaskError as e:
                stats.unsupported += len(tests)
                stats.reasons[str(e)[:90]] += len(tests)
                continue
            for test in tests:
                text = json.dumps(test["data"], ensure_ascii=False)
                try:
                    accepted = walk(compiled, vocab, text, bitmask)
                except AutomaskError as e:
                    stats.unsupported += 1
                    stats.reasons[str(e)[:90]] += 1
                    continue
                if accepted == test["valid"]:
                    stats.passed += 1
                elif accepted:
                    stats.wrong_accepts += 1
                else:
                    stats.wrong_rejects += 1
    return results


def format_table(results: dict[str, FileStats]) -> str:
    cols = ["keyword file", "cases", "passed", "wrong accepts", "wrong rejects", "unsupported"]
    rows = [[k, s.cases, s.passed, s.wrong_accepts, s.wrong_rejects, s.unsupported]
            for k, s in results.items()]
    total = [sum(r[i] for r in rows) for i in range(1, 6)]
    rows.append(["TOTAL", *total])
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                       for i, (c, w) in enumerate(zip(cols, widths, strict=True)))]
    for r in rows:
        lines.append("  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                               for i, (v, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(lines)
