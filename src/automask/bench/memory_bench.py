"""``automask bench memory``: the memory of a long run that compiles a new schema per request.

A server compiles a grammar for every request's schema, for weeks, in one
process. This bench does the same with N distinct MaskBench schemas, one
after another: each is compiled, walked on the tokens of its first valid
instance (``json.dumps``, tokenized without special tokens: a fill and a
commit per token, as a model writing it would take) and dropped, as a
server drops a finished request's grammar. Every ``every`` schemas it
samples the process's resident memory (RSS), the objects the cyclic
collector tracks, optionally the bytes Python has allocated (tracemalloc,
which slows the run several times), and the module-level tables: regex
nodes alive (interned), the nodes held as recently made, the uid-keyed
tables, the vocabulary's shared token scans (entries and the bytes their
budget counts), canonical token sets and byte tables.

Distinct schemas: the dev set in a seeded order. Past its end, each
schema again with an optional root property ``automask-repeat-K`` added
(K the pass), which changes the root object's key lexemes and leaves the
instance valid; schemas whose root is not an object with ``properties``
are not repeated. A repeat shares its nested parts with its first pass,
so past the dev set fewer new nodes come per schema than before it.

Plateau criterion (``--check``), over the second half of the run (from the
sample at or after N/2 schemas to the last):

- RSS grows by at most what the shared scans' high-water mark grew (the
  bytes their budget counts: that cache fills up to the compiler's
  ``cache_limit_bytes``, 256 MiB by default, however the schemas go, and the allocator keeps
  what it held) plus ``--max-growth-mb`` per 1,000 schemas (default 10 MiB:
  RSS only ever keeps the high-water mark of the heap, so a large schema
  late in the run leaves a step of a few tens of MiB, and the front ends'
  LRU caches (up to 4,096 entries each) are still filling; the unbounded
  tables grew RSS by about 155 MiB per 1,000 dev schemas);
- the regex nodes alive at the end are at most 1.25 times the most alive at
  any sample of the first half.

With the default budget the shared scans fill after about 4,000 dev schemas;
``--shared-scan-mb`` gives them a smaller one, so a shorter run fills it and
the RSS curve itself goes flat sooner.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from automask.bench.maskbench import load_records
from automask.bench.progress import Progress
from automask.bench.stats import printer, text_table
from automask.errors import AutomaskError

if TYPE_CHECKING:
    from automask.engine.compiled import Compiler

DEFAULT_SCHEMAS = 8000
DEFAULT_EVERY = 1000
#: what RSS may grow per 1,000 schemas over the second half, beyond the shared scans' (MiB)
DEFAULT_MAX_GROWTH_MB = 10.0
#: the live nodes at the end, at most this times the first half's most
MAX_NODES_RATIO = 1.25
REPEAT_PROPERTY = "automask-repeat-{}"


@dataclass(frozen=True)
class Walk:
    """One dev schema and the tokens of its first valid instance."""

    record_id: str
    schema: Any
    ids: tuple[int, ...]


def load_walks(data_path: str, vocab: Any, seed: int = 0) -> list[Walk]:
    """Every dev schema with a valid instance, in a seeded order, with that instance's tokens."""
    records = load_records(data_path)
    random.Random(seed).shuffle(records)
    walks = []
    for rec in records:
        valid = [t for t in rec["tests"] if t.get("valid")]
        if not valid:
            continue
        ids = tuple(vocab.encode(json.dumps(valid[0]["data"], ensure_ascii=False)))
        if ids:
            walks.append(Walk(rec["id"], rec["schema"], ids))
    return walks


def repeat_of(schema: Any, k: int) -> Any | None:
    """``schema`` made distinct for its pass ``k`` (0: itself): an optional root property
    named for the pass. None when the root is not an object with ``properties``."""
    if k == 0:
        return schema
    if not (isinstance(schema, dict) and isinstance(schema.get("properties"), dict)):
        return None
    name = REPEAT_PROPERTY.format(k)
    if name in schema["properties"]:
        return None
    out = copy.copy(schema)
    out["properties"] = {**schema["properties"], name: {"type": "integer"}}
    return out


