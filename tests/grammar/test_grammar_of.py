"""``Grammar.of``: one dispatch from a front end's name to its constructor, which the
benchmark, the explorer and the server use. Each kind gives the grammar its own
constructor gives (compared by productions and lexemes: the same language, built the
same way), options reach the front end, and an unknown kind is a ValueError naming
the kinds there are."""

from __future__ import annotations

import pytest

from automask.grammar.ir import SOURCE_KINDS, Grammar

SOURCES = {
    "json_schema": ({"type": "object", "properties": {"a": {"type": "integer"}}},
                    Grammar.from_json_schema),
    "regex": (r"[a-c]{2,3}", Grammar.from_regex),
    "gbnf": ('root ::= "x" [0-9]+', Grammar.from_gbnf),
    "lark": ('start: "x" NUM\nNUM: /[0-9]+/', Grammar.from_lark),
    "choices": (["red", "green"], Grammar.from_choices),
}


def _same(a: Grammar, b: Grammar) -> bool:
    return (a.productions, a.lexemes, a.start) == (b.productions, b.lexemes, b.start)


@pytest.mark.parametrize("kind", SOURCE_KINDS)
def test_each_kind_is_its_constructor(kind: str) -> None:
    source, build = SOURCES[kind]
    assert _same(Grammar.of(kind, source), build(source))


def test_options_reach_the_front_end() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    compact = Grammar.of("json_schema", schema, whitespace="compact")
    assert _same(compact, Grammar.from_json_schema(schema, whitespace="compact"))
    assert not _same(compact, Grammar.of("json_schema", schema))


def test_an_unknown_kind_names_the_kinds() -> None:
    with pytest.raises(ValueError, match="unknown grammar kind 'yaml'.*json_schema"):
        Grammar.of("yaml", "a: 1")
