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
from automask.schema.subschema import ANNOTATIONS, Subschema, count, pointer
from automask.schema.values import excluded


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
            s = m.schema
            lo, hi = s.get("minLength"), s.get("maxLength")
            if lo is not None or hi is not None:
                lo_i = count(lo, m, "minLength") if lo is not None else 0
                hi_i = count(hi, m, "maxLength") if hi is not None else None
                parts.append(rx.EMPTY if hi_i is not None and hi_i < lo_i
                             else rx.repeat(ANY_CHAR, lo_i, hi_i))
            if "pattern" in s:
                if not isinstance(s["pattern"], str):
                    raise GrammarError("pattern must be a string", pointer(m, "pattern"))
                try:
                    parts.append(parse_regex_search(s["pattern"]))
                except GrammarError as e:
                    raise type(e)(f"pattern: {e.message}",
                                  f"{pointer(m, 'pattern')} {e.location or ''}".strip()
                                  ) from None
            if "format" in s:
                node = self.format(s["format"], m)
                if node is not None:
                    parts.append(node)
            if "~notString" in s:
                inner = self.string_constraints([Subschema(m.uri + "/~s", s["~notString"],
                                                           m.base)])
                parts.append(rx.complement(inner))
            n = s.get("not")
            if exclusions and isinstance(n, dict) and set(n) - ANNOTATIONS <= {"enum", "const"}:
                gone = [v for v in excluded(n) if isinstance(v, str)]
                if gone:
                    parts.append(rx.complement(rx.alt_of(
                        rx.literal(v.encode("utf-8")) for v in gone)))
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
