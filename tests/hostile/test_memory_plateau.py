"""Memory that a stream of distinct schemas leaves behind stays bounded (issue 29, item 2).

A server compiles a new schema per request for weeks. A regex node (see
:mod:`automask.regex.nodes`) lives while a live grammar, a bounded cache or the
ring of recently made nodes holds it, and a sweep frees it with its memos after
that; uids are never reused. The plateau test runs in a subprocess (a fresh
process: its tables hold only what that run made), with a small ring and a small
shared-scan budget so that both are full within a few hundred schemas, and checks
that the tables stop growing once they are; the same run keeping every grammar
alive (what the strong tables amounted to) grows linearly, so the check has teeth.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from support.threads import run_in_threads

from automask.bench import memory_bench
from automask.regex import nodes as rx

PLATEAU_SCRIPT = r"""
import functools, gc, json, sys
from automask import Compiler, Grammar, Matcher, allocate_bitmask
from automask.regex import nodes as rx
from automask.vocab import Vocabulary

path, mode, count, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# The bounded holders of nodes made small, so that each is full within the run: the ring
# of recent nodes and the shared scans. The front ends' LRU caches (regex classes and
# patterns, number ranges, text_except: up to 4,096 entries each) are emptied before
# each sample instead: what is left is what the tables under test hold.
rx.keep_recent(2000)
vocab = Vocabulary.from_file(path)
compiler = Compiler(vocab, cache_limit_bytes=1 << 20)
bitmask = allocate_bitmask(1, vocab.size)


def schema(i):
    return {"type": "object",
            "properties": {f"name{i}": {"type": "string", "maxLength": 5 + i % 7},
                           f"n{i}": {"type": "integer", "minimum": i, "maximum": i + 1000},
                           "kind": {"enum": [f"a{i}", f"b{i}"]},
                           f"tags{i}": {"type": "array",
                                        "items": {"type": "string", "pattern": f"^x{i}[a-z]*$"}}},
            "required": [f"name{i}", f"n{i}", "kind"], "additionalProperties": False}


kept, samples = [], []
for i in range(1, count + 1):
    compiled = compiler.compile(Grammar.from_json_schema(schema(i)))
    matcher = Matcher(compiled)
    text = json.dumps({f"name{i}": "ab", f"n{i}": i + 3, "kind": f"b{i}", f"tags{i}": [f"x{i}q"]})
    for tid in vocab.encode(text):
        matcher.fill_bitmask(bitmask)
        assert (int(bitmask[0][tid >> 5]) >> (tid & 31)) & 1, (i, text)
        assert matcher.accept_token(tid), (i, text)
    assert matcher.is_accepting(), (i, text)
    if mode == "keep":
        kept.append(compiled)
    del compiled, matcher
    if i % every == 0:
        for f in gc.get_objects():
            if isinstance(f, functools._lru_cache_wrapper) and f.__module__.startswith("automask"):
                f.cache_clear()
        gc.collect()
        unswept = rx.node_count()
        rx.sweep()
        stats = compiler.stats()
        samples.append({"schemas": i, **rx.table_sizes(), "unswept": unswept,
                        "shared_scans": stats.entries, "shared_scan_bytes": stats.bytes})
