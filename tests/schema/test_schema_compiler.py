"""JSON Schema compiler, keyword by keyword, against the ``jsonschema`` package.

For every supported keyword a schema and a list of instances (the cases are in
:mod:`support.schema_cases`): each instance is serialized with
``json.dumps(x, ensure_ascii=False)`` (properties in the schema's order), fed
token by token under the two tiny tokenizers and byte by byte, and our verdict
must equal the reference's (:mod:`support.schema_reference`). The reference is
``jsonschema`` (Draft 2020-12, or Draft 7 / Draft 4 for their own forms) with
the format checker on (``format`` is asserted here), reading numbers as
``Decimal``: JSON numbers are decimal, and with floats ``jsonschema`` finds
0.07 not a multiple of 0.01.

Then the other promises of the compiler: :class:`UnsupportedFeature` with the
keyword and its JSON pointer, ``lenient=True``, :class:`GrammarError` for
malformed schemas, :class:`EmptyLanguage`, the whitespace options, ``strict``
and ``from_pydantic``.
"""

from __future__ import annotations

import json
import sys
import warnings

import pytest
from support.languages import same_language
from support.schema_cases import CASES, TREE, tree
from support.schema_reference import (
    D4,
    D7,
    accepts_bytes,
    accepts_tokens,
    dumps,
    mismatches,
    reference_accepts,
    reference_validator,
)

import automask
from automask import EmptyLanguage, Grammar, GrammarError, UnsupportedFeature

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(params=["tiny-bpe", "tiny-spm"])
def vocab(request):
    return request.getfixturevalue("tiny_bpe_vocab" if request.param == "tiny-bpe"
                                   else "tiny_spm_vocab")


# --------------------------------------------------------------------------- keyword cases

ALL_VALID = {"true"}


@pytest.mark.parametrize("schema, instances, cls",
                         [pytest.param(s, xs, c, id=name) for name, s, xs, c in CASES])
def test_keyword_matches_reference(schema, instances, cls, vocab):
    ref = reference_validator(schema, cls)
    verdicts = {reference_accepts(ref, dumps(x)) for x in instances}
    assert True in verdicts
    assert False in verdicts or schema is True
    assert mismatches(schema, instances, vocab, cls) == []


def test_case_names_are_unique():
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names))
    assert ALL_VALID <= set(names)


@pytest.mark.parametrize("rest, plain", [({}, True), ({"additionalProperties": True}, True),
                                         ({"additionalProperties": False}, False),
                                         ({"additionalProperties": {"type": "integer"}}, False)])
def test_patterns_taking_any_value_split_the_keys_only_where_the_rest_differ(rest, plain):
    # (the languages are checked against jsonschema in the patternProperties-trivial cases)
    grammar = Grammar.from_json_schema(
        {"type": "object", "patternProperties": {"^.{1,255}$": {}}, **rest})
    assert all(node.plain for node in grammar.lexemes) == plain  # no complement of it


def test_deep_recursion_is_accepted(tiny_bpe_vocab):
    """No depth limit: a tree 200 levels deep is accepted token by token."""
    compiled = automask.compile(Grammar.from_json_schema(TREE), tiny_bpe_vocab)
    deep = tree(200)
    assert accepts_tokens(compiled, tiny_bpe_vocab, dumps(deep))
    bad = tree(200, leaf=None)
    assert not accepts_bytes(compiled, dumps(bad))


def test_json_escapes_in_strings(tiny_bpe_vocab):
    """Escaped spellings of the same text count as that text (pattern, length, const)."""
    schema = {"type": "array", "prefixItems": [
        {"type": "string", "maxLength": 1},
        {"const": "a\"b"},
        {"type": "string", "pattern": "^\\n$"},
    ], "items": False}
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    ref = reference_validator(schema)
    for text in [r'["\n", "a\"b", "\n"]', r'["\u000a", "a\u0022b", "\u000A"]',
                 r'["\/", "a\"b", "\n"]', r'["\\", "a\u005cb", "\n"]',
                 r'["ab", "a\"b", "\n"]', r'["\n", "ab", "\n"]', r'["\n", "a\"b", "n"]']:
        want = reference_accepts(ref, text)
        assert accepts_bytes(compiled, text) == want, text
        assert accepts_tokens(compiled, tiny_bpe_vocab, text) == want, text


# --------------------------------------------------------------------------- regressions, gaps

def _anyof_behind_ref(kind: str):
    inner = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    if kind == "ref":
        return {"$defs": {"q": inner}, "$ref": "#/$defs/q"}
    if kind == "allOf":
        return {"allOf": [inner]}
    if kind == "overlapping":
        return {"$defs": {"q": {"anyOf": [{"type": "string", "maxLength": 3},
                                          {"minimum": 0}]}},
                "$ref": "#/$defs/q"}
    if kind == "oneOf-ref-sibling":
        return {"$defs": {"q": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
                "$ref": "#/$defs/q", "maxLength": 3, "minimum": 0}
    return {"type": "object", "properties": {"q": {"$ref": "#/$defs/q"}},
            "required": ["q"], "$defs": {"q": inner}}


@pytest.mark.parametrize("kind", ["ref", "allOf", "property-ref", "overlapping",
                                  "oneOf-ref-sibling"])
def test_anyof_behind_ref_or_allof(kind, tiny_bpe_vocab):
    """Regression: an anyOf/oneOf reached through $ref or allOf compiled to EmptyLanguage
    (distributing it re-expanded the other members' $ref and brought it back)."""
    schema = _anyof_behind_ref(kind)
    instances = ["a", 1, None, "abcd", -1, 2.5]
    if kind == "property-ref":
        instances = [{"q": x} for x in instances]
    ref = reference_validator(schema)
    assert {reference_accepts(ref, dumps(x)) for x in instances} == {True, False}
    assert mismatches(schema, instances, tiny_bpe_vocab) == []


@pytest.mark.parametrize("schema", [
    {"$id": "sub/x.json", "anyOf": [{"type": "object"}, {"type": "null"}],
     "properties": {"a": {"$ref": "#/$defs/t"}}, "$defs": {"t": {"type": "integer"}}},
    {"$id": "http://example.com/dir/root.json",
     "properties": {"p": {"$id": "sub/", "oneOf": [{"type": "object"}, {"type": "string"}],
                          "properties": {"a": {"$ref": "item.json"}}}},
     "$defs": {"t": {"$id": "sub/item.json", "type": "integer"}}},
], ids=["root", "nested"])
def test_a_relative_id_beside_a_combinator_is_applied_once(schema, tiny_bpe_vocab):
    """Regression: the schema beside a distributed anyOf/oneOf is a copy of its object;
    with the relative ``$id`` kept, the copy was rebased a second time and its ``$ref``s
    resolved against the wrong base ("not embedded")."""
    inner = [{"a": 1}, {"a": "x"}, None, {}]
    instances = inner if "anyOf" in schema else [{"p": x} for x in inner + ["s"]]
    assert mismatches(schema, instances, tiny_bpe_vocab) == []


@pytest.mark.parametrize("id_keyword", ["$id", "id"])
def test_draft7_plain_name_id_fragment(id_keyword, tiny_bpe_vocab):
    schema = {"definitions": {"a": {id_keyword: "#foo", "type": "integer"}},
              "type": "array", "items": {"$ref": "#foo"}}
    cls = D7 if id_keyword == "$id" else D4
    assert mismatches(schema, [[1, 2], ["x"]], tiny_bpe_vocab, cls) == []


@pytest.mark.parametrize("schema", [
    {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}},
    {"type": "object", "propertyNames": {"enum": ["a", "b"]}, "minProperties": 3},
], ids=["additionalProperties", "propertyNames-enum"])
def test_minproperties_reached_by_extra_keys_is_unsupported(schema, tiny_bpe_vocab):
    # Extra keys may repeat, and a repeated key counts once after json.loads: such a
    # minProperties cannot be enforced soundly, so it raises (and lenient output is sound).
    with pytest.raises(UnsupportedFeature, match="minProperties"):
        Grammar.from_json_schema(schema)
    with pytest.warns(UserWarning):
        g = Grammar.from_json_schema(schema, lenient=True)
    # lenient still enforces what it soundly can: at least one key.
    m = automask.Matcher(automask.compile(g, tiny_bpe_vocab))
    m.accept_bytes(b"{}")
    assert not m.is_accepting()


