"""MaskBench: JSON Schema compliance and speed, per the protocol in ../shared/data/README.md.

For each schema: compile once (TTFM = compile plus the first mask); for each
test instance, serialize with ``json.dumps(data, ensure_ascii=False)``,
tokenize without special tokens, and per token fill the mask, check the
token is allowed, commit it (TBM = one mask+commit). A schema passes when
every valid instance is accepted and ends accepting, and every invalid one
is refused at some token (or cannot end: EOS would be refused).
"""

from __future__ import annotations

import gzip
import json
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from automask.bench.peers import Engine, GrammarSpec
from automask.errors import AutomaskError, LimitExceeded, UnsupportedFeature


class SchemaTimeout(Exception):
    pass


@dataclass
class SplitStats:
    schemas: int = 0
    passing: int = 0
    compile_errors: int = 0
    validation_errors: int = 0     # a valid instance rejected
    invalidation_errors: int = 0   # an invalid instance accepted
    timeouts: int = 0
    crashes: int = 0
    tokens: int = 0
    tbm_us: list[float] = field(default_factory=list)
    ttfm_ms: list[float] = field(default_factory=list)
    error_keywords: Counter = field(default_factory=Counter)

    def summary(self) -> dict:
        def dist(xs: list[float]) -> dict:
            if not xs:
                return {}
            a = np.asarray(xs)
            return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
                    "p99": float(np.percentile(a, 99)), "max": float(a.max())}

        return {
            "schemas": self.schemas, "passing": self.passing,
            "compile_errors": self.compile_errors, "validation_errors": self.validation_errors,
            "invalidation_errors": self.invalidation_errors, "timeouts": self.timeouts,
            "crashes": self.crashes, "tokens": self.tokens,
            "tbm_us": dist(self.tbm_us), "ttfm_ms": dist(self.ttfm_ms),
            "compile_error_keywords": dict(self.error_keywords.most_common()),
        }


def load_records(path: str, split: str | None = None, sample: int | None = None,
                 seed: int = 0) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    if split:
        records = [r for r in records if split_of(r["id"]) == split]
    if sample is not None and sample < len(records):
        records = random.Random(seed).sample(records, sample)
    return records


def split_of(record_id: str) -> str:
    return re.split(r"---|_\d", record_id, maxsplit=1)[0]


def keyword_of(error: Exception) -> str:
    """A short label for a compile error: the unsupported keyword when there is one."""
    text = str(error)
    m = re.match(r"(.+?) is not supported", text)
    if m:
        return m.group(1)[:60]
    return type(error).__name__ + ": " + text[:50]


def run_engine(engine: Engine, vocab, records: Iterable[dict], *, timeout_s: float = 10.0,
               progress=None) -> dict[str, SplitStats]:
    """Run the protocol for one engine; returns stats per split (and under 'total')."""
    stats: dict[str, SplitStats] = {"total": SplitStats()}
    encoded_cache: dict[str, list[int]] = {}
    bitmask = engine.allocate_bitmask()
    row = bitmask[0] if bitmask.ndim == 2 else bitmask
    for n, record in enumerate(records):
        if progress:
            progress(n)
        split = split_of(record["id"])
        targets = [stats["total"], stats.setdefault(split, SplitStats())]
        for s in targets:
            s.schemas += 1
        outcome, tbm, ttfm, tokens, error = _one_schema(engine, vocab, record, bitmask, row,
                                                        encoded_cache, timeout_s)
        for s in targets:
            s.tbm_us.extend(tbm)
            s.tokens += tokens
            if ttfm is not None:
                s.ttfm_ms.append(ttfm)
            if outcome == "pass":
                s.passing += 1
            elif outcome == "compile":
                s.compile_errors += 1
                s.error_keywords[error] += 1
            elif outcome == "validation":
                s.validation_errors += 1
            elif outcome == "invalidation":
                s.invalidation_errors += 1
            elif outcome == "timeout":
                s.timeouts += 1
            else:
                s.crashes += 1
                s.error_keywords["crash: " + (error or "")] += 1
    return stats


def _alarm(signum, frame):
    raise SchemaTimeout()


def _one_schema(engine, vocab, record, bitmask, row, encoded_cache, timeout_s):
    tbm: list[float] = []
    tokens = 0
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        spec = GrammarSpec("json", json.dumps(record["schema"]), record["id"])
        t0 = time.perf_counter()
        try:
            compiled = engine.compile(engine.parse(spec))
            seq = engine.new_sequence(compiled)
            seq.fill(bitmask)
        except (UnsupportedFeature, LimitExceeded) as e:
            return "compile", tbm, None, tokens, keyword_of(e)
        except AutomaskError as e:
            return "compile", tbm, None, tokens, keyword_of(e)
        ttfm = (time.perf_counter() - t0) * 1e3
        outcome = "pass"
        first = True
        for test in record["tests"]:
            text = json.dumps(test["data"], ensure_ascii=False)
            ids = encoded_cache.get(text)
            if ids is None:
                ids = encoded_cache[text] = vocab.encode(text)
            if not first:
                seq = engine.new_sequence(compiled)
            first = False
            accepted = True
            for tid in ids:
                t = time.perf_counter_ns()
                seq.fill(bitmask)
                ok = (int(row[tid >> 5]) >> (tid & 31)) & 1
                if ok:
                    ok = seq.accept(tid)
                tbm.append((time.perf_counter_ns() - t) / 1e3)
                tokens += 1
                if not ok:
                    accepted = False
                    break
            if accepted:
                accepted = bool(seq.is_accepting())
            if test["valid"] and not accepted:
                outcome = "validation" if outcome == "pass" else outcome
            elif not test["valid"] and accepted:
                outcome = "invalidation"
        return outcome, tbm, ttfm, tokens, None
    except SchemaTimeout:
        return "timeout", tbm, None, tokens, None
    except Exception as e:  # a crash is a result here, not a reason to stop the run
        return "crash", tbm, None, tokens, f"{type(e).__name__}: {str(e)[:80]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def format_table(results: dict[str, dict[str, dict]]) -> str:
    """results[engine][split] = summary dict → a text table."""
    cols = ["engine", "split", "schemas", "pass", "compile", "valid-rej", "invalid-acc",
            "timeout", "crash", "tokens", "TBM mean", "p50", "p99", "max", "TTFM p50", "p99",
            "max"]
    rows = []
    for engine, splits in results.items():
        for split, s in splits.items():
            tbm, ttfm = s["tbm_us"], s["ttfm_ms"]
            rows.append([engine, split, s["schemas"], s["passing"], s["compile_errors"],
                         s["validation_errors"], s["invalidation_errors"], s["timeouts"],
                         s["crashes"], s["tokens"],
                         *(f"{tbm.get(k, 0):.1f}" for k in ("mean", "p50", "p99", "max")),
                         *(f"{ttfm.get(k, 0):.1f}" for k in ("p50", "p99", "max"))])
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    lines.append("(TBM in µs per mask+commit; TTFM in ms: compile + first mask)")
    return "\n".join(lines)
