"""MaskBench: JSON Schema compliance and speed, by MaskBench's protocol (stated here).

For each schema: compile once (TTFM = parse + compile + the first mask); for
each test instance, serialize with ``json.dumps(data, ensure_ascii=False)``,
tokenize without special tokens, and per token fill the mask, check the
token is allowed, commit it (TBM = one mask+commit). A schema passes when
every valid instance is accepted and ends accepting, and every invalid one
is refused at some token (or cannot end: EOS would be refused).

Outcomes per schema, in this order of precedence: ``compile`` (the engine
refused the schema), ``timeout`` (over ``timeout_s`` for compile and all its
instances), ``crash`` (an unexpected exception), ``invalidation`` (an invalid
instance accepted: a soundness failure), ``validation`` (a valid instance
refused), ``pass``. A schema our compiler proves empty (``EmptyLanguage``)
is not a compile error: it is an engine that refuses every instance.
"""

from __future__ import annotations

import bisect
import gzip
import json
import random
import re
import signal
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from automask.bench.peers import Engine, GrammarSpec, PeerError
from automask.bench.progress import Progress
from automask.bench.stats import printer, text_table
from automask.errors import AutomaskError, EmptyLanguage, LimitExceeded, NoLegalContinuation
from automask.gc_pause import untrack

#: the dev data and a tokenizer from ../shared next to the repository (benches' defaults)
SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
DEFAULT_DATA = str(SHARED_DATA / "maskbench-dev.jsonl.gz")
DEFAULT_TOKENIZER = str(SHARED_DATA / "tokenizers" / "llama-3.1" / "tokenizer.json")
OUTCOMES = ("pass", "compile", "validation", "invalidation", "timeout", "crash")
MAX_FAILURES_PER_SCHEMA = 3  # failing instances kept per schema in the details
MAX_INSTANCE_CHARS = 2000  # longer failing instances are cut in the details


class SchemaTimeout(BaseException):
    """Raised by the alarm. A BaseException, so ``except Exception`` in an engine can't eat it."""


class MaskBenchInputError(AutomaskError):
    """The MaskBench data file cannot be read."""


# ----------------------------------------------------------------------------- stats


@dataclass
class SplitStats:
    schemas: int = 0
    passing: int = 0
    compile_errors: int = 0
    validation_errors: int = 0     # a valid instance rejected
    invalidation_errors: int = 0   # an invalid instance accepted
    timeouts: int = 0
    crashes: int = 0
    tests: int = 0                 # instances walked (those of compiled schemas)
    tokens: int = 0
    # Samples as arrays of doubles, not lists of floats: the collector does not walk them.
    # A run holds millions; as lists, every full collection the engine under test sets
    # off inside a timed step would walk the harness's own samples too (about 1 s each
    # late in a whole-dev-set run), and a Python engine would be charged for it.
    tbm_us: array = field(default_factory=lambda: array("d"))
    ttfm_ms: array = field(default_factory=lambda: array("d"))
    error_keywords: Counter = field(default_factory=Counter)

    def add(self, r: SchemaResult) -> None:
        self.schemas += 1
        self.tbm_us.extend(r.tbm_us)
        self.tokens += r.tokens
        self.tests += r.tests
        if r.ttfm_ms is not None:
            self.ttfm_ms.append(r.ttfm_ms)
        if r.outcome == "pass":
            self.passing += 1
        elif r.outcome == "compile":
            self.compile_errors += 1
            self.error_keywords[r.error or "?"] += 1
        elif r.outcome == "validation":
            self.validation_errors += 1
        elif r.outcome == "invalidation":
            self.invalidation_errors += 1
        elif r.outcome == "timeout":
            self.timeouts += 1
        else:
            self.crashes += 1
            self.error_keywords["crash: " + (r.error or "?")] += 1

    def summary(self) -> dict:
        def dist(xs: array) -> dict:
            if not xs:
                return {}
            a = np.frombuffer(xs, dtype=np.float64)
            return {"count": int(a.size), "mean": float(a.mean()),
                    "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
                    "max": float(a.max())}

        return {
            "schemas": self.schemas, "passing": self.passing,
            "compile_errors": self.compile_errors, "validation_errors": self.validation_errors,
            "invalidation_errors": self.invalidation_errors, "timeouts": self.timeouts,
            "crashes": self.crashes, "tests": self.tests, "tokens": self.tokens,
            "tbm_us": dist(self.tbm_us), "ttfm_ms": dist(self.ttfm_ms),
            "compile_error_keywords": dict(self.error_keywords.most_common()),
        }