# Documented choices where we accept less than the reference (sound direction): integers
# are written without fraction or exponent, non-integers without exponent when integers
# are excluded, multiples without exponent.
NARROWER = [
    ({"type": "integer"}, ["5.0", "1e2", "-0.0"]),
    ({"type": "number", "multipleOf": 7}, ["1.4e1"]),
    ({"type": "number", "not": {"type": "integer"}}, ["1e-05", "1.5e0"]),
]


@pytest.mark.parametrize("schema, texts", NARROWER)
def test_documented_narrowings(schema, texts, tiny_bpe_vocab):
    """Pins the documented spellings; a text that becomes accepted belongs in CASES."""
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    ref = reference_validator(schema)
    for text in texts:
        assert reference_accepts(ref, text), text
        assert not accepts_bytes(compiled, text), text


# --------------------------------------------------------------------------- unsupported

UNSUPPORTED = [
    ({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True,
                                                "items": {"type": "string"}}}},
     "uniqueItems", "#/properties/tags/uniqueItems"),
    ({"if": {"type": "string", "format": "date"}, "then": {"minLength": 1}},
     "format", "#/if/format"),
    ({"type": "object", "properties": {"n": {"type": "object", "not": {
        "unevaluatedProperties": False, "required": ["a"]}}}},
     "unevaluatedProperties", "#/properties/n/not/unevaluatedProperties"),
    ({"type": "array", "contains": {"type": "string"},
      "allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}, {"contains": True}]},
     "contains", "#/allOf/2/contains"),
    # a format's automaton leaves valid strings out: its complement would admit them
    ({"type": "object", "not": {"propertyNames": {"format": "email"}}},
     "propertyNames", "#/not/propertyNames"),
    ({"$defs": {"s": {"type": "string", "format": "idn-email"}}, "$ref": "#/$defs/s"},
     "format", "#/$defs/s/format"),
    ({"type": "array", "contains": {"not": {"prefixItems": [True], "items": {"type": "string"}}}},
     "items", "#/contains/not/items"),
    ({"$ref": "https://example.com/other.json"}, "$ref", "#"),
    ({"type": "array", "items": {"not": {"oneOf": [{"const": [1]}, {"type": "integer"}]}}},
     "const", "#/items/not/oneOf/0/const"),
    # the complement of a schema for the values of undeclared keys
    ({"type": "object", "oneOf": [{"properties": {"a": {}}, "additionalProperties": False},
                                  {"properties": {"b": {}},
                                   "additionalProperties": {"type": "string"}}]},
     "additionalProperties", "#/oneOf/1/additionalProperties"),
]


@pytest.mark.parametrize("schema, keyword, pointer", UNSUPPORTED,
                         ids=[f"{k}@{p}" for _, k, p in UNSUPPORTED])
def test_unsupported_feature_names_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedFeature) as info:
        Grammar.from_json_schema(schema)
    assert keyword in info.value.message
    assert info.value.location == pointer
    assert keyword in str(info.value) and pointer in str(info.value)


def test_unsupported_features_stay_unsupported_when_inactive():
    """Keywords whose value asks nothing compile (uniqueItems false, empty dependencies)."""
    for schema in [{"type": "array", "uniqueItems": False},
                   {"type": "object", "dependentRequired": {}},
                   {"type": "object", "unevaluatedProperties": True},
                   {"if": {"type": "string"}}]:
        Grammar.from_json_schema(schema)


@pytest.mark.parametrize("schema, keyword, _pointer", UNSUPPORTED[:4],
                         ids=[k for _, k, _ in UNSUPPORTED[:4]])
def test_lenient_warns_and_compiles(schema, keyword, _pointer):
    with pytest.warns(UserWarning, match=keyword):
        grammar = Grammar.from_json_schema(schema, lenient=True)
    assert grammar.productions


def test_lenient_anyof_under_unevaluated_is_stricter(tiny_bpe_vocab):
    """Past 6 anyOf branches under unevaluatedProperties, lenient distributes one branch at
    a time: the other branches' annotations are lost, which only rejects more."""
    schema = {"type": "object", "unevaluatedProperties": False,
              "anyOf": [{"properties": {f"k{i}": {"type": "integer"}}} for i in range(7)]}
    with pytest.raises(UnsupportedFeature, match="anyOf"):
        Grammar.from_json_schema(schema)
    with pytest.warns(UserWarning, match="anyOf"):
        compiled = automask.compile(Grammar.from_json_schema(schema, lenient=True),
                                    tiny_bpe_vocab)
    assert accepts_bytes(compiled, '{"k1": 1}')
    assert not accepts_bytes(compiled, '{"k1": "x"}')
    assert not accepts_bytes(compiled, '{"z": 1}')
    assert not accepts_bytes(compiled, '{"k1": 1, "k2": 2}')  # valid, but lenient is stricter


def test_lenient_ignores_only_the_unsupported_keyword(tiny_bpe_vocab):
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True,
              "maxItems": 2}
    with pytest.warns(UserWarning, match=r"uniqueItems.*#/uniqueItems"):
        compiled = automask.compile(Grammar.from_json_schema(schema, lenient=True),
                                    tiny_bpe_vocab)
    assert accepts_bytes(compiled, "[1, 1]")      # uniqueItems ignored (the warning said so)
    assert not accepts_bytes(compiled, "[1, 2, 3]")
    assert not accepts_bytes(compiled, '["a"]')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Grammar.from_json_schema({"type": "array", "items": {"type": "integer"}}, lenient=True)


# --------------------------------------------------------------------------- malformed

