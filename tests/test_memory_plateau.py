"""Memory that a stream of distinct schemas leaves behind stays bounded (issue 29, item 2).

A server compiles a new schema per request for weeks. Regex nodes are interned
weakly (see :mod:`automask.regex.nodes`): a node lives while a live grammar, a
bounded cache or the ring of recently made nodes holds it, and goes with its
memos; uids are never reused. The plateau test runs in a subprocess (a fresh
process: its tables hold only what that run made), with a small ring and a small
shared-scan budget so that both are full within a few hundred schemas, and checks
that the tables stop growing once they are; the same run keeping every grammar
alive (what the strong tables amounted to) grows linearly, so the check has teeth.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading

from automask.regex import nodes as rx

PLATEAU_SCRIPT = r"""
import functools, gc, json, sys
from automask import Grammar, Matcher, allocate_bitmask, compile
from automask.engine import masks
from automask.engine.compiled import root_tokens
from automask.regex import nodes as rx
from automask.vocab import Vocabulary

path, mode, count, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# The bounded holders of nodes made small, so that each is full within the run: the ring
# of recent nodes and the shared scans. The front ends' LRU caches (regex classes and
# patterns, number ranges, text_except: up to 4,096 entries each) are emptied before
# each sample instead: what is left is what the tables under test hold.
rx.keep_recent(2000)
masks.SHARED_SCAN_BYTES = 1 << 20
vocab = Vocabulary.from_file(path)
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
    compiled = compile(Grammar.from_json_schema(schema(i)), vocab)
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
        shared = root_tokens(vocab).shared_scans
        samples.append({"schemas": i, **rx.table_sizes(), "shared_scans": len(shared),
                        "shared_scan_bytes": shared.used})
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
    the full shared scans hold). Keeping every grammar alive instead, which is what the
    strong tables amounted to (no node was ever freed), grows the nodes at least 1.6x
    (measured: ~60 per schema, 19k after 300 and 37k after 600)."""
    dropped = _plateau_run(tiny_bpe_path, "drop")
    for table in ("nodes", "uid_keyed"):
        assert dropped[600][table] <= 1.2 * dropped[300][table], (table, dropped)
    assert dropped[600]["recent"] == 2000
    kept = _plateau_run(tiny_bpe_path, "keep")
    assert kept[600]["nodes"] >= 1.6 * kept[300]["nodes"], kept
    assert kept[600]["nodes"] > 4 * dropped[600]["nodes"]


def test_a_freed_node_is_made_again_with_a_new_uid():
    """Interning is weak and uids are never reused: a node made again after its last holder
    let go is a new node (new uid, empty memos), equal in what it matches."""
    rx.keep_recent(0)
    try:
        def build():
            return rx.concat(rx.literal(b'"memory-plateau-'), rx.plus(rx.byte_range(0x30, 0x39)),
                             rx.literal(b'"'))

        node = build()
        assert build() is node  # hash-consed while alive
        uid, derived = node.uid, rx.derive(node, ord('"'))
        del node, derived
        gc.collect()
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
        gc.collect()
        d2 = digits_after(again)
        assert d2.uid > d_uid and rx.matches(d2, b'7"') and rx.matches(d2, b'"')
        assert digits_after(again) is d2
    finally:
        rx.keep_recent(rx.RECENT_NODES)


def test_nodes_built_and_dropped_by_threads_stay_interned():
    """8 threads build, derive and drop the same family of nodes while others free them:
    whatever any thread holds is the one node of its key (identity), and derivatives agree."""
    rx.keep_recent(0)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(t: int) -> None:
        try:
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
        except BaseException as e:  # (reported below)
            errors.append(e)

    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        rx.keep_recent(rx.RECENT_NODES)
    assert not errors, errors[0]