@dataclass
class SchemaResult:
    """What happened to one schema under one engine."""

    id: str
    split: str
    outcome: str = "pass"
    error: str | None = None      # compile-error keyword or crash message
    ttfm_ms: float | None = None
    tests: int = 0
    tokens: int = 0
    tbm_us: array = field(default_factory=lambda: array("d"))  # see SplitStats
    #: where each test's steps begin in ``tbm_us``: what names the slowest step, to replay
    #: it. A compiled schema walks every test in order, so entry i is test i.
    test_starts: array = field(default_factory=lambda: array("q"))
    failures: list[dict] = field(default_factory=list)  # failing instances (capped)

    def slowest_step(self) -> dict | None:
        """Where the slowest mask+commit was: the test (its index in the record) and the
        step (the token's position in that test's instance); None with no step timed."""
        if not self.tbm_us:
            return None
        at = max(range(len(self.tbm_us)), key=self.tbm_us.__getitem__)
        test = bisect.bisect_right(self.test_starts, at) - 1
        return {"test": test, "step": at - self.test_starts[test]}

    def as_dict(self) -> dict:
        return {"id": self.id, "split": self.split, "outcome": self.outcome,
                "error": self.error, "ttfm_ms": self.ttfm_ms, "tests": self.tests,
                "tokens": self.tokens, "mask_ms": round(sum(self.tbm_us) / 1e3, 3),
                "tbm_max_us": max(self.tbm_us, default=None),
                "tbm_max_at": self.slowest_step(), "failures": self.failures}


# ----------------------------------------------------------------------------- input


def load_records(path: str, split: str | None = None, sample: int | None = None,
                 seed: int = 0) -> list[dict]:
    """The records of a MaskBench ``.jsonl[.gz]``, optionally one split and a random sample.

    ``split`` matches :func:`split_of` (``BFCL``) or a finer id prefix
    (``BFCL_simple``, ``Github`` for every Github tier). The sample is drawn
    with ``random.Random(seed)`` after the split filter, so it is reproducible.
    """
    opener = gzip.open if path.endswith(".gz") else open
    records = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise MaskBenchInputError(f"{path}:{lineno}: not JSON: {e.msg}") from None
                if not (isinstance(rec, dict) and isinstance(rec.get("id"), str)
                        and "schema" in rec and isinstance(rec.get("tests"), list)):
                    raise MaskBenchInputError(
                        f"{path}:{lineno}: not a MaskBench record (needs id, schema, tests)")
                records.append(rec)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise MaskBenchInputError(f"cannot read {path}: {e}") from e
    if split:
        records = [r for r in records if _in_split(r["id"], split)]
    if sample is not None and sample < len(records):
        records = random.Random(seed).sample(records, sample)
    return records


_SPLIT_SUFFIX = re.compile(r"_\d+$")


def split_of(record_id: str) -> str:
    """The split a MaskBench id belongs to.

    ``Github_easy---o1234`` -> ``Github_easy``, ``Kubernetes---kb_0`` ->
    ``Kubernetes``; ids without ``---`` end in ``_<n>``: ``JME_0`` -> ``JME``,
    and every ``BFCL_<category>_<n>`` (simple, multiple, parallel, java, ...) -> ``BFCL``.
    """
    if "---" in record_id:
        return record_id.split("---", 1)[0]
    base = _SPLIT_SUFFIX.sub("", record_id)
    if base.startswith("BFCL_"):
        return "BFCL"
    return base


