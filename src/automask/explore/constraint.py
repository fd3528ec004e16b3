"""A constraint as the page sends it (kind + text), compiled, or its error as plain data.

Why: the page shows a compile error inline, with its type, message and
where (``line:col`` or a JSON pointer), and must never break; so compiling
returns either a compiled grammar or a :class:`CompileProblem` that says all
of that, and nothing a hostile constraint can do escapes as an unexpected
exception. Time and size are bounded by the library's own limits: each front
end's CPU-time budget and length limit (:data:`automask.grammar.ir.MAX_GRAMMAR_CHARS`),
the compile's :class:`~automask.engine.compiled.Limits`, and the first mask
(computed here, so its cost and its errors belong to the compile).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from automask.engine.compiled import CompiledGrammar, compile
from automask.engine.matcher import Matcher
from automask.errors import AutomaskError
from automask.grammar.ir import Grammar

log = logging.getLogger("automask.explore")

KINDS = ("schema", "regex", "gbnf", "lark", "choices")
WHITESPACE = ("compact", "flexible")


@dataclass(frozen=True)
class Constraint:
    """What the page compiles: ``kind`` (one of :data:`KINDS`) and its text.

    ``choices`` are written one per line (or comma-separated on one line, as on
    the command line). ``whitespace`` applies to schemas: compact by default,
    as ``automask serve`` does (small models pad flexible JSON with whitespace).
    """

    kind: str
    text: str
    whitespace: str = "compact"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "whitespace": self.whitespace}

    @property
    def choices(self) -> list[str]:
        lines = [ln for ln in self.text.splitlines() if ln != ""]
        if len(lines) == 1 and "," in lines[0]:
            return lines[0].split(",")
        return lines


class CompileProblem(Exception):
    """Why a constraint did not compile: the error ``type``, its ``message`` and where
    (``location``: ``line:col`` for text, a JSON pointer for a schema, or None)."""

    def __init__(self, type_: str, message: str, location: str | None = None):
        self.type, self.message, self.location = type_, message, location
        where = f" (at {location})" if location else ""
        super().__init__(f"{type_}: {message}{where}")

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "location": self.location}


def grammar_of(c: Constraint) -> Grammar:
    """The grammar of a constraint (raises the front ends' typed errors)."""
    if c.kind == "schema":
        return Grammar.of("json_schema", c.text, whitespace=c.whitespace)
    return Grammar.of(c.kind, c.choices if c.kind == "choices" else c.text)


def compile_constraint(c: Constraint, vocab: Any) -> tuple[CompiledGrammar, Any]:
    """(compiled grammar, the schema as data for a schema, else None); raises
    :class:`CompileProblem` for anything that does not compile."""
    if c.kind not in KINDS:
        raise CompileProblem("ValueError", f"unknown constraint kind {c.kind!r}; one of "
                             f"{', '.join(KINDS)}")
    if c.whitespace not in WHITESPACE:
        raise CompileProblem("ValueError", f"whitespace must be {' or '.join(WHITESPACE)}")
    try:
        compiled = compile(grammar_of(c), vocab)
        Matcher(compiled).mask_words()  # the first mask: cold, and it may fail
        schema = json.loads(c.text) if c.kind == "schema" else None
        return compiled, schema
    except AutomaskError as e:
        raise CompileProblem(type(e).__name__, getattr(e, "message", str(e)),
                             getattr(e, "location", None)) from None
    except RecursionError:
        raise CompileProblem("LimitExceeded", "the constraint is nested too deeply to "
                             "compile") from None
    except MemoryError:
        raise CompileProblem("LimitExceeded", "compiling the constraint ran out of "
                             "memory") from None
    except (UnicodeError, ValueError, TypeError) as e:
        raise CompileProblem(type(e).__name__, str(e)) from None
    except Exception as e:  # noqa: BLE001 - a compiler bug must not take the page down
        log.exception("compiling a %s constraint failed unexpectedly", c.kind)
        raise CompileProblem(type(e).__name__, f"cannot compile this constraint: {e}") from None


__all__ = ["KINDS", "CompileProblem", "Constraint", "compile_constraint", "grammar_of"]
