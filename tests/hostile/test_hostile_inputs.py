"""Hostile input (issue 29): every error typed and located, bounded work, misuse refused.

Each test is a reproduction from the issue: the input, the typed error it must
raise, where that error says the problem is, and (for nesting and cycles) that
it fails fast. Memory bounds are checked in a subprocess under an address-space
cap, so a regression fails the test instead of the machine.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import automask
from automask import (
    EmptyLanguage,
    Grammar,
    GrammarError,
    LimitExceeded,
    Matcher,
    Tag,
    Vocabulary,
    fill_bitmasks,
)
from automask.grammar.ir import MAX_NESTING
from automask.schema.document import MAX_DEPTH


def _nested(levels: int, wrap, leaf=None):
    """``leaf`` wrapped ``levels`` times by ``wrap`` (built without recursion)."""
    return functools.reduce(lambda inner, _: wrap(inner), range(levels),
                            {} if leaf is None else leaf)


def _raises(error, call, *args, **kwargs):
    """The error ``call`` raises, asserting its type (and nothing else yet)."""
    with pytest.raises(error) as info:
        call(*args, **kwargs)
    return info.value


def _fast(seconds: float = 5.0):
    """A generous wall-clock bound around a block (the CPU is shared)."""
    class _Clock:
        def __enter__(self):
            self.start = time.perf_counter()

        def __exit__(self, *exc):
            elapsed = time.perf_counter() - self.start
            assert elapsed < seconds, f"took {elapsed:.1f} s (bound {seconds} s)"
    return _Clock()


# --------------------------------------------------------------------------- item 3
# Untyped errors: each is a GrammarError (or LimitExceeded) with a location now.

@pytest.mark.parametrize("schema", [{"const": "a\ud800b"}, '{"const": "a\\ud800b"}'])
def test_lone_surrogate_in_const(schema):
    e = _raises(GrammarError, Grammar.from_json_schema, schema)
    assert e.location == "#/const"
    assert "lone surrogate U+D800" in e.message


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a\ud800": {"type": "string"}}},
    '{"type": "object", "properties": {"a\\ud800": {"type": "string"}}}',
])
def test_lone_surrogate_in_property_name(schema):
    e = _raises(GrammarError, Grammar.from_json_schema, schema)
    # the location is printable (the surrogate escaped), so it can be logged
    assert e.location == "#/properties/a\\ud800"
    str(e).encode("utf-8")


def test_lone_surrogates_elsewhere_in_a_schema():
    for schema, where in [({"enum": ["ok", "b\udfff"]}, "#/enum/1"),
                          ({"type": "object", "required": ["\ud83d"]}, "#/required/0"),
                          ({"type": "object", "properties": {"x": {"const": {"k\udc00": 1}}}},
                           "#/properties/x/const/k\\udc00")]:
        assert _raises(GrammarError, Grammar.from_json_schema, schema).location == where


def test_schema_bytes_not_utf8():
    e = _raises(GrammarError, Grammar.from_json_schema, b'{"type": "string",\n "const": "\xff"}')
    assert "not valid UTF-8" in e.message and "0xff" in e.message
    assert e.location == "line 2, col 12"
    # valid encodings of JSON text still compile (json.loads detects UTF-16 and UTF-32)
    Grammar.from_json_schema('{"const": "x"}'.encode("utf-16"))
    Grammar.from_json_schema(bytearray(b'{"const": "x"}'))


def test_non_string_keys():
    e = _raises(GrammarError, Grammar.from_json_schema,
                {"type": "object", "properties": {1: {"type": "string"}}})
    assert e.location == "#/properties" and "keys must be strings, not int" in e.message
    e = _raises(GrammarError, Grammar.from_json_schema, {"const": {1: 2}})
    assert e.location == "#/const"


def test_values_that_are_not_json():
    assert _raises(GrammarError, Grammar.from_json_schema,
                   {"const": object()}).location == "#/const"
    assert _raises(GrammarError, Grammar.from_json_schema,
                   {"enum": [1, {1, 2}]}).location == "#/enum/1"
    e = _raises(GrammarError, Grammar.from_json_schema, {"enum": [1, (2, 3)]})
    assert "'tuple' is not JSON" in e.message and e.location == "#/enum/1"


def test_schema_text_nested_500_deep():
    text = '{"items":' * 500 + "{}" + "}" * 500
    with _fast():
        e = _raises(LimitExceeded, Grammar.from_json_schema, text)
    assert f"nested more than {MAX_DEPTH} levels" in e.message
    assert e.location == "#" + "/items" * MAX_DEPTH
    # 1,000 levels: where json.loads itself gives up (a RecursionError under the
    # interpreter's recursion limit, which the process may have raised) the location is a
    # line and column, else the JSON pointer; both point at the same nesting level
    level = '{"properties": {"a": '  # two levels each
    text = level * 500 + "{}" + "}}" * 500
    with _fast():
        e = _raises(LimitExceeded, Grammar.from_json_schema, text)
    assert e.location in (f"line 1, col {len(level) * (MAX_DEPTH // 2) + 1}",
                          "#" + "/properties/a" * (MAX_DEPTH // 2))
    assert f"nested more than {MAX_DEPTH} levels" in e.message


def test_schema_depth_bound_location_in_text():
    text = "[" * 300 + "]" * 300
    e = _raises(LimitExceeded, Grammar.from_json_schema, '{"const": ' + text + "}")
    assert e.location == "#/const" + "/0" * (MAX_DEPTH - 1)
    head = '{"const": '
    e = _raises(LimitExceeded, Grammar.from_json_schema, head + "[" * 5000 + "]" * 5000 + "}")
    assert e.location == f"line 1, col {len(head) + MAX_DEPTH}"


def test_python_dict_nested_100000_deep_fails_fast():
    schema = _nested(100_000, lambda s: {"items": s})
    with _fast():
        e = _raises(LimitExceeded, Grammar.from_json_schema, schema)
    assert e.location == "#" + "/items" * MAX_DEPTH


def test_schemas_nested_within_the_bound_compile():
    Grammar.from_json_schema(_nested(MAX_DEPTH - 1, lambda s: {"items": s}))
    Grammar.from_json_schema(_nested(MAX_DEPTH // 2 - 1, lambda s: {
        "type": "object", "properties": {"a": s}, "required": ["a"]}, {"type": "integer"}))


def test_self_referencing_dict_is_refused_at_once():
    schema = {"type": "object", "properties": {}}
    schema["properties"]["k"] = schema
    with _fast(2.0):
        e = _raises(GrammarError, Grammar.from_json_schema, schema)
    assert "contains itself" in e.message
    assert e.location == "#/properties/k"
    inner = {"type": "array"}
    inner["items"] = [inner]
    e = _raises(GrammarError, Grammar.from_json_schema, {"properties": {"x": inner}})
    assert e.location == "#/properties/x/items/0" and "value at #/properties/x" in e.message


def test_shared_subschemas_are_not_cycles():
    """A Python value may share a subschema (a DAG): that is still a JSON document."""
    shared = {"type": "string", "maxLength": 3}
    g = Grammar.from_json_schema({"type": "object", "properties": {"a": shared, "b": shared}})
    assert g.productions


def test_deep_schema_with_long_keys_is_bounded():
    key = "k" * 10_000
    schema = _nested(1_000, lambda s: {"type": "object", "properties": {key: s}})
    with _fast():
        e = _raises(LimitExceeded, Grammar.from_json_schema, schema)
    assert "JSON pointers add up" in e.message
    assert e.location.startswith("#/properties/kkk") and len(e.location) < 3_000


_MEMORY_CAP = 1536 * 2**20  # the subprocess's address space: generous, far below 3-6 GB


def _run_capped(code: str, timeout: float = 60) -> str:
    """Run ``code`` in a fresh interpreter with its address space capped; its stdout."""
    prelude = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({_MEMORY_CAP}, {_MEMORY_CAP}))
    """)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
