"""JSON Schema compiler, keyword by keyword, against the ``jsonschema`` package.

For every supported keyword a schema and a list of instances: each instance is
serialized with ``json.dumps(x, ensure_ascii=False)`` (properties in the
schema's order), fed token by token under the two tiny tokenizers and byte by
byte, and our verdict must equal the reference's. The reference is
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

import datetime
import json
import re
import warnings
from decimal import Decimal, localcontext

import pytest

import automask
from automask import EmptyLanguage, Grammar, GrammarError, Matcher, UnsupportedFeature

jsonschema = pytest.importorskip("jsonschema")
D2020 = jsonschema.Draft202012Validator
D7 = jsonschema.Draft7Validator
D4 = jsonschema.Draft4Validator


# --------------------------------------------------------------------------- helpers
# (test_schema_soundness imports these)


def dumps(x) -> str:
    return json.dumps(x, ensure_ascii=False)


def _is_integer(checker, x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    if isinstance(x, float):
        return x.is_integer()
    if isinstance(x, Decimal):
        return x.is_finite() and x == x.to_integral_value()
    return False


def _full_date(x) -> bool:
    """RFC 3339 ``full-date``. ``jsonschema`` uses ``date.fromisoformat``, which has no year
    0000; RFC 3339 has (a leap year, like 2000)."""
    if not isinstance(x, str):
        return True
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", x)
    if m is None:
        return False
    year, month, day = (int(g) for g in m.groups())
    datetime.date(year or 2000, month, day)  # ValueError when out of range
    return True


_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\.[0-9]+)?"
                   r"([Zz]|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))")


def _full_time(x) -> bool:
    """RFC 3339 ``full-time``, with a leap second only at 23:59 UTC. ``jsonschema``'s checker
    (rfc3339-validator) has no leap seconds; the JSON Schema test suite has them."""
    if not isinstance(x, str):
        return True
    m = _TIME.fullmatch(x)
    if m is None:
        return False
    if m[3] == "60":
        offset = 0 if m[6] is None else (1 if m[6] == "+" else -1) * (int(m[7]) * 60 + int(m[8]))
        return (int(m[1]) * 60 + int(m[2]) - offset) % 1440 == 23 * 60 + 59
    return True


def _date_time(x) -> bool:
    if not isinstance(x, str):
        return True
    date, sep, time = x[:10], x[10:11], x[11:]
    return sep in ("T", "t") and _full_date(date) and _full_time(time)


def reference_validator(schema, cls=D2020):
    """A ``jsonschema`` validator that reads numbers as Decimal and asserts ``format``."""
    exact = jsonschema.validators.extend(
        cls, type_checker=cls.TYPE_CHECKER.redefine("integer", _is_integer))
    formats = jsonschema.FormatChecker(())
    formats.checkers = dict(cls.FORMAT_CHECKER.checkers)
    for name, check in (("date", _full_date), ("time", _full_time), ("date-time", _date_time)):
        if name in formats.checkers:
            formats.checks(name, raises=ValueError)(check)
    return exact(json.loads(json.dumps(schema), parse_float=Decimal), format_checker=formats)


EXPONENT_CLAMP = 3000


def exact_number(text: str) -> Decimal:
    """A JSON number as a Decimal, exactly, except that an exponent beyond Decimal's range
    is clamped: a magnitude above 10**3000 or below 10**-3000 (nonzero) keeps its sign,
    digits, integrality and divisibility by any ``multipleOf`` with fewer digits."""
    mantissa, _, exp = text.lower().partition("e")
    digits = exp.lstrip("+-").lstrip("0") or "0"  # 1e0000000000000000005 is 1e5
    if len(digits) > 18:
        digits = "9" * 18
    exp = ("-" if exp.startswith("-") else "") + digits
    d = Decimal(mantissa)
    if not d:
        return d
    e = int(exp or 0)
    adjusted = d.adjusted() + e
    if adjusted > EXPONENT_CLAMP:
        e -= adjusted - EXPONENT_CLAMP
    elif adjusted < -EXPONENT_CLAMP:
        e += -EXPONENT_CLAMP - adjusted
    sign, ds, e0 = d.as_tuple()
    return Decimal((sign, ds, e0 + e))


def reference_accepts(validator, text: str) -> bool:
    """Whether the JSON text ``text`` is valid under ``validator`` (numbers exact)."""
    with localcontext() as ctx:
        ctx.prec = 4 * EXPONENT_CLAMP
        return validator.is_valid(json.loads(text, parse_float=exact_number))


def accepts_tokens(compiled, vocab, text: str) -> bool:
    """Token by token (the tokenizer's own encoding), ending accepting with EOS allowed."""
    ids = vocab.encode(text)
    m = Matcher(compiled)
    if m.accept_tokens(ids) != len(ids) or not m.is_accepting():
        return False
    assert all(m.is_allowed(e) for e in vocab.eos_token_ids), text
    return True


def accepts_bytes(compiled, text: str) -> bool:
    m = Matcher(compiled)
    return m.accept_bytes(text.encode("utf-8")) and m.is_accepting()


def mismatches(schema, instances, vocab, cls=D2020, reference_schema=None, **options):
    """[(text, reference, by tokens, by bytes)] wherever one of ours differs from the reference."""
    compiled = automask.compile(Grammar.from_json_schema(schema, **options), vocab)
    ref = reference_validator(schema if reference_schema is None else reference_schema, cls)
    out = []
    for x in instances:
        text = x if isinstance(x, RawText) else dumps(x)
        want = reference_accepts(ref, text)
        by_tokens = accepts_tokens(compiled, vocab, text)
        by_bytes = accepts_bytes(compiled, text)
        if not want == by_tokens == by_bytes:
            out.append((text, want, by_tokens, by_bytes))
    return out


class RawText(str):
    """An instance given as JSON text (not re-serialized)."""


@pytest.fixture(params=["tiny-bpe", "tiny-spm"])
def vocab(request):
    return request.getfixturevalue("tiny_bpe_vocab" if request.param == "tiny-bpe"
                                   else "tiny_spm_vocab")


# --------------------------------------------------------------------------- keyword cases

TREE = {
    "$defs": {"node": {
        "type": "object",
        "properties": {"value": {"type": "integer"},
                       "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["value"],
        "additionalProperties": False,
    }},
    "$ref": "#/$defs/node",
}


def tree(depth: int, leaf=0):
    node = {"value": leaf}
    for i in range(depth):
        node = {"value": i, "children": [node, {"value": -i}]}
    return node


CLOSED_A = {"properties": {"a": {"type": "string"}}, "required": ["a"],
            "additionalProperties": False}
CLOSED_B = {"properties": {"b": {}}, "required": ["b"], "additionalProperties": False}
DISCRIMINATED = {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
     "required": ["kind", "x"]},
    {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
     "required": ["kind", "y"]},
]}