MALFORMED = [
    ({"type": 5}, "#/type"),
    ({"type": "strin"}, "#/type"),
    ({"type": ["string", 3]}, "#/type"),
    ({"minLength": -1}, "#/minLength"),
    ({"type": "string", "maxLength": 1.5}, "#/maxLength"),
    ({"type": "array", "minItems": "2"}, "#/minItems"),
    ({"type": "object", "maxProperties": -3}, "#/maxProperties"),
    ("not json {", None),
    ("[1, 2]", "#"),
    (5, "#"),
    ({"pattern": "("}, "#/pattern"),
    ({"enum": 3}, "#/enum"),
    ({"$ref": "#/$defs/missing"}, "#"),
    ({"$ref": 5}, "#/$ref"),
    ({"multipleOf": 0}, "#/multipleOf"),
    ({"multipleOf": -2}, "#/multipleOf"),
    ({"maximum": "10"}, "#/maximum"),
    ({"type": "object", "properties": []}, "#/properties"),
    ({"type": "object", "required": "a"}, "#/required"),
    ({"anyOf": []}, "#/anyOf"),
    ({"oneOf": {"type": "string"}}, "#/oneOf"),
    ({"type": "array", "items": 5}, "#/items"),
    ({"properties": {"a": "string"}}, "#/properties/a"),
]


@pytest.mark.parametrize("schema, location", MALFORMED, ids=[repr(s)[:40] for s, _ in MALFORMED])
def test_malformed_schema_raises_grammar_error(schema, location):
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema(schema)
    assert not isinstance(info.value, (UnsupportedFeature, EmptyLanguage))
    if location is not None:
        assert info.value.location is not None
        assert info.value.location.split()[0] == location
    else:
        assert "line 1" in str(info.value)


@pytest.mark.parametrize("schema, location", [
    ({"type": "integer", "minLength": -1}, "#/minLength"),
    ({"type": "string", "minimum": "x"}, "#/minimum"),
    ({"type": "null", "required": "a"}, "#/required"),
    ({"type": "null", "required": [1]}, "#/required"),
    ({"type": "string", "maxItems": 1.5}, "#/maxItems"),
    ({"type": "string", "multipleOf": 0}, "#/multipleOf"),
    ({"not": {"minLength": "2"}}, "#/not/minLength"),
    ({"type": "integer", "properties": {"a": {"pattern": 5}}}, "#/properties/a/pattern"),
    ({"if": {"type": "string"}, "then": {"maxContains": -1}}, "#/then/maxContains"),
    ({"type": "object", "dependentRequired": {"a": "b"}}, "#/dependentRequired/a"),
    ({"type": "object", "dependentSchemas": {"a": 5}}, "#/dependentSchemas/a"),
])
def test_malformed_keyword_of_an_excluded_type(schema, location):
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema(schema)
    assert not isinstance(info.value, UnsupportedFeature)
    assert info.value.location.split()[0] == location


@pytest.mark.parametrize("keyword, value", [
    ("$schema", 1), ("$id", 1), ("$anchor", 1), ("$dynamicAnchor", 1),
    ("exclusiveMinimum", "1"), ("exclusiveMaximum", float("inf")), ("const", float("nan")),
    ("enum", [1, float("nan")]), ("prefixItems", {}), ("format", 1), ("uniqueItems", 1),
    ("$defs", []), ("definitions", []), ("patternProperties", []), ("allOf", []),
    ("minContains", -1), ("minProperties", "1"), ("pattern", 1), ("required", "a"),
])
def test_each_checked_keyword_malformed_beside_type_alone(keyword, value):
    """Every keyword the checks read is checked beside nothing but ``type`` (positions
    with no checked keyword skip the checks: the skip must not hide one)."""
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema({"type": "object", "properties": {
            "a": {"type": "null", keyword: value}}})
    assert not isinstance(info.value, UnsupportedFeature)
    assert info.value.location.split()[0].startswith(f"#/properties/a/{keyword}")


def test_bad_pattern_property_has_pointer():
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema({"type": "object", "patternProperties": {"(": {}}})
    assert info.value.location.startswith("#/patternProperties")


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        Grammar.from_json_schema({}, whitespaces="compact")
    with pytest.raises(GrammarError):
        Grammar.from_json_schema({}, whitespace="loose")


# --------------------------------------------------------------------------- empty languages