def test_cycles_and_deep_dicts_stay_within_memory_and_time():
    """Under a 1.5 GB cap (the issue saw 3-6 GB before the failure): typed errors, quickly."""
    out = _run_capped("""
        import functools, time
        from automask import Grammar, GrammarError, LimitExceeded
        d = {"type": "object", "properties": {}}
        d["properties"]["k"] = d
        deep = functools.reduce(lambda a, _: {"items": a}, range(100_000), {})
        key = "k" * 10_000
        wide = functools.reduce(lambda a, _: {"properties": {key: a}}, range(1_000), {})
        for schema in (d, deep, wide):
            start = time.process_time()
            try:
                Grammar.from_json_schema(schema)
            except (GrammarError, LimitExceeded) as e:
                print(type(e).__name__, round(time.process_time() - start, 2))
    """)
    lines = out.split()
    assert lines[0::2] == ["GrammarError", "LimitExceeded", "LimitExceeded"], out
    assert all(float(t) < 5 for t in lines[1::2]), out


def test_gbnf_nested_500_parentheses():
    text = "root ::= " + "(" * 500 + '"a"' + ")" * 500
    e = _raises(LimitExceeded, Grammar.from_gbnf, text)
    assert f"nested deeper than {MAX_NESTING}" in e.message
    assert e.location == f"line 1, col {len('root ::= ') + MAX_NESTING + 1}"
    seq = "root ::= " + '("a" ' * 2000 + '"a"' + ")" * 2000
    assert _raises(LimitExceeded, Grammar.from_gbnf, seq).location.startswith("line 1, col ")
    stacked = 'root ::= "a"' + "?" * 2000
    e = _raises(LimitExceeded, Grammar.from_gbnf, stacked)
    assert "repetitions of repetitions" in e.message and e.location is not None
    # within the bound: compiles
    Grammar.from_gbnf("root ::= " + '("a" ' * MAX_NESTING + '"a"' + ")" * MAX_NESTING)


