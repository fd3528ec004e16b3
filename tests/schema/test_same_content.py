"""Equal subschemas at several positions compile to one rule (``schema.same_content``).

The sharing must change nothing but the compile's work: each schema here is compiled
with it and without it (``share_equal=False``), the languages are compared with each
other and with ``jsonschema``'s, and the sharing is shown to take place (fewer
rules) where it should, and not where positions or names make the content differ.
"""

from __future__ import annotations

import json

import pytest
from support.schema_reference import accepts_bytes, reference_accepts, reference_validator

import automask
from automask import EmptyLanguage, Grammar
from automask.schema.compiler import SchemaCompiler
from automask.schema.document import load_document
from automask.schema.lowering import Options


def _compiled(schema, share: bool):
    """The grammar with or without sharing, and how many conjunctions it shared."""
    compiler = SchemaCompiler(load_document(schema), Options(), share_equal=share)
    grammar = compiler.run()
    return grammar, compiler.conj.same.shared


def _has_rule_at(grammar, pointer: str) -> bool:
    """Whether a conjunction was compiled at ``pointer`` (its rule is named after its
    first position: ``s12:/properties/a``, and ``…+ws`` for its leading form)."""
    return any(p.lhs.split(":", 1)[-1].removesuffix("+ws") == pointer
               for p in grammar.productions)


def _same_language(schema, instances, vocab) -> int:
    """Assert that the shared and unshared grammars and ``jsonschema`` agree on every
    instance; the number of conjunctions shared."""
    shared, count = _compiled(schema, True)
    apart, none = _compiled(schema, False)
    assert none == 0
    with_sharing = automask.compile(shared, vocab)
    without = automask.compile(apart, vocab)
    reference = reference_validator(schema)
    for instance in instances:
        text = json.dumps(instance)
        expected = reference_accepts(reference, text)
        assert accepts_bytes(with_sharing, text) is expected, text
        assert accepts_bytes(without, text) is expected, text
    return count


DATE = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"}


def test_equal_subschemas_share_a_rule(tiny_bpe_vocab):
    """Six dates told apart only by their descriptions, and two nested objects told
    apart only by their properties' descriptions: one rule each, the same language."""
    def point(what: str):
        return {"type": "object", "required": ["x"], "additionalProperties": False,
                "properties": {"x": {"type": "integer", "minimum": 0, "description": what}}}

    schema = {"type": "object", "additionalProperties": False, "properties": {
        **{f"d{i}": dict(DATE, description=f"date {i}", title=f"D{i}") for i in range(6)},
        "from": point("start"), "to": point("end")}}
    instances = [{"d0": "2024-01", "d5": "1999-12"}, {"d3": "2024-1"}, {"d2": 7},
                 {"from": {"x": 1}, "to": {"x": 0}}, {"to": {"x": -1}}, {"from": {}},
                 {"to": {"x": 2, "y": 1}}, {"d1": "2024-01", "from": {"x": 3}}]
    shared = _same_language(schema, instances, tiny_bpe_vocab)
    assert shared >= 5 + 1, shared  # five of the dates, and the second object whole
    with_sharing, _ = _compiled(schema, True)
    without, _ = _compiled(schema, False)
    assert len(with_sharing.productions) < len(without.productions)
    assert not _has_rule_at(with_sharing, "/properties/to")
    assert _has_rule_at(without, "/properties/to")


def test_names_below_a_member_are_content(tiny_bpe_vocab):
    """Only a member's own annotations are left out of its content: a property named
    ``description`` (or ``default``) below it is part of what it says, and so is an
    annotation's value where it is a keyword of another subschema."""
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"description": {"type": "integer"}},
              "additionalProperties": False},
        "b": {"type": "object", "properties": {"description": {"type": "string"}},
              "additionalProperties": False},
        "c": {"type": "object", "properties": {"default": {"type": "integer"}},
              "additionalProperties": False},
        "d": {"type": "object", "properties": {"title": {"type": "integer"}},
              "additionalProperties": False}}}
    instances = [{"a": {"description": 1}}, {"a": {"description": "x"}},
                 {"b": {"description": "x"}}, {"b": {"description": 1}},
                 {"c": {"default": 1}}, {"c": {"description": 1}}, {"d": {"title": 2}},
                 {"d": {"default": 2}}]
    # the three {"type": "integer"} leaves are one rule; the four objects are four
    assert _same_language(schema, instances, tiny_bpe_vocab) == 2