EMPTY = [
    {"type": "string", "minLength": 3, "maxLength": 2},
    False,
    "false",
    {"not": {}},
    {"type": "integer", "minimum": 5, "maximum": 4},
    {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1},
    {"type": "integer", "minimum": 0.2, "maximum": 0.8},
    {"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9},
    {"type": "integer", "enum": ["a", 1.5]},
    {"allOf": [{"type": "string"}, {"type": "number"}]},
    {"type": "object", "properties": {"a": False}, "required": ["a"]},
    {"type": "object", "additionalProperties": False, "required": ["a"]},
    {"type": "object", "maxProperties": 1, "required": ["a", "b"]},
    {"type": "array", "items": False, "minItems": 1},
    {"type": "array", "minItems": 3, "maxItems": 2},
    {"type": "array", "minItems": 2, "maxItems": 0},
    {"type": "array", "prefixItems": [{}, {}], "minItems": 3, "maxItems": 1},
    {"type": "string", "pattern": "^a$", "minLength": 2},
    {"type": "string", "format": "date", "maxLength": 5},
    {"const": "a", "not": {"const": "a"}},
    {"enum": [2], "const": None},
    {"type": "array", "contains": {"const": 1}, "minContains": 3, "maxContains": 1},
    {"type": "integer", "minimum": 0, "oneOf": [{"minimum": 0}, {"minimum": 1}, {"maximum": 0}]},
    {"type": "string", "not": {"maxLength": 3, "anyOf": [{"minLength": 0}]}, "maxLength": 2},
    {"$defs": {"loop": {"type": "object", "properties": {"x": {"$ref": "#/$defs/loop"}},
                        "required": ["x"]}}, "$ref": "#/$defs/loop"},
]


@pytest.mark.parametrize("schema", EMPTY, ids=[
    repr(s.values[0] if isinstance(s, type(pytest.param(0))) else s)[:50] for s in EMPTY])
def test_unsatisfiable_schema_is_empty_language(schema):
    with pytest.raises(EmptyLanguage):
        Grammar.from_json_schema(schema)
    if not isinstance(schema, str):
        # The reference agrees on a few candidates (a sanity check on the list).
        ref = reference_validator(schema)
        for x in [None, True, 0, 1, 5, "a", "aa", [], [1], {}, {"a": 1}]:
            assert not ref.is_valid(x)


# --------------------------------------------------------------------------- options

OBJ = {"type": "object", "properties": {"a": {"type": "integer"},
                                        "b": {"type": "array", "items": {"type": "string"}}}}


def _compiled(schema, vocab, **options):
    return automask.compile(Grammar.from_json_schema(schema, **options), vocab)


def test_whitespace_compact(vocab):
    c = _compiled(OBJ, vocab, whitespace="compact")
    for text in ['{"a":1}', '{"a":1,"b":["x","y"]}', "{}", '{"b":[]}']:
        assert accepts_tokens(c, vocab, text), text
    for text in ['{"a": 1}', '{ "a":1}', '{"a":1 }', '{"a":1, "b":[]}', '{"b":["x", "y"]}',
                 ' {"a":1}', '{"a":1}\n', "{\n}"]:
        assert not accepts_bytes(c, text), text
        assert not accepts_tokens(c, vocab, text), text


def test_whitespace_flexible(vocab):
    c = _compiled(OBJ, vocab)
    x = {"a": 1, "b": ["x", "y"]}
    for text in [dumps(x), json.dumps(x, indent=2), json.dumps(x, indent="\t"),
                 json.dumps(x, separators=(",", ":")), '\n{\r\n "a" : 1 ,\t"b":[ ] }\n',
                 '{"a":' + " " * 24 + "1}"]:
        assert accepts_tokens(c, vocab, text), text
    for text in ['{"a":' + " " * 1000 + "1}", " " * 1000 + "{}", "{}" + "\n" * 1000,
                 '{"a":1,' + "\t" * 1000 + '"b":[]}', '{"a":\u00a01}', '{"a":\x0b1}']:
        assert not accepts_bytes(c, text), repr(text)


def test_whitespace_bound_is_max_whitespace(tiny_bpe_vocab):
    c = _compiled({"type": "array"}, tiny_bpe_vocab, max_whitespace=4)
    assert accepts_bytes(c, "[" + " " * 4 + "1" + " " * 4 + "," + " " * 4 + "2]")
    assert not accepts_bytes(c, "[" + " " * 5 + "1]")
    assert not accepts_bytes(c, "[1" + " " * 5 + ",2]")


def test_whitespace_indent(tiny_bpe_vocab):
    c = _compiled(OBJ, tiny_bpe_vocab, whitespace=2)
    x = {"a": 1, "b": ["x", "y"]}
    for text in [json.dumps(x, indent=2), dumps(x), json.dumps(x, separators=(",", ":"))]:
        assert accepts_tokens(c, tiny_bpe_vocab, text), text
    for text in [json.dumps(x, indent="\t"), '{"a":  1}']:
        assert not accepts_bytes(c, text), text


def test_strict_times_have_no_leap_second(vocab):
    """``strict`` leaves out ``:60``, which ``jsonschema``'s own checker rejects."""
    import jsonschema

    schema = {"type": "object", "properties": {"t": {"type": "string", "format": "time"},
                                               "d": {"type": "string", "format": "date-time"}}}
    checker = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    leap = [{"t": "23:59:60Z"}, {"d": "1998-12-31T23:59:60Z"}, {"d": "1998-12-31T15:59:60-08:00"}]
    plain = [{"t": "23:59:59Z"}, {"d": "1998-12-31T23:59:59.5+01:00"}]
    strict, spec = _compiled(schema, vocab, strict=True), _compiled(schema, vocab)
    for x in leap + plain:
        text = json.dumps(x)
        assert accepts_bytes(spec, text), text
        assert accepts_bytes(strict, text) == (x in plain), text
        assert checker.is_valid(x) == (x in plain), text  # rfc3339-validator is a test dep


def test_strict(vocab):
    nested = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "o": {"type": "object", "properties": {"y": {}}, "additionalProperties": True},
    }}
    closed = json.loads(json.dumps(nested))
    closed["additionalProperties"] = False
    closed["properties"]["a"]["additionalProperties"] = False
    instances = [{"a": {"x": 1}}, {"a": {"x": 1, "z": 2}}, {"a": {}, "extra": 1},
                 {"m": {"k": 1}}, {"m": {"k": "v"}}, {"o": {"y": 1, "z": 2}}, {}]
    assert mismatches(nested, instances, vocab, strict=True, reference_schema=closed) == []
    assert mismatches(nested, instances, vocab, strict=False) == []
    # The two differ on exactly the instances with undeclared keys.
    loose = reference_validator(nested)
    tight = reference_validator(closed)
    assert [loose.is_valid(x) != tight.is_valid(x) for x in instances] == [
        False, True, True, False, False, False, False]


# --------------------------------------------------------------------------- pydantic


def test_from_pydantic(vocab):
    pydantic = pytest.importorskip("pydantic")
    from typing import Literal

    class Address(pydantic.BaseModel):
        city: str
        zip: str = pydantic.Field(pattern=r"^[0-9]{5}$")

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(min_length=1, max_length=20)
        age: int = pydantic.Field(ge=0, le=150)
        tags: list[str] = []
        role: Literal["admin", "user"] = "user"
        address: Address | None = None

    grammar = Grammar.from_pydantic(Person)
    compiled = automask.compile(grammar, vocab)
    schema = Person.model_json_schema()
    ref = reference_validator(schema)
    good = [
        {"name": "Ada", "age": 36},
        {"name": "Ada", "age": 36, "tags": ["x", "y"], "role": "admin",
         "address": {"city": "Paris", "zip": "75001"}},
        {"name": "Zoë", "age": 0, "address": None},
        Person(name="Bo", age=150, tags=["t"]).model_dump(),
    ]
    bad = [
        {"name": "", "age": 1}, {"name": "Ada", "age": -1}, {"name": "Ada", "age": 151},
        {"name": "Ada", "age": 3.5}, {"age": 3}, {"name": "Ada", "age": 1, "role": "root"},
        {"name": "Ada", "age": 1, "address": {"city": "P", "zip": "7500"}},
        {"name": "Ada", "age": 1, "address": {"zip": "75001"}},
    ]
    for x in good:
        text = dumps(x)
        assert reference_accepts(ref, text), text
        assert accepts_tokens(compiled, vocab, text), text
        Person.model_validate_json(text)
    for x in bad:
        text = dumps(x)
        assert not reference_accepts(ref, text), text
        assert not accepts_bytes(compiled, text), text
        with pytest.raises(pydantic.ValidationError):
            Person.model_validate_json(text)
    # Options pass through.
    compact = automask.compile(Grammar.from_pydantic(Person, whitespace="compact"), vocab)
    assert accepts_bytes(compact, '{"name":"Ada","age":36}')
    assert not accepts_bytes(compact, '{"name": "Ada","age":36}')


def test_from_pydantic_rejects_non_models():
    with pytest.raises(TypeError):
        Grammar.from_pydantic({"type": "object"})