print(json.dumps(samples))
"""


def _plateau_run(tiny_bpe_path, mode: str, count: int = 600, every: int = 100) -> dict:
    out = subprocess.run([sys.executable, "-c", PLATEAU_SCRIPT, str(tiny_bpe_path), mode,
                          str(count), str(every)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return {s["schemas"]: s for s in json.loads(out.stdout.strip().splitlines()[-1])}


def test_interned_tables_plateau_over_distinct_schemas(tiny_bpe_path):
    """600 distinct schemas compiled, walked (every token checked against its mask) and
    dropped: the live nodes and the uid-keyed tables after 600 are at most 1.2x what they
    were after 300 (measured: ~2,400 nodes from 100 schemas on, the ring's 2,000 and what
    the full shared scans hold). So do the tables before the sample's own sweep, kept by
    the sweeps that ran by themselves (measured: ~6,000, the nodes the front ends' caches
    held too, twice over). Keeping every grammar alive instead, which is what the
    strong tables amounted to (no node was ever freed), grows the nodes at least 1.6x
    (measured: ~60 per schema, 19k after 300 and 37k after 600)."""
    dropped = _plateau_run(tiny_bpe_path, "drop")
    for table in ("nodes", "uid_keyed"):
        assert dropped[600][table] <= 1.2 * dropped[300][table], (table, dropped)
    assert dropped[600]["recent"] == 2000
    assert dropped[600]["unswept"] <= 1.2 * dropped[300]["unswept"], dropped
    kept = _plateau_run(tiny_bpe_path, "keep")
    assert kept[600]["nodes"] >= 1.6 * kept[300]["nodes"], kept
    assert kept[600]["nodes"] > 4 * dropped[600]["nodes"]


def test_a_freed_node_is_made_again_with_a_new_uid():
    """Uids are never reused: a node made again after its last holder let go and a sweep
    freed it is a new node (new uid, empty memos), equal in what it matches."""
    rx.keep_recent(0)
    try:
        def build():
            return rx.concat(rx.literal(b'"memory-plateau-'), rx.plus(rx.byte_range(0x30, 0x39)),
                             rx.literal(b'"'))

        node = build()
        assert build() is node  # hash-consed while alive
        uid, derived = node.uid, rx.derive(node, ord('"'))
        del node, derived
        rx.sweep()
        again = build()
        assert again.uid > uid  # a new node: the old uid is gone for good
        assert rx.matches(again, b'"memory-plateau-42"')
        assert not rx.matches(again, b'"memory-plateau-"')
        # a derivative memo whose target was freed is computed again
        def digits_after(node: rx.Node) -> rx.Node:  # [0-9]*" after a digit: held by nothing
            for c in b'"memory-plateau-4':
                node = rx.derive(node, c)
            return node

        d = digits_after(again)
        d_uid = d.uid
        assert rx.matches(d, b'77"') and not rx.matches(d, b"7")
        del d
        rx.sweep()
        d2 = digits_after(again)
        assert d2.uid > d_uid and rx.matches(d2, b'7"') and rx.matches(d2, b'"')
        assert digits_after(again) is d2
    finally:
        rx.keep_recent(rx.RECENT_NODES)


def test_nodes_built_and_dropped_by_threads_stay_interned():
    """8 threads build, derive and drop the same family of nodes while others free them:
    whatever any thread holds is the one node of its key (identity), and derivatives agree."""
    rx.keep_recent(0)
    start = threading.Barrier(8)

    def work(t: int) -> None:
        start.wait()
        for i in range(300):
            word = f"w{i % 37}-{(i * 7 + t) % 11}".encode()
            a = rx.concat(rx.literal(word), rx.star(rx.byte_range(0x61, 0x7A)))
            b = rx.concat(rx.literal(word), rx.star(rx.byte_range(0x61, 0x7A)))
            assert a is b
            d = rx.derive(a, word[0])
            assert d is rx.derive(b, word[0])
            assert rx.matches(a, word + b"abc") and not rx.matches(a, word + b"1")
            assert rx.derive(d, word[1]) is rx.derive(rx.derive(a, word[0]), word[1])

    try:
        errors = run_in_threads(work, 8)
    finally:
        rx.keep_recent(rx.RECENT_NODES)
    assert not errors, errors[0]


def test_memory_bench_helpers():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert memory_bench.repeat_of(schema, 0) is schema
    second = memory_bench.repeat_of(schema, 2)
    assert set(second["properties"]) == {"a", "automask-repeat-2"} and schema["properties"] == {
        "a": {"type": "string"}}
    assert memory_bench.repeat_of({"type": "string"}, 1) is None
    walks = [memory_bench.Walk("o", schema, (1,)), memory_bench.Walk("s", {"type": "string"}, (2,))]
    got = list(memory_bench.distinct_schemas(walks, 5))
    assert [rid for rid, _, _ in got] == ["o", "s", "o#1", "o#2", "o#3"]
    assert len({json.dumps(s, sort_keys=True) for _, s, _ in got}) == 5
    assert len(list(memory_bench.distinct_schemas(walks[1:], 3))) == 1  # nothing repeats
    samples = [{"schemas": n, "rss_mb": rss, "shared_scan_mb": scans, "nodes": nodes}
               for n, rss, scans, nodes in ((0, 100, 0, 3), (1000, 150, 20, 900),
                                            (2000, 170, 30, 1000), (3000, 178, 34, 1100),
                                            (4000, 185, 40, 1200))]
    check = memory_bench.plateau(samples, 10)  # 10 MB per 1,000 schemas: 20 MB here
    assert check["from_schemas"] == 2000 and check["rss_growth_mb"] == 15
    assert check["shared_scan_growth_mb"] == 10 and check["unexplained_mb"] == 5
    assert check["bound_mb"] == 20 and check["nodes_ratio"] == 1.2 and check["flat"]
    assert not memory_bench.plateau(samples, 2)["flat"]  # 5 MB over a bound of 4
    samples[-1]["nodes"] = 1300  # 1.3x the first half's most
    assert not memory_bench.plateau(samples, 10)["flat"]


def test_bench_memory_smoke(shared_data, tmp_path):
    tokenizer = shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json"
    data = shared_data / "maskbench-dev.jsonl.gz"
    if not (tokenizer.exists() and data.exists()):
        pytest.skip("needs ../shared/data (MaskBench dev set and the Llama-3.1 tokenizer)")
    out = tmp_path / "memory.json"
    run = subprocess.run([sys.executable, "-m", "automask.cli", "bench", "memory", "--data",
                          str(data), "--tokenizer", str(tokenizer), "-n", "30", "--every", "10",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "plateau, schemas" in run.stdout
    result = json.loads(out.read_text())
    assert [s["schemas"] for s in result["samples"]] == [0, 10, 20, 30]
    last = result["samples"][-1]
    assert last["pass"] + last["refused"] + last["error"] == 30 and last["pass"] >= 20
    assert last["nodes"] > 0 and last["shared_scans"] > 0 and result["plateau"] is not None
