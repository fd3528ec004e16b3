"""``automask bench grammar`` and ``automask bench compile``: timing masks on real text.

The grammar bench follows the MaskBench protocol for one grammar: compile K
times (the first is the cold compile), then walk every instance token by
token, timing each ``fill bitmask + check the token's bit + commit`` step
with ``time.perf_counter_ns``. Every engine walks the same token ids
(``vocab.encode``, no special tokens) through the same loop, so the
numbers differ only by what the engines do.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from automask.bench.maskbench import MaskBenchInputError, load_records
from automask.bench.peers import Engine, GrammarSpec, PeerError, SequenceOps
from automask.bench.progress import Progress
from automask.bench.stats import Summary, median, printer, summarize
from automask.errors import AutomaskError


class BenchInputError(AutomaskError):
    """An instances or grammar file the bench cannot read."""


# ----------------------------------------------------------------------------- inputs


def grammar_spec_from_file(path: str) -> GrammarSpec:
    """A grammar file, its format taken from the extension (``.gbnf`` or ``.lark``)."""
    ext = os.path.splitext(path)[1].lower()
    kinds = {".gbnf": "gbnf", ".lark": "lark"}
    if ext not in kinds:
        raise BenchInputError(f"{path}: unknown grammar format {ext or '(none)'!r}; "
                              "use a .gbnf or .lark file, or --regex")
    return GrammarSpec(kinds[ext], _read_text(path), path)


def regex_spec(pattern: str) -> GrammarSpec:
    return GrammarSpec("regex", pattern, f"regex {pattern}")


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise BenchInputError(f"cannot read {path}: {e}") from e


@dataclass(frozen=True)
class Instance:
    label: str
    text: str


def load_instances(path: str, limit: int | None = None) -> list[Instance]:
    """Instances from a MaskBench ``.jsonl[.gz]``, a ``.json`` list of strings, or text lines.

    MaskBench records give their *valid* tests, each serialized with
    ``json.dumps(data, ensure_ascii=False)``. A text file gives one instance
    per line (the newline, and a ``\\r`` before it, removed); blank lines are
    skipped, so an empty instance needs the ``.json`` form.
    """
    name = path.lower()
    if name.endswith((".jsonl.gz", ".jsonl")):
        return _load_maskbench(path, limit)
    if name.endswith(".json"):
        try:
            data = json.loads(_read_text(path))
        except json.JSONDecodeError as e:
            raise BenchInputError(f"{path}: not JSON: {e}") from e
        if not isinstance(data, list) or not all(isinstance(s, str) for s in data):
            raise BenchInputError(f"{path}: a .json instances file must be a list of strings")
        return [Instance(f"#{i}", s) for i, s in enumerate(data)][:limit]
    out = []
    for lineno, line in enumerate(_read_text(path).split("\n"), 1):
        line = line[:-1] if line.endswith("\r") else line
        if line:
            out.append(Instance(f"line {lineno}", line))
            if limit is not None and len(out) >= limit:
                break
    return out


def _load_maskbench(path: str, limit: int | None) -> list[Instance]:
    """The valid instances of a MaskBench file, serialized as the protocol does."""
    try:
        records = load_records(path)
    except MaskBenchInputError as e:
        raise BenchInputError(str(e)) from e
    out: list[Instance] = []
    for rec in records:
        for i, test in enumerate(rec["tests"]):
            if isinstance(test, dict) and test.get("valid"):
                text = json.dumps(test["data"], ensure_ascii=False)
                out.append(Instance(f"{rec['id']}#{i}", text))
                if limit is not None and len(out) >= limit:
                    return out
    return out


# ----------------------------------------------------------------------------- walking


@dataclass
class Rejection:
    label: str
    position: int  # index of the first failing token (== tokens when not accepting at the end)
    reason: str  # "masked" | "refused" | "not accepting" | "error: ..."

    def as_dict(self) -> dict[str, Any]:
        return {"instance": self.label, "position": self.position, "reason": self.reason}


@dataclass
class WalkResult:
    instances: int = 0
    accepted: int = 0
    tokens: int = 0  # steps timed (tokens up to and including the first refused one)
    steps_ns: list[int] = field(default_factory=list)
    first_mask_ns: list[int] = field(default_factory=list)
    new_sequence_ns: list[int] = field(default_factory=list)
    outcome: list[int] = field(default_factory=list)  # -1 accepted, else failing position
    rejections: list[Rejection] = field(default_factory=list)
    seconds: float = 0.0
    gc: dict[str, float] = field(default_factory=dict)


class GCMeter:
    """Counts Python garbage collections and their time while active.

    Full (generation 2) collections over large caches show up as isolated
    slow steps; this says how much of the tail they explain.
    """

    def __init__(self) -> None:
        self.collections = 0
        self.full = 0
        self.ns = 0
        self.max_ns = 0
        self._start = 0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
            return
        dt = time.perf_counter_ns() - self._start
        self.collections += 1
        self.full += info.get("generation") == 2
        self.ns += dt
        self.max_ns = max(self.max_ns, dt)

    def __enter__(self) -> GCMeter:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def as_dict(self) -> dict[str, float]:
        return {"collections": self.collections, "full_collections": self.full,
                "total_ms": self.ns / 1e6, "max_ms": self.max_ns / 1e6}


def walk(engine: Engine, compiled: Any, token_lists: Sequence[Sequence[int]],
         labels: Sequence[str], progress: Progress | None = None) -> WalkResult:
    """Run every instance through ``engine``; see the module docstring for what is timed.

    The first mask of each instance is also timed on its own (time to first
    mask). An engine error inside an instance counts as a rejection with
    the error as its reason; the walk goes on.
    """
    res = WalkResult()
    bitmask = engine.allocate_bitmask()
    gc.collect()
    start = time.perf_counter()
    with GCMeter() as meter:
        for idx, toks in enumerate(token_lists):
            t0 = time.perf_counter_ns()
            seq = engine.new_sequence(compiled)
            res.new_sequence_ns.append(time.perf_counter_ns() - t0)
            failed_at, reason = _walk_one(seq, toks, bitmask, res)
            res.instances += 1
            if failed_at is None:
                res.accepted += 1
                res.outcome.append(-1)
            else:
                res.rejections.append(Rejection(labels[idx], failed_at, reason))
                res.outcome.append(failed_at)
            if progress is not None:
                progress.update(idx + 1)
    res.seconds = time.perf_counter() - start
    res.gc = meter.as_dict()
    res.tokens = len(res.steps_ns)
    return res


def _walk_one(seq: SequenceOps, toks: Sequence[int], bitmask: Any,
              res: WalkResult) -> tuple[int | None, str]:
    """One instance: None when accepted, else (first failing token position, reason).

    The position is ``len(toks)`` when every token was taken but the end is
    not accepting.
    """
    perf = time.perf_counter_ns
    row = bitmask[0]
    steps = res.steps_ns
    fill, accept = seq.fill, seq.accept
    n = len(toks)
    pos = 0
    bit = 1
    ok = True
    try:
        # Step 0, with the fill timed on its own as well (time to first mask).
        t0 = perf()
        fill(bitmask)
        t1 = perf()
        if n:
            tok = toks[0]
            bit = (int(row[tok >> 5]) >> (tok & 31)) & 1
            ok = bool(bit and accept(tok))
            steps.append(perf() - t0)
        res.first_mask_ns.append(t1 - t0)
        while ok and pos + 1 < n:
            pos += 1
            tok = toks[pos]
            t0 = perf()
            fill(bitmask)
            bit = (int(row[tok >> 5]) >> (tok & 31)) & 1
            ok = bool(bit and accept(tok))
            steps.append(perf() - t0)
        if not ok:
            reason = "masked" if not bit else "refused"
            err = seq.error()
            return pos, f"{reason}: {err}" if err else reason
        pos = n
        if not seq.is_accepting():
            return n, "not accepting"
    except AutomaskError as e:
        return pos, f"error: {type(e).__name__}: {e}"
    return None, ""


# ----------------------------------------------------------------------------- grammar bench


@dataclass
class EngineReport:
    """Everything measured for one engine; ``as_dict`` is the JSON form."""

    engine: str
    version: str
    vocab_index_ms: float | None = None
    parse_ms: float | None = None
    compile_ns: list[int] = field(default_factory=list)
    walk: WalkResult | None = None
    memory: dict[str, Any] | None = None
    error: str | None = None

    @property
    def compile_ms(self) -> dict[str, Any]:  # floats (None: none), "all": a list
        cold = self.compile_ns[0] / 1e6 if self.compile_ns else None
        s = summarize(self.compile_ns, 1e6)
        return {"cold": cold, "median": s.p50, "p99": s.p99, "max": s.max,
                "all": [c / 1e6 for c in self.compile_ns]}

    def step_stats(self) -> Summary:
        return summarize(self.walk.steps_ns if self.walk else [])

    def ttfm_stats(self) -> Summary:
        return summarize(self.walk.first_mask_ns if self.walk else [])

    def as_dict(self, max_rejections: int = 10_000) -> dict[str, Any]:
        w = self.walk
        out: dict[str, Any] = {
            "engine": self.engine,
            "version": self.version,
            "error": self.error,
            "vocab_index_build_ms": self.vocab_index_ms,
            "grammar_parse_ms": self.parse_ms,
            "compile_ms": self.compile_ms,
        }
        if w is not None:
            out.update({
                "instances": w.instances,
                "accepted": w.accepted,
                "rejected": w.instances - w.accepted,
                "tokens": w.tokens,
                "walk_seconds": w.seconds,
                "gc_during_walk": w.gc,
                "mask_commit_us": self.step_stats().as_dict(),
                "first_mask_us": self.ttfm_stats().as_dict(),
                "new_sequence_us": summarize(w.new_sequence_ns).as_dict(),
                "rejections": [r.as_dict() for r in w.rejections[:max_rejections]],
                "rejections_truncated": len(w.rejections) > max_rejections,
            })
        if self.memory is not None:
            out["memory"] = self.memory
        return out


def bench_engine(engine: Engine, spec: GrammarSpec, tokenizer_path: str, vocab: Any,
                 token_lists: Sequence[Sequence[int]], labels: Sequence[str],
                 repeat_compile: int) -> EngineReport:
    """Prepare, parse, compile ``repeat_compile`` times, walk, and measure memory."""
    rep = EngineReport(engine.name, engine.version)
    t0 = time.perf_counter_ns()
    engine.prepare(tokenizer_path, vocab)
    rep.vocab_index_ms = (time.perf_counter_ns() - t0) / 1e6
    t0 = time.perf_counter_ns()
    parsed = engine.parse(spec)
    rep.parse_ms = (time.perf_counter_ns() - t0) / 1e6
    compiled = None
    for _ in range(max(1, repeat_compile)):
        compiled = None  # drop the previous one first: each compile starts from nothing
        t0 = time.perf_counter_ns()
        compiled = engine.compile(parsed)
        rep.compile_ns.append(time.perf_counter_ns() - t0)
    progress = Progress(f"bench grammar: {engine.name} walk", len(token_lists))
    try:
        rep.walk = walk(engine, compiled, token_lists, labels, progress)
    finally:
        progress.close()
    rep.memory = engine.memory(compiled)
    return rep


def compare(base: WalkResult, other: WalkResult, labels: Sequence[str],
            limit: int = 50) -> dict[str, Any]:
    """Instances where two engines disagree (accepted or not, or where they refuse)."""
    diffs = [i for i, (a, b) in enumerate(zip(base.outcome, other.outcome, strict=True)) if a != b]

    def show(o: int) -> str:
        return "accepted" if o < 0 else f"rejected at token {o}"

    return {
        "disagreements": len(diffs),
        "examples": [{"instance": labels[i], "ours": show(base.outcome[i]),
                      "theirs": show(other.outcome[i])} for i in diffs[:limit]],
    }


def run_grammar_bench(spec: GrammarSpec, tokenizer_path: str, instances_path: str, *,
                      peers: Sequence[Engine] = (), limit: int | None = None,
                      repeat_compile: int = 5, stream: TextIO | None = None) -> dict[str, Any]:
    """The whole ``bench grammar`` run; returns the JSON-ready result and prints the table."""
    from automask.bench.peers import AutomaskEngine
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    t0 = time.perf_counter_ns()
    vocab = Vocabulary.from_file(tokenizer_path)
    vocab_load_ms = (time.perf_counter_ns() - t0) / 1e6
    instances = load_instances(instances_path, limit)
    if not instances:
        raise BenchInputError(f"{instances_path}: no instances")
    labels = [inst.label for inst in instances]
    t0 = time.perf_counter_ns()
    token_lists = [vocab.encode(inst.text) for inst in instances]
    tokenize_ms = (time.perf_counter_ns() - t0) / 1e6

    reports = [bench_engine(AutomaskEngine(), spec, tokenizer_path, vocab, token_lists, labels,
                            repeat_compile)]
    for peer in peers:
        try:
            reports.append(bench_engine(peer, spec, tokenizer_path, vocab, token_lists, labels,
                                        repeat_compile))
        except PeerError as e:
            reports.append(EngineReport(peer.name, peer.version, error=str(e)))

    result: dict[str, Any] = {
        "command": "bench grammar",
        "automask_version": reports[0].version,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "grammar": {"kind": spec.kind, "source": spec.label},
        "tokenizer": tokenizer_path,
        "vocab_size": vocab.size,
        "vocab_load_ms": vocab_load_ms,
        "instances_file": instances_path,
        "limit": limit,
        "repeat_compile": repeat_compile,
        "tokenize_ms": tokenize_ms,
        "timing": "time.perf_counter_ns around fill bitmask + check the token's bit + commit",
        "engines": [r.as_dict() for r in reports],
    }
    if reports[0].walk is not None:
        result["agreement"] = {
            r.engine: compare(reports[0].walk, r.walk, labels)
            for r in reports[1:] if r.walk is not None
        }
    print_grammar_table(result, reports, out)
    return result


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def print_grammar_table(result: dict[str, Any], reports: Sequence[EngineReport],
                        out: TextIO) -> None:
    p = printer(out)
    p(f"grammar:    {result['grammar']['source']} ({result['grammar']['kind']})")
    p(f"tokenizer:  {result['tokenizer']} ({result['vocab_size']} ids, "
      f"loaded in {result['vocab_load_ms']:.0f} ms)")
    p(f"instances:  {result['instances_file']} (limit {result['limit'] or 'none'}, "
      f"tokenized in {result['tokenize_ms']:.0f} ms)")
    for r in reports:
        p(f"{r.engine} {r.version}: vocabulary index build {_f(r.vocab_index_ms)} ms, "
          f"grammar parse {_f(r.parse_ms, 2)} ms"
          + (f", walk {r.walk.seconds:.1f} s (Python GC {r.walk.gc['total_ms']:.0f} ms in "
             f"{r.walk.gc['collections']} collections, {r.walk.gc['full_collections']} full, "
             f"longest {r.walk.gc['max_ms']:.0f} ms)" if r.walk else ""))
    p("")
    header = ["engine", "compile cold ms", "compile med ms", "compile p99 ms", "instances",
              "accepted", "rejected", "tokens", "mean µs", "p50 µs", "p99 µs", "max µs",
              "TTFM p50 µs", "memory MB"]
    rows = []
    for r in reports:
        if r.error:
            rows.append([r.engine, f"error: {r.error}"])
            continue
        c = r.compile_ms
        w = r.walk
        s = r.step_stats()
        mem = r.memory.get("memory_mb") if r.memory else None
        rows.append([r.engine, _f(c["cold"], 2), _f(c["median"], 2), _f(c["p99"], 2),
                     str(w.instances if w else 0), str(w.accepted if w else 0),
                     str(w.instances - w.accepted if w else 0), str(w.tokens if w else 0),
                     _f(s.mean), _f(s.p50), _f(s.p99), _f(s.max),
                     _f(r.ttfm_stats().p50), _f(mem)])
    p(format_table(header, rows))
    for r in reports:
        if r.walk and r.walk.rejections:
            first = ", ".join(f"{x.label} @{x.position} ({x.reason[:40]})"
                              for x in r.walk.rejections[:3])
            p(f"{r.engine} rejections ({len(r.walk.rejections)}), first: {first}")
    for name, agr in result.get("agreement", {}).items():
        p(f"automask vs {name}: {agr['disagreements']} instances with a different outcome")
        for ex in agr["examples"][:5]:
            p(f"  {ex['instance']}: automask {ex['ours']}, {name} {ex['theirs']}")
    if reports[0].memory:
        p(f"memory MB: {reports[0].memory['method']}; vocabulary index "
          f"{reports[0].memory['vocab_index_mb']:.1f} MB on its own")


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Right-aligned columns (left for the first); error rows span the rest."""
    widths = [len(h) for h in header]
    for row in rows:
        if len(row) == len(header):
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def fmt(row: Sequence[str]) -> str:
        if len(row) != len(header):
            return f"{row[0]:<{widths[0]}}  " + "  ".join(row[1:])
        pairs = zip(row[1:], widths[1:], strict=True)
        cells = [f"{row[0]:<{widths[0]}}"] + [f"{c:>{w}}" for c, w in pairs]
        return "  ".join(cells)

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), sep, *(fmt(r) for r in rows)])