@pytest.mark.parametrize("schema", [
    {"type": "object"},
    {"type": "object", "properties": {"a": {"type": "array"}}},
    {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True},
    {"type": "array", "contains": {"type": "integer"}, "minContains": 0, "maxContains": 2},
    {"type": "array", "allOf": [{"contains": {"const": 1}, "minContains": 0, "maxContains": 1},
                                {"contains": {"const": 2}, "minContains": 0, "maxContains": 1}]},
    {"const": {"a": [], "b": {}}},
], ids=["object", "nested", "unique", "counted", "multi-counted", "const"])
def test_whitespace_leads_lexemes_and_never_trails_them(schema):
    """A whitespace gap sits at the front of the lexeme after it, never at the end of
    the one before: no lexeme goes on with a space once it can end (else after
    ``":`` or ``,`` the parser holds two threads, more whitespace or the next
    lexeme, and each token through the gap costs a decision). The one lexeme of
    whitespace alone is the document's trailing gap, which nothing follows."""
    from automask.engine.earley import follow_lexemes
    from automask.regex import nodes as rx
    from automask.schema.json_text import Layout

    grammar = Grammar.from_json_schema(schema)
    gap = rx.nonempty(Layout.make().ws)
    follow = follow_lexemes(grammar)
    for i, node in enumerate(grammar.lexemes):
        if node is gap:
            assert not follow[i], "only the trailing gap is whitespace alone"
            continue
        seen, todo = {node.uid}, [node]
        while todo:  # every derivative of the lexeme (small here)
            cur = todo.pop()
            assert not (cur.nullable and rx.derive(cur, ord(" ")) is not rx.EMPTY), \
                rx.to_pattern(node)
            for b in range(256):
                nxt = rx.derive(cur, b)
                if nxt is not rx.EMPTY and nxt.uid not in seen:
                    seen.add(nxt.uid)
                    todo.append(nxt)
            assert len(seen) < 5000


def test_lists_and_members_lower_without_helper_rules(tiny_bpe_vocab):
    """Array items and object members lower to ``list ::= item | list sep item``, nested
    sequences (``sep key value``) are spliced into their rule, and no helper rule only
    renames another symbol; the language stays the same."""
    schema = {"type": "array", "items": {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}}}}
    grammar = Grammar.from_json_schema(schema)
    by_lhs: dict[str, list[tuple]] = {}
    for p in grammar.productions:
        by_lhs.setdefault(p.lhs, []).append(p.rhs)
    lists = [lhs for lhs, alts in by_lhs.items()
             if len(alts) == 2 and any(len(r) == 3 and r[0] == lhs for r in alts)]
    assert len(lists) >= 3  # the items of both arrays, and any value's (extra members)
    renames = [lhs for lhs, alts in by_lhs.items()
               if "~" in lhs and len(alts) == 1 and len(alts[0]) == 1
               and isinstance(alts[0][0], str)]
    assert not renames
    compiled = automask.compile(grammar, tiny_bpe_vocab)
    for text in ['[]', '[{}]', '[{"a": 1}, {"a": 2, "b": ["x", "y"]}, {}]',
                 '[{"b": [], "c": {"d": [1, {"e": null}]}}]']:
        assert accepts_bytes(compiled, text), text
    for text in ['[{},]', '[,{}]', '[{"a": 1,}]', '[{"b": ["x",]}]', '[{"b": ["x" "y"]}]',
                 '[{"a": 1 "b": []}]', '[{"a": "1"}]']:
        assert not accepts_bytes(compiled, text), text


def test_multiples_of_far_values_are_decided_exactly(tiny_bpe_vocab):
    """1e308 by 0.123456789: Decimal's ``%`` gives up on such quotients; fractions do not."""
    schema = {"enum": [1e308, 0.246913578, 7], "not": {"multipleOf": 0.123456789}}
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert accepts_bytes(compiled, json.dumps(1e308))
    assert accepts_bytes(compiled, "7")
    assert not accepts_bytes(compiled, "0.246913578")  # twice the multiple
    kept = Grammar.from_json_schema({"enum": [1e308, 3e300], "multipleOf": 1e300})
    compiled = automask.compile(kept, tiny_bpe_vocab)
    assert accepts_bytes(compiled, json.dumps(1e308)) and accepts_bytes(compiled, json.dumps(3e300))


def test_json_keys_equal_exactly_where_values_are_equal():
    """Enums are deduplicated and intersected by a hashable key: it must tell values apart
    exactly as JSON equality does (1 and 1.0 equal, true and 1 not, key order ignored),
    written here the plain recursive way as the reference."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from automask.schema.subschema import json_key as _json_key

    def json_equal(a, b) -> bool:
        if isinstance(a, bool) or isinstance(b, bool):
            return type(a) is type(b) and a == b
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a == b
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(map(json_equal, a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
        return type(a) is type(b) and a == b

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                        st.sampled_from([0.0, 1.0, -1.0, 2.5, 1e300]), st.sampled_from("ab"))
    values = st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("xyz"), inner,
                                                     max_size=3)), max_leaves=8)

    @settings(max_examples=400, deadline=None)
    @given(values, values)
    def check(a, b):
        assert (_json_key(a) == _json_key(b)) == json_equal(a, b)

    check()
    assert _json_key({"x": 1, "y": [True]}) == _json_key({"y": [True], "x": 1.0})
    assert _json_key(True) != _json_key(1) and _json_key(0) != _json_key(False)


def test_long_enums_compile_within_the_limits(tiny_bpe_vocab):
    """Enums meet each other by hashing, not pairwise: 20,000 values under a oneOf with
    another enum (pairwise, that is 400 million comparisons: past the compile limit)."""
    words = [f"w{i}" for i in range(20_000)]
    schema = {"oneOf": [{"enum": words}, {"enum": words[::2] + [1, 2]}]}
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert accepts_bytes(compiled, '"w1"') and accepts_bytes(compiled, "1")
    assert not accepts_bytes(compiled, '"w2"')  # in both: oneOf fails


def test_a_large_enum_is_one_lexeme_with_the_masks_of_one_lexeme_per_value(
        tiny_bpe_vocab, monkeypatch):
    """An enum of more than ENUM_LEXEMES scalar values is the alternation of their texts,
    one lexeme; the language and every mask are those of one lexeme per value."""
    from support.walks import assert_same_masks, masks_along

    from automask.schema import conjunctions

    values = [f"code-{i:03d}" for i in range(40)] + [1.5, 7, None, True]
    schema = {"type": "object", "properties": {"v": {"enum": values}, "w": {"type": "string"}}}
    instances = [{"v": v, "w": "x"} for v in values[::7]] + [{"v": "code-039"}, {}]
    grammar = Grammar.from_json_schema(schema)
    merged = masks_along(tiny_bpe_vocab, schema, instances)
    monkeypatch.setattr(conjunctions, "ENUM_LEXEMES", len(values))
    apart = Grammar.from_json_schema(schema)
    assert len(apart.lexemes) - len(grammar.lexemes) == len(values) - 1
    assert_same_masks(merged, masks_along(tiny_bpe_vocab, schema, instances))
    c = automask.compile(grammar, tiny_bpe_vocab)
    for text in ('{"v": "code-01"}', '{"v": 7.0}', '{"v": "code-040"}', '{"v": 1.50}'):
        assert accepts_bytes(c, text) is (text in ('{"v": 7.0}', '{"v": 1.50}')), text


def test_a_wide_enum_is_one_tree_of_its_values_spellings():
    """An enum of thousands of names goes straight from its texts into the prefix tree of
    bytes: the node is the one the alternation of each value's own node gives (nodes are
    interned, so the very same object); and within the limit of a plain alternation
    nothing changes. In a wide enum of values of several spellings (numbers, a string
    with an escape), every spelling of every value is one branch of the tree: the
    language is each value's, spelled any way JSON allows, and nothing else."""
    from automask.regex import nodes as rx
    from automask.regex.parser import TRIE_BRANCHES, alternation
    from automask.schema.json_text import literal_node, only_spelling, values_node

    names = [f"name {i}" for i in range(TRIE_BRANCHES + 50)] + [None, True, False, "é"]
    for values in (names, names[:20]):
        assert values_node(values) is alternation([literal_node(v) for v in values])
    assert only_spelling("a/b") is None and only_spelling(1) is None  # (also \/ and 1.0)
    assert only_spelling("x") == b'"x"' and only_spelling(None) == b"null"

    numbers = [3 * i for i in range(TRIE_BRANCHES + 10)] + [0.25, -7]
    narrow = numbers[:30] + ['say "hi"', "a/b", None]
    assert values_node(narrow) is alternation([literal_node(v) for v in narrow])
    for values in (numbers, narrow):
        node = values_node(values)
        for v in values:
            assert rx.matches(node, json.dumps(v).encode()), v
        numeric = {float(v) for v in values if type(v) in (int, float)}
        for text in ("15.0", "1.5e1", "150E-1", "0.15e+2", "0.250", "2.5e-1", "-7.00",
                     "-0.7e1", "762", "7.62e2", "16", "7"):
            assert rx.matches(node, text.encode()) is (float(text) in numeric), text
        assert not rx.matches(node, b"1.5e") and not rx.matches(node, b'"name"')
        assert same_language(node, rx.alt_of(literal_node(v) for v in values))