def test_lark_nested_2000_groups():
    for open_, close in [("(", ")"), ("[", "]")]:
        text = "start: " + (open_ + '"a" ') * 2000 + '"a"' + close * 2000
        e = _raises(LimitExceeded, Grammar.from_lark, text)
        assert f"nested deeper than {MAX_NESTING}" in e.message
        assert e.location == f"line 1, col {len('start: ') + 5 * MAX_NESTING + 1}"
    Grammar.from_lark("start: " + '("a" ' * MAX_NESTING + '"a"' + ")" * MAX_NESTING)
    Grammar.from_lark('%ignore " "\nstart: ' + '("a" ' * MAX_NESTING + '"a"'
                      + ")*" * MAX_NESTING)


def test_lark_terminal_chain_is_typed():
    """Terminals defined through thousands of others: compiled, or a typed limit (never a
    RecursionError)."""
    text = "start: T0\n" + "".join(f'T{i}: "a" T{i + 1}\n' for i in range(3000)) + 'T3000: "a"\n'
    try:
        Grammar.from_lark(text)
    except LimitExceeded:
        pass


@pytest.mark.parametrize("make, where", [
    (lambda: Grammar.from_gbnf('root ::= "x\\uD800"'), "line 1, col 12"),
    (lambda: Grammar.from_gbnf('root ::= "x\ud800"'), "line 1, col 12"),
    (lambda: Grammar.from_lark('start: "\\uD800"'), "line 1, col 8"),
    (lambda: Grammar.from_lark('start: "a"\nB: "\udc00"'), "line 2, col 4"),
    (lambda: Grammar.from_choices(["a", "b\ud800"]), "choice 1, col 2"),
])
def test_lone_surrogates_in_grammars(make, where):
    e = _raises(GrammarError, make)
    assert "lone surrogate" in e.message and e.location == where


def test_lone_surrogates_in_tags_and_reasoning_markers():
    inner = Grammar.from_regex("a")
    for make in (lambda: Grammar.from_tags([Tag("<\ud800>", inner, "</x>")]),
                 lambda: Grammar.from_tags([Tag("<x>", inner, "</x\udfff>")]),
                 lambda: Grammar.from_tags([Tag("<x>", inner, "</x>")], triggers=["<\udc00"]),
                 lambda: Grammar.after_reasoning(inner, end="\ud800")):
        assert "lone surrogate" in _raises(GrammarError, make).message


def test_grammar_text_must_be_str():
    _raises(TypeError, Grammar.from_gbnf, b'root ::= "a"')
    _raises(TypeError, Grammar.from_lark, b'start: "a"')


# --------------------------------------------------------------------------- item 4
# EmptyLanguage says where; NaN is named as what it is.

def test_empty_property_is_located():
    schema = {"type": "object", "properties": {
        "s": {"type": "string", "minLength": 5, "maxLength": 2}}, "required": ["s"]}
    e = _raises(EmptyLanguage, Grammar.from_json_schema, schema)
    assert e.location == "#/properties/s"
    assert "nothing is valid at #/properties/s" in e.message


@pytest.mark.parametrize("schema, where", [
    ({"type": "string", "minLength": 5, "maxLength": 2}, "#"),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "array", "minItems": 3, "maxItems": 1}}, "required": ["b"]}},
      "required": ["a"]}, "#/properties/a/properties/b"),
    ({"type": "array", "prefixItems": [{"type": "integer"},
                                       {"type": "string", "minLength": 3, "maxLength": 1}],
      "minItems": 2}, "#/prefixItems/1"),
    # under a oneOf the property is still the one to blame
    ({"type": "object", "properties": {"s": {"type": "string", "minLength": 5, "maxLength": 2}},
      "required": ["s"], "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
     "#/properties/s"),
    # two branches empty for different reasons: the anyOf itself
    ({"anyOf": [{"type": "string", "minLength": 5, "maxLength": 2},
                {"type": "integer", "minimum": 3, "maximum": 1}]}, "#"),
])
def test_empty_language_locations(schema, where):
    assert _raises(EmptyLanguage, Grammar.from_json_schema, schema).location == where


