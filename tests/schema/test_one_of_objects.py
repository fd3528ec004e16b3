"""``oneOf`` of overlapping object branches, lowered key by key (the set of branches
still holding), against ``jsonschema``: never an invalid instance, and every valid
one written in its branch's key order."""

from __future__ import annotations

import json
import random

import pytest
from support.schema_reference import accepts_bytes, reference_accepts, reference_validator

import automask
from automask import EmptyLanguage, Grammar, LimitExceeded
from automask.schema import one_of_objects
from automask.schema.one_of_objects import merged_slots

KEYS = ["kind", "a", "b", "c"]
LEAVES = [{"const": "x"}, {"const": "y"}, {"type": "string"}, {"type": "integer"},
          {"type": "boolean"}, {"enum": ["x", 1]}, {"type": "string", "maxLength": 1},
          {"minimum": 1}, {}, {"type": ["string", "null"]}]
VALUES = ["x", "y", 1, 2, 0, True, "ab", None, ""]


def random_branch(r: random.Random) -> dict:
    names = r.sample(KEYS, r.randint(1, 3))
    branch: dict = {"properties": {k: r.choice(LEAVES) for k in names}}
    if r.random() < 0.8:
        branch["type"] = "object"
    if r.random() < 0.7:
        branch["required"] = r.sample(names, r.randint(0, len(names)))
    if r.random() < 0.5:
        branch["additionalProperties"] = False
    return branch


def random_schema(r: random.Random) -> dict:
    branches = [random_branch(r) for _ in range(r.randint(2, 5))]
    if r.random() < 0.3:  # a branch that is itself a oneOf of tagged variants
        variants = [random_branch(r) for _ in range(2)]
        for tag, v in zip("xy", variants, strict=True):
            v["properties"]["kind"] = {"const": tag}
            v["required"] = [*v.get("required", []), "kind"]
        branches[0] = {"oneOf": variants}
    schema: dict = {"oneOf": branches}
    if r.random() < 0.3:  # through references
        schema["$defs"] = {f"b{i}": b for i, b in enumerate(branches)}
        schema["oneOf"] = [{"$ref": f"#/$defs/b{i}"} for i in range(len(branches))]
    if r.random() < 0.3:
        schema["type"] = "object"
    elif r.random() < 0.3:
        schema["properties"] = {"a": r.choice(LEAVES)}
    return schema


def random_instance(r: random.Random):
    if r.random() < 0.1:
        return r.choice(VALUES)
    return {k: r.choice(VALUES) for k in r.sample(KEYS + ["z"], r.randint(0, 4))}


def branch_order(branch: dict) -> list[str]:
    return list(dict.fromkeys([*branch.get("properties", {}), *branch.get("required", [])]))


def holding(schema: dict, x) -> list[dict]:
    """The branches (with the schema's own keywords) that ``x`` satisfies."""
    defs = schema.get("$defs", {})
    out = []
    for b in schema["oneOf"]:
        b = defs[b["$ref"].rsplit("/", 1)[1]] if "$ref" in b else b
        alone = {"allOf": [b, {k: v for k, v in schema.items() if k not in ("oneOf", "$defs")}]}
        if reference_validator(alone).is_valid(x):
            out.append(b)
    return out