def _in_split(record_id: str, split: str) -> bool:
    return (record_id == split or split_of(record_id) == split
            or record_id.startswith(split + "---") or record_id.startswith(split + "_"))


def keyword_of(error: BaseException) -> str:
    """A short label for a compile error: the unsupported keyword when there is one."""
    text = getattr(error, "message", None) or str(error)
    text = " ".join(str(text).split())
    if isinstance(error, PeerError):
        # "llguidance rejects the grammar: Unimplemented keys: [...]" -> the peer's reason
        _, _, reason = text.partition(": ")
        return (reason or text)[:60]
    m = re.match(r"(.+?) is not supported", text)
    if m:
        return m.group(1)[:60]
    head = re.split(r": |\(at ", text, maxsplit=1)[0].strip()  # drop the specifics
    return f"{type(error).__name__}: {head}"[:60]


# ----------------------------------------------------------------------------- timeout


@contextmanager
def time_limit(seconds: float | None) -> Iterator[Callable[[], None]]:
    """Raise :class:`SchemaTimeout` in the body after ``seconds`` (SIGALRM, main thread).

    Yields ``disarm``: call it before leaving the body normally, so an alarm
    that would fire at the very end is not raised outside a handler. The
    previous SIGALRM handler and any earlier timer (minus the time spent) are
    restored. Without SIGALRM, off the main thread or with no limit, nothing
    is timed.
    """
    usable = (seconds is not None and seconds > 0 and hasattr(signal, "SIGALRM")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield lambda: None
        return
    state = {"armed": True}

    def on_alarm(signum, frame):
        if state["armed"]:
            state["armed"] = False
            raise SchemaTimeout()

    def disarm() -> None:
        state["armed"] = False  # first: a late alarm is now a no-op

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    start = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)  # type: ignore[arg-type]  # usable: set
    try:
        yield disarm
    finally:
        disarm()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            left = max(old_delay - (time.monotonic() - start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


# ----------------------------------------------------------------------------- the run


def run_engine(engine: Engine, vocab, records: Iterable[dict], *, timeout_s: float = 10.0,
               progress: Callable[[int], Any] | None = None,
               details: list[SchemaResult] | None = None) -> dict[str, SplitStats]:
    """Run the protocol for one engine; returns stats per split (and under 'total').

    ``engine`` must be prepared. One schema's error, timeout or crash is a
    result for that schema, never the end of the run. ``details``, when
    given, receives one :class:`SchemaResult` per schema, in order.
    """
    runs = run_engines({"engine": engine}, vocab, records, timeout_s=timeout_s,
                       progress=progress)
    if details is not None:
        details.extend(runs["engine"].rows)
    return runs["engine"].stats


@dataclass
class EngineRun:
    """One engine's results in a run: stats per split, a row per schema, its own seconds."""

    stats: dict[str, SplitStats] = field(default_factory=lambda: {"total": SplitStats()})
    rows: list[SchemaResult] = field(default_factory=list)
    wall_s: float = 0.0


def run_engines(engines: dict[str, Engine], vocab, records: Iterable[dict], *,
                timeout_s: float | None = 10.0,
                progress: Callable[[int], Any] | None = None) -> dict[str, EngineRun]:
    """Run the protocol for every (prepared) engine, schema by schema.

    Each schema is run by every engine before the next one, the engine going
    first turning with each schema: a machine whose speed drifts over a long
    run (a shared or throttled one drifts by tens of percent) then slows all
    engines alike, and their ratios stay true where their absolute figures
    may not. One engine run after the other would put each on its own stretch
    of the machine's time.
    """
    runs = {name: EngineRun() for name in engines}
    encoded_cache: dict[str, tuple[int, ...]] = {}  # tuples of ints: untracked
    bitmasks = {name: bitmask_and_row(engine) for name, engine in engines.items()}
    order = list(engines)
    for n, record in enumerate(records if order else ()):
        if progress:
            progress(n)
        turn = n % len(order)
        for name in order[turn:] + order[:turn]:
            run = runs[name]
            bitmask, row = bitmasks[name]
            t0 = time.perf_counter()
            result = run_schema(engines[name], vocab, record, bitmask, row, encoded_cache,
                                timeout_s)
            run.wall_s += time.perf_counter() - t0
            run.stats["total"].add(result)
            run.stats.setdefault(result.split, SplitStats()).add(result)
            run.rows.append(_settled(result))
    return runs


def _settled(result: SchemaResult) -> SchemaResult:
    """``result``, finished, out of the collector's sight (it and its failures hold only
    strings, numbers and arrays: in no cycle). A whole-dev-set run holds 18,000 rows and
    the instances' token ids; tracked, they made every full collection that the engine
    under test sets off inside a timed step walk them (about 50 ms of 70-85 ms late in
    the run), charging the harness's own data to whichever engine was timed."""
    for failure in result.failures:
        untrack(failure)
    untrack(result.failures)
    untrack(result)
    return result


def bitmask_and_row(engine: Engine) -> tuple[np.ndarray, np.ndarray]:
    """The engine's bitmask, and its one row (what the walk reads a token's bit from)."""
    bitmask = engine.allocate_bitmask()
    return bitmask, bitmask[0] if bitmask.ndim == 2 else bitmask


def run_schema(engine: Engine, vocab, record: dict, bitmask, row,
               encoded_cache: dict[str, tuple[int, ...]], timeout_s: float | None) -> SchemaResult:
    """One schema under the protocol, with a time limit on compile plus every walk."""
    result = SchemaResult(record["id"], split_of(record["id"]))
    try:
        with time_limit(timeout_s) as disarm:
            try:
                _run_schema(engine, vocab, record, bitmask, row, encoded_cache, result)
            finally:
                disarm()
    except SchemaTimeout:
        result.outcome, result.ttfm_ms, result.failures = "timeout", None, []
    except LimitExceeded as e:  # the engine's own time/size limit, mid-walk: a timeout too
        result.outcome, result.ttfm_ms, result.failures = "timeout", None, []
        result.error = f"LimitExceeded: {' '.join(str(e).split())[:80]}"
    except Exception as e:  # a crash is a result here, not a reason to stop the run
        result.outcome, result.ttfm_ms = "crash", None
        result.error = f"{type(e).__name__}: {' '.join(str(e).split())[:80]}"
    return result


def _run_schema(engine, vocab, record, bitmask, row, encoded_cache, result: SchemaResult):
    spec = GrammarSpec("json", json.dumps(record["schema"]), record["id"])
    everything_refused = False
    t0 = time.perf_counter()
    try:
        compiled = engine.compile(engine.parse(spec))
        seq = engine.new_sequence(compiled)
        seq.fill(bitmask)
    except EmptyLanguage:
        # Proven to admit nothing: the engine refuses every instance (no mask is ever given).
        everything_refused = True
    except AutomaskError as e:  # unsupported, limits, peers' refusals (PeerError)
        result.outcome, result.error = "compile", keyword_of(e)
        return
    result.ttfm_ms = (time.perf_counter() - t0) * 1e3
    failed = {"validation": False, "invalidation": False}
    first = True
    for index, test in enumerate(record["tests"]):
        text = json.dumps(test["data"], ensure_ascii=False)
        result.tests += 1
        if everything_refused:
            accepted, position, reason = False, 0, "empty language"
        else:
            ids = encoded_cache.get(text)
            if ids is None:
                ids = encoded_cache[text] = tuple(vocab.encode(text))
                untrack(encoded_cache)  # (see _settled)
            if not first:
                seq = engine.new_sequence(compiled)
            first = False
            result.test_starts.append(len(result.tbm_us))
            accepted, position, reason = walk_instance(seq, ids, bitmask, row, result)
        if bool(test["valid"]) == accepted:
            continue
        kind = "validation" if test["valid"] else "invalidation"
        failed[kind] = True
        if len(result.failures) < MAX_FAILURES_PER_SCHEMA or kind == "invalidation":
            result.failures.append({
                "kind": kind, "test": index, "description": test.get("description", ""),
                "instance": text[:MAX_INSTANCE_CHARS], "position": position, "reason": reason,
                **({} if everything_refused else _where(vocab, ids, position))})
    if failed["invalidation"]:
        result.outcome = "invalidation"
    elif failed["validation"]:
        result.outcome = "validation"


def _where(vocab, ids: Sequence[int], position: int) -> dict[str, str]:
    """The text before the failing token (its last 60 characters) and the token itself."""
    try:
        before = vocab.decode_bytes(ids[:position]).decode("utf-8", "replace")[-60:]
        token = (vocab.decode_bytes(ids[position:position + 1]).decode("utf-8", "replace")
                 if position < len(ids) else "")
    except Exception:  # only a diagnostic
        return {}
    return {"before": before, "token": token}


def walk_instance(seq, ids: Sequence[int], bitmask, row,
                  result: SchemaResult) -> tuple[bool, int, str]:
    """Mask, check, commit each token; returns (accepted, failing position, reason)."""
    tbm = result.tbm_us
    fill, accept = seq.fill, seq.accept
    for pos, tid in enumerate(ids):
        t = time.perf_counter_ns()
        try:
            fill(bitmask)
        except NoLegalContinuation:  # an empty mask: no token, this one included, is allowed
            tbm.append((time.perf_counter_ns() - t) / 1e3)
            result.tokens += 1
            return False, pos, "no legal continuation"
        allowed = (int(row[tid >> 5]) >> (tid & 31)) & 1
        ok = allowed and accept(tid)
        tbm.append((time.perf_counter_ns() - t) / 1e3)
        result.tokens += 1
        if not ok:
            return False, pos, "refused" if allowed else "masked"
    if not seq.is_accepting():
        return False, len(ids), "not accepting"
    return True, len(ids), ""


# ----------------------------------------------------------------------------- reports


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
    return (text_table(cols, rows, left=2)
            + "\n(TBM in µs per mask+commit; TTFM in ms: parse + compile + first mask)")


def ordered_summaries(stats: dict[str, SplitStats]) -> dict[str, dict]:
    """Summaries with the splits by name and 'total' last."""
    names = sorted(k for k in stats if k != "total")
    return {k: stats[k].summary() for k in [*names, "total"]}


def compare(ours: list[SchemaResult], theirs: list[SchemaResult]) -> dict[str, Any]:
    """Pass/fail agreement of two engines on the same schemas (in the same order)."""
    both = only_ours = only_theirs = neither = 0
    only_theirs_ids: list[str] = []
    for a, b in zip(ours, theirs, strict=True):
        pa, pb = a.outcome == "pass", b.outcome == "pass"
        if pa and pb:
            both += 1
        elif pa:
            only_ours += 1
        elif pb:
            only_theirs += 1
            only_theirs_ids.append(a.id)
        else:
            neither += 1
    return {"both_pass": both, "only_ours_pass": only_ours, "only_theirs_pass": only_theirs,
            "neither_pass": neither, "only_theirs_pass_ids": only_theirs_ids}


# ----------------------------------------------------------------------------- the command


def run_maskbench(data_path: str, tokenizer_path: str, *, peers: Sequence[str] = (),
                  sample: int | None = None, split: str | None = None, seed: int = 0,
                  timeout_s: float | None = 10.0, stream=None,
                  progress_stream=None) -> dict[str, Any]:
    """The whole ``bench maskbench`` run: every engine on the same records and tokens.

    Prints one table per engine (per split and total), our top compile-error
    keywords and every soundness failure, and returns the JSON-ready result.
    A peer that cannot be loaded is reported with its error; the run goes on.
    """
    import gc
    import os
    import platform
    import sys

    from automask.bench.peers import prepare_engines
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    t0 = time.perf_counter()
    vocab = Vocabulary.from_file(tokenizer_path)
    vocab_load_ms = (time.perf_counter() - t0) * 1e3
    records = load_records(data_path, split=split, sample=sample, seed=seed)
    if not records:
        raise MaskBenchInputError(f"{data_path}: no records"
                                  + (f" in split {split!r}" if split else ""))
    # The harness's own data (records, vocabulary) lives for the whole run: out of the
    # collector's sight, or every full collection inside a timed step walks it again.
    gc.collect()
    gc.freeze()

    result: dict[str, Any] = {
        "command": "bench maskbench",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "data": data_path, "split": split, "sample": sample, "seed": seed,
        "timeout_s": timeout_s, "tokenizer": tokenizer_path, "vocab_size": vocab.size,
        "vocab_load_ms": vocab_load_ms, "records": len(records),
        "tests": sum(len(r["tests"]) for r in records),
        "protocol": "json.dumps(data, ensure_ascii=False), tokenized without special tokens; "
                    "per token: fill mask, check the token's bit, commit (TBM, "
                    "time.perf_counter_ns); TTFM: parse + compile + first mask",
    }
    p = printer(out)
    p(f"MaskBench: {len(records)} schemas, {result['tests']} instances from {data_path}"
      + (f" (split {split})" if split else "")
      + (f" (sample {sample}, seed {seed})" if sample else ""))
    p(f"tokenizer: {tokenizer_path} ({vocab.size} ids); timeout {timeout_s} s per schema")

    ready, entries = prepare_engines(peers, tokenizer_path, vocab, p)
    for entry in entries.values():
        entry.update(wall_s=None, splits=None, schemas=None)
    result["engines"] = list(entries.values())
    if len(ready) > 1:
        p("engines interleaved: each schema is run by each engine in turn")

    bar = Progress(f"bench maskbench ({' + '.join(ready)})", len(records), progress_stream)
    try:
        runs = run_engines(ready, vocab, records, timeout_s=timeout_s, progress=bar.update)
    finally:
        bar.close()
    details: dict[str, list[SchemaResult]] = {}
    for name, run in runs.items():
        entry = entries[name]
        entry["wall_s"] = run.wall_s
        entry["splits"] = ordered_summaries(run.stats)
        entry["schemas"] = [r.as_dict() for r in run.rows]
        details[name] = run.rows
        p("")
        p(f"== {name}")
        p(format_table({name: entry["splits"]}))
        p(f"wall {entry['wall_s']:.1f} s")
        _print_problems(p, name, run.stats["total"], run.rows)

    ours = details.get("automask")
    if ours is not None:
        result["comparison"] = {name: compare(ours, rows)
                                for name, rows in details.items() if name != "automask"}
        for name, c in result["comparison"].items():
            p("")
            p(f"automask vs {name}: both pass {c['both_pass']}, only automask "
              f"{c['only_ours_pass']}, only {name} {c['only_theirs_pass']}, "
              f"neither {c['neither_pass']}")
    return result


def _print_problems(p, name: str, total: SplitStats, rows: list[SchemaResult],
                    top: int = 15) -> None:
    compile_kw = [(k, n) for k, n in total.error_keywords.most_common()
                  if not k.startswith("crash: ")]
    if compile_kw:
        shown = compile_kw if name == "automask" else compile_kw[:5]
        p(f"top compile errors ({name}, {total.compile_errors} schemas):")
        for k, n in shown[:top]:
            p(f"  {n:5d}  {k}")
    for outcome, title in (("invalidation", "INVALID INSTANCE ACCEPTED"), ("crash", "crash"),
                           ("timeout", "timeout")):
        bad = [r for r in rows if r.outcome == outcome]
        for r in bad[:20]:
            if outcome == "invalidation":
                for f in r.failures:
                    if f["kind"] == "invalidation":
                        p(f"  {title}: {r.id} test {f['test']}: {f['instance'][:200]}")
            else:
                p(f"  {title}: {r.id}" + (f": {r.error}" if r.error else ""))
        if len(bad) > 20:
            p(f"  ... and {len(bad) - 20} more ({outcome})")


