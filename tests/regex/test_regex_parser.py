"""Tests for the regex front-end: constructs, errors, and agreement with Python's ``re``."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automask.errors import GrammarError, LimitExceeded, UnsupportedFeature
from automask.regex import nodes as rx
from automask.regex.parser import MAX_DEPTH, parse_regex, parse_regex_search


def _m(node: rx.Node, s: str) -> bool:
    return rx.matches(node, s.encode("utf-8"))


# --------------------------------------------------------------------------- table

ECMA_SPACES = ("\t\n\v\f\r \u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f"
               "\u3000\ufeff")

CASES: list[tuple[str, list[str], list[str]]] = [
    # literals
    ("abc", ["abc"], ["", "ab", "abcd", "abd"]),
    ("", [""], ["a", " "]),
    ("é😀", ["é😀"], ["é", "e😀", "😀é"]),
    ("é+", ["é", "ééé"], ["", "e"]),
    ("😀{2}", ["😀😀"], ["😀", "😀😀😀"]),
    ("a b\n", ["a b\n"], ["ab\n", "a b"]),
    ("}]", ["}]"], ["}", "]"]),
    # dot
    ("a.c", ["abc", "a c", "aéc", "a😀c", "a\tc", "a\x85c"],
     ["ac", "a\nc", "a\rc", "a\u2028c", "a\u2029c", "abbc"]),
    (".{2}", ["ab", "😀😀", "é1"], ["a", "\n\n", "abc"]),
    # class escapes (ECMA meanings)
    (r"\d+", ["0", "0123456789"], ["", "a", "\u0661", "\uff11"]),
    (r"\D", ["a", "é", "\u0661"], ["5", "", "ab"]),
    (r"\w+", ["a_Z9", "___"], ["é", "-", "", "a b"]),
    (r"\W", ["é", "-", " ", "😀"], ["a", "_", "0"]),
    (r"\s", list(ECMA_SPACES), ["a", "\x1c", "\x1f", "\x85", "\u200b", "\u180e", "  "]),
    (r"\S", ["a", "\x85", "\x1c", "\u200b"], [" ", "\u3000", "\ufeff", "\n"]),
    # character escapes
    (r"\n\t\r\f\v\0", ["\n\t\r\f\v\0"], ["ntrfv0", "\n\t\r\f\v"]),
    (r"\0", ["\0"], ["0", ""]),
    (r"\u00e9", ["é"], ["e", "u00e9"]),
    (r"\u0041+", ["A", "AAA"], ["", "\u0041\u0042"]),
    (r"\u{1F600}", ["😀"], ["😁", "u{1F600}"]),
    (r"\u{41}\u{0010FFFF}", ["A\U0010ffff"], ["A"]),
    (r"\u{10000}", ["\U00010000"], ["\uffff"]),
    (r"\x41\x7e", ["A~"], ["x41x7e", "A"]),
    (r"\x00-\x1f", ["\x00-\x1f"], ["\x00"]),
    (r"\U0001F600", ["😀"], ["U0001F600"]),
    (r"\cJ\cm", ["\n\r"], ["cJcm", "\n"]),
    (r"\.\*\\\/\-\+\?\(\)\[\]\{\}\|\^\$", [".*\\/-+?()[]{}|^$"], ["a", ".*\\/-+?()[]{}|^"]),
    (r"\é\ \_\😀", ["é _😀"], ["é _"]),
    (r"\uD83D\uDE00", ["😀"], ["😁", ""]),
    (r"\uD83D\uDE00+", ["😀", "😀😀"], ["", "😀😁"]),
    # classes
    ("[abc]", ["a", "b", "c"], ["d", "", "ab"]),
    ("[a-cx-z]", ["a", "b", "x", "z"], ["d", "w", "A"]),
    ("[^abc]", ["d", "é", "\n", "😀", "\r"], ["a", "c", "", "dd"]),
    ("[-a]", ["-", "a"], ["b", "-a"]),
    ("[a-]", ["-", "a"], ["b"]),
    (r"[a\-z]", ["-", "a", "z"], ["b", "y"]),
    ("[--/]", ["-", ".", "/"], [",", "0"]),
    ("[a-c-e]", ["a", "b", "-", "e"], ["d"]),
    (r"[\d.]", ["5", "."], ["a", ","]),
    (r"[^\d\s]", ["a", "é", "_"], ["5", " ", "\u3000", "\n"]),
    (r"[\w-]+", ["a-b_9"], ["a b", "é"]),
    (r"[\D]", ["a"], ["1"]),
    (r"[\S\s]", ["\n", "😀", "a"], ["", "ab"]),
    (r"[\b]", ["\b"], ["b", "\\"]),
    (r"[\cA-\cC\0]", ["\x01", "\x03", "\x00"], ["\x04", "c"]),
    (r"[\x00-\x08]", ["\x00", "\x08"], ["\t"]),
    ("[]", [], ["", "a", "]"]),
    ("[]a]", [], ["a]", "a", "]", ""]),
    ("[^]", ["a", "\n", "😀"], ["", "ab"]),
    ("[é-ê]", ["é", "ê"], ["è", "ë", "e"]),
    (r"[\u0100-\uFFFF]", ["Ā", "\uffff", "€"], ["a", "ÿ", "😀"]),
    ("[😀-😂]", ["😀", "😁", "😂"], ["😃", "\u263a"]),
    (r"[\uD83D\uDE00-\uD83D\uDE4F]", ["😀", "🙏"], ["🚀", "a"]),
    (r"[\u{1F680}a]", ["🚀", "a"], ["b"]),
    ("[.]", ["."], ["a"]),
    ("[$^]", ["$", "^"], ["a"]),
    ("[a^]", ["a", "^"], ["b"]),
    ("[[]", ["["], ["]"]),
    (r"[\]\\]", ["]", "\\"], ["a"]),
    (r"[\uD800-\uDFFFa]", ["a"], ["b", "😀"]),
    # groups and alternation
    ("(ab)+", ["ab", "abab"], ["", "aba", "a"]),
    ("(?:ab|cd)*", ["", "ab", "cdab"], ["a", "abc"]),
    ("(?P<x>a)b", ["ab"], ["a", "b"]),
    (r"(?<year>\d{4})-(?<month>\d{2})", ["2024-01"], ["24-01", "2024-1"]),
    ("a|b|", ["a", "b", ""], ["ab", "c"]),
    ("|a", ["", "a"], ["aa"]),
    ("(|a)b", ["b", "ab"], ["aab", "a"]),
    ("()", [""], ["a"]),
    ("((a|b)c){2}", ["acbc", "bcac"], ["ac", "acbcac"]),
    ("a|b*", ["a", "", "bbb"], ["ab", "ba"]),
    ("(a|ab)(c|bcd)", ["ac", "abcd", "abc"], ["abd", "a"]),
    # quantifiers
    ("a*", ["", "a", "aaaa"], ["b", "ab"]),
    ("a+", ["a", "aa"], ["", "b"]),
    ("a?b", ["b", "ab"], ["aab"]),
    ("a{3}", ["aaa"], ["aa", "aaaa"]),
    ("a{2,}", ["aa", "aaaaa"], ["a", ""]),
    ("a{2,4}", ["aa", "aaa", "aaaa"], ["a", "aaaaa"]),
    ("a{0}b", ["b"], ["ab"]),
    ("(ab){1,2}c", ["abc", "ababc"], ["c", "abababc"]),
    ("a*?", ["", "aa"], ["b"]),
    ("a+?b", ["ab", "aab"], ["b"]),
    ("a??", ["", "a"], ["aa"]),
    ("a{1,2}?", ["a", "aa"], ["", "aaa"]),
    ("(ab){2,3}?", ["abab", "ababab"], ["ab"]),
    ("(a?){3}", ["", "a", "aaa"], ["aaaa"]),
    ("a{", ["a{"], ["a"]),
    ("x{2,y}", ["x{2,y}"], ["xx"]),
    ("a{}", ["a{}"], ["a"]),
    ("{a", ["{a"], ["a"]),
    # anchors at the edges are ignored under full-match
    ("^abc$", ["abc"], ["xabc", "abcx", ""]),
    ("^a|b$", ["a", "b"], ["ab", "ba"]),
    ("^$", [""], ["a"]),
    ("^", [""], ["a"]),
    ("$", [""], ["a"]),
    ("^(a|b)+$", ["ab", "bba"], ["", "abc"]),
    ("(^a|b)c", ["ac", "bc"], ["c", "abc"]),
    ("(a|b$)", ["a", "b"], ["ab"]),
    (r"\Aabc\Z", ["abc"], ["abcd"]),
    ("^^a$$", ["a"], ["aa"]),
    # realistic schema patterns
    (r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$", ["2024-02-29", "1999-12-31"],
     ["2024-13-01", "2024-00-10", "2024-1-1", "2024-02-32"]),
    (r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", ["a.b@c.de", "é@x.org"], ["a@b", "a b@c.de", "a@b.c"]),
    (r"^(\([0-9]{3}\))?[0-9]{3}-[0-9]{4}$", ["(555)555-1234", "555-1234"],
     ["(555)5551234", "(55)555-1234"]),
    (r"^[A-Za-z_$][\w$]*$", ["$x", "_a1", "abc"], ["1a", "a-b"]),
]


@pytest.mark.parametrize(("pattern", "good", "bad"), CASES, ids=[repr(c[0]) for c in CASES])
def test_table(pattern: str, good: list[str], bad: list[str]) -> None:
    node = parse_regex(pattern)
    for s in good:
        assert _m(node, s), f"{pattern!r} should match {s!r}"
    for s in bad:
        assert not _m(node, s), f"{pattern!r} should not match {s!r}"


def test_table_is_large() -> None:
    assert len(CASES) >= 80


def test_multibyte_quantifier_repeats_whole_code_point() -> None:
    node = parse_regex("é+")
    assert rx.matches(node, "éé".encode())
    assert not rx.matches(node, b"\xc3\xa9\xa9")  # only the last byte repeated


def test_only_valid_utf8_is_matched() -> None:
    node = parse_regex("[^a]")
    assert not rx.matches(node, b"\xff")
    assert not rx.matches(node, b"\xed\xa0\x80")  # an encoded surrogate
    assert rx.matches(node, b"\xf4\x8f\xbf\xbf")


# --------------------------------------------------------------------------- search semantics

SEARCH_CASES: list[tuple[str, list[str], list[str]]] = [
    ("abc", ["abc", "xxabcxx", "\nabc\n"], ["ab", "a\nbc", ""]),
    ("^abc", ["abc", "abc\nzz"], ["xabc", "\nabc"]),
    ("abc$", ["abc", "zz\nabc"], ["abcx", "abc\n"]),
    ("^abc$", ["abc"], ["abc\n", "xabc"]),
    ("^a|b$", ["a", "axx", "xxb", "b"], ["xa", "bx", ""]),
    ("(^a|b)c", ["ac", "acx", "xbcx"], ["xac", "a", "c"]),
    ("", ["", "anything", "\n"], []),
    ("^", ["", "x"], []),
    ("^$", [""], ["\n", "a"]),
    (r"\d{3}", ["a123b", "1234"], ["12", "1a2b3"]),
    ("[]", [], ["", "a"]),
    (r"\Aab\Z", ["ab"], ["abc", "cab"]),
]


@pytest.mark.parametrize(("pattern", "good", "bad"), SEARCH_CASES,
                         ids=[repr(c[0]) for c in SEARCH_CASES])
def test_search(pattern: str, good: list[str], bad: list[str]) -> None:
    node = parse_regex_search(pattern)
    for s in good:
        assert _m(node, s), f"search {pattern!r} should match {s!r}"
    for s in bad:
        assert not _m(node, s), f"search {pattern!r} should not match {s!r}"


# --------------------------------------------------------------------------- errors

UNSUPPORTED = [
    ("(?=a)", "lookahead", 1),
    ("a(?!b)", "negative lookahead", 2),
    ("(?<=a)b", "lookbehind", 1),
    ("x(?<!a)b", "negative lookbehind", 2),
    ("a\\1", "backreference", 2),
    ("(a)\\2", "backreference", 4),
    ("(?<n>a)\\k<n>", "backreference", 8),
    ("(?P<n>a)(?P=n)", "backreference", 9),
    ("\\bfoo", "word boundary", 1),
    ("foo\\B", "word boundary", 4),
    ("(?i)abc", "inline flag", 1),
    ("a(?i:b)", "inline flag", 2),
    ("(?-i:b)", "inline flag", 1),
    ("(?>a)", "atomic group", 1),
    ("(?#note)a", "inline comment", 1),
    ("(?(1)a|b)", "conditional", 1),
    ("\\p{L}", "Unicode property", 1),
    ("ab\\P{Lu}", "Unicode property", 3),
    ("a^b", "'^' anchor", 2),
    ("a$b", "'$' anchor", 2),
    ("(^a)*", "'^' anchor", 2),
    ("a(b$)+", "'$' anchor", 4),
    ("$^", "'^' anchor", 2),
    ("a\\Ab", "'^' anchor", 2),
    ("a*+", "possessive", 2),
    ("a{2}+", "possessive", 2),
    ("[\\1]", "octal", 2),
    ("\\01", "octal", 1),
]


@pytest.mark.parametrize(("pattern", "feature", "col"), UNSUPPORTED,
                         ids=[repr(c[0]) for c in UNSUPPORTED])
def test_unsupported(pattern: str, feature: str, col: int) -> None:
    with pytest.raises(UnsupportedFeature) as info:
        parse_regex(pattern)
    assert feature in str(info.value)
    assert "not supported" in str(info.value)
    assert info.value.location == f"col {col}"
    assert f"col {col}" in str(info.value)


MALFORMED = [
    ("(a", 1),
    ("a(b(c)", 2),
    ("a)", 2),
    ("[z-a]", 2),
    ("[a-\\d]", 2),
    ("[\\w-z]", 2),
    ("*a", 1),
    ("+", 1),
    ("a|?", 3),
    ("(*)", 2),
    ("{2}", 1),
    ("^*", 2),
    ("a$?", 3),
    ("a{3,2}", 2),
    ("a**", 3),
    ("a???", 4),
    ("a{2}{3}", 5),
    ("a{,3}", 2),
    ("a{,}", 2),
    ("\\u12", 1),
    ("x\\u{}", 2),
    ("\\u{110000}", 1),
    ("\\x4", 1),
    ("\\U0001F60", 1),
    ("\\c1", 1),
    ("\\q", 1),
    ("\\a", 1),
    ("a\\", 2),
    ("[a\\", 3),
    ("[abc", 1),
    ("[a-", 1),
    ("[\\B]", 2),
    ("(?<n>a)(?<n>b)", 8),
    ("(?P<1a>x)", 1),
    ("(?<>x)", 1),
    ("(?P<n", 1),
    ("(?", 1),
    ("(?Q)", 1),
    ("\\uD800", 1),
    ("ab\\uDE00", 3),
    ("\ud800", 1),
]


@pytest.mark.parametrize(("pattern", "col"), MALFORMED, ids=[repr(c[0]) for c in MALFORMED])
def test_malformed(pattern: str, col: int) -> None:
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern)
    assert not isinstance(info.value, UnsupportedFeature)
    assert info.value.location == f"col {col}"


@pytest.mark.parametrize("pattern", ["a{100001}", "a{0,100001}", "a{100001,}",
                                     "a{99999999999999999999999}", "a{1,99999999999999}"])
def test_repeat_limit(pattern: str) -> None:
    with pytest.raises(LimitExceeded, match="col 2"):
        parse_regex(pattern)


def test_repeat_limit_boundary_is_accepted() -> None:
    assert _m(parse_regex("a{000000002}"), "aa")
    node = parse_regex("a{100000}")
    assert not _m(node, "a" * 99_999)
    assert _m(node, "a" * 100_000)


def test_nesting_limit() -> None:
    ok = "(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH
    assert _m(parse_regex(ok), "a")
    too_deep = "(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(LimitExceeded):
        parse_regex(too_deep)


def test_anchors_rejected_when_not_allowed() -> None:
    assert _m(parse_regex("ab", anchored_ends_only=False), "ab")
    with pytest.raises(UnsupportedFeature, match="col 1"):
        parse_regex("^ab", anchored_ends_only=False)
    with pytest.raises(UnsupportedFeature, match="col 3"):
        parse_regex("ab$", anchored_ends_only=False)
    assert _m(parse_regex("a\\$", anchored_ends_only=False), "a$")


def test_non_str_pattern_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_regex(b"abc")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- size and speed


def test_counted_string_body_stays_symbolic() -> None:
    node = parse_regex(r'"[^"\\]{0,500}"')
    assert "{0,500}" in rx.to_pattern(node)  # one repeat node, not 500 copies
    assert _m(node, '""')
    assert _m(node, '"' + "é😀x" * 100 + '"')
    assert _m(node, '"' + "x" * 500 + '"')
    assert not _m(node, '"' + "x" * 501 + '"')
    assert not _m(node, '"a"b"')
    assert not _m(node, '"a\\b"')


def test_counted_email() -> None:
    node = parse_regex(r"[a-z0-9]{1,300}@example\.com")
    assert "{1,300}" in rx.to_pattern(node)
    assert _m(node, "bob42@example.com")
    assert _m(node, "a" * 300 + "@example.com")
    assert not _m(node, "a" * 301 + "@example.com")
    assert not _m(node, "@example.com")
    assert not _m(node, "Bob@example.com")
    assert not _m(node, "bob@exampleXcom")


def test_long_literal_does_not_recurse_per_byte() -> None:
    text = "".join("abcdé😀"[(i * i + 3 * i) % 7 % 6] for i in range(2500))
    node = parse_regex("^(" + text + ")(x|y)$")
    assert _m(node, text + "x")
    assert not _m(node, text)
    assert not _m(node, text[:-1] + "x")
    assert _m(parse_regex_search(text), "zz" + text + "zz")
    assert _m(parse_regex("(a|b)" * 3000 + "c"), "ab" * 1500 + "c")


@pytest.mark.parametrize("data", [b"", b"a", b'"key"', bytes(range(256))])
@pytest.mark.parametrize("after", ["eps", "empty", "literal", "star", "concat"])
def test_a_literal_is_the_concatenation_of_its_bytes(data: bytes, after: str) -> None:
    """``literal(data, after)`` builds its chain its own way (a lookup per byte): the
    node is the one ``concat`` makes of the bytes and ``after``, under interning."""
    tail = {"eps": rx.EPS, "empty": rx.EMPTY, "literal": rx.literal(b"zz"),
            "star": rx.repeat(rx.literal(b" "), 0, None),
            "concat": rx.concat(rx.repeat(rx.literal(b"ab"), 1, 3), rx.literal(b":"))}[after]
    expected = rx.concat(*(rx.byte_set(1 << c) for c in data), tail)
    assert rx.literal(data, tail) is expected
    if after == "eps":
        assert rx.literal(data) is expected
    assert rx.matches(expected, data + b"zz") is (after == "literal")


def test_a_node_lists_the_parts_its_kind_has_and_marks_the_others_absent() -> None:
    a, b = parse_regex("a"), parse_regex("[0-9]+")
    cat, star, either = rx.concat(a, b), rx.star(b), rx.alt(a, b, parse_regex("x"))
    assert rx.parts_of(cat) == [cat.a, cat.b] and rx.concat(*rx.parts_of(cat)) is cat
    assert rx.parts_of(star) == [b] and star.b is rx.NO_PART
    assert rx.parts_of(either) == list(either.items) and either.a is rx.NO_PART
    assert rx.parts_of(a) == [] and a.a is rx.NO_PART is a.b
    with pytest.raises(AttributeError):  # an absent part is never read as a node
        rx.NO_PART.kind  # noqa: B018


def test_alphabets_are_memoized_on_every_part_as_computed_alone() -> None:
    """``_alphabet`` keeps its answer on each node below the one asked (the derivatives of
    an intersection share most of its parts); each kept answer is the one a walk of that
    part alone gives, in both modes (plain bytes, and any-character as no byte)."""
    def alone(n: rx.Node, whole: rx.Node | None) -> int:
        if n is whole:
            return 0
        if n.kind == rx.K_BYTES:
            return n.bits
        if n.kind in (rx.K_NOT, rx.K_ENC):
            return rx.FULL_BITS
        bits = 0
        for c in rx.parts_of(n):
            bits |= alone(c, whole)
        return bits

    def parts(n: rx.Node) -> list[rx.Node]:
        out, stack = {}, [n]
        while stack:
            x = stack.pop()
            if x.uid not in out:
                out[x.uid] = x
                stack += rx.parts_of(x)
        return list(out.values())

    node = rx.intersect(parse_regex("(ab|[0-9]{2,4})+x?"), rx.alt(
        parse_regex(".*9.*"), rx.complement(parse_regex("a.*")), parse_regex("[a-c]+")))
    for whole, slot in ((None, "_alpha"), (rx.any_char(), "_alpha_text")):
        assert rx._alphabet(node, whole) == alone(node, whole)
        for part in parts(node):
            assert getattr(part, slot) in (None, alone(part, whole)), rx.to_pattern(part)
        assert all(getattr(p, slot) is not None for p in node.items)  # (not below a not)


def test_surrogate_pair_in_pattern_text_is_one_code_point() -> None:
    # A str can hold an unpaired-looking pair, e.g. from surrogatepass decoding.
    node = parse_regex("\ud83d\ude00+")
    assert _m(node, "😀😀")
    assert not rx.matches(node, "😀".encode() + b"\x80")


def test_results_are_shared() -> None:
    assert parse_regex("(a|b)*c") is parse_regex("(?:[ab])*c")


# --------------------------------------------------------------------------- agreement with re

# Characters on which ECMA and Python (re.ASCII) agree for every construct below.
ALPHABET = ["a", "b", "0", "5", "_", "-", ".", " ", "\n", "é", "😀"]
# Candidate strings also use these, which no pattern names literally.
EXTRA = ["\t", "\v", "\x00", "Z", "ÿ", "€", "\U0010ffff",
         "\u07ff", "\u0800", "\ufffd", "\uffff", "\U00010000", "\U00010001", "😁"]
# Class ranges stay narrow (hypothesis's from_regex walks every code point of a
# range) but cross each UTF-8 length boundary.
RANGES = [("0", "5"), ("a", "b"), ("-", "."), ("_", "a"), ("a", "é"), ("é", "ÿ"),
          ("\u07fe", "\u0801"), ("\ufffd", "\U00010001"), ("😀", "😂")]
CANDIDATE_CHARS = "".join(ALPHABET + EXTRA)
_LITERAL_FORMS = {
    "a": ["a", r"\x61", r"\u0061"],
    "é": ["é", r"\u00e9", r"\xe9"],
    "😀": ["😀", r"\U0001F600"],
    ".": [r"\."],
    "-": ["-", r"\-"],
    "\n": ["\n", r"\n"],
}
_CLASS_ESCAPES = [r"\d", r"\w", r"\s", r"\D", r"\W", r"\S"]
# Python's '.' and \s/\S disagree with ECMA on these; candidate strings avoid them.
_DISAGREE = (set("\r\u2028\u2029\x1c\x1d\x1e\x1f\x85" + ECMA_SPACES)
             | {chr(c) for c in range(0x2000, 0x200B)}) - set(" \t\n\v\f")


def _class_char(c: str) -> str:
    return "\\" + c if c in "]\\^-" else c


@st.composite
def _class(draw: st.DrawFn) -> str:
    negate = draw(st.booleans())
    items = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            items.append(_class_char(draw(st.sampled_from(ALPHABET))))
        elif kind == 1:
            lo, hi = draw(st.sampled_from(RANGES))
            items.append(f"{_class_char(lo)}-{_class_char(hi)}")
        else:  # negated escapes only in positive classes, so [^...] is never everything
            escapes = _CLASS_ESCAPES[:3] if negate else _CLASS_ESCAPES
            items.append(draw(st.sampled_from(escapes)))
    return ("[^" if negate else "[") + "".join(items) + "]"


def _atom(depth: int) -> st.SearchStrategy[str]:
    literal = st.sampled_from(ALPHABET).flatmap(
        lambda c: st.sampled_from(_LITERAL_FORMS.get(c, [c])))
    leaves = st.one_of(literal, literal, _class(), st.just("."), st.sampled_from(_CLASS_ESCAPES))
    if depth <= 0:
        return leaves
    group = st.tuples(st.sampled_from(["(", "(?:", "(?P<g>"]), _alternation(depth - 1)).map(
        lambda t: f"{t[0]}{t[1]})")
    return st.one_of(leaves, leaves, group)


_QUANTIFIERS = ["*", "+", "?", "{2}", "{0,2}", "{1,}", "{1,3}", "{0}"]


def _piece(depth: int) -> st.SearchStrategy[str]:
    quant = st.one_of(st.just(""), st.just(""),
                      st.tuples(st.sampled_from(_QUANTIFIERS),
                                st.sampled_from(["", "?"])).map("".join))
    return st.tuples(_atom(depth), quant).map("".join)


def _alternation(depth: int) -> st.SearchStrategy[str]:
    seq = st.lists(_piece(depth), min_size=0, max_size=4).map("".join)
    return st.lists(seq, min_size=1, max_size=3).map("|".join)


def _number_groups(pattern: str) -> str:
    """Python needs distinct group names."""
    parts = pattern.split("(?P<g>")
    return parts[0] + "".join(f"(?P<g{i}>{p}" for i, p in enumerate(parts[1:]))


patterns = _alternation(2).map(_number_groups)


def _candidates(data: st.DataObject, pattern: str) -> list[str]:
    """Random strings over the alphabet, plus strings Python says match.

    Generation ignores re.ASCII (hypothesis then refuses non-ASCII literals) and
    keeps to a small alphabet (building a full-Unicode strategy is slow); the
    oracle still uses re.ASCII.
    """
    text = st.text(alphabet=CANDIDATE_CHARS, max_size=8)
    matching = st.from_regex(re.compile(pattern), fullmatch=True, alphabet=CANDIDATE_CHARS)
    out = [data.draw(text) for _ in range(4)] + [data.draw(matching) for _ in range(3)]
    usable = []
    for s in out:
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            continue
        if not _DISAGREE.intersection(s):
            usable.append(s)
    return usable


_PROPERTY = settings(max_examples=200, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@_PROPERTY
@given(pattern=patterns, data=st.data())
def test_agrees_with_python_fullmatch(pattern: str, data: st.DataObject) -> None:
    compiled = re.compile(pattern, re.ASCII)
    node = parse_regex(pattern)
    for s in _candidates(data, pattern):
        expected = compiled.fullmatch(s) is not None
        assert _m(node, s) == expected, (pattern, s, expected)


@_PROPERTY
@given(pattern=patterns, start=st.booleans(), end=st.booleans(), data=st.data())
def test_search_agrees_with_python_search(pattern: str, start: bool, end: bool,
                                          data: st.DataObject) -> None:
    # \Z rather than $: Python's $ also matches before a final newline, ECMA's does not.
    anchored = ("^" if start else "") + f"(?:{pattern})" + (r"\Z" if end else "")
    compiled = re.compile(anchored, re.ASCII)
    node = parse_regex_search(anchored)
    text = st.text(alphabet=CANDIDATE_CHARS, max_size=4)
    inner = _candidates(data, pattern)
    for s in [data.draw(text) + s + data.draw(text) for s in inner] + inner:
        if _DISAGREE.intersection(s):
            continue
        expected = compiled.search(s) is not None
        assert _m(node, s) == expected, (anchored, s, expected)


def _states_from(*starts: rx.Node, limit: int = 300) -> Iterator[rx.Node]:
    """``starts`` and the nodes a few bytes into them (one derivative per byte class)."""
    todo = list(starts)
    seen: set[int] = set()
    while todo and len(seen) < limit:
        node = todo.pop()
        if node.uid in seen:
            continue
        seen.add(node.uid)
        yield node
        todo.extend(d for lo, _ in rx.class_runs(rx.class_starts(node))
                    if (d := rx.derive(node, lo)) is not rx.EMPTY)


@_PROPERTY
@given(pattern=patterns)
def test_can_continue_read_off_structure_agrees_with_derivatives(pattern: str) -> None:
    # Every state a few bytes in, JSON string encodings included (they are K_ENC nodes).
    from automask.schema.json_text import JSON_STRING_CODE

    start = parse_regex(pattern)
    for node in _states_from(start, rx.encoded(start, JSON_STRING_CODE)):
        by_derivative = any(rx.derive(node, lo) is not rx.EMPTY
                            for lo, _ in rx.class_runs(rx.class_starts(node)))
        structural = rx._extends(node) if node.plain else None
        assert structural in (None, by_derivative), (rx.to_pattern(node), by_derivative)
        assert rx.can_continue(node) == by_derivative


@_PROPERTY
@given(pattern=patterns)
def test_first_bytes_read_off_structure_agree_with_derivatives(pattern: str) -> None:
    # Every state a few bytes in, JSON string encodings, key chains and their
    # whitespace gaps included (the lexemes FOLLOW sets are read from).
    from automask.schema.json_text import JSON_STRING_CODE

    start = parse_regex(pattern)
    gap = rx.repeat(rx.byte_set(sum(1 << b for b in b" \t\n\r")), 0, 4)
    for node in _states_from(start, rx.encoded(start, JSON_STRING_CODE),
                             rx.concat(gap, rx.optional(start)),
                             rx.concat(gap, rx.literal(b'"k"'), gap, start)):
        by_derivative = 0
        for lo, hi in rx.class_runs(rx.class_starts(node)):
            if rx.derive(node, lo) is not rx.EMPTY:
                by_derivative |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
        assert rx.first_bytes(node) == by_derivative, rx.to_pattern(node)


# ------------------------------------------------------------------ clamp (token-length bound)

def _strings(alphabet: bytes, n: int):
    yield b""
    frontier = [b""]
    for _ in range(n):
        frontier = [s + bytes([c]) for s in frontier for c in alphabet]
        yield from frontier


def _live_after(node: rx.Node, data: bytes) -> bool:
    for b in data:
        node = rx.derive(node, b)
    return rx.is_live(node)


@pytest.mark.parametrize("pattern", [
    "a{0,9}b", "(ab|c){2,40}x", "[ab]{7,}", "a{6,8}", "(a{0,3}b){0,12}", "(a|b{2,9})*c{0,30}",
    "(a{0,9}|b)(c{5,}|x)", "a{3}b{0,6}", "(a?){8,20}b",
    # iterations of m >= 2 bytes: counts past limit // m merge
    "(ab){0,2}x", "(ab){0,3}x", "(ab){5,9}", "(abc){3,3}", "(abc){2,2}x", "(abc){1,1}",
    "(ab|cx){2,6}a", "(a|bc){0,2}x",
    "(a+b){1,4}", "((ab){0,9}c){0,5}",
])
def test_clamp_agrees_on_strings_up_to_the_limit(pattern: str) -> None:
    """Membership and liveness after every string of at most ``limit`` bytes are unchanged."""
    limit = 5
    node = parse_regex(pattern)
    clamped = rx.clamp(node, limit)
    for s in _strings(b"abcx", limit):
        assert rx.matches(clamped, s) == rx.matches(node, s), (pattern, s)
        assert _live_after(clamped, s) == _live_after(node, s), (pattern, s)


def test_clamp_merges_long_counts_and_keeps_short_ones() -> None:
    assert rx.clamp(parse_regex("a{0,1000}b"), 128) is rx.clamp(parse_regex("a{0,999}b"), 128)
    assert rx.clamp(parse_regex("a{0,1000}b"), 128) is parse_regex("a*b")
    assert rx.clamp(parse_regex("a{300,}"), 128) is parse_regex("a{129,}")
    assert rx.clamp(parse_regex("a{0,100}b"), 128) is parse_regex("a{0,100}b")
    # a word count: each iteration takes two bytes or more, so 65 of them cannot fit in 128
    words = r"(?:\S+\s+){0,99}\S+"
    assert rx.clamp(parse_regex(words), 128) is parse_regex(r"(?:\S+\s+)*\S+")
    assert rx.clamp(parse_regex("(ab){0,64}c"), 128) is parse_regex("(ab){0,64}c")
    assert rx.clamp(parse_regex("(ab){0,65}c"), 128) is parse_regex("(ab)*c")
    # An intersection is clamped only to drop a bound that cannot bind within the limit;
    # otherwise it is kept whole: its liveness needs whole languages.
    both = rx.intersect(parse_regex("a{0,1000}"), parse_regex("(aa)*"))
    assert rx.clamp(both, 4) is parse_regex("(aa)*")
    tight = rx.intersect(parse_regex("a{0,5}"), parse_regex("(aa)*"))
    assert rx.clamp(tight, 4) is tight


def test_clamp_skips_nodes_without_counts() -> None:
    # Stars, pluses and plain text hold nothing to clamp: the node itself, with no walk.
    for pattern in ("a*b+c", "(ab|cd)+e", "xyz"):
        node = parse_regex(pattern)
        assert not node.counted and rx.clamp(node, 2) is node
    for pattern in ("a{2,}", "a{0,3}", "(b|a{1,4})c"):
        assert parse_regex(pattern).counted
    assert rx.intersect(parse_regex("a*b"), parse_regex("(aa)*b")).counted  # kept whole


def test_clamp_returns_a_node_whose_counts_fit_as_is() -> None:
    # ``counted`` is the most bytes a count spans (count x the body's shortest string):
    # within the limit no count can change, so clamp gives the node back with no walk (a
    # key's whitespace gap, and each new key, under every vocabulary).
    gap_key = parse_regex(r'[ \t\n\r]{0,24}"a key no other test names"[ \t\n\r]{0,24}:')
    assert gap_key.counted == 24
    memo = dict(gap_key._clamps or {})  # (interned: whatever clamped it before stays)
    assert rx.clamp(gap_key, 24) is gap_key and (gap_key._clamps or {}) == memo  # no walk
    assert 24 not in memo
    assert parse_regex("(ab){0,64}c").counted == 128 and parse_regex("(a?){0,9}").counted == 9
    assert rx.clamp(parse_regex("x(abc){2,7}"), 20) is parse_regex("x(abc){2,}")  # 21 > 20
    assert parse_regex("a*b").counted == 0


def test_text_except_is_every_text_but_the_words() -> None:
    from automask.regex import utf8

    words = ["ab", "a", "é", "éa", "", "b\u00e9"]
    node = utf8.text_except(words)
    assert node.plain  # no complement or intersection: cheap derivatives
    alphabet = "abé\u0101"
    texts = [""] + list(alphabet)
    texts += [x + y for x in alphabet for y in alphabet]
    texts += [x + y + z for x in alphabet for y in alphabet for z in "aé"]
    for t in texts:
        assert rx.matches(node, t.encode()) == (t not in words), t
    assert not rx.matches(node, b"a\xff")  # only valid UTF-8
    assert not rx.matches(node, "é".encode()[:1])
    # Leaving the words' trie lands on the node every other string uses.
    anything = rx.star(rx.any_char())
    assert rx.derive(rx.derive(node, ord("a")), ord("x")) is anything
    assert utf8.text_except([]) is anything


@pytest.mark.parametrize("text, bound, clamped", [
    ("[a-z]+@[a-z]+(\\.[a-z]+)*", "[\\s\\S]{0,40}", True),     # 40 >= 5 + completions (2)
    ("[a-z]+@[a-z]+(\\.[a-z]+)*", "[\\s\\S]{1,40}", True),
    ("[a-z]+@[a-z]+(\\.[a-z]+)*", "[\\s\\S]{0,6}", False),     # the maximum can bind within 5+2
    ("[a-z]+@[a-z]+(\\.[a-z]+)*", "[\\s\\S]{3,40}", False),    # the minimum is not implied
    ("a{20}b", "[\\s\\S]{0,25}", False),                     # completions up to 21 long
    ("a{20}b", "[\\s\\S]{0,26}", True),
    ("[a-zé]+", "[\\s\\S]{0,40}", True),                       # whole UTF-8 characters
    ("[a-zé]+", "[\\s\\S]{0,6}", False),
    ("x(ab)*y", "(..){0,40}", True),                  # whole two-byte iterations
    ("x(ab)*", "(..){0,40}", False),                  # "x" is no whole iteration
    ("[^a]+", "[a-z]{0,40}", False),                  # the bound's class binds
])
def test_clamp_drops_a_length_bound_only_when_it_cannot_bind(text, bound, clamped) -> None:
    limit = 5
    node = rx.intersect(parse_regex(text), parse_regex(bound))
    assert (rx.clamp(node, limit) is rx.clamp(parse_regex(text), limit)) == clamped
    for s in _strings(b"ab@.xy\xc3\xa9", limit):
        assert rx.matches(rx.clamp(node, limit), s) == rx.matches(node, s), s
        assert _live_after(rx.clamp(node, limit), s) == _live_after(node, s), s


def test_any_char_is_the_utf8_node_of_every_code_point() -> None:
    from automask.regex import utf8

    assert rx.any_char() is utf8.ranges_to_node([(0, utf8.MAX_CODE_POINT)])
    for text in ["a", "\x00", "\x7f", "é", "\u0800", "\ud7ff", "\ue000", "\uffff", "😀",
                 "\U0010ffff"]:
        assert rx.matches(rx.any_char(), text.encode()), text
    for data in [b"", b"ab", b"\x80", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]:
        assert not rx.matches(rx.any_char(), data), data


def test_intersections_drop_members_that_constrain_nothing() -> None:

    a, b = parse_regex("ab*"), parse_regex("c|d")
    anything = rx.complement(rx.EMPTY)
    text = rx.star(rx.any_char())
    # "anything" and an alternation offering another member are no constraint at all
    assert rx.intersect(a, anything) is a
    assert rx.intersect(a, rx.alt(a, b)) is a
    # text made of whole characters (ASCII, any character) is text already
    words = parse_regex_search("(date|time)")  # .*(date|time).* over characters
    assert rx.intersect(text, words) is words
    # a byte class above ASCII is not plainly text: the intersection stays
    high = parse_regex("[\\xc3][\\xa9]")
    assert rx.intersect(text, high).kind == rx.K_AND
    # a long literal is a long concatenation chain: no recursion along it
    long_words = parse_regex_search("a" * 3000)
    assert rx.intersect(text, long_words) is long_words
    for node, parts in [(rx.intersect(a, rx.alt(a, b), anything), (a,)),
                        (rx.intersect(text, words), (text, words))]:
        for s in _strings(b"abcd\xc3\xa9", 4):
            assert rx.matches(node, s) == all(rx.matches(p, s) for p in parts), s


def test_an_intersection_needing_a_byte_another_member_lacks_is_empty_without_a_search(
        monkeypatch) -> None:
    # A bounded repeat makes a new derivative per byte: a search of the product would
    # visit 100 states before finding nothing. A byte one member needs and the other
    # never contains proves the intersection empty first.
    monkeypatch.setattr(rx, "MAX_LIVENESS_STATES", 10)
    times = parse_regex("[0-9:]{0,100}Z")
    needs_t = parse_regex_search("T[0-9]")  # .*T[0-9].*
    assert rx.intersect(times, needs_t) is rx.EMPTY
    # the proof only ever says "empty" when it is: with a T possible, the search runs
    monkeypatch.setattr(rx, "MAX_LIVENESS_STATES", 20_000)
    with_t = rx.intersect(parse_regex("[0-9:T]{0,100}Z"), needs_t)
    assert with_t is not rx.EMPTY and rx.matches(with_t, b"12T4Z")
    assert not rx.matches(with_t, b"1234Z")
    # required bytes: forced ones only (a class forces none; an alternation, the common ones)
    assert rx._required(parse_regex("a[bc]d")) == (1 << ord("a")) | (1 << ord("d"))
    assert rx._required(parse_regex("xa|ya")) == 1 << ord("a")
    assert rx._required(parse_regex("(ab)*")) == 0


def test_a_date_time_with_a_pattern_needing_an_upper_case_t_is_decided_without_a_search(
        monkeypatch, tiny_bpe_vocab) -> None:
    """MaskBench Github_medium o9517: after ``2016-01-05`` the lexer derives every byte;
    on ``t`` the format goes on but the (unanchored) pattern needs a ``T`` that the rest
    of a date-time never holds. Proving that by search took thousands of states (one
    mask of 2 s); under a small search budget the walk now completes."""
    from support.walks import masks_along

    monkeypatch.setattr(rx, "MAX_LIVENESS_STATES", 300)
    schema = {"type": "string", "format": "date-time",
              "pattern": "\\d\\d\\d\\d-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ"}
    masks_along(tiny_bpe_vocab, schema, ["2016-01-05T16:51:00Z"])


def test_an_unpinned_count_at_a_search_edge_needs_only_its_minimum() -> None:
    # beside the pad a count's extra repeats are the pad's: x{1,255} searches as x does
    assert parse_regex_search("[a-z]{1,255}") is parse_regex_search("[a-z]")
    assert parse_regex_search("a{2,5}b") is parse_regex_search("a{2}b")
    assert parse_regex_search("b(ab){0,3}") is parse_regex_search("b")
    # a pinned edge keeps its count
    assert parse_regex_search("^a{2,5}$") is not parse_regex_search("^aa$")
    for pattern in ["x{1,255}", "a{2,5}b", "^a{2,5}", "a{2,5}$", "(ab){0,3}", "b(ab){1,3}a",
                    "^a{1,2}b{2,3}", "a{2,}b+"]:
        node = parse_regex_search(pattern)
        for s in _strings(b"abx", 6):
            assert rx.matches(node, s) == bool(re.search(pattern, s.decode())), (pattern, s)


def test_raw_derivatives_are_memoized_and_agree_with_a_fresh_derivation() -> None:
    """The liveness search's raw derivatives are kept on the node: a memoized one is the
    node a fresh derivation makes (nodes are interned), and liveness answers are unchanged
    for an intersection with complements, whose search runs through product states."""
    node = rx.intersect(parse_regex("[1-9][0-9]{0,3}"),
                        *(rx.complement(parse_regex(f"[0-9]*[{last}]"))
                          for last in ("05", "02468")))
    assert node.kind == rx.K_AND
    seen, todo = {node.uid}, [node]
    while todo and len(seen) < 400:
        n = todo.pop()
        for lo, _ in rx.class_runs(rx.class_starts(n)):
            first = rx._raw_derive(n, lo)
            assert rx._raw_derive(n, lo) is first is rx._raw_derivative(n, lo)
            assert n.plain or n._raw_derivs[lo] == first.uid  # kept on the node
            if first is not rx.EMPTY and first.uid not in seen:
                seen.add(first.uid)
                todo.append(first)
    # live after a prefix exactly when some number of 1-4 digits, odd and not ending in 5,
    # starts with it
    members = {str(k).encode() for k in range(1, 10_000) if k % 2 and k % 5}
    for text in (b"1", b"5", b"10", b"13", b"1234", b"1235", b"999", b"12345", b"0"):
        assert _live_after(node, text) is any(m.startswith(text) for m in members), text


def test_a_complement_of_any_text_refutes_text_members() -> None:
    """``A & ~B`` is empty at once when ``B`` offers ``X*`` and ``A`` lies inside ``X*``:
    once ``admin`` has occurred, "contains customer and not admin" is dead without a
    search. The language is unchanged (checked on strings), and the liveness search of a
    oneOf of unanchored patterns derives a few states instead of every state below."""
    text = rx.star(rx.any_char())
    customer, admin = parse_regex_search("customer"), parse_regex_search("admin")
    assert rx.intersect(customer, rx.complement(rx.alt(text, admin))) is rx.EMPTY
    assert rx.intersect(parse_regex("[a-z]{2,5}"), rx.complement(text)) is rx.EMPTY
    node = rx.intersect(customer, rx.complement(admin), rx.complement(parse_regex_search("maker")))
    for data, member in ((b"customer", True), (b"a customer", True), (b"admin customer", False),
                         (b"customer maker", False), (b"custom", False), (b"", False)):
        assert rx.matches(node, data) is member, data
    after = node
    for byte in b"xadmin":
        after = rx.derive(after, byte)
    assert after is rx.EMPTY
    raw = node
    for byte in b"xadmin":
        raw = rx._raw_derive(raw, byte)
    assert raw is rx.EMPTY  # the search stops here instead of exploring below


def test_patterns_are_known_text_and_stay_so_along_their_derivatives() -> None:
    """A pattern's node is recorded as valid text, so a length bound over any characters
    drops from it without an inclusion search, at its start and at each character
    boundary after (a derivative keeps inclusion)."""
    pattern = "^[A-Za-z\\u00c0-\\u024f\\u0400-\\u04ff]+-[0-9]*$"
    node = parse_regex(pattern)
    text = rx.any_text()
    assert rx._includes(node, text)
    bounded = rx.intersect(node, rx.repeat(rx.any_char(), 0, 300))
    assert bounded.kind == rx.K_AND and rx.clamp(bounded, 16) is rx.clamp(node, 16)
    for data in ("Ж".encode(), b"a", "aé".encode(), "aé-1".encode()):
        d = node
        for b in data:
            d = rx.derive(d, b)
        assert rx._includes(d, text), data  # at a character boundary: known text
        assert rx._included(d, text)  # and true, by the search itself
    half = rx.derive(node, "Ж".encode()[0])  # inside a character: not text
    assert not rx._includes(half, text)
    # what a derivative is recorded as included in, it is included in (strings checked)
    for data in (b"", b"a", b"ab", "aé".encode(), b"a-", b"a-1"):
        d = node
        for b in data:
            d = rx.derive(d, b)
        for s in (b"", b"a", "é".encode(), b"-", b"-12", b"\xff", "Ж".encode()[:1]):
            if rx.matches(d, s):
                assert rx.matches(text, data + s)


def test_an_inclusion_that_fails_is_not_searched_again(monkeypatch) -> None:
    small, big = parse_regex("[a-c]*x"), parse_regex("[a-b]*x")
    assert not rx._included(small, big) and rx._included(big, small)
    searched = []
    monkeypatch.setattr(rx, "_inclusion_pairs", lambda s, b: searched.append(s) or None)
    assert not rx._included(small, big) and rx._included(big, small)
    assert not searched  # both answers were remembered


def test_a_liveness_search_past_its_bound_says_undecided(monkeypatch) -> None:
    """The bound on a liveness search raises its own type (still a ``LimitExceeded``, so
    a compile reports it as a limit), which callers that can do without the answer
    catch apart from a spent time budget."""
    monkeypatch.setattr(rx, "MAX_LIVENESS_STATES", 10)
    # (bytes no other test builds: an interned node keeps what earlier searches learnt)
    with pytest.raises(rx.Undecided, match="cannot decide") as caught:
        rx.intersect(parse_regex("[1-8;U]{0,93}Q"), parse_regex_search("U[1-8]"))
    assert isinstance(caught.value, LimitExceeded)