UUID = "123e4567-e89b-12d3-a456-426614174000"

# (id, schema, instances, validator class). Every list holds valid and invalid instances.
CASES = [
    # ---- type
    ("type-null", {"type": "null"}, [None, 0, False, "null", [], {}], D2020),
    ("type-boolean", {"type": "boolean"}, [True, False, None, 0, "true"], D2020),
    ("type-string", {"type": "string"}, ["", "a", "é🙂\n\"\\", 1, None, ["a"]], D2020),
    ("type-integer", {"type": "integer"}, [0, -7, 12345678901234567890, 1.5, "1", True],
     D2020),
    ("type-number", {"type": "number"}, [0, -7, 1.5, -0.25, 1e-05, 2.5e+20, "1", None],
     D2020),
    ("type-object", {"type": "object"}, [{}, {"a": [1, {"b": None}]}, [], "{}", None], D2020),
    ("type-array", {"type": "array"}, [[], [1, "a", None, [{}]], {}, "[]"], D2020),
    ("type-list", {"type": ["string", "null"]}, ["a", None, 1, [], {}, False], D2020),
    ("type-list-number", {"type": ["number", "boolean"]}, [1, 1.5, True, None, "1"], D2020),
    # ---- enum / const
    ("enum", {"enum": ["red", 1, None, [1, 2], {"a": 1}, True]},
     ["red", 1, 1.0, None, [1, 2], {"a": 1}, True, "blue", 2, [2, 1], {"a": 2}, False,
      "Red"], D2020),
    ("enum-typed", {"type": "string", "enum": ["a", "b", 3]}, ["a", "b", 3, "c"], D2020),
    ("const", {"const": {"a": [1, "x"], "b": None}},
     [{"a": [1, "x"], "b": None}, {"a": [1], "b": None}, {"a": [1, "x"]}, None], D2020),
    ("const-string", {"const": "é \"q\" \\"}, ["é \"q\" \\", "é", "e \"q\" \\"], D2020),
    ("const-and-enum", {"const": 2, "enum": [1, 2.0, None]}, [2, 1, None, 2.5], D2020),
    ("const-number", {"const": 2.5}, [2.5, 2.50, 25e-1, 2, "2.5"], D2020),
    # ---- objects
    ("properties-required",
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
      "required": ["a"]},
     [{"a": 1}, {"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": None}, {}, {"b": "x"},
      {"a": "1"}, {"a": 1, "b": 2}, [], "x"], D2020),
    ("required-not-in-properties",
     {"type": "object", "properties": {"a": {}}, "required": ["z", "a"]},
     [{"a": 1, "z": 2}, {"a": 1}, {"z": 2}], D2020),
    ("additionalProperties-false",
     {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     [{"a": 1}, {}, {"a": 1, "b": 2}, {"b": 2}], D2020),
    ("additionalProperties-schema",
     {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
     [{"a": "s", "b": 1, "c": 2}, {"b": 1}, {"a": "s", "b": "x"}, {"c": None}], D2020),
    ("additionalProperties-absent",
     {"type": "object", "properties": {"a": {"type": "integer"}}},
     [{"a": 1, "b": [1]}, {"zz": None}, {"a": None}], D2020),
    ("patternProperties",
     {"type": "object", "patternProperties": {"^x-": {"type": "integer"},
                                              "^y": {"type": "string"}},
      "additionalProperties": False},
     [{"x-a": 1, "yb": "s"}, {}, {"x-": 0}, {"x-a": "s"}, {"z": 1}, {"yb": 1}], D2020),
    ("patternProperties-overlapping",
     {"type": "object", "properties": {"ab": {"maximum": 9}},
      "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 5}, "^c": False},
      "additionalProperties": {"type": "string"}},
     [{"ab": 7}, {"ab": 10}, {"ab": 4}, {"xa": 1, "xb": 5, "xab": 6}, {"xab": 4},
      {"xab": 5.5}, {"z": "s"}, {"z": 1}, {"ca": 1}, {"b": "s"}, {"b": 7.5}], D2020),
    ("patternProperties-unanchored",
     {"type": "object", "properties": {"id": {"type": "string"}},
      "patternProperties": {"num": {"type": "integer"}}, "additionalProperties": False},
     [{"id": "x", "mynumber": 3}, {"numb": 1}, {"id": "x", "mynumber": "3"}, {"other": 1}],
     D2020),
    ("propertyNames",
     {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
     [{"abc": 1}, {}, {"a": 1, "b": 2}, {"abcd": 1}, {"A": 1}, {"é": 1}], D2020),
    ("propertyNames-enum",
     {"type": "object", "propertyNames": {"enum": ["a", "b"]}},
     [{"a": 1}, {"a": 1, "b": 2}, {"c": 1}], D2020),
    ("property-name-escapes",
     {"type": "object", "properties": {"a\"b": {"type": "integer"}, "\\": {}, "é🙂": {},
                                       "": {"type": "null"}, "new\nline": {}},
      "required": ["a\"b"], "additionalProperties": False},
     [{"a\"b": 1}, {"a\"b": 1, "\\": 2, "é🙂": 3, "": None, "new\nline": 4}, {"a\"b": "1"},
      {"ab": 1}, {"a\"b": 1, "": 0}, {"a\"b": 1, "e🙂": 3}], D2020),
    ("propertyNames-and-properties",
     {"type": "object", "properties": {"A": {}, "b": {"type": "integer"}},
      "propertyNames": {"pattern": "^[a-z]+$"}},
     [{"b": 1}, {"b": 1, "c": 2}, {"A": 1}, {"b": "x"}, {"C": 1}], D2020),
    ("maxProperties-required",
     {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"], "maxProperties": 1},
     [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "c": 2}, {"b": 2}, {}], D2020),
    ("min-maxProperties",
     {"type": "object", "minProperties": 1, "maxProperties": 2},
     [{"a": 1}, {"a": 1, "b": 2}, {}, {"a": 1, "b": 2, "c": 3}], D2020),
    ("minProperties-with-properties",
     {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 2,
      "maxProperties": 3},
     [{"a": 1, "b": 2}, {"a": 1, "c": 1}, {"a": 1, "b": 2, "c": 3}, {"a": 1},
      {"a": 1, "b": 2, "c": 3, "d": 4}], D2020),
    # ---- arrays
    ("items", {"type": "array", "items": {"type": "integer"}},
     [[], [1, 2, -3], [1, "a"], [None]], D2020),
    ("prefixItems-closed",
     {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
      "items": False},
     [[], ["a"], ["a", 1], [1], ["a", 1, 2], ["a", "b"]], D2020),
    ("prefixItems-open",
     {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}},
     [["a", True, False], ["a"], ["a", 1], [True]], D2020),
    ("draft7-items-array-additionalItems",
     {"type": "array", "items": [{"type": "string"}, {"type": "null"}],
      "additionalItems": {"type": "integer"}},
     [["a"], ["a", None], ["a", None, 1, 2], ["a", None, "b"], [1], ["a", 1]], D7),
    ("draft7-additionalItems-false",
     {"type": "array", "items": [{"type": "string"}], "additionalItems": False},
     [[], ["a"], ["a", "b"], [1]], D7),
    ("min-maxItems", {"type": "array", "minItems": 1, "maxItems": 3},
     [[1], [1, 2, 3], [], [1, 2, 3, 4]], D2020),
    ("minItems-prefixItems",
     {"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 2, "maxItems": 3},
     [[1, "x"], [1, "x", None], [1], [1, 2, 3, 4], ["x", 1]], D2020),
    ("contains", {"type": "array", "contains": {"type": "string"}},
     [["a"], [1, "a", 2], [], [1, 2]], D2020),
    ("minContains",
     {"type": "array", "items": {"type": ["integer", "string"]},
      "contains": {"type": "string"}, "minContains": 2},
     [["a", "b"], [1, "a", 2, "b", 3], ["a", 1], [], ["a", "b", None]], D2020),
    ("minContains-zero", {"type": "array", "contains": {"type": "string"}, "minContains": 0},
     [[], [1], ["a"], {}], D2020),
    # ---- strings
    ("min-maxLength", {"type": "string", "minLength": 2, "maxLength": 3},
     ["ab", "é🙂", "日本語", "a\nb", "\"\\", "a", "é", "🙂🙂🙂🙂", "abcd", ""], D2020),
    ("pattern-unanchored", {"type": "string", "pattern": "a"},
     ["xay", "a", "aaa", "xyz", "", "A"], D2020),
    ("pattern-anchored", {"type": "string", "pattern": "^a[0-9]+$"},
     ["a1", "a12", "xa12", "a12x", "a"], D2020),
    ("pattern-unicode", {"type": "string", "pattern": "^[é🙂]{2}$"},
     ["éé", "🙂é", "é", "ee", "é🙂é"], D2020),
    ("pattern-and-length", {"type": "string", "pattern": "^[a-z]*$", "maxLength": 2},
     ["", "ab", "abc", "a1"], D2020),
    ("format-date", {"type": "string", "format": "date"},
     ["2024-02-29", "1999-12-31", "0000-02-29", "2023-02-29", "1900-02-29", "2024-13-01",
      "2024-1-01", "20240101", "2024-04-31", "x2024-01-01"], D2020),
    ("format-email", {"type": "string", "format": "email"},
     ["user@example.com", "first.last@sub.example.org", "no-at-sign", "", "example.com"],
     D2020),
    ("format-ipv4", {"type": "string", "format": "ipv4"},
     ["192.168.0.1", "0.0.0.0", "255.255.255.255", "256.1.1.1", "1.2.3", "1.2.3.4.5",
      "01.2.3.4", "a.b.c.d"], D2020),
    ("format-uuid", {"type": "string", "format": "uuid"},
     [UUID, UUID.upper(), UUID.replace("-", ""), UUID[:-1], UUID[:-1] + "g",
      "{" + UUID + "}"], D2020),
    ("format-date-time", {"type": "string", "format": "date-time"},
     ["2024-05-17T12:30:00Z", "2024-05-17t12:30:00.5z", "0000-01-01T00:00:00+01:00",
      "1998-12-31T23:59:60Z", "1998-12-31T15:59:60.123-08:00", "2024-05-17T12:30:60Z",
      "2024-05-17 12:30:00Z", "2024-05-17T12:30:00", "2024-05-17T24:00:00Z",
      "2023-02-29T00:00:00Z"], D2020),
    ("format-time", {"type": "string", "format": "time"},
     ["12:30:00Z", "23:59:60Z", "00:29:60+00:30", "12:30:00", "12:30Z", "12:60:00Z"], D2020),
    ("format-non-string", {"format": "date"}, ["2024-01-01", "x", 5, None], D2020),
    ("format-regex", {"type": "string", "format": "regex"},
     ["^a+$", "", "[a-z]{2,3}\\d*", "(x|y)?\\.", "(a|b", "a**", "[z-a]", "\\", "x{3,2}"],
     D2020),
    # ---- numbers
    ("min-max-decimal", {"type": "number", "minimum": 0.1, "maximum": 1.5},
     [0.1, 0.5, 1, 1.5, 0.09999, 1.50001, 2, 0, -0.1, 1e-05, 1e20], D2020),
    ("exclusive-decimal", {"type": "number", "exclusiveMinimum": 0.1, "exclusiveMaximum": 0.2},
     [0.15, 0.10000000001, 0.19999, 0.1, 0.2, 0, 1], D2020),
    ("min-max-integer", {"type": "integer", "minimum": -5, "maximum": 100},
     [-5, 0, 100, -6, 101, 1.5, 50.5], D2020),
    ("exclusive-integer", {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 10},
     [0, 9, -1, 10], D2020),
    ("exclusive-decimal-integer", {"type": "integer", "exclusiveMinimum": 0.5,
                                   "maximum": 2.5},
     [1, 2, 0, 3], D2020),
    ("draft4-exclusive-booleans",
     {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 10,
      "exclusiveMaximum": True},
     [0.001, 5, 9.999, 0, 10, -1], D4),
    ("draft4-exclusive-false",
     {"type": "number", "minimum": 0, "exclusiveMinimum": False, "maximum": 1,
      "exclusiveMaximum": False},
     [0, 1, 0.5, -0.5, 1.5], D4),
    ("multipleOf-integer", {"type": "integer", "multipleOf": 7},
     [0, 14, -21, 700, 15, -1, 14.5], D2020),
    ("multipleOf-integral-number", {"type": "number", "multipleOf": 7, "maximum": 30},
     [14, 14.0, 21.00, 15.0, 35.0, -7.0, 0.0, 28.5], D2020),
    ("multipleOf-decimal", {"type": "number", "multipleOf": 0.01},
     [0, 0.07, 1.25, 3, -0.5, 12.34, 0.075, 0.001, -0.123], D2020),
    ("multipleOf-bounds", {"type": "integer", "multipleOf": 5, "minimum": 3, "maximum": 21},
     [5, 10, 20, 0, 25, 7], D2020),
    ("multipleOf-decimal-bounds", {"type": "number", "multipleOf": 0.5, "minimum": -1,
                                   "maximum": 1},
     [-1, -0.5, 0, 0.5, 1, 1.5, 0.25, -1.5], D2020),
    # ---- combinators
    ("anyOf",
     {"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string", "maxLength": 2},
                {"type": "number", "maximum": 5}]},
     [11, "ab", 3, 3.5, -100, 7, "abc", None, 10.5], D2020),
    ("anyOf-overlapping-objects",
     {"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                 "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "string"}},
                 "required": ["b"]}]},
     [{"a": 1}, {"b": "x"}, {"a": 1, "b": "x"}, {}, {"a": "x"}], D2020),
    ("allOf-objects",
     {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                 "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}, {"a": 1}, {"b": "x"}, {"a": "1", "b": "x"}], D2020),
    ("allOf-numbers",
     {"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}, {"multipleOf": 2}]},
     [0, 4, 10, -2, 12, 3], D2020),
    ("allOf-strings",
     {"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "z$"}, {"maxLength": 4}]},
     ["az", "abcz", "abcdz", "za", "a"], D2020),
    ("allOf-properties-narrowed",
     {"type": "object", "properties": {"a": {"type": "number"}},
      "allOf": [{"properties": {"a": {"minimum": 5}}},
                {"additionalProperties": False, "properties": {"a": {}}}]},
     [{"a": 5}, {}, {"a": 4}, {"a": 6, "b": 1}], D2020),
    ("ref-siblings",
     {"$defs": {"pos": {"type": "integer", "minimum": 0}}, "$ref": "#/$defs/pos",
      "maximum": 10},
     [0, 10, -1, 11, "5"], D2020),
    ("not-multipleOf", {"not": {"type": "integer", "multipleOf": 3}},
     [3, 4, 6.0, "x", 4.5, -9, 0, 10, -0.5, None], D2020),
    ("not-multipleOf-decimal", {"type": "number", "not": {"multipleOf": 0.25}},
     [0.5, 0.3, 1, 1.75, 1.1, -0.26, 0.0], D2020),
    ("oneOf-multiples", {"type": "integer", "oneOf": [{"multipleOf": 3}, {"multipleOf": 5}]},
     [3, 5, 15, 7, 30, 9, 10, 0, -6], D2020),
    # not of additionalProperties false: some key neither a property nor a pattern names
    ("not-additionalProperties", {"type": "object", "not": {
        "properties": {"a": {}, "b": {"type": "string"}}, "patternProperties": {"^x": True},
        "additionalProperties": False}},
     [{}, {"a": 1}, {"c": 1}, {"a": 1, "c": 2}, {"x1": 1}, {"x1": 1, "y": 2}, {"b": 3},
      {"c": 1, "d": 2}, {"a": 1, "b": "s", "zz": None}], D2020),
    # {} meets both open-ended closed objects; a key one branch does not name fails it
    ("oneOf-closed-optional", {"oneOf": [
        {"properties": {"value": {"type": "string"}, "unit": {"type": "string"}},
         "additionalProperties": False},
        {"properties": {"text": {"type": "string"}}, "additionalProperties": False}]},
     [{}, {"value": "1"}, {"value": "1", "unit": "s"}, {"text": "x"}, {"text": "x", "unit": "u"},
      {"other": 1}, "s", 5, {"value": 1}, {"unit": "s", "text": "t", "value": "v"}], D2020),
    # patternProperties admit the other branch's required key: not disjoint, complemented
    ("oneOf-closed-patterns", {"type": "object", "oneOf": [
        {"properties": {"a": {}}, "patternProperties": {"^b": {}}, "required": ["a"],
         "additionalProperties": False},
        {"properties": {"b1": {}}, "patternProperties": {"^a": {}}, "required": ["b1"],
         "additionalProperties": False}]},
     [{"a": 1}, {"b1": 1}, {"a": 1, "b1": 2}, {"a": 1, "b2": 2}, {"b1": 1, "a2": 2},
      {"a": 1, "c": 2}, {}], D2020),
    ("not-closed-object-items", {"type": "array", "items": {
        "not": {"type": "object", "additionalProperties": False}}},
     [[], [{}], [{"a": 1}], [1, "x"], [{"a": 1}, {}], [{"a": 1}, {"b": 2, "c": 3}]], D2020),
    # not of propertyNames: some key the names schema rejects
    ("not-propertyNames", {"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}},
     [{}, {"0": 1}, {"1": 1}, {"1": 1, "0": 2}, {"01": 1}, [], "0"], D2020),
    ("not-propertyNames-strings", {"type": "object", "not": {"propertyNames": {
        "pattern": "^a", "maxLength": 3}}},
     [{}, {"ab": 1}, {"b": 1}, {"abcd": 1}, {"ab": 1, "ba": 2}, {"a": 1, "abc": 2}], D2020),
    ("oneOf-propertyNames", {"oneOf": [{"type": "object", "propertyNames": {"maxLength": 2}},
                                       {"type": "object"}]},
     [{}, {"ab": 1}, {"abc": 1}, {"ab": 1, "abc": 2}, "s"], D2020),
    ("not-additionalProperties-counted", {"type": "object", "maxProperties": 2, "not": {
        "properties": {"a": {}}, "additionalProperties": False}},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {"b": 1, "c": 2}, {"a": 1, "b": 2, "c": 3}],
     D2020),
    ("not-additionalProperties-twice", {"type": "object", "allOf": [
        {"not": {"properties": {"a": {}}, "additionalProperties": False}},
        {"not": {"properties": {"b": {}}, "additionalProperties": False}}]},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {"c": 1}, {"a": 1, "c": 2}], D2020),
    # enumerated objects and arrays, checked value by value against the other keywords
    ("enum-objects-constrained", {"enum": [{"a": 1}, {"a": "x"}, {"b": 2}, {"a": 1, "c": 3}],
                                  "properties": {"a": {"type": "integer"}}, "required": ["a"],
                                  "additionalProperties": False},
     [{"a": 1}, {"a": "x"}, {"b": 2}, {"a": 1, "c": 3}, {"a": 2}], D2020),
    ("enum-objects-combinators", {"enum": [{"k": 1}, {"k": "s"}, {"k": None}, {"k": 2.5},
                                           {"k": [1]}, {"k": "t"}],
                                  "properties": {"k": {"anyOf": [
                                      {"type": "string"},
                                      {"oneOf": [{"type": "integer"}, {"minimum": 2}]}],
                                      "not": {"const": "s"}}}},
     [{"k": 1}, {"k": "s"}, {"k": None}, {"k": 2.5}, {"k": [1]}, {"k": "t"}, {"k": 3}], D2020),
    ("enum-objects-keys", {"enum": [{"ab": 1}, {"ab": "x"}, {"zz": 1}, {"abc": 2}, {}],
                           "patternProperties": {"^a": {"type": "integer"}},
                           "propertyNames": {"maxLength": 2}, "minProperties": 1},
     [{"ab": 1}, {"ab": "x"}, {"zz": 1}, {"abc": 2}, {}], D2020),
    ("enum-arrays-constrained", {"enum": [[1, 2], [1, "x"], [], [3, 3], [5], [1]],
                                 "items": {"type": "integer"}, "minItems": 1,
                                 "uniqueItems": True, "contains": {"minimum": 2}},
     [[1, 2], [1, "x"], [], [3, 3], [5], [1], [2]], D2020),
    ("enum-arrays-prefix", {"enum": [[1, "a"], ["a", 1], [1, "a", True], [1]],
                            "prefixItems": [{"type": "integer"}, {"type": "string"}],
                            "items": False},
     [[1, "a"], ["a", 1], [1, "a", True], [1]], D2020),
    ("oneOf-types", {"oneOf": [{"type": "string"}, {"type": "integer"}]},
     ["a", 1, 1.5, None], D2020),
    ("oneOf-discriminated", DISCRIMINATED,
     [{"kind": "a", "x": 1}, {"kind": "b", "y": "s"}, {"kind": "a", "y": "s"},
      {"kind": "c", "x": 1}, {"x": 1}], D2020),
    ("oneOf-consts", {"oneOf": [{"const": 1}, {"const": "1"}, {"enum": [None, False]}]},
     [1, "1", None, False, 2, True], D2020),
    ("not-type", {"not": {"type": "string"}}, [1, None, [], {}, "a", ""], D2020),
    ("not-types", {"not": {"type": ["number", "null"]}}, ["a", True, 1, 1.5, None], D2020),
    ("not-integer", {"type": "number", "not": {"type": "integer"}},
     [1.5, -0.25, 1, 0, 2.0], D2020),
    ("not-const", {"type": "integer", "not": {"const": 3}}, [2, 4, -3, 3, 3.0], D2020),
    ("not-enum-strings", {"type": "string", "not": {"enum": ["a", "b"]}},
     ["c", "ab", "", "a", "b"], D2020),
    ("not-with-enum", {"enum": ["a", "b", 1, True], "not": {"enum": ["a", 1]}},
     ["b", True, "a", 1, 1.0, "c"], D2020),
    ("not-enum-and-const", {"type": ["integer", "string"], "not": {"enum": [1, 2, "a"],
                                                                  "const": 2}},
     [1, 2, 3, "a", "b"], D2020),
    ("not-boolean-const", {"type": "boolean", "not": {"const": True}}, [False, True, None],
     D2020),
    ("not-enum-untyped", {"not": {"enum": [None, True, 1, "x"]}},
     [False, 2, "y", [], None, True, 1, 1.0, "x"], D2020),
    # ---- not (complements), if/then/else, exact oneOf
    ("not-properties",
     {"not": {"type": "object", "properties": {"foo": {"type": "string"}}}},
     [{"foo": 1}, {"foo": None, "bar": 2}, 1, "x", {"foo": "a"}, {}, {"bar": 1}], D2020),
    ("not-required", {"type": "object", "not": {"required": ["a", "b"]}},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {"b": 1, "a": 2}, {"c": 1}], D2020),
    ("not-string-keywords", {"not": {"minLength": 2, "pattern": "^a"}},
     ["", "a", "b", "bcd", "ab", "abc", 5, None, []], D2020),
    ("not-number-bounds", {"not": {"minimum": 2, "exclusiveMaximum": 5.5}},
     [1, 1.99, 2, 5, 5.4, 5.5, 6, "3", None], D2020),
    ("not-draft4-exclusive", {"not": {"minimum": 2, "exclusiveMinimum": True}},
     [1, 2, 2.001, 3, "x"], D4),
    ("not-anyOf", {"not": {"anyOf": [{"type": "string"}, {"minimum": 3}]}},
     [None, 1, 2.5, 3, 4, "a", [], {}], D2020),
    ("not-oneOf", {"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}},
     [1, 2, 3, 1.5, 2.5, "x", None], D2020),
    ("not-not", {"not": {"not": {"type": "string", "maxLength": 1}}},
     ["", "a", "ab", 1, None], D2020),
    ("not-items", {"type": "array", "not": {"items": {"type": "integer"}}},
     [[], [1, 2], [1, "a"], ["a"], [None, 1]], D2020),
    ("not-prefixItems", {"type": "array", "not": {"prefixItems": [{"type": "integer"},
                                                                  {"const": "x"}]}},
     [[], [1], [1, "x"], [1, "x", 5], ["a"], [1, "y"], [1, "y", 2]], D2020),
    ("not-contains", {"type": "array", "not": {"contains": {"type": "string"}}},
     [[], [1], [1, None], ["a"], [1, "a"]], D2020),
    ("not-minContains", {"type": "array", "not": {"contains": {"const": 1}, "minContains": 2}},
     [[], [1], [2, 1, 3], [1, 1], [1, 2, 1]], D2020),
    ("not-counts", {"not": {"minItems": 2, "minProperties": 1, "maxItems": 3}},
     [[], [1], [1, 2], [1, 2, 3, 4], {}, {"a": 1}, {"a": 1, "b": 2}, None], D2020),
    ("not-dependentRequired", {"type": "object", "properties": {"a": {}, "b": {}},
                               "not": {"dependentRequired": {"a": ["b"]}}},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}], D2020),
    ("not-enum-ref",
     {"$defs": {"small": {"type": "integer", "maximum": 3}},
      "type": "array", "items": {"not": {"$ref": "#/$defs/small"}}},
     [[], [4, "a"], [3], [0, 9], [None, 1.5]], D2020),
    ("if-then-else",
     {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
     ["ab", "a", 3, 3.5, None, "abc"], D2020),
    ("if-then", {"if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}},
     [-1, -10, -11, 0, 100, "x"], D2020),
    ("if-else-object",
     {"type": "object",
      "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
      "then": {"required": ["x"]}, "else": {"required": ["y"]}},
     [{"kind": "a", "x": 1}, {"kind": "a", "y": 1}, {"kind": "b", "y": 1},
      {"kind": "b", "x": 1}, {"y": 1}, {"x": 1}], D2020),
    ("if-alone-and-stray-then", {"type": ["string", "integer"], "if": {"type": "string"},
                                 "allOf": [{"then": False}, {"else": False}]},
     ["a", 1, None], D2020),
    ("if-boolean", {"if": False, "then": {"type": "string"}, "else": {"type": "integer"}},
     [1, "a", None], D2020),
    ("oneOf-overlapping", {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
     [1, 2, 3, 1.5, 2.5, "x", None], D2020),
    ("oneOf-overlapping-strings", {"type": "string", "oneOf": [{"minLength": 2},
                                                               {"maxLength": 4}]},
     ["a", "ab", "abcd", "abcde", 5], D2020),
    ("oneOf-required",
     {"type": "object", "oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]},
     [{"foo": 1, "bar": 2}, {"foo": 1, "baz": 3}, {"foo": 1, "bar": 2, "baz": 3},
      {"bar": 2}], D2020),
    ("oneOf-booleans", {"oneOf": [True, {"type": "string"}, False]}, [1, None, "a"], D2020),
    ("oneOf-nested", {"oneOf": [{"oneOf": [{"type": "null"}]}, {"type": "string"}]},
     [None, "a", 1], D2020),
    # disjoint because each branch requires a key the other's closed object forbids:
    # among objects only (a string meets both branches when nothing says "object")
    ("oneOf-closed-objects", {"type": "object", "oneOf": [CLOSED_A, CLOSED_B]},
     [{"a": "x"}, {"b": 1}, {"a": "x", "b": 1}, {}, "s"], D2020),
    # untyped: every non-object meets both branches, so none is valid; objects split
    ("oneOf-closed-untyped", {"oneOf": [CLOSED_A, CLOSED_B]},
     [{"a": "x"}, {"b": 1}, {}, "s", 5, None, [], {"a": 1}, {"a": "x", "b": 1}], D2020),
    ("oneOf-object-keywords-untyped", {"oneOf": [
        {"properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"properties": {"b": {}}, "additionalProperties": False}]},
     [{"a": "x"}, {"b": 1}, {}, "s", 5, None, [], {"a": 1}, {"a": "x", "b": 1}], D2020),
    # one branch holds for every string, the other only for some: not settled per type
    ("oneOf-one-branch-per-type", {"oneOf": [
        {"properties": {"a": {}}, "required": ["a"]}, {"type": "string", "minLength": 2}]},
     [{"a": 1}, {}, "s", "st", 5], D2020),
    ("oneOf-nested-enums", {"oneOf": [
        {"oneOf": [{"enum": ["A", "B"]}, {"enum": ["C"]}]},
        {"type": "object", "properties": {"t": {"oneOf": [{"enum": ["A"]}, {"enum": ["N"]}]}},
         "required": ["t"], "additionalProperties": False},
        {"type": "object", "properties": {"t": {"enum": ["X"]}}, "required": ["t"]}]},
     ["A", "C", "D", {"t": "A"}, {"t": "N"}, {"t": "X"}, {"t": "X", "u": 1}, {"t": "Q"}],
     D2020),
    # ---- dependencies
    ("dependentRequired",
     {"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
      "dependentRequired": {"a": ["b", "c"], "b": []}},
     [{}, {"b": 1}, {"a": 3, "b": 1, "c": 2}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "c": 2},
      "x"], D2020),
    ("dependentSchemas",
     {"properties": {"a": {}, "b": {}},
      "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                           "z": False}},
     [{}, {"b": "x"}, {"a": 1, "b": 2}, {"a": 1}, {"a": 1, "b": "x"}, {"z": 1}, 5], D2020),
    ("draft7-dependencies",
     {"dependencies": {"a": ["b"], "c": {"properties": {"d": {"type": "string"}}}},
      "properties": {"a": {}, "b": {}, "c": {}, "d": {}}},
     [{}, {"a": 2, "b": 1}, {"a": 1}, {"c": 1, "d": "x"}, {"c": 1, "d": 2}, {"d": 2}], D7),
    # ---- contains counts
    ("maxContains", {"type": "array", "contains": {"const": 1}, "maxContains": 2},
     [[1], [1, 1], [2, 1, 3, 1], [1, 1, 1], [], [2], [1, 2, 1, 1]], D2020),
    ("min-maxContains",
     {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5},
      "minContains": 2, "maxContains": 3},
     [[5, 6], [1, 5, 2, 6, 7], [5], [5, 6, 7, 8], [5, 6, "x"], [9, 9, 9]], D2020),
    ("maxContains-zero", {"type": "array", "contains": {"type": "string"}, "minContains": 0,
                          "maxContains": 0},
     [[], [1, 2], ["a"], [1, "a"]], D2020),
    ("contains-prefixItems-maxItems",
     {"type": "array", "prefixItems": [{"type": "string"}], "contains": {"type": "integer"},
      "minItems": 2, "maxItems": 3},
     [["a", 1], ["a", 1, 2], [1, 2], ["a"], ["a", "b"], ["a", 1, 2, 3], ["a", "b", 1]],
     D2020),
    # ---- unevaluatedProperties / unevaluatedItems
    ("unevaluatedProperties-adjacent",
     {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}},
      "unevaluatedProperties": {"type": "integer"}},
     [{"a": "s"}, {"a": "s", "xy": "t"}, {"a": "s", "b": 1}, {"b": "s"}, {"a": 1, "b": "s"}],
     D2020),
    ("unevaluatedProperties-nested",
     {"type": "object", "properties": {"a": {}},
      "allOf": [{"properties": {"b": {}}}, {"$ref": "#/$defs/c"}],
      "$defs": {"c": {"properties": {"c": {}}}}, "unevaluatedProperties": False},
     [{"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3, "d": 4}, {"d": 1}, {}], D2020),
    ("unevaluatedProperties-cousins",
     {"allOf": [{"properties": {"a": True}}, {"unevaluatedProperties": False}]},
     [{}, {"a": 1}, 5], D2020),
    ("unevaluatedProperties-anyOf",
     {"type": "object", "properties": {"a": {}},
      "anyOf": [{"properties": {"b": {"const": 1}}, "required": ["b"]},
                {"properties": {"c": {"const": 2}}, "required": ["c"]}],
      "unevaluatedProperties": False},
     [{"a": 0, "b": 1}, {"a": 0, "c": 2}, {"a": 0, "b": 1, "c": 2}, {"a": 0, "b": 1, "c": 3},
      {"a": 0}, {"b": 1, "d": 0}], D2020),
    ("unevaluatedProperties-if",
     {"type": "object", "if": {"properties": {"k": {"const": "t"}}, "required": ["k"]},
      "then": {"properties": {"t": {}}}, "else": {"properties": {"e": {}}},
      "unevaluatedProperties": False},
     [{"k": "t", "t": 1}, {"k": "t", "e": 1}, {"k": "x", "e": 1}, {"k": "x"}, {"e": 1},
      {"t": 1}], D2020),
    ("unevaluatedProperties-lone-if",
     {"type": "object", "if": {"properties": {"a": {"type": "string"}}},
      "unevaluatedProperties": False},
     [{"a": "x"}, {"a": 1}, {"b": "x"}, {}], D2020),
    ("unevaluatedProperties-not",
     {"type": "object", "properties": {"a": {}},
      "not": {"not": {"properties": {"b": {}}, "required": ["b"]}},
      "unevaluatedProperties": {"type": "integer"}},
     [{"a": "x", "b": 1}, {"a": "x", "b": "s"}, {"a": "x"}], D2020),
    ("unevaluatedProperties-dependentSchemas",
     {"type": "object", "properties": {"a": {}},
      "dependentSchemas": {"a": {"properties": {"b": {}}}}, "unevaluatedProperties": False},
     [{"a": 1, "b": 2}, {"b": 2}, {"a": 1}, {}], D2020),
    ("unevaluatedProperties-failed-branch-ref",  # X holds, but not through P's anyOf/0
     {"type": "object", "allOf": [{"$ref": "#/$defs/P"}, {"$ref": "#/$defs/X"}],
      "$defs": {"P": {"unevaluatedProperties": False,
                      "anyOf": [{"$ref": "#/$defs/X", "required": ["z"],
                                 "properties": {"z": {}}}, True]},
                "X": {"properties": {"q": {}}}}},
     [{"q": 1}, {"q": 1, "z": 2}, {}, {"z": 1}], D2020),
    ("unevaluatedProperties-recursive",
     {"type": "object", "properties": {"x": {"$ref": "#"}}, "unevaluatedProperties": False},
     [{}, {"x": {}}, {"x": {"x": {}}}, {"y": 1}, {"x": {"y": 1}}], D2020),
    ("unevaluatedItems-prefix",
     {"type": "array", "prefixItems": [{"type": "string"}],
      "allOf": [{"prefixItems": [True, {"type": "number"}]}], "unevaluatedItems": False},
     [[], ["a"], ["a", 1], ["a", 1, 2], [1]], D2020),
    ("unevaluatedItems-schema", {"type": "array", "unevaluatedItems": {"type": "string"},
                                 "anyOf": [{"prefixItems": [{"const": 1}]},
                                           {"items": {"type": "integer"}}]},
     [[], ["a", "b"], [1, "a"], [2, 3], [1, 2], [1, 2, "a"]], D2020),
    ("unevaluatedItems-contains",
     {"type": "array", "prefixItems": [True], "contains": {"type": "string"},
      "unevaluatedItems": False},
     [[1, "a"], [1, "a", "b"], [1, "a", 2], [1], ["a"]], D2020),
    ("unevaluatedItems-items-evaluates-all",
     {"type": "array", "allOf": [{"items": {"type": "integer"}}], "unevaluatedItems": False},
     [[], [1, 2], ["a"]], D2020),
    ("contains-several",
     {"type": "array", "contains": {"type": "string"}, "items": {"type": ["string", "integer"]},
      "allOf": [{"contains": {"const": 1}, "maxContains": 1},
                {"contains": {"minimum": 5}, "minContains": 2}]},
     [["a", 1, 5, 6], [5, "a", 6, 1], ["a", 1, 1, 5, 6], ["a", 5, 6], [1, 5, 6],
      ["a", 1, 5], [7, 8, "x", 1, 9]], D2020),
    ("contains-several-counts-items",
     {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4,
      "contains": {"multipleOf": 2}, "allOf": [{"contains": {"multipleOf": 3}}]},
     [[2, 3], [6, 1], [6], [1, 5], [2, 4, 9, 1], [2, 4, 9, 1, 5], [2, "3"]], D2020),
    ("uniqueItems-enum", {"type": "array", "uniqueItems": True,
                          "items": {"enum": [1, "a", None, [1], {"a": 1}]}},
     [[], [1, "a", None, [1], {"a": 1}], [1, 1.0], ["a", "a"], [[1], [1]], [{"a": 1}, 1],
      [1, "a", None, [1], {"a": 1}, 1], [2]], D2020),
    ("uniqueItems-booleans", {"type": "array", "uniqueItems": True,
                              "prefixItems": [{"type": "boolean"}, {"type": "boolean"}],
                              "items": False},
     [[], [True], [True, False], [False, True], [True, True], [False, False],
      [True, False, None]], D2020),
    ("uniqueItems-prefix-and-items", {"type": "array", "uniqueItems": True, "minItems": 2,
                                      "prefixItems": [{"const": 1}],
                                      "items": {"type": ["null", "boolean"]}},
     [[1, None], [1, True, False, None], [1], [1, None, None], [1, True, True],
      [1, 1]], D2020),
    ("uniqueItems-single-item", {"type": "array", "uniqueItems": True, "maxItems": 1},
     [[], [1], [[1, 1]], [1, 2]], D2020),
    # ---- references
    ("defs-ref",
     {"type": "object", "properties": {"p": {"$ref": "#/$defs/point"}},
      "$defs": {"point": {"type": "array", "prefixItems": [{"type": "number"}] * 2,
                          "items": False}}},
     [{"p": [1, 2]}, {}, {"p": [1]}, {"p": [1, "2"]}], D2020),
    ("draft7-definitions",
     {"definitions": {"name": {"type": "string", "minLength": 1}},
      "type": "array", "items": {"$ref": "#/definitions/name"}},
     [["a", "b"], [], [""], [1]], D7),
    ("anchor",
     {"$defs": {"x": {"$anchor": "small", "type": "integer", "maximum": 3}},
      "type": "array", "items": {"$ref": "#small"}},
     [[1, 3], [4], ["1"]], D2020),
    ("ref-pointer-escapes",
     {"$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}},
      "type": "array", "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}]},
     [[1, "s"], [1], ["s", 1], [1, 2]], D2020),
    ("ref-id-relative",
     {"$id": "https://example.com/root.json",
      "$defs": {"a": {"$id": "a.json", "type": "integer"}},
      "type": "array", "items": {"$ref": "a.json"}},
     [[1, 2], [], ["x"]], D2020),
    ("ref-urn-base",
     {"$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed",
      "properties": {"foo": {"$ref": "#/$defs/bar"},
                     "baz": {"$ref": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#x"}},
      "$defs": {"bar": {"type": "string"}, "q": {"$anchor": "x", "type": "null"}}},
     [{"foo": "a"}, {"foo": 1}, {"baz": None}, {"baz": 1}], D2020),
    ("ref-nested-id-then-ref",
     {"$id": "https://example.com/a/base.json", "$ref": "nested/foo.json",
      "$defs": {"foo": {"$id": "nested/foo.json", "$ref": "./bar.json"},
                "bar": {"$id": "nested/bar.json", "type": "number"}}},
     [5, 1.5, "a", None], D2020),
    ("ref-id-and-anchor",
     {"$id": "https://example.com/b/base.json", "$ref": "#big",
      "$defs": {"big": {"$anchor": "big", "maximum": 10},
                "small": {"$id": "https://example.com/b/", "$anchor": "big", "maximum": 2}}},
     [1, 5, 11], D2020),
    ("ref-id-in-unknown-keyword",  # an $id inside an unknown keyword identifies nothing
     {"$defs": {"odd": {"not": {"array_of_schemas": [
         {"$id": "https://example.com/u/my.json", "type": "null"}]}},
         "real": {"$id": "https://example.com/u/my.json", "type": "string"}},
      "$ref": "https://example.com/u/my.json"},
     ["a", None, 1], D2020),
    ("dynamicRef-single-anchor",  # one declaration: the dynamic scope cannot pick another
     {"$id": "https://example.com/list", "type": "array",
      "items": {"$dynamicRef": "#items"},
      "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"}}},
     [[], ["a", "b"], ["a", 1]], D2020),
    ("dynamicRef-to-plain-anchor",
     {"type": "array", "items": {"$dynamicRef": "#it"},
      "$defs": {"it": {"$anchor": "it", "type": "integer"},
                "a": {"$dynamicAnchor": "it", "$id": "https://example.com/a"},
                "b": {"$dynamicAnchor": "it", "$id": "https://example.com/b"}}},
     [[1], ["a"]], D2020),
    ("dynamicRef-dynamic-scope",  # the outermost resource declaring "items" wins
     {"$id": "https://example.com/root", "$ref": "list",
      "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"},
                "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#items"},
                         "$defs": {"items": {"$dynamicAnchor": "items", "type": "integer"}}}}},
     [["a", "b"], [1], [], ["a", 1]], D2020),
    ("dynamicRef-scope-per-path",  # two paths into one resource, two bindings
     {"$id": "https://example.com/main", "type": "object",
      "properties": {"s": {"$ref": "strs"}, "n": {"$ref": "nums"}},
      "$defs": {"generic": {"$id": "generic", "type": "array",
                            "items": {"$dynamicRef": "#t"},
                            "$defs": {"d": {"$dynamicAnchor": "t"}}},
                "strs": {"$id": "strs", "$ref": "generic",
                         "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}},
                "nums": {"$id": "nums", "$ref": "generic",
                         "$defs": {"t": {"$dynamicAnchor": "t", "type": "number"}}}}},
     [{"s": ["a"], "n": [1]}, {"s": [1]}, {"n": ["a"]}, {"s": [], "n": [2.5]}], D2020),
    ("ref-chain",
     {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/c"},
                "c": {"type": "boolean"}}, "$ref": "#/$defs/a"},
     [True, False, None, 0], D2020),
    ("recursion-tree", TREE,
     [tree(0), tree(1), tree(3), tree(40), {"value": "x"}, {"value": 1, "children": [{}]},
      tree(40, leaf="deep"), {"value": 1, "extra": 2}], D2020),
    ("recursion-linked-list",
     {"$defs": {"node": {"type": "object",
                         "properties": {"head": {"type": "integer"},
                                        "tail": {"anyOf": [{"type": "null"},
                                                           {"$ref": "#/$defs/node"}]}},
                         "required": ["head", "tail"], "additionalProperties": False}},
      "type": "object", "properties": {"l": {"$ref": "#/$defs/node"}}, "required": ["l"]},
     [{"l": {"head": 1, "tail": None}}, {"l": {"head": 1, "tail": {"head": 2, "tail": None}}},
      {"l": None}, {"l": {"head": 1}},
      {"l": {"head": 1, "tail": {"head": "2", "tail": None}}}], D2020),
    ("recursion-ref-to-anyOf",
     {"$defs": {"expr": {"anyOf": [
         {"type": "number"},
         {"type": "object", "properties": {"neg": {"$ref": "#/$defs/expr"}},
          "required": ["neg"], "additionalProperties": False},
         {"type": "object", "properties": {"+": {"type": "array", "minItems": 2, "maxItems": 2,
                                                 "items": {"$ref": "#/$defs/expr"}}},
          "required": ["+"], "additionalProperties": False}]}},
      "$ref": "#/$defs/expr"},
     [1, {"neg": 2.5}, {"+": [1, {"neg": {"+": [2, 3]}}]}, {"neg": {"neg": {"neg": 0}}},
      "x", {"neg": "x"}, {"+": [1]}, {"+": [1, 2, 3]}, {"neg": 1, "+": [1, 2]}], D2020),
    ("oneOf-behind-ref",
     {"definitions": {"IntOrString": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
      "type": "object", "properties": {"port": {"$ref": "#/definitions/IntOrString"},
                                       "name": {"type": ["string", "null"]}},
      "required": ["port"]},
     [{"port": 80}, {"port": "http", "name": None}, {"port": 1.5}, {"name": "x"}, {}], D7),
    # ---- boolean schemas
    ("true", True, [None, 1, "a", [1, {}], {"a": [None]}], D2020),
    ("boolean-subschemas",
     {"type": "object", "properties": {"a": False, "b": True}},
     [{"b": [1]}, {}, {"c": 1}, {"a": 1}], D2020),
    ("items-false", {"type": "array", "items": False}, [[], [1]], D2020),
    ("additionalProperties-true",
     {"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": True},
     [{"a": None, "b": 1}, {"a": 1}], D2020),
]

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