def test_empty_conjunction_names_its_parts():
    e = _raises(EmptyLanguage, Grammar.from_json_schema,
                {"allOf": [{"type": "string"}, {"type": "integer"}]})
    assert e.location == "#" and "#/allOf/0" in e.message and "#/allOf/1" in e.message


def test_empty_grammar_rule_is_located():
    e = _raises(EmptyLanguage, Grammar.from_gbnf, 'root ::= x "b"\nx ::= "a" x')
    assert e.rule == "x" and e.location == "line 2, col 1"
    e = _raises(EmptyLanguage, Grammar.from_lark, 'start: "b" x\nx: "a" x')
    assert e.rule == "x" and e.location == "line 2, col 1"


@pytest.mark.parametrize("schema", [{"enum": [math.nan, 1]}, '{"enum": [NaN, 1]}'])
def test_nan_in_enum(schema):
    e = _raises(GrammarError, Grammar.from_json_schema, schema)
    assert "minimum" not in e.message
    assert "NaN and Infinity are not JSON" in e.message
    assert e.location == "#/enum/0"


def test_non_finite_numbers_elsewhere():
    for schema, where in [({"const": math.inf}, "#/const"),
                          ({"enum": [1, [2, {"a": -math.inf}]]}, "#/enum/1/1/a"),
                          ({"properties": {"x": {"const": {"k": [math.nan]}}}},
                           "#/properties/x/const/k/0"),
                          ({"minimum": math.nan}, "#/minimum"),
                          ({"multipleOf": math.inf}, "#/multipleOf")]:
        e = _raises(GrammarError, Grammar.from_json_schema, schema)
        assert e.location == where and "not JSON" in e.message


# --------------------------------------------------------------------------- item 5
# Misuse is refused with a clear error, not accepted silently.

@pytest.fixture(scope="module")
def vocab():
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    tokens = [b"<eos>"] + [c.encode() for c in alphabet] + [b"ab", b"abc"]
    return Vocabulary(tokens, special_ids=[0], eos_token_ids=[0], size=64)


@pytest.fixture()
def matcher(vocab):
    return Matcher(automask.compile(Grammar.from_regex("[a-c]+"), vocab))


def test_fill_bitmask_requires_int32(matcher, vocab):
    e = _raises(ValueError, matcher.fill_bitmask, np.zeros((1, 2), dtype=np.float32))
    assert "int32" in str(e) and "float32" in str(e)
    _raises(ValueError, matcher.fill_bitmask, np.zeros((1, 2), dtype=np.uint32))
    _raises(TypeError, matcher.fill_bitmask, [[0, 0]])  # a copy would be filled and lost
    b = automask.allocate_bitmask(1, vocab.size)
    matcher.fill_bitmask(b)
    assert automask.unpack_bitmask(b, vocab.size)[0, 1:4].all()


def test_fill_bitmask_torch_float32_refused(matcher):
    torch = pytest.importorskip("torch")
    e = _raises(ValueError, matcher.fill_bitmask, torch.zeros((1, 2), dtype=torch.float32))
    assert "torch.float32" in str(e)
    b = torch.zeros((2, 2), dtype=torch.int32)
    matcher.fill_bitmask(b, 1)
    assert b[1].ne(0).any() and b[0].eq(0).all()


def test_fill_bitmask_row_index(matcher, vocab):
    b = automask.allocate_bitmask(2, vocab.size)
    b[:] = 0
    e = _raises(IndexError, matcher.fill_bitmask, b, -1)
    assert "row -1" in str(e)
    _raises(IndexError, matcher.fill_bitmask, b, 2)
    _raises(TypeError, matcher.fill_bitmask, b, 1.0)
    _raises(TypeError, matcher.fill_bitmask, b, True)
    assert not b.any()  # nothing written by a refused call
    matcher.fill_bitmask(b, np.int64(1))
    assert b[1].any() and not b[0].any()
    one = np.zeros(b.shape[1], dtype=np.int32)
    _raises(IndexError, matcher.fill_bitmask, one, 5)
    matcher.fill_bitmask(one, 0)
    assert one.any()


