"""String keywords: ``minLength``/``maxLength``, ``pattern``, ``format``, and the strings a
``not`` excludes (its ``enum``/``const``, and the compiler's negated string keywords), as
one regex per conjunction.
"""

from __future__ import annotations

from automask.errors import GrammarError
from automask.regex import nodes as rx
from automask.regex.parser import parse_regex_search
from automask.schema.json_text import ANY_CHAR, ANY_TEXT, string_node
from automask.schema.lowering import Report
from automask.schema.normalize import shape
from automask.schema.subschema import Subschema, pointer


class Strings:
    """The string keywords of a conjunction as one regex."""

    def __init__(self, report: Report, strict: bool):
        self.report = report
        self.strict = strict

    def string_constraints(self, members: list[Subschema], *,
                           exclusions: bool = True) -> rx.Node:
        """The strings ``members`` allow, as one regex; without the values their
        ``not: {enum/const}`` excludes when ``exclusions`` is false (a caller that checks
        those by hashing, not by a complement of thousands of literals)."""
        parts = [ANY_TEXT]
        for m in members:
            view = shape(m).string
            if view.lengths is not None:
                lo, hi = view.lengths
                parts.append(rx.EMPTY if hi is not None and hi < lo
                             else rx.repeat(ANY_CHAR, lo, hi))
            if view.pattern is not None:
                try:
                    parts.append(parse_regex_search(view.pattern))
                except GrammarError as e:
                    raise type(e)(f"pattern: {e.message}",
                                  f"{pointer(m, 'pattern')} {e.location or ''}".strip()
                                  ) from None
            if view.has_format:
                node = self.format(view.format, m)
                if node is not None:
                    parts.append(node)
            if view.not_string is not None:
                inner = self.string_constraints([Subschema(m.uri + "/~s", view.not_string,
                                                           m.base)])
                parts.append(rx.complement(inner))
            if exclusions and view.excluded:
                parts.append(rx.complement(rx.alt_of(
                    rx.literal(v.encode("utf-8")) for v in view.excluded)))
        return rx.intersect(*parts) if len(parts) > 1 else parts[0]

    def string(self, members: list[Subschema]) -> rx.Node:
        return string_node(self.string_constraints(members))

    def format(self, name, m: Subschema) -> rx.Node | None:
        from automask.schema.formats import format_node

        node = (format_node(name, leap_seconds=not self.strict)
                if isinstance(name, str) else None)
        if node is None:
            self.report.unsupported(f"format {name!r}", m, "format")
        return node
