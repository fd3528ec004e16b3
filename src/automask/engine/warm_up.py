"""Warming a compiler up: what every JSON grammar of a vocabulary needs, made before the
first request needs it (:func:`warm_up`, also ``automask.warm_up``).

A compiler's first masks pay for work that no later grammar repeats: the
vocabulary's whitespace tables (:mod:`automask.engine.gaps`), the code point
counts behind length-bounded strings (:mod:`automask.engine.counted`), and the
scans of the lexemes nearly every JSON schema has (a string body, a number,
``true``/``false``/``null``, the punctuation and whitespace between them, a
key's quotes). On Llama-3.1 the first schema a fresh compiler saw took about
130 ms to its first mask, the next ones a few. A server pays that at startup
instead: it walks one built-in schema of those shapes along a few texts, one
character at a time (no tokenizer needed, and every boundary a token could end
at is visited), in the layouts JSON is written in.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from automask.engine.matcher import Matcher
from automask.errors import GrammarError
from automask.grammar.ir import Grammar

if TYPE_CHECKING:
    from automask.engine.compiled import Compiler

#: What nearly every JSON schema holds: each JSON type, arrays and nested objects,
#: strings with a length bound and the most used formats, an enum, open and closed
#: objects. (Generic shapes, not any benchmark's schemas.)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "none": {"type": "null"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "values": {"type": "array", "items": {"type": "number"}},
        "short": {"type": "string", "maxLength": 64},
        "kind": {"enum": ["a", "b"]},
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "link": {"type": "string", "format": "uri"},
        "mail": {"type": "string", "format": "email"},
        "id": {"type": "string", "format": "uuid"},
        "child": {"type": "object", "properties": {"key": {"type": "string"}},
                  "additionalProperties": False},
        "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        "either": {"type": ["string", "null"]},
        "any": {},
    },
}

#: Texts of ``SCHEMA``: plain and escaped strings, signed and fractional numbers, empty
#: and nested containers (each one written compact and indented).
INSTANCES: tuple[dict[str, Any], ...] = (
    {"name": 'Ada "Lovelace"\\ café', "count": -12, "score": 3.5e-3, "ok": True,
     "none": None, "tags": ["x", "y z"], "values": [1, 2.5, -3], "short": "abc",
     "kind": "a", "when": "2024-01-02T03:04:05Z", "day": "2024-01-02",
     "link": "https://example.org/a?b=c", "mail": "a.b@example.com",
     "id": "123e4567-e89b-12d3-a456-426614174000", "child": {"key": "v"},
     "extra": {"k": "v", "k2": ""}, "either": None,
     "any": {"a": [1, "b", None, True, {"c": 2.5}]}},
    {"name": "", "count": 0, "score": 10, "ok": False, "tags": [], "values": [],
     "child": {}, "extra": {}, "either": "s", "any": []},
)


def warm_up(compiler: Compiler, *, whitespace: str | int = "flexible") -> None:
    """Make now what the first masks of ``compiler``'s JSON grammars would otherwise
    make (see the module docstring): a server calls it at startup, so that its first
    request does not wait for them (Llama-3.1: ~0.4 s here, ~130 ms off the first
    schema's first mask). ``whitespace``: the layout of the grammars to come, as
    :meth:`Grammar.from_json_schema` takes it (flexible: the texts are walked compact
    and indented). Only caches are filled: masks are the same either way.

    It walks :data:`SCHEMA` along :data:`INSTANCES`, then a date-time's minutes at
    every hour; a vocabulary that cannot spell some lexeme of it (a toy one) is left
    as it is."""
    try:
        compiled = compiler.compile(Grammar.from_json_schema(SCHEMA, whitespace=whitespace))
    except GrammarError:  # a vocabulary that cannot spell some lexeme: it has no use for it
        return
    matcher = Matcher(compiled)
    for instance in INSTANCES:
        for layout in _layouts(whitespace):
            text = json.dumps(instance, ensure_ascii=False, **layout)
            matcher.reset()
            for char in text:
                matcher.mask_words()
                if not matcher.accept_bytes(char.encode()):
                    raise RuntimeError(f"warm-up text refused at {char!r}: {text}")
            matcher.mask_words()
    # A date-time's state after "hh:" depends on the hour (which offsets may follow a
    # leap second's ":60" does), so each hour has its own scan there, the one costly
    # position of the format (~8 ms on Llama-3.1, against 1 ms or less at the others):
    # the 23 hours the texts above do not reach, made now. (Also the "time" format's:
    # past the date, both lexemes are the same node.)
    layout = _layouts(whitespace)[0]
    for hour in range(24):
        text = json.dumps({"when": f"2024-01-02T{hour:02d}:"}, **layout)
        text = text[:text.index("T") + 4]  # up to the value's last ":"
        matcher.reset()
        if not matcher.accept_bytes(text.encode()):
            raise RuntimeError(f"warm-up text refused: {text}")
        matcher.mask_words()


def _layouts(whitespace: str | int) -> list[dict[str, Any]]:
    """``json.dumps`` options for the texts a grammar of that layout admits."""
    if whitespace == "compact":
        return [{"separators": (",", ":")}]
    if isinstance(whitespace, int):
        return [{"indent": whitespace}]
    return [{}, {"indent": 2}]  # flexible: written either way
