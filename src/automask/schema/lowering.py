"""What the keyword families of the schema compiler share: the options, the reporter of
unsupported keywords, and the interface of the conjunction builder they lower through.

Each family module (strings, numbers, objects, arrays, ``oneOf``, …) is handed the
objects it needs; the conjunction builder (:class:`~automask.schema.conjunctions.
Conjunctions`) is one of them, seen through :class:`Conjoin` so that the families
need not import it (it imports them).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from automask.errors import UnsupportedFeature
from automask.grammar.ir import Expr
from automask.schema.json_text import JsonPieces
from automask.schema.subschema import Subschema, pointer


@dataclass
class Options:
    whitespace: str | int = "flexible"
    strict: bool = False
    lenient: bool = False
    max_whitespace: int = 24
    max_rules: int = 20_000


class Report:
    """Reports a keyword that is not enforced: an error, or a warning under ``lenient``."""

    def __init__(self, lenient: bool):
        self.lenient = lenient

    def unsupported(self, what: str, m: Subschema, kw: str | None) -> None:
        where = pointer(m, kw)
        if self.lenient:
            warnings.warn(f"automask: {what} is not enforced (at {where})", stacklevel=4)
            return
        raise UnsupportedFeature(f"{what} is not supported", where)


class Conjoin(Protocol):
    """The conjunction builder, as the keyword families use it."""

    rules: dict[str, Expr]
    json: JsonPieces
    tracks: bool  # whether unevaluated* annotations are tracked by position

    def inside(self, build: Callable[[], Expr]) -> Expr:
        """``build()`` for the values inside the one being compiled (another instance
        position)."""
        ...

    def conj_ref(self, members: list[Subschema]) -> Expr:
        """A rule for the conjunction of ``members`` (memoized)."""
        ...

    def expand(self, members: list[Subschema]) -> list[Subschema] | None:
        """``members`` with ``$ref``/``allOf`` followed; None when one is ``false``."""
        ...

    def check_keywords(self, m: Subschema) -> None:
        """Raises on malformed or unsupported keywords of ``m``."""
        ...

    def types(self, members: list[Subschema]) -> set[str]:
        """The JSON types every member's ``type`` allows."""
        ...

    def negated_types(self, m: Subschema) -> frozenset[str]:
        """The types ``m``'s ``not`` excludes (where it says so exactly)."""
        ...