def test_write_row_and_fill_bitmasks_check_the_same(matcher, vocab):
    words = automask.allocate_bitmask(2, vocab.size)
    _raises(ValueError, matcher.write_row, words[0].astype(np.float32))  # itemsize 4 too
    _raises(ValueError, matcher.write_row, words[0].view(np.uint32))
    _raises(TypeError, matcher.write_row, words[0].tolist())
    _raises(ValueError, fill_bitmasks, [matcher], words.astype(np.float32))
    _raises(TypeError, fill_bitmasks, [matcher], words.tolist())
    _raises(IndexError, fill_bitmasks, [matcher], words, [-1])
    _raises(TypeError, fill_bitmasks, [matcher], words, [0.0])
    fill_bitmasks([matcher, None], words, [np.int32(1), 0])


def test_apply_bitmask_batch_must_match(matcher, vocab):
    mask = automask.allocate_bitmask(2, vocab.size)
    matcher.fill_bitmask(mask, 0)
    e = _raises(ValueError, automask.apply_bitmask, np.zeros(vocab.size, np.float32), mask)
    assert "2 rows" in str(e)
    _raises(ValueError, automask.apply_bitmask, np.zeros((3, vocab.size), np.float32), mask)
    # one row per row of logits, a single row, or a 1-D mask: applied
    logits = np.zeros((2, vocab.size), np.float32)
    automask.apply_bitmask(logits, mask)
    assert np.isneginf(logits[0, 0]) and logits[0, 1] == 0 and logits[1, 0] == 0
    logits = np.zeros((3, vocab.size), np.float32)
    automask.apply_bitmask(logits, mask[0])
    assert np.isneginf(logits[:, 0]).all() and (logits[:, 1] == 0).all()
    logits = np.zeros((3, vocab.size), np.float32)
    automask.apply_bitmask(logits, mask[:1])
    assert np.isneginf(logits[:, 0]).all()


def test_apply_bitmask_torch_batch_must_match(matcher, vocab):
    torch = pytest.importorskip("torch")
    mask = torch.from_numpy(automask.allocate_bitmask(2, vocab.size))
    _raises(ValueError, automask.apply_bitmask, torch.zeros(vocab.size), mask)
    _raises(ValueError, automask.apply_bitmask, torch.zeros(vocab.size, dtype=torch.int64),
            mask[0])
    _raises(ValueError, automask.apply_bitmask, torch.zeros(vocab.size), mask[0].float())


def test_apply_bitmask_is_in_place_only(vocab):
    mask = automask.allocate_bitmask(1, vocab.size)
    e = _raises(TypeError, automask.apply_bitmask, [0.0] * vocab.size, mask)
    assert "in place" in str(e)
    _raises(ValueError, automask.apply_bitmask, np.zeros(vocab.size, np.int64), mask)
    _raises(ValueError, automask.apply_bitmask, np.zeros(vocab.size, np.float32),
            mask.astype(np.float32))


def test_accept_token_requires_an_integer(matcher, vocab):
    e = _raises(TypeError, matcher.accept_token, 0.0)  # 0 is EOS here
    assert "float" in str(e)
    _raises(TypeError, matcher.accept_token, True)
    _raises(TypeError, matcher.is_allowed, 1.0)
    assert matcher.num_accepted == 0
    assert matcher.accept_token(np.int64(1))  # NumPy integers are integers
    torch = pytest.importorskip("torch")
    assert matcher.accept_token(torch.tensor(2))
    _raises(TypeError, matcher.accept_token, torch.tensor(2.0))
    assert matcher.accept_token(0) and matcher.is_terminated()


def test_accept_bytes_takes_bytes_like(matcher):
    assert matcher.accept_bytes(bytearray(b"ab"))
    assert matcher.accept_bytes(memoryview(b"c"))
    assert matcher.accept_bytes(b"a")
    _raises(TypeError, matcher.accept_bytes, "a")
    _raises(TypeError, matcher.accept_bytes, [97])
    assert matcher.num_accepted == 3


def test_from_choices_refuses_a_single_string():
    e = _raises(TypeError, Grammar.from_choices, "abc")
    assert "sequence of strings" in str(e)
    _raises(TypeError, Grammar.from_choices, b"abc")
    e = _raises(GrammarError, Grammar.from_choices, ["a", 1])
    assert e.location == "choice 1" and "must be a str, not int" in e.message
    Grammar.from_choices(["abc"])
    Grammar.from_choices(c for c in ["x", "y"])


def test_schema_keyword_types():
    e = _raises(GrammarError, Grammar.from_json_schema, {"$schema": 42})
    assert e.location == "#/$schema"
    assert _raises(GrammarError, Grammar.from_json_schema,
                   {"properties": {"a": {"$id": 5}}}).location == "#/properties/a/$id"
    # a property that happens to be called "$schema" is a property, not the keyword
    Grammar.from_json_schema({"type": "object", "properties": {"$schema": {"type": "string"}}})