def test_order_is_content(tiny_bpe_vocab):
    """Members are written in their schema's order, so the same properties (or the same
    ``const`` object) in another order are another rule: each object takes its own
    order (an instance in the other's order is read as out of order, not as invalid)."""
    xy = {"x": {"type": "integer"}, "y": {"type": "string"}}
    yx = {"y": {"type": "string"}, "x": {"type": "integer"}}
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": xy, "required": ["x", "y"]},
        "b": {"type": "object", "properties": yx, "required": ["x", "y"]},
        "c": {"const": {"p": 1, "q": 2}}, "d": {"const": {"q": 2, "p": 1}}}}
    instances = [{"a": {"x": 1, "y": "s"}}, {"b": {"y": "s", "x": 1}},
                 {"c": {"p": 1, "q": 2}}, {"d": {"q": 2, "p": 1}}, {"a": {"x": "s", "y": 1}}]
    _same_language(schema, instances, tiny_bpe_vocab)
    grammar, _ = _compiled(schema, True)
    for second in ("/properties/b", "/properties/d"):  # compiled, not shared
        assert _has_rule_at(grammar, second), second


def test_equal_references_under_other_bases_stay_apart(tiny_bpe_vocab):
    """An object whose property is ``{"$ref": "x.json"}``, written the same in two
    resources whose base URIs differ, is two schemas: the reference names another."""
    def resource(base: str, kind: str):
        return {"$id": base, "$defs": {"x": {"$id": "x.json", "type": kind}},
                "type": "object", "properties": {
                    "w": {"type": "object", "properties": {"v": {"$ref": "x.json"}}}}}

    schema = {"type": "object", "properties": {
        "s": resource("https://example.com/s/", "string"),
        "n": resource("https://example.com/n/", "integer")}}
    instances = [{"s": {"w": {"v": "a"}}}, {"s": {"w": {"v": 1}}}, {"n": {"w": {"v": 1}}},
                 {"n": {"w": {"v": "a"}}}]
    assert _same_language(schema, instances, tiny_bpe_vocab) == 0


EMPTY = {"type": "string", "minLength": 3, "maxLength": 1}
NEEDS_EMPTY = {"type": "object", "properties": {"x": EMPTY}, "required": ["x"]}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": EMPTY, "b": dict(EMPTY)}, "required": ["b"]},
    {"type": "object", "properties": {"a": NEEDS_EMPTY, "b": dict(NEEDS_EMPTY)},
     "required": ["b"]},
    {"type": "object", "required": ["b"], "properties": {
        "a": {"type": "array", "items": NEEDS_EMPTY, "minItems": 1},
        "b": {"type": "array", "items": dict(NEEDS_EMPTY), "minItems": 1}}},
], ids=["strings", "objects", "arrays"])
def test_an_empty_language_is_blamed_as_without_sharing(schema):
    """An empty language names the position it names with every position compiled
    apart: a rule shared by equal subschemas would name the first of them, where only
    the second is required (the compile is then made again without sharing)."""
    def message(share: bool) -> str:
        with pytest.raises(EmptyLanguage) as e:
            SchemaCompiler(load_document(schema), Options(), share_equal=share).run()
        return str(e.value)

    with pytest.raises(EmptyLanguage) as found:
        Grammar.from_json_schema(schema)
    assert str(found.value) == message(False)
    assert message(True) != message(False)  # (what the compile made again corrects)
