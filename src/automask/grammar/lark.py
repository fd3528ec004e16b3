"""The Lark front-end: a Lark grammar file to the grammar IR.

The language is the one Lark's Earley parser accepts with
``lexer="dynamic_complete"``: every terminal may end at every length where
it matches, and ``%ignore``d terminals may stand between any two terminals
(and at either end). Rules become :class:`~automask.grammar.ir.Ref` graphs;
each terminal occurrence in a rule becomes one
:class:`~automask.grammar.ir.Terminal`; a terminal defined from other
terminals is inlined into one regex, as Lark does, so ignored text can never
fall inside it.

Terminal text follows Lark's own reading of literals: ``"..."`` strings and
``/.../`` regexes go through Lark's escape rules, and regexes have Python
``re`` semantics (``.`` excludes only ``\\n``; ``\\d``, ``\\w``, ``\\s`` are
Unicode-aware; the ``i`` flag uses Python's per-character case equivalence).
They are translated here into the explicit dialect of
:func:`automask.regex.parser.parse_regex`. Three things cannot match Lark
exactly and are documented rather than hidden:

* regexes are read with full-match semantics, so a lazy quantifier matches
  the same strings as a greedy one (Lark's ``dynamic_complete`` only tries
  prefixes of the first match Python's ``re`` finds; the common terminals
  below are written so that both agree);
* anchors and word boundaries (``^ $ \\A \\Z \\b \\B``) depend on text
  outside the terminal and are rejected;
* an ignored terminal may end anywhere it matches (Lark takes only its
  longest match at each position); the two agree whenever no other terminal
  can begin with what the ignored terminal matches, as with whitespace.

Features with no regular meaning or no single-file meaning raise
:class:`~automask.errors.UnsupportedFeature`: templates, ``%declare``,
``%override``, ``%extend``, and imports from modules other than ``common``.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]  # (CPython's, not in typeshed)
import array
import bisect
import functools
import re
import sys
import unicodedata
from dataclasses import dataclass

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

# --------------------------------------------------------------------------- grammar AST


@dataclass(frozen=True)
class _Name:
    """A reference to a rule (lowercase) or a terminal (uppercase)."""

    name: str
    pos: int


@dataclass(frozen=True)
class _Leaf:
    """A literal already turned into a byte regex."""

    node: rx.Node
    text: str
    pos: int


@dataclass(frozen=True)
class _Seq:
    items: tuple


@dataclass(frozen=True)
class _Alt:
    items: tuple
    alias_pos: int | None = None  # where a '-> alias' appeared (illegal in terminals)


@dataclass(frozen=True)
class _Rep:
    item: object
    lo: int
    hi: int | None


def _is_rule_name(name: str) -> bool:
    return name.lstrip("_")[:1].islower()


# --------------------------------------------------------------------------- case folding


@functools.lru_cache(maxsize=1)
def _case_groups() -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Candidate case-equivalence groups: code points linked by lower, upper or casefold.

    Returns the sorted cased code points and, for each, its group. Groups may be
    too wide; :func:`_case_variants` keeps only what Python's ``re`` agrees with.
    """
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    # ``re`` lowercases with the *simple* mapping (U+0130 -> "i"), which str.lower() hides.
    simple_lower = getattr(_sre, "unicode_tolower", None)
    by_fold: dict[str, int] = {}
    for cp in range(0x20000):  # no cased character lies past the SMP
        ch = chr(cp)
        for other in (ch.lower(), ch.upper()):
            if len(other) == 1 and other != ch:
                union(cp, ord(other))
        if simple_lower is not None and simple_lower(cp) != cp:
            union(cp, simple_lower(cp))
        fold = ch.casefold()
        if fold != ch:
            union(cp, by_fold.setdefault(fold, cp))
    members: dict[int, list[int]] = {}
    for cp in set(parent) | set(parent.values()):
        members.setdefault(find(cp), []).append(cp)
    groups = {cp: tuple(sorted(g)) for g in members.values() for cp in g}
    return sorted(groups), groups


@functools.cache
def _case_variants(cp: int) -> frozenset[int]:
    """The code points Python's ``re`` matches for ``cp`` under IGNORECASE."""
    group = _case_groups()[1].get(cp)
    if group is None:
        return frozenset((cp,))
    pattern = re.compile("(?i:" + re.escape(chr(cp)) + ")")
    return frozenset([cp] + [x for x in group if pattern.fullmatch(chr(x))])


