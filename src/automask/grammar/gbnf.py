"""The GBNF front-end: llama.cpp's grammar format to the grammar IR.

A GBNF file is a list of rules ``name ::= alternatives``; ``root`` is the
start rule. Strings and character classes speak of code points and become
UTF-8 byte regexes; everything else maps one-to-one onto the EBNF
expressions of :mod:`automask.grammar.ir`.

Where this reader differs from llama.cpp, it is on purpose:

* newlines are plain whitespace inside a rule body; a body ends where the
  next ``name ::=`` begins (which must start a new line), so alternatives may
  be spread over several lines with or without a trailing ``|``;
* a rule defined twice is an error (llama.cpp silently keeps the last
  definition, which hides mistakes);
* ``[]`` (a class matching nothing) is an error, while ``[^]`` is any
  character, as in llama.cpp;
* raw newlines inside ``"..."`` or ``[...]`` are errors (they are almost
  always an unterminated literal); write ``\\n``;
* llama.cpp's token syntax (``<...>``, ``!<...>``) is reported as unsupported.
"""

from __future__ import annotations

import bisect

from automask.budget import check_time, time_budget
from automask.errors import GrammarError, LimitExceeded, UnsupportedFeature
from automask.gc_pause import paused_gc
from automask.grammar.ir import (
    GRAMMAR_SECONDS,
    MAX_NESTING,
    Choice,
    Expr,
    Grammar,
    Ref,
    Repeat,
    Seq,
    Terminal,
    check_length,
    line_col,
    lower,
)
from automask.regex import nodes as rx
from automask.regex import utf8

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_DIGITS = frozenset("0123456789")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_ANY_CHAR = Terminal(rx.any_char(), ".")