# ----------------------------------------------------------------------------- compile bench


@dataclass
class CompileReport:
    """Compile and first-mask timings of one grammar with one engine."""

    engine: str
    source: str
    kind: str
    parse_ms: float | None = None
    compile_ns: list[int] = field(default_factory=list)
    first_mask_ns: list[int] = field(default_factory=list)  # fresh compile, fresh sequence
    reuse_first_mask_ns: list[int] = field(default_factory=list)  # 2nd sequence, same compile
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        def ms(v: list[int]) -> dict[str, Any]:  # floats (None: none), "all": a list
            return {"cold": v[0] / 1e6 if v else None,
                    "warm_median": median([x / 1e6 for x in v[1:]]),
                    "all": [x / 1e6 for x in v]}

        return {"engine": self.engine, "source": self.source, "kind": self.kind,
                "error": self.error, "grammar_parse_ms": self.parse_ms,
                "compile_ms": ms(self.compile_ns), "first_mask_ms": ms(self.first_mask_ns),
                "reused_first_mask_ms": ms(self.reuse_first_mask_ns)}


def compile_one(engine: Engine, spec: GrammarSpec, repeat: int) -> CompileReport:
    """Parse once; then ``repeat`` times: compile, first mask of a fresh sequence, and
    the first mask of a second sequence on the same compiled grammar (caches warm)."""
    rep = CompileReport(engine.name, spec.label, spec.kind)
    perf = time.perf_counter_ns
    try:
        t0 = perf()
        parsed = engine.parse(spec)
        rep.parse_ms = (perf() - t0) / 1e6
        bitmask = engine.allocate_bitmask()
        for _ in range(max(1, repeat)):
            gc.collect()
            t0 = perf()
            compiled = engine.compile(parsed)
            t1 = perf()
            seq = engine.new_sequence(compiled)
            t2 = perf()
            seq.fill(bitmask)
            t3 = perf()
            again = engine.new_sequence(compiled)
            t4 = perf()
            again.fill(bitmask)
            t5 = perf()
            rep.compile_ns.append(t1 - t0)
            rep.first_mask_ns.append(t3 - t2)
            rep.reuse_first_mask_ns.append(t5 - t4)
            del compiled, seq, again
    except AutomaskError as e:
        rep.error = f"{type(e).__name__}: {e}"
    return rep