def _fold_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` plus every case variant of the code points in them."""
    cased = _case_groups()[0]
    out = list(ranges)
    for lo, hi in ranges:
        for cp in cased[bisect.bisect_left(cased, lo):bisect.bisect_right(cased, hi)]:
            out.extend((v, v) for v in _case_variants(cp))
    return utf8.normalize_ranges(out)


def _literal_node(text: str, ignore_case: bool) -> rx.Node:
    if not ignore_case:
        return utf8.literal_text(text)
    return rx.concat(*(utf8.ranges_to_node(_fold_ranges([(ord(c), ord(c))])) for c in text))


# --------------------------------------------------------------------------- Lark's escapes

_EVAL_ESCAPES = {"n": "\n", "f": "\f", "t": "\t", "r": "\r"}
_HEX_LENGTHS = {"x": 2, "u": 4, "U": 8}


def _lark_unescape(body: str) -> str:
    """Lark's reading of the text between the delimiters of a literal.

    ``\\n \\f \\t \\r \\xNN \\uNNNN \\UNNNNNNNN`` become the character; ``\\"``
    becomes ``"``; every other backslash pair (``\\\\`` included) is kept as
    written, for the regex reader (or, for strings, the step below).
    """
    out = []
    i = 0
    while i < len(body):
        check_time()
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(body):
            raise ValueError("the literal ends with a lone backslash")
        e = body[i + 1]
        if e in _EVAL_ESCAPES:
            out.append(_EVAL_ESCAPES[e])
            i += 2
        elif e in _HEX_LENGTHS:
            digits = body[i + 2:i + 2 + _HEX_LENGTHS[e]]
            if len(digits) != _HEX_LENGTHS[e] or not all(d in "0123456789abcdefABCDEF"
                                                         for d in digits):
                raise ValueError(f"bad \\{e} escape")
            value = int(digits, 16)
            if value > utf8.MAX_CODE_POINT:
                raise ValueError(f"\\{e} escape out of range")
            out.append(chr(value))
            i += 2 + len(digits)
        elif e == '"':
            out.append('"')
            i += 2
        else:
            out.append(body[i:i + 2])
            i += 2
    return "".join(out)


def _string_value(body: str) -> str:
    """The text a Lark ``"..."`` literal stands for."""
    return _lark_unescape(body).replace("\\\\", "\\")


# --------------------------------------------------------------------------- Python regexes

_MAX_CP = utf8.MAX_CODE_POINT
_ALL: list[tuple[int, int]] = [(0, _MAX_CP)]
_NOT_NEWLINE = [(0, 9), (11, _MAX_CP)]
_PY_CHAR_ESCAPES = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_OCTAL = "01234567"
_QUANTIFIER = re.compile(r"\{([0-9]*)(,?)([0-9]*)\}")
_NAMED_CHAR = re.compile(r"\{([^}]*)\}")


@functools.cache
def _categories() -> dict[str, tuple[tuple[int, int], ...]]:
    """Python's Unicode ``\\d``, ``\\w``, ``\\s`` as code-point ranges, asked of ``re``."""
    codes = array.array("I", range(0xD800))
    codes.extend(range(0xE000, _MAX_CP + 1))
    if codes.itemsize == 4:  # decoding the raw code units is much faster than chr() per point
        everything = codes.tobytes().decode(f"utf-32-{sys.byteorder[0]}e")
    else:
        everything = "".join(map(chr, codes))

    def code_point(index: int) -> int:  # undo the gap left for the surrogates
        return index if index < 0xD800 else index + 0x800

    return {letter: tuple(utf8.normalize_ranges(
        (code_point(m.start()), code_point(m.end() - 1))
        for m in re.finditer(f"\\{letter}+", everything))) for letter in "dws"}


def _category_ranges(letter: str) -> list[tuple[int, int]]:
    base = list(_categories()[letter.lower()])
    return utf8.negate_ranges(base) if letter.isupper() else base


def _class_text(ranges: list[tuple[int, int]]) -> str:
    """An explicit class for :func:`parse_regex` (``\\U`` escapes; surrogates left out)."""
    parts = []
    for lo, hi in utf8.normalize_ranges(ranges):
        for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
            if a <= b:
                parts.append(f"\\U{a:08X}" if a == b else f"\\U{a:08X}-\\U{b:08X}")
    return "[" + "".join(parts) + "]"


def _is_octal(text: str, length: int) -> bool:
    return len(text) == length and all(c in _OCTAL for c in text)


class _RegexTranslator:
    """Python ``re`` syntax and flags to the ECMA-style dialect of :func:`parse_regex`.

    Everything whose meaning differs between the two (``.``, ``\\d\\w\\s``,
    classes, escapes, ``{,n}``, the ``i s x`` flags) is spelled out explicitly;
    structure (groups, alternation, quantifiers) passes through.
    """

    def __init__(self, pattern: str, flags: str):
        self.p = pattern
        self.i = 0
        self.icase = "i" in flags
        self.dotall = "s" in flags
        self.verbose = "x" in flags

    def fail(self, message: str) -> GrammarError:
        return GrammarError(message)

    def unsupported(self, what: str) -> UnsupportedFeature:
        return UnsupportedFeature(f"{what} is not supported in Lark terminals")

    def translate(self) -> str:
        out = []
        p = self.p
        while self.i < len(p):
            check_time()
            c = p[self.i]
            if self.verbose and c in " \t\n\r\f\v":
                self.i += 1
            elif self.verbose and c == "#":
                end = p.find("\n", self.i)
                self.i = len(p) if end < 0 else end + 1
            elif c == "\\":
                out.append(self.escape())
            elif c == "[":
                out.append(_class_text(self.char_class()))
            elif c == ".":
                self.i += 1
                out.append(_class_text(_ALL if self.dotall else _NOT_NEWLINE))
            elif c == "(":
                out.append(self.group_open())
            elif c == "{":
                out.append(self.braces())
            elif c in "^$":
                raise self.unsupported(f"anchor {c!r}")
            elif c in ")|*+?":
                out.append(c)
                self.i += 1
            else:  # a literal character, '}' and ']' included
                self.i += 1
                out.append(self.literal(ord(c)))
        return "".join(out)

    def literal(self, cp: int) -> str:
        if self.icase:
            return _class_text(_fold_ranges([(cp, cp)]))
        if 0xD800 <= cp <= 0xDFFF:
            return "[]"  # no UTF-8 form: never matches
        ch = chr(cp)
        return ch if ch.isascii() and ch.isalnum() else f"\\U{cp:08X}"

    def braces(self) -> str:
        m = _QUANTIFIER.match(self.p, self.i)
        if m and (m.group(1) or m.group(2)):
            self.i = m.end()
            lo = m.group(1) or "0"
            return f"{{{lo},{m.group(3)}}}" if m.group(2) else f"{{{lo}}}"
        self.i += 1
        return self.literal(ord("{"))

    def group_open(self) -> str:
        p, i = self.p, self.i
        if not p.startswith("(?", i):
            self.i += 1
            return "("
        nxt = p[i + 2:i + 3]
        if nxt == "#":
            end = p.find(")", i)
            if end < 0:
                raise self.fail("unterminated comment group")
            self.i = end + 1
            return ""
        if p.startswith("(?P<", i):
            end = p.find(">", i)
            if end < 0:
                raise self.fail("unterminated group name")
            self.i = end + 1
            return p[i:end + 1]
        if p.startswith("(?P=", i):
            raise self.unsupported("backreference")
        if nxt and nxt in "aiLmsux-":
            raise self.unsupported("inline flag group")
        for header in ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>"):
            if p.startswith(header, i):
                self.i += len(header)
                return header  # parse_regex accepts or names what follows
        if p.startswith("(?<", i):
            end = p.find(">", i)
            if end < 0:
                raise self.fail("unterminated group name")
            self.i = end + 1
            return p[i:end + 1]
        raise self.fail(f"unknown group syntax {p[i:i + 3]!r}")

    def escape(self) -> str:
        p = self.p
        if self.i + 1 >= len(p):
            raise self.fail("the regex ends with a lone backslash")
        e = p[self.i + 1]
        if e in "bBAZ":
            raise self.unsupported(f"anchor '\\{e}'")
        if e in "dDwWsS":
            self.i += 2
            return _class_text(_category_ranges(e))
        if e in "123456789" and not (e in _OCTAL and _is_octal(p[self.i + 2:self.i + 4], 2)):
            raise self.unsupported("backreference")
        return self.literal(self.char_escape())

    def char_escape(self) -> int:
        """One escaped character at the cursor (``\\`` then at least one char)."""
        p = self.p
        start = self.i
        e = p[self.i + 1]
        self.i += 2
        if e in _PY_CHAR_ESCAPES:
            return _PY_CHAR_ESCAPES[e]
        if e in _HEX_LENGTHS:
            n = _HEX_LENGTHS[e]
            digits = p[self.i:self.i + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"bad escape {p[start:self.i + n]!r}")
            self.i += n
            value = int(digits, 16)
            if value > _MAX_CP:
                raise self.fail(f"bad escape {p[start:self.i]!r}")
            return value
        if e == "N":
            m = _NAMED_CHAR.match(p, self.i)
            if not m:
                raise self.fail("bad \\N escape")
            self.i = m.end()
            try:
                return ord(unicodedata.lookup(m.group(1)))
            except KeyError:
                raise self.fail(f"unknown character name {m.group(1)!r}") from None
        if e in _OCTAL:
            digits = e
            while len(digits) < 3 and _is_octal(p[self.i:self.i + 1], 1):
                digits += p[self.i]
                self.i += 1
            value = int(digits, 8)
            if value > 0o377:
                raise self.fail(f"octal escape out of range: {p[start:self.i]!r}")
            return value
        if e.isascii() and e.isalnum():
            raise self.fail(f"bad escape '\\{e}'")
        return ord(e)

    def char_class(self) -> list[tuple[int, int]]:
        """A Python ``[...]`` class at the cursor, resolved to code-point ranges."""
        p = self.p
        opener = self.i
        self.i += 1
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        chars: list[tuple[int, int]] = []
        categories: list[tuple[int, int]] = []
        first = True
        while True:
            if self.i >= len(p):
                raise self.fail(f"unterminated character class at offset {opener}")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            item = self.class_item()
            if isinstance(item, list):
                categories.extend(item)
                continue
            lo = item
            if p.startswith("-", self.i) and self.i + 1 < len(p) and p[self.i + 1] != "]":
                self.i += 1
                hi = self.class_item()
                if isinstance(hi, list) or hi < lo:
                    raise self.fail("bad character range in class")
                chars.append((lo, hi))
            else:
                chars.append((lo, lo))
        if self.icase:
            chars = _fold_ranges(chars)
        ranges = utf8.normalize_ranges(chars + categories)
        return utf8.negate_ranges(ranges) if negated else ranges

    def class_item(self) -> int | list[tuple[int, int]]:
        p = self.p
        c = p[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        if self.i + 1 >= len(p):
            raise self.fail("the regex ends with a lone backslash")
        e = p[self.i + 1]
        if e in "dDwWsS":
            self.i += 2
            return _category_ranges(e)
        if e == "b":
            self.i += 2
            return 8
        if e in "89":
            raise self.fail(f"bad escape '\\{e}' in class")
        return self.char_escape()


def _regex_node(body: str, flags: str) -> rx.Node:
    """The byte regex of a Lark ``/body/flags`` literal (``body`` already unescaped)."""
    from automask.regex.parser import parse_regex

    if "l" in flags:
        raise GrammarError("the 'l' (locale) flag cannot be used with text patterns")
    translated = _RegexTranslator(body, flags).translate()
    return parse_regex(translated, anchored_ends_only=False)


# --------------------------------------------------------------------------- common.lark


def _chars(s: str) -> rx.Node:
    return utf8.ranges_to_node([(ord(c), ord(c)) for c in s])


def _crange(a: str, b: str) -> rx.Node:
    return utf8.ranges_to_node([(ord(a), ord(b))])


@functools.lru_cache(maxsize=1)
def _common() -> dict[str, rx.Node]:
    """The terminals of Lark's ``common`` module, written out as byte regexes.

    Each has the language Lark's dynamic Earley lexer gives the original: for
    the lazy ones (``ESCAPED_STRING``, ``C_COMMENT``) that is "up to the first
    unescaped quote" and "up to the first ``*/``".
    """
    lit = utf8.literal_text
    digit = _crange("0", "9")
    integer = rx.plus(digit)
    sign = rx.optional(_chars("+-"))
    signed_int = rx.concat(sign, integer)
    decimal = rx.alt(rx.concat(integer, lit("."), rx.optional(integer)),
                     rx.concat(lit("."), integer))
    exp = rx.concat(_chars("eE"), signed_int)
    float_ = rx.alt(rx.concat(integer, exp), rx.concat(decimal, rx.optional(exp)))
    number = rx.alt(float_, integer)
    lcase, ucase = _crange("a", "z"), _crange("A", "Z")
    letter = rx.alt(lcase, ucase)
    not_newline = utf8.ranges_to_node(_NOT_NEWLINE)
    string_char = utf8.ranges_to_node(utf8.negate_ranges([(0x0A, 0x0A), (0x22, 0x22),
                                                          (0x5C, 0x5C)]))
    cr, lf = lit("\r"), lit("\n")
    not_star = utf8.ranges_to_node(utf8.negate_ranges([(0x2A, 0x2A)]))
    not_star_slash = utf8.ranges_to_node(utf8.negate_ranges([(0x2A, 0x2A), (0x2F, 0x2F)]))
    stars = rx.plus(lit("*"))
    return {
        "DIGIT": digit,
        "HEXDIGIT": rx.alt(digit, _crange("a", "f"), _crange("A", "F")),
        "INT": integer,
        "SIGNED_INT": signed_int,
        "DECIMAL": decimal,
        "_EXP": exp,
        "FLOAT": float_,
        "SIGNED_FLOAT": rx.concat(sign, float_),
        "NUMBER": number,
        "SIGNED_NUMBER": rx.concat(sign, number),
        "ESCAPED_STRING": rx.concat(
            lit('"'), rx.star(rx.alt(string_char, rx.concat(lit("\\"), not_newline))), lit('"')),
        "LCASE_LETTER": lcase,
        "UCASE_LETTER": ucase,
        "LETTER": letter,
        "WORD": rx.plus(letter),
        "CNAME": rx.concat(rx.alt(lit("_"), letter), rx.star(rx.alt(lit("_"), letter, digit))),
        "WS_INLINE": rx.plus(_chars(" \t")),
        "WS": rx.plus(_chars(" \t\f\r\n")),
        "CR": cr,
        "LF": lf,
        "NEWLINE": rx.plus(rx.concat(rx.optional(cr), lf)),
        "SH_COMMENT": rx.concat(lit("#"), rx.star(not_newline)),
        "CPP_COMMENT": rx.concat(lit("//"), rx.star(not_newline)),
        "SQL_COMMENT": rx.concat(lit("--"), rx.star(not_newline)),
        "C_COMMENT": rx.concat(
            lit("/*"), rx.star(rx.alt(not_star, rx.concat(stars, not_star_slash))),
            stars, lit("/")),
    }


# --------------------------------------------------------------------------- the lexer


@dataclass(frozen=True)
class _Tok:
    kind: str  # RULE TERM STRING REGEXP NUMBER OP MOD DIRECTIVE NL EOF or the punctuation
    text: str
    pos: int


_NAME = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*")
_TERM_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")
_STRING = re.compile(r'"(?:\\[^\n]|[^"\\\n])*"(i?)')
_REGEXP = re.compile(r"/(?:\\[\s\S]|[^/\\])+/([imslux]*)")
_NUMBER = re.compile(r"[+-]?[0-9]+")
_DIRECTIVE = re.compile(r"%[a-z]+")
_MODIFIER = re.compile(r"(?:!\??|\?!?)(?=[_a-z])")  # as Lark: '?' before a name is a modifier
_SKIP = re.compile(r"[ \t]+|\\[ \t]*\r?\n|//[^\n]*|#[^\n]*")
_BLANK_LINES = re.compile(r"(?:[ \t\r\n]+|//[^\n]*|#[^\n]*)*")
_PUNCT = ("->", "..", ".", ":", ",", "|", "(", ")", "[", "]", "{", "}", "~")


class _Lexer:
    def __init__(self, text: str, location):
        self.text = text
        self.location = location

    def error(self, message: str, pos: int) -> GrammarError:
        return GrammarError(message, self.location(pos))

    def tokens(self) -> list[_Tok]:
        text, n = self.text, len(self.text)
        out: list[_Tok] = []
        i = 0
        while i < n:
            try:
                check_time()  # (a count: a long grammar stops at the time limit)
            except LimitExceeded as e:  # where reading had got to
                raise LimitExceeded(e.message, self.location(i)) from None
            m = _SKIP.match(text, i)
            if m:
                i = m.end()
                continue
            c = text[i]
            prev = out[-1].kind if out else "NL"
            if c in "\r\n":
                j = _BLANK_LINES.match(text, i).end()  # type: ignore[union-attr]  # (matches "")
                if j < n and text[j] == "|":
                    out.append(_Tok("|", "|", j))
                    i = j + 1
                else:
                    if prev != "NL":
                        out.append(_Tok("NL", "\n", i))
                    i = j
                continue
            if c == '"':
                m = _STRING.match(text, i)
                if not m:
                    raise self.error("unterminated string literal", i)
                out.append(_Tok("STRING", m.group(0), i))
                i = m.end()
                continue
            if c == "/":
                m = _REGEXP.match(text, i)
                if not m:
                    raise self.error("unterminated regular expression", i)
                out.append(_Tok("REGEXP", m.group(0), i))
                i = m.end()
                continue
            if prev in ("~", "..", ".") and (m := _NUMBER.match(text, i)):
                out.append(_Tok("NUMBER", m.group(0), i))
                i = m.end()
                continue
            if c in "!?":
                m = _MODIFIER.match(text, i)
                if m:
                    out.append(_Tok("MOD", m.group(0), i))
                    i = m.end()
                    continue
                if c == "!":
                    raise self.error("'!' must be followed by a rule name", i)
                out.append(_Tok("OP", c, i))
                i += 1
                continue
            if c in "+*":
                out.append(_Tok("OP", c, i))
                i += 1
                continue
            if c == "%":
                m = _DIRECTIVE.match(text, i)
                if not m:
                    raise self.error("expected a directive after '%'", i)
                out.append(_Tok("DIRECTIVE", m.group(0), i))
                i = m.end()
                continue
            m = _NAME.match(text, i)
            if m:
                name = m.group(0)
                if _RULE_NAME.fullmatch(name):
                    out.append(_Tok("RULE", name, i))
                elif _TERM_NAME.fullmatch(name):
                    out.append(_Tok("TERM", name, i))
                else:
                    raise self.error(f"{name!r} is neither a rule name (lowercase) nor a "
                                     "terminal name (uppercase)", i)
                i = m.end()
                continue
            for p in _PUNCT:
                if text.startswith(p, i):
                    out.append(_Tok(p, p, i))
                    i += len(p)
                    break
            else:
                if c.isdigit():
                    raise self.error("a number is only allowed after '~', '..' or '.'", i)
                raise self.error(f"unexpected character {c!r}", i)
        out.append(_Tok("EOF", "", n))
        return out


# --------------------------------------------------------------------------- the parser


def read_lark(text: str, start: str = "start", *,
              max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
    """``Grammar.from_lark``: :func:`parse_lark` within the length and CPU-time limits."""
    if isinstance(text, str):
        check_length(text, "Lark grammar", lambda at: line_col(text, at))
    with paused_gc(), time_budget(max_seconds, "reading the Lark grammar", start_now=True):
        return parse_lark(text, start=start)


def parse_lark(text: str, start: str = "start") -> Grammar:
    """Compile a Lark grammar to the grammar IR; ``start`` names the start rule."""
    if not isinstance(text, str):
        raise TypeError(f"a Lark grammar is text (str), not {type(text).__name__}")
    parser = _LarkParser(text)
    try:
        return parser.build(start)
    except RecursionError:  # terminals defined through thousands of others
        raise LimitExceeded("the grammar is nested too deeply for Python's recursion limit "
                            "(terminals defined through thousands of others)") from None


_END_OF_EXPANSION = ("|", ")", "]", "NL", "EOF", "->")


class _LarkParser:
    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.toks = _Lexer(text, self.location).tokens()
        self.k = 0
        self.rules: dict[str, tuple[object, int]] = {}
        self.terms: dict[str, tuple[object, int]] = {}
        self.imported: dict[str, rx.Node] = {}
        self.ignores: list[tuple[object, int]] = []
        self.depth = 0  # groups open at the cursor

    # ---- positions and errors
    def location(self, pos: int) -> str:
        line = bisect.bisect_right(self.line_starts, pos) - 1
        return f"line {line + 1}, col {pos - self.line_starts[line] + 1}"

    def error(self, message: str, pos: int) -> GrammarError:
        return GrammarError(message, self.location(pos))

    def unsupported(self, message: str, pos: int) -> UnsupportedFeature:
        return UnsupportedFeature(message, self.location(pos))

    # ---- token stream
    @property
    def tok(self) -> _Tok:
        return self.toks[self.k]

    def take(self) -> _Tok:
        t = self.toks[self.k]
        self.k += 1
        return t

    def expect(self, kind: str, what: str) -> _Tok:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}, found {self._show(self.tok)}", self.tok.pos)
        return self.take()

    @staticmethod
    def _show(t: _Tok) -> str:
        if t.kind == "EOF":
            return "end of input"
        if t.kind == "NL":
            return "end of line"
        return repr(t.text)

    def end_statement(self) -> None:
        if self.tok.kind not in ("NL", "EOF"):
            raise self.error(f"unexpected {self._show(self.tok)}", self.tok.pos)
        if self.tok.kind == "NL":
            self.take()

    # ---- statements
    def parse(self) -> None:
        while self.tok.kind != "EOF":
            t = self.tok
            if t.kind == "NL":
                self.take()
            elif t.kind == "DIRECTIVE":
                self.directive()
            elif t.kind in ("MOD", "RULE", "TERM"):
                self.definition()
            else:
                raise self.error(f"expected a rule, a terminal or a directive, found "
                                 f"{self._show(t)}", t.pos)

    def definition(self) -> None:
        modifier = self.take() if self.tok.kind == "MOD" else None
        t = self.take()
        if t.kind != "RULE" and modifier is not None:
            raise self.error("rule modifiers apply to rules only", modifier.pos)
        if t.kind not in ("RULE", "TERM"):
            raise self.error(f"expected a rule name, found {self._show(t)}", t.pos)
        if self.tok.kind == "{":
            raise self.unsupported("templates are not supported", self.tok.pos)
        if self.tok.kind == ".":
            self.take()
            self.expect("NUMBER", "a priority number")
        self.expect(":", "':'")
        body = self.expansions()
        self.end_statement()
        table = self.rules if t.kind == "RULE" else self.terms
        if t.text in table or t.text in self.imported:
            raise self.error(f"{t.text!r} is defined more than once", t.pos)
        table[t.text] = (body, t.pos)

    def directive(self) -> None:
        t = self.take()
        if t.text == "%ignore":
            body = self.expansions()
            self.end_statement()
            self.ignores.append((body, t.pos))
        elif t.text == "%import":
            self.import_()
        elif t.text in ("%declare", "%override", "%extend"):
            raise self.unsupported(f"{t.text} is not supported", t.pos)
        else:
            raise self.error(f"unknown directive {t.text}", t.pos)

    def import_(self) -> None:
        path: list[_Tok] = []
        if self.tok.kind == ".":
            raise self.unsupported("relative imports are not supported", self.tok.pos)
        while True:
            if self.tok.kind not in ("RULE", "TERM"):
                raise self.error(f"expected a module or name, found {self._show(self.tok)}",
                                 self.tok.pos)
            path.append(self.take())
            if self.tok.kind != ".":
                break
            self.take()
        names: list[tuple[_Tok, str]] = []
        if self.tok.kind == "(":
            self.take()
            module = path
            while True:
                n = self.take()
                if n.kind not in ("RULE", "TERM"):
                    raise self.error(f"expected a name, found {self._show(n)}", n.pos)
                names.append((n, n.text))
                if self.tok.kind != ",":
                    break
                self.take()
            self.expect(")", "')'")
        else:
            if len(path) < 2:
                raise self.error("expected module.NAME", path[0].pos)
            module = path[:-1]
            alias = path[-1].text
            if self.tok.kind == "->":
                self.take()
                a = self.take()
                if a.kind not in ("RULE", "TERM"):
                    raise self.error(f"expected a name, found {self._show(a)}", a.pos)
                alias = a.text
            names.append((path[-1], alias))
        self.end_statement()
        module_name = ".".join(m.text for m in module)
        if module_name != "common":
            raise self.unsupported(f"only the 'common' module can be imported, not "
                                   f"{module_name!r}", module[0].pos)
        common = _common()
        for tok, alias in names:
            if tok.text not in common:
                raise self.error(f"module 'common' has no terminal {tok.text!r}", tok.pos)
            if _is_rule_name(alias):
                raise self.error(f"terminal {tok.text} cannot be imported as a rule name",
                                 tok.pos)
            if alias in self.imported or alias in self.terms:
                raise self.error(f"{alias!r} is defined more than once", tok.pos)
            self.imported[alias] = common[tok.text]

    # ---- expressions
    def expansions(self) -> object:
        alternatives = []
        alias_pos = None
        while True:
            item, pos = self.alias()
            alternatives.append(item)
            alias_pos = alias_pos if alias_pos is not None else pos
            if self.tok.kind != "|":
                break
            self.take()
        if len(alternatives) == 1 and alias_pos is None:
            return alternatives[0]
        return _Alt(tuple(alternatives), alias_pos)

    def alias(self) -> tuple[object, int | None]:
        """One alternative, and where its ``-> alias`` is (the alias itself is ignored)."""
        items = []
        while self.tok.kind not in _END_OF_EXPANSION:
            check_time()
            items.append(self.expr())
        alias_pos = None
        if self.tok.kind == "->":
            alias_pos = self.take().pos
            name = self.take()
            if name.kind != "RULE":
                raise self.error("an alias must be a lowercase name", name.pos)
        return (items[0] if len(items) == 1 else _Seq(tuple(items))), alias_pos

    def expr(self) -> object:
        atom = self.atom()
        t = self.tok
        if t.kind == "OP":
            self.take()
            return _Rep(atom, 0 if t.text != "+" else 1, 1 if t.text == "?" else None)
        if t.kind == "~":
            self.take()
            lo = int(self.expect("NUMBER", "a repetition count").text)
            hi = lo
            if self.tok.kind == "..":
                self.take()
                hi = int(self.expect("NUMBER", "a repetition count").text)
            if lo < 0 or hi < lo:
                raise self.error(f"bad repetition range {lo}..{hi}", t.pos)
            return _Rep(atom, lo, hi)
        return atom

    def atom(self) -> object:
        t = self.take()
        if t.kind in ("(", "["):
            if self.depth >= MAX_NESTING:
                raise LimitExceeded(f"groups nested deeper than {MAX_NESTING}",
                                    self.location(t.pos))
            self.depth += 1
            inner = self.expansions()
            self.depth -= 1
            close = ")" if t.kind == "(" else "]"
            if self.tok.kind != close:
                raise self.error(f"expected {close!r} to close {t.kind!r} at "
                                 f"{self.location(t.pos)}, found {self._show(self.tok)}",
                                 self.tok.pos)
            self.take()
            return inner if t.kind == "(" else _Rep(inner, 0, 1)
        if t.kind == "STRING":
            if self.tok.kind == "..":
                self.take()
                end = self.expect("STRING", "a string after '..'")
                return self.char_range(t, end)
            return self.string(t)
        if t.kind == "REGEXP":
            return self.regexp(t)
        if t.kind in ("RULE", "TERM"):
            if self.tok.kind == "{":
                raise self.unsupported("templates are not supported", self.tok.pos)
            return _Name(t.text, t.pos)
        if t.kind == "MOD":
            raise self.error(f"unexpected {t.text!r} (a rule modifier) inside an expansion",
                             t.pos)
        raise self.error(f"unexpected {self._show(t)}", t.pos)

    # ---- literals
    def string(self, t: _Tok) -> _Leaf:
        icase = t.text.endswith("i")
        body = t.text[1:-2] if icase else t.text[1:-1]
        try:
            value = _string_value(body)
        except ValueError as e:
            raise self.error(str(e), t.pos) from None
        if not value:
            raise self.error("empty strings are not allowed", t.pos)
        surrogate = next((c for c in value if 0xD800 <= ord(c) <= 0xDFFF), None)
        if surrogate is not None:
            raise self.error(f"lone surrogate U+{ord(surrogate):04X} has no UTF-8 form", t.pos)
        return _Leaf(_literal_node(value, icase), t.text, t.pos)

    def char_range(self, a: _Tok, b: _Tok) -> _Leaf:
        ends = []
        for t in (a, b):
            if t.text.endswith("i"):
                raise self.error("a range endpoint cannot take flags", t.pos)
            try:
                value = _string_value(t.text[1:-1])
            except ValueError as e:
                raise self.error(str(e), t.pos) from None
            if len(value) != 1:
                raise self.error("a range endpoint must be one character", t.pos)
            ends.append(ord(value))
        if ends[1] < ends[0]:
            raise self.error("the range is reversed", a.pos)
        return _Leaf(utf8.ranges_to_node([(ends[0], ends[1])]), f"{a.text}..{b.text}", a.pos)

    def regexp(self, t: _Tok) -> _Leaf:
        end = t.text.rindex("/")
        body, flags = t.text[1:end], t.text[end + 1:]
        if "\n" in body and "x" not in flags:
            raise self.error("newlines in a regex need the 'x' flag", t.pos)
        try:
            node = _regex_node(_lark_unescape(body), flags)
        except ValueError as e:
            if isinstance(e, GrammarError):
                raise type(e)(f"in regex {t.text}: {e.message}", self.location(t.pos)) from None
            raise self.error(f"in regex {t.text}: {e}", t.pos) from None
        return _Leaf(node, t.text, t.pos)

    # ---- semantics
    def build(self, start: str) -> Grammar:
        try:
            self.parse()
        except LimitExceeded as e:
            if e.location is None and self.toks:  # a time limit: where reading had got to
                at = self.toks[min(self.k, len(self.toks) - 1)]
                raise LimitExceeded(e.message, self.location(at.pos)) from None
            raise
        terms: dict[str, rx.Node] = dict(self.imported)

        def term_refs(e: object) -> list[_Name]:
            """The terminal names inside a terminal's definition."""
            out, todo = [], [e]
            while todo:
                e = todo.pop()
                if isinstance(e, _Name):
                    out.append(e)
                elif isinstance(e, (_Seq, _Alt)):
                    todo.extend(e.items)
                elif isinstance(e, _Rep):
                    todo.append(e.item)
            return out

        def term_node(name: str, pos: int) -> rx.Node:
            """The regex of terminal ``name``, resolving the terminals it is defined
            through first (depth first with a stack of our own: chains of thousands of
            terminals are no deeper for Python than one)."""
            if name in terms:
                return terms[name]
            resolving: dict[str, None] = {}  # the path being resolved, in order
            work = [(name, pos)]
            while work:
                check_time()
                current, at = work[-1]
                if current in terms:
                    work.pop()
                    continue
                if current not in self.terms:
                    raise self.error(f"undefined terminal {current!r}", at)
                if current not in resolving:
                    resolving[current] = None
                    pending = [r for r in term_refs(self.terms[current][0])
                               if not _is_rule_name(r.name) and r.name not in terms]
                    for r in pending:
                        if r.name in resolving:
                            raise self.error(f"terminal {r.name!r} is recursive (terminals "
                                             "must be regular)", self.terms[r.name][1])
                    if pending:
                        work.extend((r.name, r.pos) for r in reversed(pending))
                        continue
                # every terminal it names is resolved: its node is built without descent
                terms[current] = to_node(self.terms[current][0])
                del resolving[current]
                work.pop()
            return terms[name]

        def to_node(e: object) -> rx.Node:
            if isinstance(e, _Leaf):
                return e.node
            if isinstance(e, _Name):
                if _is_rule_name(e.name):
                    raise self.error(f"rule {e.name!r} cannot be used inside a terminal", e.pos)
                return term_node(e.name, e.pos)
            if isinstance(e, _Seq):
                return rx.concat(*(to_node(i) for i in e.items))
            if isinstance(e, _Alt):
                if e.alias_pos is not None:
                    raise self.error("aliases are not allowed in terminals", e.alias_pos)
                return rx.alt_of([to_node(i) for i in e.items])
            assert isinstance(e, _Rep)
            return rx.repeat(to_node(e.item), e.lo, e.hi)

        def to_expr(e: object) -> Expr:
            if isinstance(e, _Leaf):
                return Terminal(e.node, e.text)
            if isinstance(e, _Name):
                if _is_rule_name(e.name):
                    if e.name not in self.rules:
                        raise self.error(f"undefined rule {e.name!r}", e.pos)
                    return Ref(e.name, self.location(e.pos))
                return Terminal(term_node(e.name, e.pos), e.name)
            if isinstance(e, _Seq):
                return Seq(tuple(to_expr(i) for i in e.items))
            if isinstance(e, _Alt):
                return Choice(tuple(to_expr(i) for i in e.items))
            assert isinstance(e, _Rep)
            return Repeat(to_expr(e.item), e.lo, e.hi)

        for name, (_, pos) in self.terms.items():
            term_node(name, pos)
        rules = {name: to_expr(body) for name, (body, _) in self.rules.items()}
        ignore = [Terminal(to_node(body), "%ignore") for body, _ in self.ignores]
        if start not in rules:
            raise GrammarError(f"start rule {start!r} is not defined")
        defined = {name: self.location(pos) for name, (_, pos) in self.rules.items()}
        return lower(rules, start, ignore=ignore, source="lark", locations=defined)