@pytest.mark.python_engine
def test_a_tag_required_next_to_the_one_of_makes_its_branches_disjoint(
        tiny_bpe_vocab, monkeypatch):
    """A tagged union whose tag is required beside the ``oneOf`` (not in each branch) is
    an ``anyOf``: no object has two values for the tag. Each branch used to be conjoined
    with the complements of all the others; with eight branches that took the compile
    past its time limit. The language is the reference's, and without the context's
    ``required`` the exact ``oneOf`` is kept (``{}`` satisfies both branches there)."""
    from automask.schema import one_of

    branches = [{"properties": {"kind": {"const": k}, "x": {"type": t}}}
                for k, t in (("a", "integer"), ("b", "string"), ("c", "boolean"))]
    tagged = {"type": "object", "properties": {"kind": {"enum": ["a", "b", "c"]}},
              "required": ["kind"], "oneOf": branches}
    untagged = {k: v for k, v in tagged.items() if k != "required"}
    complements = []
    real_overlaps = one_of.OneOf.overlaps

    def watched(self, subs, context=()):
        answer = real_overlaps(self, subs, context)
        complements.append(any(answer))
        return answer

    monkeypatch.setattr(one_of.OneOf, "overlaps", watched)
    instances = ['{"kind": "a", "x": 1}', '{"kind": "a", "x": "s"}', '{"kind": "b", "x": "s"}',
                 '{"kind": "c", "x": true}', '{"kind": "c"}', '{"x": 1}', '{}',
                 '{"kind": "d", "x": 1}']
    for schema, exact_one_of in ((tagged, False), (untagged, True)):
        complements.clear()
        compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
        assert complements == [exact_one_of]
        ref = reference_validator(schema)
        for text in instances:
            assert accepts_bytes(compiled, text) is reference_accepts(ref, text), (schema, text)


@pytest.mark.python_engine
def test_one_of_complements_only_the_branches_that_may_overlap(tiny_bpe_vocab, monkeypatch):
    """Exactly one branch holds: branch i is conjoined with the complements of the
    branches that may overlap it, and no other (one disjoint from it fails wherever it
    holds). Here ``a`` and ``b`` overlap (``{"x": 1, "y": "s"}`` is both) and ``c``, whose
    required tag has a value neither of them allows, overlaps neither; the language is
    the reference's. (The general lowering: plain object branches are read key by key,
    see ``test_one_of_objects``.)"""
    from automask.schema import conjunctions, one_of_objects

    schema = {"type": "object", "oneOf": [
        {"properties": {"x": {"type": "integer"}, "t": {"const": "a"}}, "required": ["x"]},
        {"properties": {"y": {"type": "string"}, "t": {"const": "a"}}, "required": ["y"]},
        {"properties": {"t": {"const": "c"}}, "required": ["t"]}]}
    negated = []
    real_negated = conjunctions.negated

    def watched(m):
        negated.append(m.uri.rsplit("/", 1)[-1])
        return real_negated(m)

    monkeypatch.setattr(conjunctions, "negated", watched)
    monkeypatch.setattr(one_of_objects.OneOfObjects, "lower", lambda self, *a: None)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert sorted(negated) == ["0", "1"]  # a's complement for b, b's for a; none of c
    ref = reference_validator(schema)
    for text in ('{"x": 1}', '{"y": "s"}', '{"t": "c"}', '{"t": "c", "y": "s"}'):
        assert accepts_bytes(compiled, text) and reference_accepts(ref, text), text
    # (some valid ones are left out by property order: never an invalid one in)
    for text in ('{"x": 1, "y": "s"}', '{"x": 1, "t": "c"}', '{"x": "s", "y": "s"}', '{}',
                 '{"x": 1, "t": "a"}', '{"x": 1, "y": 2}', '{"x": 1, "y": "s", "t": "a"}',
                 '{"t": "c", "x": 1}', '{"y": "s", "x": 1.5}', '{"t": "a"}'):
        assert not accepts_bytes(compiled, text) or reference_accepts(ref, text), text


