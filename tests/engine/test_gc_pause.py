"""The collector pause around compiles: nested, exception-safe, and it never turns on a
collector the user had turned off."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from automask import Grammar
from automask.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def _restore_gc():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_nested_pauses_restore_once():
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still on
    assert gc.isenabled()


def test_exception_restores():
    gc.enable()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("x")
    assert gc.isenabled()


def test_user_disabled_collector_stays_off():
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_compile_pauses_and_restores():
    gc.enable()
    seen = []

    class Probe(dict):
        def get(self, *args):  # read by the compiler while it runs
            seen.append(gc.isenabled())
            return super().get(*args)

    Grammar.from_json_schema(Probe(type="object", properties={"a": {"type": "integer"}}))
    assert seen and not any(seen)
    assert gc.isenabled()


def test_overlapping_threads():
    gc.enable()
    inside, release = threading.Barrier(2), threading.Event()

    def work():
        with paused_gc():
            inside.wait()
            release.wait()

    t = threading.Thread(target=work)
    t.start()
    with paused_gc():
        inside.wait()
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    t.join()
    assert gc.isenabled()


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="untracking is CPython's")
def test_regex_nodes_are_out_of_the_collectors_sight():
    from automask.regex import nodes as rx

    node = rx.concat(rx.literal(b'"k'), rx.alt(rx.literal(b"x"), rx.literal(b"yz")))
    assert not gc.is_tracked(node) and not gc.is_tracked(node.b.items)
    assert not gc.is_tracked(rx._intern) and not gc.is_tracked(rx._by_uid)
    gc.collect()  # nothing they hold is freed: the nodes still work
    assert rx.derive(rx.derive(node, ord('"')), ord("k")) is node.b.b


def test_node_tables_are_untracked_when_a_pause_ends():
    from automask.regex import nodes as rx

    gc.enable()
    with paused_gc():  # nodes made inside leave the tables tracked until the pause ends
        made = [rx.literal(f"fresh-{i}".encode()) for i in range(3)]
    assert not gc.is_tracked(rx._intern) and not gc.is_tracked(rx._by_uid)
    made.append(rx.literal(b"made with the collector on"))
    assert not gc.is_tracked(rx._intern) and not gc.is_tracked(rx._by_uid)
    assert rx.derive(made[0], ord("f")) is made[0].b


def test_untracked_objects_keep_what_they_hold_alive():
    from automask.gc_pause import untrack

    holder = [[1, 2]]
    untrack(holder)
    gc.collect()
    assert holder == [[1, 2]]


def test_untrack_untracks_once_and_for_all():
    from automask.engine import COMPILED
    from automask.gc_pause import untrack

    # the compiled engine's build adds the C function (setup.py); else it goes by ctypes
    assert (getattr(untrack, "__module__", None) == "automask._untrack") is COMPILED
    held = [[1], {"a": [2]}]
    for obj in (held, held[1], (held,)):
        assert gc.is_tracked(obj)
        untrack(obj)
        assert not gc.is_tracked(obj)
        untrack(obj)  # again: no change
        assert not gc.is_tracked(obj)


def test_bench_samples_are_not_walked_by_the_collector():
    from automask.bench.maskbench import SchemaResult, SplitStats

    stats, result = SplitStats(), SchemaResult("x", "split")
    result.tbm_us.extend([1.0, 2.0])
    stats.add(result)
    for samples in (stats.tbm_us, result.tbm_us):  # a collection does not walk the samples
        assert not any(isinstance(x, float) for x in gc.get_referents(samples))
    assert stats.summary()["tbm_us"]["mean"] == 1.5


def test_dropped_grammars_are_freed(tiny_bpe_vocab):
    """Untracked per-grammar objects (Earley sets, thread tuples, masks) must be in no
    cycle: a grammar compiled, walked and dropped again and again leaves nothing behind."""
    import json
    import tracemalloc

    from automask import Matcher, compile

    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "tags": {"type": "array",
                                                        "items": {"type": "integer"}}},
              "required": ["name"]}
    text = json.dumps({"name": "ab cd", "tags": [1, 22, 333]})

    def walk() -> Matcher:
        matcher = Matcher(compile(Grammar.from_json_schema(schema), tiny_bpe_vocab))
        for token in tiny_bpe_vocab.encode(text):
            matcher.mask_words()
            assert matcher.accept_token(token)
        assert matcher.is_accepting()
        return matcher

    for _ in range(3):  # interned regex nodes and shared scans: made once, kept
        walk()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        alive = walk()
        one = tracemalloc.get_traced_memory()[0] - before  # what one live grammar holds
        del alive
        for _ in range(20):
            walk()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # a leak of the Earley sets alone would be about 1.5x one grammar here; none is ~0.05x
    assert one > 0 and grown < one // 2, (one, grown)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
     "minProperties": 1, "additionalProperties": {"type": "boolean"}},
    {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"},
     "maxItems": 4},
    {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True},
    {"type": "array", "contains": {"const": 1}, "minContains": 1, "maxContains": 2},
    {"type": "array", "contains": {"const": 1}, "items": {"type": "integer"},
     "allOf": [{"contains": {"const": 2}, "maxContains": 1}], "maxContains": 3},
    {"type": "number", "multipleOf": 0.07},  # fraction digits, searched recursively
    {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2,
     "maxItems": 1000},  # an item count in binary (the IR's counted repeat)
])
def test_schema_compiles_leave_no_cycles(schema):
    """A compile's state is freed by reference counts when the grammar goes: a cycle (a
    recursive closure holding itself) would leave it all to the cyclic collector, whose
    pass over it lands in some later, unrelated step (a mask's time, in a server)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        Grammar.from_json_schema(schema)
        gc.collect()
        left = [type(o).__module__ + "." + type(o).__qualname__ for o in gc.garbage
                if type(o).__module__.startswith("automask")
                or getattr(o, "__module__", "").startswith("automask")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not left


def test_cached_scans_are_out_of_the_collectors_sight(tiny_bpe_vocab):
    """The scans shared by every grammar (100k+ entries in a long run) and the token
    sets they hold are never walked by a collection: a tuple holding a token set would
    otherwise stay tracked for good, and every full collection would walk them all."""
    import json

    from automask import Matcher, compile
    from automask.engine.compiled import compiler_for

    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "n": {"type": "integer"}}}
    matcher = Matcher(compile(Grammar.from_json_schema(schema), tiny_bpe_vocab))
    for token in tiny_bpe_vocab.encode(json.dumps({"name": "ab cd", "n": 12})):
        matcher.mask_words()
        assert matcher.accept_token(token)
    gc.collect()
    shared = compiler_for(tiny_bpe_vocab).scans.cache
    scans = [value for key, value in shared.items()
             if all(isinstance(k, int) for k in key)]  # (token set, node, follow) -> scan
    groups = [pair for _, by_node in scans for pair in by_node]
    assert groups  # crossing groups were scanned and kept
    assert not gc.is_tracked(shared) and not gc.is_tracked(shared._costs)
    assert not any(gc.is_tracked(scan) or gc.is_tracked(scan[1]) for scan in scans)
    assert not any(gc.is_tracked(pair) or gc.is_tracked(pair[1]) for pair in groups)


def test_freeze_startup_collects_then_puts_what_lives_out_of_sight():
    # In a process of its own: freezing is for good, and this test process is not ours.
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import gc, weakref
        from automask.gc_pause import freeze_startup

        class Node: pass
        kept, lost = Node(), Node()
        kept.me, lost.me = kept, lost            # two cycles; the second is garbage
        gone = weakref.ref(lost)
        del lost
        gc.disable()                             # (no collection but the one asked for)
        freeze_startup()
        assert gone() is None                    # collected before freezing
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # out of sight
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
