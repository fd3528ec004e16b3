"""``automask bench batch``: one bitmask for a batch of sequences, each under its own schema.

What an engine's decode step asks of a grammar backend (vLLM's logits
processor, SGLang's batch): B sequences, each with a different MaskBench
schema, advance together; at every step one call fills every row of one
bitmask, then each sequence commits its next token. The tokens are those of
a valid instance of each schema (``json.dumps``, tokenized without special
tokens), so the walk is the one a model writing that instance would take.

Per level B, every engine takes schemas from the same pool in the same
order, compiled fresh for the level (no mask computed at an earlier level is
reused). A sequence whose
instance ends leaves its row to the next schema of the pool, so the batch
stays full and the steps keep meeting cold masks, as a server's would; the
level stops after ``steps`` steps or when the pool runs dry. Timed per step:
the batch fill (ours: :func:`automask.fill_bitmasks`, one thread, the GIL;
llguidance: ``fill_next_token_bitmask_par`` on its Rust thread pool, as
many threads as its executor takes by default unless ``threads`` is given)
and, separately, the commits. Compile time is not timed here, and neither
is each grammar's first mask, which an engine computes with the compile
before the request joins the batch (``bench maskbench`` reports both).
"""

from __future__ import annotations

import gc
import json
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from automask.bench.maskbench import load_records
from automask.bench.peers import (
    AutomaskEngine,
    Engine,
    GrammarSpec,
    PeerError,
    prepare_engines,
)
from automask.bench.stats import printer, summarize, text_table
from automask.errors import AutomaskError

LEVELS = (1, 16, 64, 256)
SLOW_STEP_MS = 5.0
#: targets at B = 64 (issue: engines): p50 within 2x llguidance's, p99 at most 20 ms
TARGET_B = 64
TARGET_P50_RATIO = 2.0
TARGET_P99_MS = 20.0
#: the automask rows: one thread (fill_bitmasks), and a MatcherPool of worker processes
POOL_ENGINE = "automask-pool"
OURS = ("automask", POOL_ENGINE)


@dataclass
class Walk:
    """One schema's instance: its compiled-grammar input and its token ids."""

    record_id: str
    spec: GrammarSpec
    ids: tuple[int, ...]


@dataclass
class LevelResult:
    engine: str
    batch: int
    fill_ns: list[int] = field(default_factory=list)
    commit_ns: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # sequences in each step's batch
    refused: list[str] = field(default_factory=list)  # schemas whose walk the engine refused
    compile_errors: int = 0
    sequences: int = 0

    def summary(self) -> dict[str, Any]:
        fill = summarize(self.fill_ns, 1e6)
        commit = summarize(self.commit_ns, 1e6)
        slow = float(np.mean(np.asarray(self.fill_ns) > SLOW_STEP_MS * 1e6)) \
            if self.fill_ns else None
        return {"engine": self.engine, "batch": self.batch, "steps": len(self.fill_ns),
                "mean_rows": float(np.mean(self.rows)) if self.rows else None,
                "fill_ms": fill.as_dict(), "commit_ms": commit.as_dict(),
                "share_over_5ms": slow, "sequences": self.sequences,
                "refused": len(self.refused), "refused_ids": sorted(self.refused),
                "compile_errors": self.compile_errors}