def read_gbnf(text: str, *, max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
    """``Grammar.from_gbnf``: :func:`parse_gbnf` within the length and CPU-time limits."""
    if isinstance(text, str):
        check_length(text, "GBNF grammar", lambda at: line_col(text, at))
    with paused_gc(), time_budget(max_seconds, "reading the GBNF grammar", start_now=True):
        return parse_gbnf(text)


def parse_gbnf(text: str) -> Grammar:
    """Compile a GBNF grammar (start rule ``root``) to the grammar IR."""
    if not isinstance(text, str):
        raise TypeError(f"a GBNF grammar is text (str), not {type(text).__name__}")
    return _GbnfParser(text).parse()


class _GbnfParser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.refs: list[Ref] = []
        self.depth = 0  # groups open at the cursor

    # ---- positions and errors
    def location(self, pos: int) -> str:
        line = bisect.bisect_right(self.line_starts, pos) - 1
        return f"line {line + 1}, col {pos - self.line_starts[line] + 1}"

    def error(self, message: str, pos: int | None = None) -> GrammarError:
        return GrammarError(message, self.location(self.pos if pos is None else pos))

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else ""

    # ---- lexical helpers
    def skip_space(self) -> bool:
        """Skip blanks, newlines and ``#`` comments; say whether a newline was crossed."""
        text, n, newline = self.text, len(self.text), False
        while self.pos < n:
            c = text[self.pos]
            if c == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            elif c in " \t\r":
                self.pos += 1
            elif c == "\n":
                newline = True
                self.pos += 1
            else:
                break
        return newline

    def name_end(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in _NAME_CHARS:
            pos += 1
        return pos

    def starts_rule(self) -> bool:
        """Whether the name at the cursor is followed by ``::=`` (a new rule begins)."""
        save = self.pos
        self.pos = self.name_end(self.pos)
        self.skip_space()
        found = self.text.startswith("::=", self.pos)
        self.pos = save
        return found

    # ---- grammar
    def parse(self) -> Grammar:
        try:
            rules, defined = self.rules()
        except LimitExceeded as e:
            if e.location is None:  # a time limit: where reading had got to
                raise LimitExceeded(e.message, self.location(self.pos)) from None
            raise
        return lower(rules, "root", source="gbnf", locations=defined)

    def rules(self) -> tuple[dict[str, Expr], dict[str, str]]:
        """The rules by name, and where each is defined."""
        rules: dict[str, Expr] = {}
        defined: dict[str, str] = {}
        self.skip_space()
        while self.pos < len(self.text):
            start = self.pos
            end = self.name_end(start)
            if end == start:
                raise self.error(f"expected a rule name, found {self.peek()!r}")
            name = self.text[start:end]
            self.pos = end
            self.skip_space()
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after rule name {name!r}")
            self.pos += 3
            body = self.alternatives(nested=False)
            if name in rules:
                raise self.error(f"rule {name!r} is defined twice", start)
            rules[name] = body
            defined[name] = self.location(start)
        for ref in self.refs:
            if ref.name not in rules:
                raise GrammarError(f"undefined rule {ref.name!r}", ref.location)
        if "root" not in rules:
            raise GrammarError("the grammar has no 'root' rule", self.location(0))
        return rules, defined

    def alternatives(self, nested: bool) -> Expr:
        items = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            items.append(self.sequence(nested))
        return items[0] if len(items) == 1 else Choice(tuple(items))

    def sequence(self, nested: bool) -> Expr:
        items: list[Expr] = []
        stacked = 0  # repetition operators on the last item (each one more level)
        while True:
            check_time()  # (a count: a long grammar stops at the time limit)
            newline = self.skip_space()
            c = self.peek()
            start = self.pos
            if c in ("", "|", ")"):
                break
            if c not in "*+?{":
                stacked = 0
            if c in _NAME_CHARS:
                if self.starts_rule():
                    if nested:
                        raise self.error("expected ')' before the next rule")
                    if not newline:
                        raise self.error("a rule definition must start on a new line")
                    break
                end = self.name_end(start)
                self.pos = end
                ref = Ref(self.text[start:end], self.location(start))
                self.refs.append(ref)
                items.append(ref)
            elif c == '"':
                items.append(self.string())
            elif c == "[":
                items.append(self.char_class())
            elif c == ".":
                self.pos += 1
                items.append(_ANY_CHAR)
            elif c == "(":
                if self.depth >= MAX_NESTING:
                    raise LimitExceeded(f"groups nested deeper than {MAX_NESTING}",
                                        self.location(start))
                self.pos += 1
                self.depth += 1
                inner = self.alternatives(nested=True)
                self.depth -= 1
                if self.peek() != ")":
                    raise self.error("unclosed '('", start)
                self.pos += 1
                items.append(inner)
            elif c in "*+?{":
                if not items:
                    raise self.error(f"{c!r} must follow an item")
                if self.depth + stacked >= MAX_NESTING:
                    raise LimitExceeded(f"repetitions of repetitions nested deeper than "
                                        f"{MAX_NESTING}", self.location(start))
                items[-1] = self.postfix(items[-1])
                stacked += 1
            elif c in "<!":
                raise UnsupportedFeature("llama.cpp token references are not supported",
                                         self.location(start))
            elif c == ":" and self.text.startswith("::=", start):
                raise self.error("'::=' without a rule name")
            else:
                raise self.error(f"unexpected character {c!r}")
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def postfix(self, item: Expr) -> Expr:
        c = self.peek()
        start = self.pos
        self.pos += 1
        if c == "*":
            return Repeat(item, 0, None)
        if c == "+":
            return Repeat(item, 1, None)
        if c == "?":
            return Repeat(item, 0, 1)
        self.skip_space()
        lo = self.integer()
        hi: int | None = lo
        self.skip_space()
        if self.peek() == ",":
            self.pos += 1
            self.skip_space()
            hi = self.integer() if self.peek() in _DIGITS else None
            self.skip_space()
        if self.peek() != "}":
            raise self.error("expected '}' to close the repetition")
        self.pos += 1
        if hi is not None and hi < lo:
            raise self.error(f"repetition bounds {{{lo},{hi}}} are reversed", start)
        return Repeat(item, lo, hi)

    def integer(self) -> int:
        start = self.pos
        while self.peek() in _DIGITS:
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a number")
        return int(self.text[start:self.pos])

    # ---- literals
    def char(self, closer: str, opener_pos: int) -> int:
        """One (possibly escaped) code point inside a literal ending at ``closer``."""
        c = self.peek()
        if c == "" or c == "\n":
            what = "string" if closer == '"' else "character class"
            raise self.error(f"unterminated {what}", opener_pos)
        start = self.pos
        self.pos += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        self.pos += 1
        if e in _SIMPLE_ESCAPES:
            return ord(_SIMPLE_ESCAPES[e])
        if e in _HEX_ESCAPES:
            digits = self.text[self.pos:self.pos + _HEX_ESCAPES[e]]
            if len(digits) != _HEX_ESCAPES[e] or any(
                    d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"\\{e} needs {_HEX_ESCAPES[e]} hex digits", start)
            self.pos += len(digits)
            value = int(digits, 16)
            if value > utf8.MAX_CODE_POINT:
                raise self.error(f"code point {value:#x} is out of range", start)
            return value
        if e == "":
            raise self.error("unterminated escape", start)
        raise self.error(f"unknown escape '\\{e}'", start)

    def string(self) -> Terminal:
        opener = self.pos
        self.pos += 1
        chars = []
        while self.peek() != '"':
            check_time()
            start = self.pos
            cp = self.char('"', opener)
            if 0xD800 <= cp <= 0xDFFF:
                raise self.error(f"lone surrogate U+{cp:04X} has no UTF-8 form", start)
            chars.append(chr(cp))
        self.pos += 1
        return Terminal(utf8.literal_text("".join(chars)))

    def char_class(self) -> Terminal:
        opener = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            check_time()
            start = self.pos
            lo = self.char("]", opener)
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi = self.char("]", opener)
                if hi < lo:
                    raise self.error("character range is reversed", start)
            ranges.append((lo, hi))
        self.pos += 1
        if not ranges and not negated:
            raise self.error("empty character class '[]' matches nothing", opener)
        if negated:
            ranges = utf8.negate_ranges(ranges)
        return Terminal(utf8.ranges_to_node(ranges))
