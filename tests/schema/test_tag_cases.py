"""If-chains over one key (``if: {properties: {t: {const: …}}}``, a ``type`` beside the
``const`` or not), split by that key's case rather than distributed ``if`` by ``if``:
against ``jsonschema``, and never narrower than the distribution on the same instances."""

from __future__ import annotations

import json
import random

import pytest
from support.schema_reference import accepts_bytes, reference_accepts, reference_validator

import automask
from automask import EmptyLanguage, Grammar, LimitExceeded
from automask.schema import conditionals, conjunctions

TAGS = ["a", "b", "c", 1]
LEAVES = [{"required": ["x"]}, {"properties": {"x": {"type": "integer"}}},
          {"properties": {"y": {"const": 1}}, "required": ["y"]}, {"type": "object"},
          {"not": {"required": ["y"]}}, {"properties": {"x": {"type": "string"}}}, False]


def random_if(r: random.Random) -> dict:
    test: dict = {"const": r.choice(TAGS)} if r.random() < 0.6 else {
        "enum": r.sample(TAGS, r.randint(1, 2))}
    if r.random() < 0.3:  # the value's type beside it: the test holds of those of that type
        test["type"] = r.choice(["string", "integer", "number", ["string", "null"], "boolean"])
    branch: dict = {"if": {"properties": {"t": test}}}
    if r.random() < 0.4:
        branch["if"]["required"] = ["t"]
    if r.random() < 0.3:
        branch["if"]["type"] = "object"
    if r.random() < 0.9:
        branch["then"] = r.choice(LEAVES)
    if r.random() < 0.5 or "then" not in branch:
        branch["else"] = r.choice(LEAVES)
    return branch


def random_schema(r: random.Random) -> dict:
    schema: dict = {"allOf": [random_if(r) for _ in range(r.randint(2, 5))]}
    if r.random() < 0.5:
        schema["properties"] = {"t": {}, "x": {}, "y": {}}
    return schema


def random_instance(r: random.Random):
    if r.random() < 0.15:
        return r.choice([1, "a", None, [1]])
    keys = r.sample(["t", "x", "y"], r.randint(0, 3))
    pool = {"t": TAGS + ["d", None], "x": [1, "s", True], "y": [1, 2]}
    return {k: r.choice(pool[k]) for k in ["t", "x", "y"] if k in keys}


def compiled(schema, vocab):
    try:
        return automask.compile(Grammar.from_json_schema(schema), vocab)
    except EmptyLanguage:
        return None


def accepts(c, text: str) -> bool:
    return c is not None and accepts_bytes(c, text)


@pytest.mark.python_engine
def test_tag_cases_match_the_reference_and_the_distribution(tiny_bpe_vocab, monkeypatch):
    split = []
    real = conditionals.tag_cases

    def counted(members):
        out = real(members)
        split.append(out is not None)
        return out

    monkeypatch.setattr(conjunctions, "tag_cases", counted)
    accepted = 0
    for seed in range(120):
        r = random.Random(seed)
        schema = random_schema(r)
        ours = compiled(schema, tiny_bpe_vocab)
        with monkeypatch.context() as m:
            m.setattr(conjunctions, "tag_cases", lambda members: None)
            try:
                general = compiled(schema, tiny_bpe_vocab)
            except LimitExceeded:
                general = None
        ref = reference_validator(schema)
        for _ in range(30):
            text = json.dumps(random_instance(r))
            valid = reference_accepts(ref, text)
            assert valid or not accepts(ours, text), (seed, json.dumps(schema), text)
            if accepts(general, text):  # the split leaves out nothing the distribution has
                assert accepts(ours, text), (seed, json.dumps(schema), text)
            accepted += accepts(ours, text)
    assert sum(split) >= 100 and accepted >= 300


def if_chain(n: int) -> dict:
    """``n`` ``if``s over an optional tag, each requiring its own key."""
    return {"type": "object", "properties": {"type": {"type": "string"}},
            "allOf": [{"if": {"properties": {"type": {"const": f"k{i}"}}},
                       "then": {"required": [f"p{i}"],
                                "properties": {f"p{i}": {"type": "integer"}}},
                       "else": {"not": {"required": [f"p{i}"]}}}
                      for i in range(n)]}


def test_a_long_if_chain_over_an_optional_tag_compiles(tiny_bpe_vocab):
    """Twelve ``if``s over an optional tag: one case per tag value (and absent, other),
    where the distribution made one per subset of the ``if``s (where the tag is absent
    every ``if`` holds, so no two of them contradict each other)."""
    schema = if_chain(12)
    c = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    ref = reference_validator(schema)
    for text in ('{"type": "k3", "p3": 1}', '{"type": "k3", "p4": 1}', '{"type": "zz"}',
                 '{"q": 1}', '{}', '{"type": "k3", "p3": "s"}', '[1]',
                 '{"type": "zz", "p3": 1}', '{"type": "k3", "p3": 1, "p4": 1}'):
        assert accepts_bytes(c, text) == reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_without_the_tag_cases_a_long_if_chain_is_past_the_time_limit(monkeypatch):
    monkeypatch.setattr(conjunctions, "tag_cases", lambda members: None)
    with pytest.raises(LimitExceeded):
        Grammar.from_json_schema(if_chain(12), max_seconds=1)