@pytest.mark.python_engine
def test_overlapping_object_branches_match_the_reference(tiny_bpe_vocab, monkeypatch):
    used = []
    lower = one_of_objects.OneOfObjects.lower

    def counted(self, *args):
        out = lower(self, *args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(one_of_objects.OneOfObjects, "lower", counted)
    checked = accepted = 0
    for seed in range(150):
        r = random.Random(seed)
        schema = random_schema(r)
        try:
            compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
        except EmptyLanguage:
            compiled = None
        ref = reference_validator(schema)
        for _ in range(40):
            x = random_instance(r)
            text = json.dumps(x)
            ours = compiled is not None and accepts_bytes(compiled, text)
            valid = reference_accepts(ref, text)
            assert valid or not ours, (seed, json.dumps(schema), text)
            if not valid or not isinstance(x, dict):
                continue
            # valid: written in the order of the branch that holds, extra keys last
            (branch,) = holding(schema, x)
            if "oneOf" in branch:
                continue  # (which variant's order: not this test's)
            order = branch_order({"properties": {**schema.get("properties", {}),
                                                 **branch.get("properties", {})},
                                  "required": branch.get("required", [])})
            others = {k for b in [*(schema.get("$defs") or {}).values(), *schema["oneOf"]]
                      for v in b.get("oneOf", [b]) for k in branch_order(v)}
            if any(k not in order and k in others for k in x):
                continue  # a key another branch places: its slot is not this test's
            ordered = {k: x[k] for k in order if k in x} | {
                k: v for k, v in x.items() if k not in order}
            checked += 1
            accepted += accepts_bytes(compiled, json.dumps(ordered))
            assert accepts_bytes(compiled, json.dumps(ordered)), (
                seed, json.dumps(schema), json.dumps(ordered))
    assert sum(used) >= 100  # the key-by-key lowering ran, not only the general one
    assert checked >= 300 and accepted == checked


def variants(n: int) -> dict:
    """``n`` closed variants of one record, told apart by an optional ``type`` tag and
    by their last field: the shape that multiplied out under complements."""
    common = {"id": {"type": "string"}, "label": {"type": "string"},
              "grid": {"type": "object", "properties": {"x": {"type": "number"}}}}
    return {"type": "array", "items": {"oneOf": [
        {"type": "object", "additionalProperties": False,
         "properties": {"type": {"enum": [f"t{i}"]}, **common,
                        "value": [{"type": "boolean"}, {"type": "string"},
                                  {"type": "number"}][i % 3]}}
        for i in range(n)]}}


@pytest.mark.python_engine
def test_variants_with_an_optional_tag_compile_key_by_key(tiny_bpe_vocab, monkeypatch):
    schema = variants(8)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    ref = reference_validator(schema)
    cases = ['[{"type": "t4", "id": "a", "value": "s"}]',
             '[{"type": "t4", "id": "a", "value": true}]',  # t4's value is a string
             '[{"id": "a", "value": true}]',  # three boolean variants hold
             '[{"type": "t0", "label": "b", "grid": {"x": 1}, "value": false}]',
             '[{"id": "a"}]', '[{"type": "t9"}]', '[{"type": "t1", "more": 1}]', "[]",
             '[{"id": "a", "value": "s"}, {"type": "t2", "value": 1.5}]']
    for text in cases:
        assert accepts_bytes(compiled, text) == reference_accepts(ref, text), text
    assert accepts_bytes(compiled, cases[0]) and not accepts_bytes(compiled, cases[2])
    assert not accepts_bytes(compiled, cases[-1])  # the first: three string variants
    # the general lowering (each branch beside every other's complement) does not finish
    monkeypatch.setattr(one_of_objects.OneOfObjects, "lower", lambda self, *a: None)
    with pytest.raises(LimitExceeded):
        Grammar.from_json_schema(schema, max_seconds=1)


def test_branch_types_are_not_shared_between_signatures(tiny_bpe_vocab):
    """One branch's ``type`` once narrowed the set every branch's signature shared, so
    two untyped branches looked disjoint and ``true`` (which both hold of) passed."""
    schema = {"oneOf": [
        {"properties": {"kind": {"type": "boolean"}}, "required": ["kind"]},
        {"properties": {"kind": {"const": "y"}}, "additionalProperties": False},
        {"type": "object", "properties": {"c": {}}, "required": ["c"],
         "additionalProperties": False}]}
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert not accepts_bytes(compiled, "true") and not accepts_bytes(compiled, '"s"')
    assert accepts_bytes(compiled, '{"c": 1}') and accepts_bytes(compiled, '{"kind": true}')


def test_key_orders_merge_with_a_slot_per_placement():
    """Each order is a subsequence of the slots; a key placed two ways gets two."""
    assert merged_slots([["a", "b", "c"], ["a", "c", "b"], ["d"]]) == ["a", "b", "c", "b", "d"]
    assert merged_slots([["x"] * 600, ["y"] * 600]) is None  # past MAX_MERGE


def test_a_value_whose_split_needs_a_large_complement_is_left_out(tiny_bpe_vocab):
    """Branch ``a`` says ``list`` is an array of records (a six-way ``oneOf``); branch
    ``b`` is open and says nothing of it. A list that ``a`` rejects keeps only ``b``,
    but telling it apart takes the complement of ``a``'s list (some item that meets no
    record or two), which multiplies out: those lists are not written. Valid objects
    are lost that way, never an invalid one admitted."""
    records = {"oneOf": [
        {"type": "object", "properties": {f"f{j}": {"type": "string"} for j in range(6)},
         "required": [f"f{i}"]} for i in range(6)]}
    schema = {"oneOf": [
        {"type": "object", "properties": {"list": {"type": "array", "items": records}}},
        {"type": "object", "properties": {"name": {"type": "string"}}}]}
    compiled = automask.compile(Grammar.from_json_schema(schema, max_seconds=5),
                                tiny_bpe_vocab)
    ref = reference_validator(schema)
    for text in ('{"list": [], "name": 1}', '{"name": 1}', '{"list": [{"f0": "x"}], "name": 2}'):
        assert accepts_bytes(compiled, text) and reference_accepts(ref, text), text
    for text in ('{}', '{"list": []}', '{"name": "s"}', '{"list": [{"f0": "x"}]}',
                 '{"list": [{"f0": "x", "f1": "y"}], "name": 1}'):
        assert not accepts_bytes(compiled, text) and not reference_accepts(ref, text), text
    lost = '{"list": [1], "name": "s"}'  # only b holds: valid, and not written
    assert reference_accepts(ref, lost) and not accepts_bytes(compiled, lost)


@pytest.mark.python_engine
def test_too_many_branch_sets_fall_back_to_the_general_lowering(tiny_bpe_vocab, monkeypatch):
    """Thirteen open branches, each with an optional key of its own: every subset of them
    is a state (each key's value may keep its branch or drop it), past MAX_STATES. The
    general lowering (each branch beside the others' one-key complements) is linear
    there, and is used instead."""
    raised = []
    real = one_of_objects.OneOfObjects.object

    def watched(self, *args):
        try:
            return real(self, *args)
        except one_of_objects.TooManyStates:
            raised.append(1)
            raise

    monkeypatch.setattr(one_of_objects.OneOfObjects, "object", watched)
    schema = {"oneOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}}
                        for i in range(13)]}
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert raised
    ref = reference_validator(schema)
    for text in ('{}', '{"k0": 1}', '{"k0": "s"}', '{"k0": "s", "k1": "s"}',
                 '{"k0": 1, "k1": "s", "k2": "s", "k3": "s", "k4": "s", "k5": "s", "k6": "s", '
                 '"k7": "s", "k8": "s", "k9": "s", "k10": "s", "k11": "s", "k12": "s"}', '1'):
        assert accepts_bytes(compiled, text) == reference_accepts(ref, text), text