class _Batch:
    """One engine's batch operations: a sequence from a compiled grammar, the batch fill,
    the commits of a step."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def open(self, spec: GrammarSpec, scratch: np.ndarray) -> Any:
        """A sequence under ``spec``, its grammar compiled and its first mask computed: that
        belongs to compiling, as in an engine that compiles a request's grammar before the
        request joins the batch (vLLM, SGLang, automask serve)."""
        grammar = self.engine.compile(self.engine.parse(spec))
        self.fill([self.new(grammar)], scratch, [0])
        return self.new(grammar)

    def close(self, sequence: Any) -> None:
        """The sequence's walk ended: its row goes to the next schema."""

    def allocate(self, batch: int, width: int) -> np.ndarray:
        return np.zeros((batch, (width + 31) // 32), dtype=np.int32)

    def new(self, compiled: Any) -> Any:
        raise NotImplementedError

    def fill(self, sequences: Sequence[Any], bitmask: np.ndarray, rows: Sequence[int]) -> None:
        raise NotImplementedError

    def commit(self, steps: Sequence[tuple[Any, int]]) -> list[bool]:
        """Each ``(sequence, token)``'s commit: whether the token was accepted."""
        return [self.commit_one(seq, token) for seq, token in steps]

    def commit_one(self, sequence: Any, token: int) -> bool:
        raise NotImplementedError


class _AutomaskBatch(_Batch):
    def new(self, compiled: Any) -> Any:
        from automask.engine.matcher import Matcher

        return Matcher(compiled)

    def fill(self, sequences: Sequence[Any], bitmask: np.ndarray, rows: Sequence[int]) -> None:
        from automask.engine.batch import fill_bitmasks

        fill_bitmasks(sequences, bitmask, rows)

    def commit_one(self, sequence: Any, token: int) -> bool:
        return sequence.accept_token(token)


class _AutomaskPoolBatch(_Batch):
    """automask's sequences in a :class:`~automask.engine.pool.MatcherPool` of ``workers``
    processes: a sequence is a handle; the fill and the commits are one round each."""

    def __init__(self, engine: AutomaskEngine, workers: int):
        super().__init__(engine)
        from automask.engine.pool import MatcherPool

        self._options = dict(engine.schema_options)
        self.pool = MatcherPool(engine.vocab, workers=workers, max_batch=max(LEVELS),
                                warm_up=self._options["whitespace"] if engine.warm_up else None)

    def open(self, spec: GrammarSpec, scratch: np.ndarray) -> Any:
        from automask.bench.peers import grammar_of

        return self.pool.add(grammar_of, spec, self._options)

    def close(self, sequence: Any) -> None:
        self.pool.remove([sequence])

    def allocate(self, batch: int, width: int) -> np.ndarray:
        bitmask = self.pool.allocate_bitmask(batch)  # the workers write it in place
        bitmask[:] = 0
        return bitmask

    def fill(self, sequences: Sequence[Any], bitmask: np.ndarray, rows: Sequence[int]) -> None:
        self.pool.fill(bitmask, sequences, rows)

    def commit(self, steps: Sequence[tuple[Any, int]]) -> list[bool]:
        return self.pool.accept(steps)


class _LLGuidanceBatch(_Batch):
    def __init__(self, engine: Engine, threads: int | None):
        super().__init__(engine)
        import llguidance
        import llguidance.numpy

        self._executor = llguidance.LLExecutor(num_threads=threads)
        self._fill = llguidance.numpy.fill_next_token_bitmask_par

    def new(self, compiled: Any) -> Any:
        return compiled.deep_copy()

    def fill(self, sequences: Sequence[Any], bitmask: np.ndarray, rows: Sequence[int]) -> None:
        self._fill(self._executor, list(zip(sequences, rows, strict=True)), bitmask)

    def commit_one(self, sequence: Any, token: int) -> bool:
        return bool(sequence.consume_token(token)) and not sequence.is_error()


def batch_ops(name: str, engine: Engine, threads: int | None) -> _Batch:
    if name == "automask":
        return _AutomaskBatch(engine)
    if name == "llguidance":
        return _LLGuidanceBatch(engine, threads)
    raise PeerError(f"bench batch has no batch fill for {name!r} (automask, llguidance)")


def load_walks(data_path: str, vocab: Any, count: int, seed: int) -> list[Walk]:
    """``count`` schemas in a seeded order, each with its first valid instance's tokens."""
    records = load_records(data_path)
    random.Random(seed).shuffle(records)
    walks: list[Walk] = []
    for rec in records:
        valid = [t for t in rec["tests"] if t.get("valid")]
        if not valid:
            continue
        text = json.dumps(valid[0]["data"], ensure_ascii=False)
        ids = tuple(vocab.encode(text))
        if ids:
            walks.append(Walk(rec["id"], GrammarSpec("json", json.dumps(rec["schema"]),
                                                     rec["id"]), ids))
        if len(walks) == count:
            break
    return walks


def run_level(name: str, ops: _Batch, walks: Sequence[Walk], batch: int, steps: int,
              width: int) -> LevelResult:
    """One engine at one batch size: fill, commit, refill rows (see the module docstring)."""
    result = LevelResult(name, batch)
    pool = iter(walks)
    scratch = np.zeros((1, (width + 31) // 32), dtype=np.int32)
    bitmask = ops.allocate(batch, width)
    # per row: [walk, sequence, position], or None once the pool is dry
    live: list[list[Any] | None] = [None] * batch

    def refill(row: int) -> None:
        for walk in pool:
            try:
                live[row] = [walk, ops.open(walk.spec, scratch), 0]
                result.sequences += 1
                return
            except AutomaskError:  # a schema this engine does not compile: the next one
                result.compile_errors += 1
        live[row] = None

    for row in range(batch):
        refill(row)
    gc.collect()
    for _ in range(steps):
        rows = [r for r in range(batch) if live[r] is not None]
        if not rows:
            break
        sequences = [live[r][1] for r in rows]  # type: ignore[index]
        t0 = time.perf_counter_ns()
        ops.fill(sequences, bitmask, rows)
        t1 = time.perf_counter_ns()
        done: list[int] = []
        moving: list[int] = []
        for r in rows:
            walk, seq, pos = live[r]  # type: ignore[misc]
            token = walk.ids[pos]
            if (int(bitmask[r, token >> 5]) >> (token & 31)) & 1:
                moving.append(r)
            else:
                result.refused.append(walk.record_id)
                done.append(r)
        accepted = ops.commit([(live[r][1], live[r][0].ids[live[r][2]])  # type: ignore[index]
                               for r in moving])
        for r, ok in zip(moving, accepted, strict=True):
            walk, seq, pos = live[r]  # type: ignore[misc]
            if not ok:
                result.refused.append(walk.record_id)
                done.append(r)
                continue
            live[r][2] = pos + 1  # type: ignore[index]
            if pos + 1 == len(walk.ids):
                done.append(r)
        t2 = time.perf_counter_ns()
        result.fill_ns.append(t1 - t0)
        result.commit_ns.append(t2 - t1)
        result.rows.append(len(rows))
        for r in done:
            ops.close(live[r][1])  # type: ignore[index]
            refill(r)
    return result


def default_workers() -> int:
    """A MatcherPool's processes for the bench: one per CPU (as llguidance's executor
    takes one thread per CPU), or none on one CPU, where a pool has nothing to gain."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 0 if not cpus or cpus < 2 else min(cpus, 8)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def run_batch_bench(data_path: str, tokenizer_path: str, *, levels: Sequence[int] = LEVELS,
                    steps: int = 100, pool: int | None = None, seed: int = 0,
                    peers: Sequence[str] = ("llguidance",), threads: int | None = None,
                    workers: int = 0, stream: TextIO | None = None) -> dict[str, Any]:
    """The whole ``bench batch`` run: every engine at every level, on the same schemas.

    ``workers``: also run automask's sequences in a MatcherPool of that many
    processes (the ``automask-pool`` rows); 0 for none."""
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    p = printer(out)
    vocab = Vocabulary.from_file(tokenizer_path)
    # Enough schemas to keep the largest batch full for every step, whatever their lengths.
    pool = pool or max(levels) + max(levels) * steps // 40 + 16
    walks = load_walks(data_path, vocab, pool, seed)
    ready, entries = prepare_engines(peers, tokenizer_path, vocab, p)
    gc.collect()
    gc.freeze()  # the harness's data stays out of every timed collection
    p(f"bench batch: {len(walks)} schemas from {data_path}, tokenizer {tokenizer_path} "
      f"({vocab.size} ids), {steps} steps per level, llguidance's executor on "
      f"{threads or 'its default number of'} threads")
    engines: list[tuple[str, Engine]] = list(ready.items())
    pool_ops = None
    one_process = ready.get("automask")
    if workers and isinstance(one_process, AutomaskEngine):
        pool_ops = _AutomaskPoolBatch(one_process, workers)
        engines.insert(1, (POOL_ENGINE, one_process))
        entries[POOL_ENGINE] = dict(entries["automask"], engine=POOL_ENGINE, workers=workers)
    results: list[LevelResult] = []
    try:
        for batch in levels:
            for name, engine in engines:
                try:
                    ops = pool_ops if name == POOL_ENGINE else batch_ops(name, engine, threads)
                except (PeerError, ImportError) as e:
                    entries[name]["error"] = str(e)
                    continue
                level = run_level(name, ops, walks, batch, steps, vocab.size)  # type: ignore[arg-type]
                results.append(level)
                s = level.summary()
                p(f"  B={batch:<4d} {name:<13s} fill p50 {_fmt(s['fill_ms']['p50'])} ms, "
                  f"p99 {_fmt(s['fill_ms']['p99'])} ms over {s['steps']} steps")
    finally:
        if pool_ops is not None:
            pool_ops.pool.close()
    summaries = [r.summary() for r in results]
    rows = [[s["engine"], s["batch"], s["steps"], _fmt(s["mean_rows"], 1),
             _fmt(s["fill_ms"]["p50"], 3), _fmt(s["fill_ms"]["p99"], 3),
             _fmt(s["fill_ms"]["max"], 3),
             "-" if s["share_over_5ms"] is None else f"{100 * s['share_over_5ms']:.1f}%",
             _fmt(s["commit_ms"]["p50"], 3), s["sequences"], s["refused"], s["compile_errors"]]
            for s in summaries]
    p(text_table(["engine", "B", "steps", "rows", "fill p50", "p99", "max", ">5ms",
                  "commit p50", "seqs", "refused", "no compile"], rows))
    p("(fill and commit in ms per step for the whole batch; rows: sequences per step)")
    ratios = _ratios(summaries)
    for (ours, batch), ratio in ratios.items():
        p(f"  B={batch}: {ours}/llguidance fill p50 {ratio['p50']:.2f}x, "
          f"p99 {ratio['p99']:.2f}x")
    targets = _targets(summaries, ratios)
    for line in targets:
        p(f"  target: {line['text']}: {'met' if line['met'] else 'NOT met'}")
    return {"command": "bench batch", "python": platform.python_version(),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
            "data": data_path, "tokenizer": tokenizer_path, "vocab_size": vocab.size,
            "steps": steps, "pool": len(walks), "seed": seed, "threads": threads,
            "workers": workers, "engines": entries, "levels": summaries,
            "ratios": [dict(engine=e, batch=b, **r) for (e, b), r in ratios.items()],
            "targets": targets}


def _ratios(summaries: Sequence[dict]) -> dict[tuple[str, int], dict[str, float]]:
    """Each automask row's fill p50 and p99 over llguidance's at the same B."""
    by = {(s["engine"], s["batch"]): s for s in summaries}
    out: dict[tuple[str, int], dict[str, float]] = {}
    for (engine, batch), ours in by.items():
        theirs = by.get(("llguidance", batch))
        if engine not in OURS or theirs is None or not theirs["fill_ms"]["p50"]:
            continue
        out[engine, batch] = {"p50": ours["fill_ms"]["p50"] / theirs["fill_ms"]["p50"],
                              "p99": ours["fill_ms"]["p99"] / theirs["fill_ms"]["p99"]}
    return out


def _targets(summaries: Sequence[dict],
             ratios: dict[tuple[str, int], dict[str, float]]) -> list[dict]:
    """The targets at B = 64 (``p99``, ``p50_ratio``), for each automask row."""
    out = []
    for ours in summaries:
        engine = ours["engine"]
        if engine not in OURS or ours["batch"] != TARGET_B:
            continue
        out.append({"engine": engine, "target": "p99", "met":
                    ours["fill_ms"]["p99"] <= TARGET_P99_MS,
                    "text": f"B={TARGET_B}: {engine} fill p99 <= {TARGET_P99_MS:g} ms "
                            f"({_fmt(ours['fill_ms']['p99'])} ms)"})
        if (engine, TARGET_B) in ratios:
            ratio = ratios[engine, TARGET_B]["p50"]
            out.append({"engine": engine, "target": "p50_ratio",
                        "met": ratio <= TARGET_P50_RATIO,
                        "text": f"B={TARGET_B}: {engine} fill p50 <= {TARGET_P50_RATIO:g}x "
                                f"llguidance's ({ratio:.2f}x)"})
    return out


def failed_targets(result: dict[str, Any]) -> list[str]:
    """The targets missed, judged per automask row, since a user runs one of them (one
    thread, or the pool): none if one row meets them all, else the misses of the row
    that misses fewest."""
    misses: dict[str, list[str]] = {}
    for t in result.get("targets", []):
        misses.setdefault(t["engine"], [])
        if not t["met"]:
            misses[t["engine"]].append(t["text"])
    return min(misses.values(), key=len, default=[])