@pytest.mark.parametrize("schema, kept_first, texts", [
    # not object, no "a", no "b", "b" not 1: the first two contradict the members
    ({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}},
      "not": {"type": "object", "required": ["a", "b"], "properties": {"b": {"const": 1}}}},
     (4, 2), ('{"a": "x"}', '{"a": "x", "b": 2}', '{"a": "x", "b": 1}', '{"b": 2}', '{}',
              '{"a": 1}', '"a"', '{"a": "x", "b": "1"}')),
    # "p" not a string (excluded by its type, through the complement's embedded
    # subschema) contradicts the members; "q" not an integer is kept
    ({"type": "object", "required": ["p"], "properties": {"p": {"type": "string"}},
      "not": {"properties": {"p": {"type": "string"}, "q": {"type": "integer"}}}},
     (2, 1), ('{"p": "s"}', '{"p": "s", "q": 1}', '{"p": "s", "q": "1"}', '{"p": 1}',
              '{"q": "1"}', '{}')),
])
@pytest.mark.python_engine
def test_complement_branches_the_other_members_contradict_are_dropped(
        schema, kept_first, texts, tiny_bpe_vocab, monkeypatch):
    """``not`` distributes as a choice of its complement's branches, each conjoined with
    the other members; a branch they contradict (a key they require, absent there; a type
    they exclude; a property of a type they exclude) holds of nothing, and is dropped
    before it multiplies the rules of the next ``not``. The language is the reference's."""
    from automask.schema import one_of

    kept = []
    real_consistent = one_of.OneOf.consistent

    def watched(self, branches, members):
        out = real_consistent(self, branches, members)
        kept.append((len(branches), len(out)))
        return out

    monkeypatch.setattr(one_of.OneOf, "consistent", watched)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert kept[0] == kept_first
    ref = reference_validator(schema)
    for text in texts:
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_a_required_key_of_different_types_makes_branches_disjoint(tiny_bpe_vocab,
                                                                   monkeypatch):
    """Two branches whose required key takes values of different types hold of no common
    object (the same test as for a tag's values, on the key's whole signature)."""
    from automask.schema import one_of

    schema = {"type": "object", "oneOf": [
        {"required": ["v"], "properties": {"v": {"type": "string"}}},
        {"properties": {"v": {"type": "integer"}, "w": {"type": "boolean"}}, "required": ["w"]}]}
    answers = []
    real_overlaps = one_of.OneOf.overlaps

    def watched(self, subs, context=()):
        answers.append(real_overlaps(self, subs, context))
        return answers[-1]

    monkeypatch.setattr(one_of.OneOf, "overlaps", watched)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert answers == [[[], []]]
    ref = reference_validator(schema)
    for text in ('{"v": "s"}', '{"v": 1, "w": true}', '{"w": true}', '{"v": "s", "w": true}',
                 '{"v": 1}', '{}', '{"v": null, "w": true}'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


def typed_with_and_without(monkeypatch, schema, target, name: str, value):
    """The grammar of ``schema``, the conjunctions compiled for it (``typed`` calls), and
    the number compiled with ``target.name`` replaced by ``value`` (a pruning off)."""
    from automask.schema import conjunctions

    typed = []
    real_typed = conjunctions.Conjunctions.typed

    def counted(self, members):
        typed.append(1)
        return real_typed(self, members)

    monkeypatch.setattr(conjunctions.Conjunctions, "typed", counted)
    grammar = Grammar.from_json_schema(schema)
    pruned = len(typed)
    typed.clear()
    with monkeypatch.context() as m:
        m.setattr(target, name, value)
        Grammar.from_json_schema(schema)
    return grammar, pruned, len(typed)


@pytest.mark.python_engine
def test_an_if_chain_over_a_required_tag_is_not_a_case_per_subset(tiny_bpe_vocab,
                                                                  monkeypatch):
    """``if``/``then`` is distributed as the choice (if and then) or (not if); with six
    of them over a required tag, every subset of the ifs was a case (2^6 conjunctions,
    most of them empty only once compiled). A case the other members contradict (two
    tags) is dropped as it is made: the conjunctions compiled grow with the square of the
    ifs, not as 2^n. The language is the reference's. (The general distribution: an
    if-chain over one key is split by that key's value first, see ``test_tag_cases``.)"""
    from automask.schema import conjunctions, one_of

    monkeypatch.setattr(conjunctions, "tag_cases", lambda members: None)
    tags = [f"t{i}" for i in range(6)]
    schema = {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": tags}},
              "allOf": [{"if": {"properties": {"kind": {"const": t}}},
                         "then": {"required": [f"x{i}"]}} for i, t in enumerate(tags)]}
    grammar, pruned, unpruned = typed_with_and_without(
        monkeypatch, schema, one_of.OneOf, "consistent", lambda self, branches, members: branches)
    assert pruned * 4 < unpruned, (pruned, unpruned)  # (14 against 128 when written)
    compiled = automask.compile(grammar, tiny_bpe_vocab)
    ref = reference_validator(schema)
    for text in ('{"kind": "t3", "x3": 1}', '{"kind": "t3"}', '{"kind": "t5", "x5": null}',
                 '{"kind": "t5", "x3": 1}', '{"kind": "t6", "x1": 1}', '{"x3": 1}'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_ifs_that_a_key_is_set_are_not_a_case_per_subset(tiny_bpe_vocab, monkeypatch):
    """"At most one of these keys is set (not null)", written as one ``if`` per key:
    ``if: {not: {properties: {K: {const: null}}}}, then: {properties: {others: {const:
    null}}}``. Distributed ``if`` by ``if``, both branches of each stayed (2^n
    conjunctions) until a signature said what the ``not`` does: an object with K, whose
    value is not null. Then "K is set" and another ``then``'s "K is null" are disjoint,
    and the branch is dropped as it is made. The language is the reference's."""
    from automask.schema import one_of

    keys = [f"k{i}" for i in range(6)]
    schema = {"type": "object", "properties": {k: {"type": ["string", "null"]} for k in keys},
              "allOf": [{"if": {"not": {"properties": {k: {"const": None}}}},
                         "then": {"properties": {o: {"const": None} for o in keys if o != k}}}
                        for k in keys]}
    grammar, pruned, unpruned = typed_with_and_without(
        monkeypatch, schema, one_of, "negated_property", lambda n: None)
    assert pruned * 4 < unpruned, (pruned, unpruned)  # (49 against 448 when written)
    compiled = automask.compile(grammar, tiny_bpe_vocab)
    ref = reference_validator(schema)
    for text in ('{}', '{"k0": "a"}', '{"k0": "a", "k1": null}', '{"k0": "a", "k1": "b"}',
                 '{"k2": null, "k3": null, "k5": "x"}', '{"k2": "x", "k4": "y"}',
                 '{"k1": null, "k3": null}', '{"k3": 1}'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_a_complement_leaves_out_the_members_that_hold_beside_it(tiny_bpe_vocab,
                                                                monkeypatch):
    """``not (M and R)`` where ``M`` holds is ``not R``: each ``oneOf`` branch built on a
    shared base is conjoined with the other branch's complement, and the base's own
    complement (a branch per constrained property) is left out of it. The language is
    the reference's. (The general lowering: see ``test_one_of_objects`` for plain object
    branches read key by key.)"""
    from automask.schema import conjunctions, one_of_objects

    schema = {"$defs": {"base": {"type": "object", "properties": {
        "n": {"type": "string", "minLength": 1}, "m": {"type": "integer", "minimum": 0}}}},
        "oneOf": [{"allOf": [{"$ref": "#/$defs/base"}, {"required": ["a"]}]},
                  {"allOf": [{"$ref": "#/$defs/base"}, {"required": ["b"]}]}]}
    sizes = []
    real_complement = conjunctions.Conjunctions.complement_beside

    def watched(self, operand, others):
        out = real_complement(self, operand, others)
        sizes.append(len(out))
        return out

    monkeypatch.setattr(conjunctions.Conjunctions, "complement_beside", watched)
    monkeypatch.setattr(one_of_objects.OneOfObjects, "lower", lambda self, *a: None)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert sizes == [1, 1]  # "no b" beside branch 0, "no a" beside branch 1 (were 4 each)
    ref = reference_validator(schema)
    for text in ('{"a": 1}', '{"b": 1}', '{"a": 1, "b": 1}', '{}', '{"a": 1, "n": ""}',
                 '{"n": "x", "a": 1}', '{"m": -1, "b": 1}', '{"m": 2, "b": 1}', '"a"'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_each_subschema_below_a_member_is_signed_once(tiny_bpe_vocab, monkeypatch):
    """Disjointness tests read signatures of the members' properties and nested branches;
    every conjunction that holds a member reads them again, so they are kept per
    compile (a schema of many overlapping branches spent 57% of its compile signing
    the same properties). Each (subschema, depth) is signed once; the language is the
    reference's."""
    from automask.schema import one_of

    props = {f"p{i}": {"type": ["string", "integer"][i % 2]} for i in range(6)}
    schema = {"type": "object", "oneOf": [
        {"properties": props, "required": ["a"]}, {"properties": props, "required": ["b"]},
        {"properties": {**props, "c": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}]}
    signed = []
    real_signature = one_of.OneOf.signature

    def watched(self, branch, types, depth=0, **kw):
        if depth:
            signed.append((tuple(m.uri for m in branch), depth))
        return real_signature(self, branch, types, depth, **kw)

    monkeypatch.setattr(one_of.OneOf, "signature", watched)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert signed and len(signed) == len(set(signed))
    ref = reference_validator(schema)
    for text in ('{"a": 1}', '{"b": 1}', '{"a": 1, "b": 1}', '{"c": null}', '{"c": 1}',
                 '{"a": 1, "p0": "s"}', '{"a": 1, "p0": 1}', '{"p1": 2}', '{"c": "x", "a": 0}'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_a_not_the_other_members_imply_is_dropped(tiny_bpe_vocab, monkeypatch):
    """``C and not X`` is ``C`` where ``C`` implies a branch of ``not X``: here ``C``
    forbids ``a``, which ``X`` requires, so the ``not`` is not distributed at all. The
    language is the reference's."""
    from automask.schema import one_of

    schema = {"type": "object", "properties": {"a": False},
              "not": {"required": ["a"], "properties": {"b": {"type": "string"}}}}
    answers = []
    real_absorbed = one_of.OneOf.absorbed

    def watched(self, branches, members):
        answers.append(real_absorbed(self, branches, members))
        return answers[-1]

    monkeypatch.setattr(one_of.OneOf, "absorbed", watched)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert answers == [True]
    ref = reference_validator(schema)
    for text in ('{}', '{"b": 1}', '{"b": "s"}', '{"a": 1}', '{"a": 1, "b": 2}', '1'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


@pytest.mark.python_engine
def test_properties_that_only_refer_to_one_definition_share_its_rule(tiny_bpe_vocab,
                                                                     monkeypatch):
    """A property that is only ``{"$ref": …}`` (annotations aside) adds nothing to its
    target, so the conjunctions at every such property are one conjunction, compiled
    once; one with a keyword of its own is its own. The language is the reference's."""
    from automask.schema import conjunctions

    record = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    schema = {"$defs": {"r": record}, "type": "object", "properties": {
        "p": {"$ref": "#/$defs/r"}, "q": {"$ref": "#/$defs/r", "description": "same"},
        "s": {"$ref": "#/$defs/r", "required": ["a"]}}}
    objects = []
    real_object = conjunctions.Objects.object

    def counted(self, members):
        objects.append(sorted(m.uri.rsplit("#", 1)[-1] for m in members))
        return real_object(self, members)

    monkeypatch.setattr(conjunctions.Objects, "object", counted)
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert sorted(objects) == [[""], ["/$defs/r", "/properties/p"],
                               ["/$defs/r", "/properties/s"]]
    ref = reference_validator(schema)
    for text in ('{"p": {"a": 1}, "q": {"b": "x"}, "s": {"a": 2}}', '{"q": {"a": "x"}}',
                 '{"s": {"b": "x"}}', '{"p": {"a": 1, "b": 2}}', '{"q": {}, "s": {"a": 1}}'):
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text


def test_a_declared_key_lexeme_is_made_once_across_schemas():
    from automask.regex import nodes as rx
    from automask.schema.json_text import key_lexeme, literal_string_node

    key_lexeme.cache_clear()
    Grammar.from_json_schema({"type": "object", "properties": {"name": {"type": "string"}}})
    made = key_lexeme.cache_info()
    Grammar.from_json_schema({"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "integer"}}}})
    again = key_lexeme.cache_info()
    assert again.misses == made.misses and again.hits > made.hits
    # what it keeps is what it would make: ws, the key as JSON spells it, the separator
    ws, sep = rx.literal(b" "), rx.literal(b":")
    assert key_lexeme("na\"me", ws, sep) is rx.concat(ws, literal_string_node("na\"me", sep))
    assert rx.matches(key_lexeme("na\"me", ws, sep), b' "na\\"me":')


@pytest.mark.python_engine
def test_one_of_reads_an_undecided_meet_as_may_meet_and_never_a_spent_time_limit(
        tiny_bpe_vocab, monkeypatch):
    """Two string branches of a ``oneOf`` are told apart by intersecting their texts. A
    liveness search that gives up there (``rx.Undecided``) reads as "they may meet":
    the ``oneOf`` is then lowered with complements ("exactly one"), and the language is
    the same. Any other ``LimitExceeded`` in that intersection is the compile's own time
    limit, which must end the compile rather than read as an answer."""
    from automask import LimitExceeded
    from automask.regex import nodes as rx
    from automask.schema import one_of

    schema = {"oneOf": [{"type": "string", "pattern": "^a"},
                        {"type": "string", "pattern": "^b"}]}
    texts = ['"a1"', '"b1"', '"ab"', '"ba"', '"c"', '""', "1"]
    real_meet, real_intersect = one_of.OneOf.meet, rx.intersect
    gives, met = [], []

    def intersect(*nodes):
        if sys._getframe(1).f_code is real_meet.__code__:  # meet's own test of the texts
            raise gives[0]
        return real_intersect(*nodes)

    def watched_meet(self, *args):
        met.append(real_meet(self, *args))
        return met[-1]

    monkeypatch.setattr(rx, "intersect", intersect)
    monkeypatch.setattr(one_of.OneOf, "meet", watched_meet)
    gives.append(rx.Undecided("no answer within the bound"))
    compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
    assert met == [True]  # disjoint texts, but undecided: read as overlapping
    ref = reference_validator(schema)
    for text in texts:
        assert accepts_bytes(compiled, text) is reference_accepts(ref, text), text
    gives[0] = LimitExceeded("compiling the JSON Schema took longer than 2 s of CPU time")
    met.clear()
    with pytest.raises(LimitExceeded, match="took longer than"):
        Grammar.from_json_schema(schema)
    assert met == []
