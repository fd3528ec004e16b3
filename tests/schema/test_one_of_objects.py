"""``oneOf`` disjointness: signatures of branches."""

from __future__ import annotations

from support.schema_reference import accepts_bytes

import automask
from automask import Grammar


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