def run_compile_bench(specs: Sequence[GrammarSpec], tokenizer_path: str, *,
                      peers: Sequence[Engine] = (), repeat: int = 5,
                      stream: TextIO | None = None) -> dict[str, Any]:
    """The whole ``bench compile`` run; returns the JSON-ready result and prints the table."""
    from automask.bench.peers import AutomaskEngine
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    t0 = time.perf_counter_ns()
    vocab = Vocabulary.from_file(tokenizer_path)
    vocab_load_ms = (time.perf_counter_ns() - t0) / 1e6
    engines: list[Engine] = [AutomaskEngine(), *peers]
    index_ms: dict[str, float | None] = {}
    ready: list[Engine] = []
    engine_errors: dict[str, str] = {}
    for eng in engines:
        t0 = time.perf_counter_ns()
        try:
            eng.prepare(tokenizer_path, vocab)
        except PeerError as e:
            engine_errors[eng.name] = str(e)
            continue
        index_ms[eng.name] = (time.perf_counter_ns() - t0) / 1e6
        ready.append(eng)
    jobs = [(spec, eng) for spec in specs for eng in ready]
    bar = Progress("bench compile", len(jobs))
    reports = []
    try:
        for n, (spec, eng) in enumerate(jobs):
            bar.update(n)
            reports.append(compile_one(eng, spec, repeat))
    finally:
        bar.close()

    p = printer(out)
    p(f"tokenizer: {tokenizer_path} ({vocab.size} ids, loaded in {vocab_load_ms:.0f} ms)")
    for name, ms in index_ms.items():
        p(f"{name}: vocabulary index build {_f(ms)} ms (once per vocabulary, not in compile)")
    for name, err in engine_errors.items():
        p(f"{name}: error: {err}")
    p(f"compile and first mask: cold = first in this process, warm = median of the next "
      f"{max(1, repeat) - 1}; reused = first mask of a 2nd sequence on the same compile")
    p("")
    header = ["grammar", "engine", "parse ms", "compile cold ms", "compile warm ms",
              "1st mask cold ms", "1st mask warm ms", "1st mask reused ms"]
    rows = []
    for r in reports:
        name = _short(r.source)
        if r.error:
            rows.append([name, r.engine, f"error: {r.error}"])
            continue
        d = r.as_dict()
        rows.append([name, r.engine, _f(r.parse_ms, 2),
                     _f(d["compile_ms"]["cold"], 2), _f(d["compile_ms"]["warm_median"], 2),
                     _f(d["first_mask_ms"]["cold"], 3), _f(d["first_mask_ms"]["warm_median"], 3),
                     _f(d["reused_first_mask_ms"]["warm_median"], 3)])
    p(format_table(header, rows))
    return {
        "command": "bench compile",
        "automask_version": engines[0].version,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "tokenizer": tokenizer_path,
        "vocab_size": vocab.size,
        "vocab_load_ms": vocab_load_ms,
        "vocab_index_build_ms": index_ms,
        "engine_errors": engine_errors,
        "repeat": repeat,
        "results": [r.as_dict() for r in reports],
    }


def _short(label: str, width: int = 40) -> str:
    if not label.startswith("regex "):
        label = os.path.basename(label)
    return label if len(label) <= width else label[: width - 1] + "…"


def check_limits(result: dict[str, Any], max_compile_ms: float | None,
                 max_first_mask_ms: float | None) -> list[str]:
    """Failures of ``bench compile`` results against cold-time budgets (automask rows only)."""
    fails = []
    for r in result["results"]:
        if r["engine"] != "automask":
            continue
        if r["error"]:
            fails.append(f"{r['source']}: {r['error']}")
            continue
        comp = r["compile_ms"]["cold"]
        fm = r["first_mask_ms"]["cold"]
        if max_compile_ms is not None and comp > max_compile_ms:
            fails.append(f"{r['source']}: cold compile {comp:.2f} ms > {max_compile_ms} ms")
        if max_first_mask_ms is not None and fm > max_first_mask_ms:
            fails.append(f"{r['source']}: cold first mask {fm:.3f} ms > {max_first_mask_ms} ms")
    return fails