def distinct_schemas(walks: Sequence[Walk], count: int) -> Iterator[tuple[str, Any, tuple]]:
    """``count`` distinct (id, schema, tokens): the walks, then their repeats, pass by pass."""
    made, k = 0, 0
    while made < count:
        produced = 0
        for walk in walks:
            schema = repeat_of(walk.schema, k)
            if schema is None:
                continue
            yield (walk.record_id if k == 0 else f"{walk.record_id}#{k}"), schema, walk.ids
            made += 1
            produced += 1
            if made == count:
                return
        if not produced:
            return  # nothing repeatable: fewer schemas than asked
        k += 1


def run_one(schema: Any, ids: Sequence[int], compiler: Compiler, bitmask) -> str:
    """Compile, walk and drop one schema: ``pass``, ``refused`` (a token masked or not
    accepted) or ``error`` (the schema does not compile, or a limit fired)."""
    from automask.engine.matcher import Matcher
    from automask.grammar.ir import Grammar

    try:
        matcher = Matcher(compiler.compile(Grammar.from_json_schema(schema)))
        row = bitmask[0]
        for tid in ids:
            matcher.fill_bitmask(bitmask)
            if not ((int(row[tid >> 5]) >> (tid & 31)) & 1 and matcher.accept_token(tid)):
                return "refused"
        return "pass"
    except AutomaskError:
        return "error"


