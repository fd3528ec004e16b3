"""Shapes: the typed form of schema objects (normalize.py reads the user's; the compiler
builds its own with ``written``), and complements built as shapes, not keyword dicts."""

from decimal import Decimal

from automask.schema.complement import complement, without
from automask.schema.normalize import normalize, shape
from automask.schema.shapes import (
    ArrayPart,
    NumberPart,
    ObjectPart,
    Shape,
    StringPart,
    embed,
    trivial,
    written,
)
from automask.schema.subschema import Subschema

BASE = "file:///t.json"


def at(schema, pointer: str = "") -> Subschema:
    return Subschema(f"{BASE}#{pointer}", schema, BASE)


def test_a_document_object_is_read_into_typed_parts():
    s = normalize(at({
        "type": "integer", "minimum": 2, "exclusiveMaximum": 9.5, "multipleOf": 0.5,
        "minLength": 1, "pattern": "^a", "not": {"enum": ["x", 3]},
        "properties": {"a": True}, "required": ["a"],
        "items": [{"type": "string"}], "additionalItems": False, "title": "t"}))
    assert s.keywords >= {"type", "minimum", "items", "additionalItems", "title"}
    assert s.types == {"integer"} and s.number.integer
    assert s.number.lower == ((Decimal(2), False),)
    assert s.number.upper == ((Decimal("9.5"), True),)
    assert s.number.multiple_of == Decimal("0.5")
    assert s.string.lengths == (1, None) and s.string.pattern == "^a"
    assert s.string.excluded == ("x",)  # the strings the `not` excludes
    assert s.not_excludes == ("x", 3) and s.not_simple
    assert s.array.prefix_keyword == "items" and s.array.rest_keyword == "additionalItems"
    assert s.array.has_rest and s.array.rest is False
    assert list(s.object.required) == ["a"]


def test_draft04_exclusive_bounds_are_read_as_strict_limits():
    s = normalize(at({"minimum": 1, "exclusiveMinimum": True, "maximum": 4}))
    assert s.number.lower == ((Decimal(1), True),)
    assert s.number.upper == ((Decimal(4), False),)


def test_strict_closes_the_users_objects_not_the_compilers():
    users = normalize(at({"properties": {"a": True}})).object
    assert users.extra(strict=True) is False and users.extra(strict=False) is True
    mine = written(object=ObjectPart(properties={"a": True})).object
    assert mine.extra(strict=True) is True
    given = normalize(at({"additionalProperties": {"type": "string"}})).object
    assert given.extra(strict=True) == {"type": "string"}


def test_a_shape_is_its_own_normal_form():
    s = written(type="string")
    m = at(s, "/~w")
    assert shape(m) is s
    assert s.keywords == {"type"} and s.types == {"string"}


def test_written_shapes_name_their_keywords_and_requirements():
    s = written(type="object", object=ObjectPart(required=("k",), properties={"k": False}))
    assert s.keywords == {"type", "required", "properties"}
    n = written(type="number", number=NumberPart(upper=((Decimal(3), True),)))
    assert n.keywords == {"type", "exclusiveMaximum"}
    e = embed(at({"type": "string"}, "/x"))
    assert e.keywords == {"embedded"} and not trivial(e)
    assert trivial(written()) and trivial({"title": "only an annotation"}) and trivial(True)
    neg = written(not_=written(values=(["a", "b"],), enum=True))
    assert neg.not_simple and neg.not_excludes == ("a", "b")
    assert neg.string.excluded == ("a", "b")


def sub_of(m: Subschema):
    def sub(*path):
        node = m.schema
        for p in path:
            node = node.child(p) if type(node) is Shape else node[p]
        return embed(Subschema(m.uri + "".join(f"/{p}" for p in path), node, m.base))
    return sub


def test_a_complement_is_a_union_of_typed_shapes():
    m = at({"type": "string", "minLength": 3, "maximum": 5})
    branches = complement(shape(m), sub_of(m))
    assert all(type(b) is Shape for b in branches)
    not_type, not_string, above = branches
    assert not_type.keywords == {"not"} and not_type.not_.types == {"string"}
    # strings of fewer than 3 characters: string keywords that must not all hold
    assert not_string.types == {"string"}
    assert not_string.string.not_string.string == StringPart(min_length=3)
    # numbers above the maximum
    assert above.types == {"number", "integer"}
    assert above.number.lower == ((Decimal(5), True),)


def test_complements_of_object_and_array_keywords_embed_the_users_subschemas():
    m = at({"properties": {"a": {"type": "string"}}, "additionalProperties": False,
            "contains": {"type": "null"}, "minContains": 2})
    branches = complement(shape(m), sub_of(m))
    value_fails, key_outside, few_hits = branches
    assert value_fails.object.required == ("a",)
    operand = value_fails.object.properties["a"].not_
    assert operand.embedded.uri == f"{BASE}#/properties/a"
    assert key_outside.object.key_outside.names == ("a",)
    assert few_hits.array == ArrayPart(has_contains=True, contains=few_hits.array.contains,
                                       min_contains=0, max_contains=1)
    assert few_hits.array.contains.embedded.uri == f"{BASE}#/contains"


def test_without_keeps_a_document_object_a_dict_and_a_shape_a_shape():
    assert without({"$ref": "#/a", "allOf": [True], "minimum": 1}) == {"minimum": 1}
    s = written(type="string", not_=written(values=(["x"],), enum=True),
                any_of=(True, False))
    less = without(s, "not")
    assert type(less) is Shape and less.keywords == {"type", "anyOf"}
    assert less.string.excluded is None and less.not_excludes == ()
    assert without(s, "anyOf").any_of is None