def rss_mb() -> float | None:
    """The resident set size now (Linux), in MiB; None where /proc is absent."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


def table_sizes(compiler: Compiler) -> dict[str, Any]:
    """The module-level tables that a stream of schemas could grow, and the compiler's
    shared scans."""
    from automask.engine import lexer, tokens
    from automask.regex import nodes

    sizes: dict[str, Any] = dict(nodes.table_sizes())
    stats = compiler.stats()
    sizes["shared_scans"] = stats.entries
    sizes["shared_scan_mb"] = stats.bytes / 2**20
    sizes["canonical_sets"] = len(tokens._canonical_sets)
    sizes["byte_luts"] = len(lexer._luts)
    return sizes


def sample(done: int, compiler: Compiler, start: float, outcomes: dict[str, int],
           traced: bool) -> dict[str, Any]:
    gc.collect()
    row: dict[str, Any] = {"schemas": done, "seconds": round(time.monotonic() - start, 1),
                           "rss_mb": rss_mb(), "gc_tracked": len(gc.get_objects()),
                           "traced_mb": (tracemalloc.get_traced_memory()[0] / 2**20
                                         if traced else None),
                           **table_sizes(compiler), **outcomes}
    return row


def plateau(samples: Sequence[dict[str, Any]], max_growth_mb: float) -> dict[str, Any] | None:
    """The plateau check over the second half of the run (see the module docstring);
    ``max_growth_mb`` per 1,000 schemas."""
    if len(samples) < 2 or samples[-1]["rss_mb"] is None:
        return None
    last = samples[-1]
    at = next(i for i, s in enumerate(samples) if s["schemas"] * 2 >= last["schemas"])
    at = min(at, len(samples) - 2)
    half, first = samples[at], samples[:at + 1]
    grown = last["rss_mb"] - half["rss_mb"]
    scans = max(max(s["shared_scan_mb"] for s in samples)
                - max(s["shared_scan_mb"] for s in first), 0.0)
    unexplained = grown - scans
    bound = max_growth_mb * (last["schemas"] - half["schemas"]) / 1000
    nodes_before = max(s["nodes"] for s in first)
    return {"from_schemas": half["schemas"], "to_schemas": last["schemas"],
            "rss_growth_mb": round(grown, 1), "shared_scan_growth_mb": round(scans, 1),
            "unexplained_mb": round(unexplained, 1), "bound_mb": round(bound, 1),
            "nodes_first_half_max": nodes_before, "nodes_last": last["nodes"],
            "nodes_ratio": round(last["nodes"] / max(nodes_before, 1), 3),
            "flat": unexplained <= bound and last["nodes"] <= MAX_NODES_RATIO * nodes_before}


def _fmt_row(s: dict[str, Any]) -> list[Any]:
    def mb(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    return [s["schemas"], f"{s['seconds']:.0f}", mb(s["rss_mb"]), mb(s["traced_mb"]),
            s["gc_tracked"], s["nodes"], s["recent"], s["uid_keyed"], s["shared_scans"],
            f"{s['shared_scan_mb']:.1f}", s["canonical_sets"], s["byte_luts"],
            s["pass"], s["refused"], s["error"]]


def run_memory_bench(data_path: str, tokenizer_path: str, *, schemas: int = DEFAULT_SCHEMAS,
                     every: int = DEFAULT_EVERY, seed: int = 0, traced: bool = False,
                     shared_scan_mb: float | None = None,
                     max_growth_mb: float = DEFAULT_MAX_GROWTH_MB,
                     stream: TextIO | None = None) -> dict[str, Any]:
    """The whole ``bench memory`` run; returns the samples and the plateau check."""
    from automask.bitmask import allocate_bitmask
    from automask.engine.compiled import CACHE_LIMIT_BYTES, Compiler
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    p = printer(out)
    vocab = Vocabulary.from_file(tokenizer_path)
    compiler = Compiler(vocab, cache_limit_bytes=CACHE_LIMIT_BYTES if shared_scan_mb is None
                        else int(shared_scan_mb * 2**20))
    walks = load_walks(data_path, vocab, seed)
    bitmask = allocate_bitmask(1, vocab.size)
    p(f"bench memory: {schemas} distinct schemas from {data_path} ({len(walks)} with a valid "
      f"instance, then repeats), tokenizer {tokenizer_path} ({vocab.size} ids), a sample every "
      f"{every}; shared scans budget {compiler.scans.cache.budget / 2**20:.0f} MiB")
    if traced:
        tracemalloc.start()
    outcomes = {"pass": 0, "refused": 0, "error": 0}
    start = time.monotonic()
    samples = [sample(0, compiler, start, outcomes, traced)]
    bar = Progress("bench memory", schemas)
    done = 0
    try:
        for _rid, schema, ids in distinct_schemas(walks, schemas):
            outcomes[run_one(schema, ids, compiler, bitmask)] += 1
            done += 1
            bar.update(done)
            if done % every == 0 or done == schemas:
                samples.append(sample(done, compiler, start, outcomes, traced))
    finally:
        bar.close()
        if traced:
            tracemalloc.stop()
    if samples[-1]["schemas"] != done:
        samples.append(sample(done, compiler, start, outcomes, traced))
    p(text_table(["schemas", "s", "RSS MB", "traced MB", "gc objs", "nodes", "recent",
                  "uid-keyed", "shared scans", "scan MB", "canon sets", "luts", "pass",
                  "refused", "error"], [_fmt_row(s) for s in samples]))
    p("(RSS: resident memory; traced: Python's allocations (--tracemalloc); nodes: regex "
      "nodes alive; recent: of them held as recently made; scan MB: the bytes the "
      "shared scans' budget counts)")
    check = plateau(samples, max_growth_mb)
    if check is not None:
        p(f"plateau, schemas {check['from_schemas']} to {check['to_schemas']}: RSS "
          f"{check['rss_growth_mb']:+.1f} MB, shared scans' high-water mark "
          f"{check['shared_scan_growth_mb']:+.1f} MB, the rest {check['unexplained_mb']:+.1f} MB "
          f"(bound {check['bound_mb']:g} MB); nodes {check['nodes_last']}, "
          f"{check['nodes_ratio']:.2f}x the first half's most (bound {MAX_NODES_RATIO:g}x): "
          f"{'flat' if check['flat'] else 'NOT flat'}")
    return {"command": "bench memory", "python": platform.python_version(),
            "machine": platform.machine(), "data": data_path, "tokenizer": tokenizer_path,
            "vocab_size": vocab.size, "schemas": done, "every": every, "seed": seed,
            "shared_scan_bytes": compiler.scans.cache.budget, "dev_schemas": len(walks),
            "samples": samples, "plateau": check}


def failed_checks(result: dict[str, Any]) -> list[str]:
    """The plateau criterion, as lines for ``--check`` (empty: met)."""
    check = result.get("plateau")
    if check is None:
        return ["no plateau check: too few samples (or no RSS on this platform)"]
    if check["flat"]:
        return []
    return [f"memory grew {check['unexplained_mb']:.1f} MB beyond the shared scans' budget "
            f"from schema {check['from_schemas']} to {check['to_schemas']} "
            f"(bound {check['bound_mb']:g} MB), and the live regex nodes to "
            f"{check['nodes_ratio']:.2f}x the first half's most (bound {MAX_NODES_RATIO:g}x)"]
