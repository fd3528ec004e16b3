"""JSON Schema ``format`` values as byte regexes over the *decoded* string.

The node matches the UTF-8 of the string value itself (no quotes, no JSON
escapes: the string layer adds those), and it matches exactly the strings the
format's RFC allows, so constrained generation never emits an invalid value.
Each format is written from its RFC's ABNF as :func:`parse_regex` text, plus
node combinators where a regex alone is awkward (the total length of a
hostname, the leap-second rule of ``time``).

Deliberate choices (each one keeps the node *sound*: nothing invalid is accepted):

* ``date``: RFC 3339 ``full-date`` with month lengths and Gregorian leap years
  (Feb 29 only in years divisible by 4 and not by 100 unless by 400; 0000 is one).
* ``time`` / ``date-time``: RFC 3339 with ``T``/``t`` and ``Z``/``z``; a leap second
  ``:60`` only where the time minus its offset is 23:59 UTC (the date is not
  checked against the IERS leap-second list). No space separator. With
  ``leap_seconds=False`` (the compiler's ``strict`` option) there is no ``:60`` at all:
  Python's ``datetime`` and ``jsonschema``'s RFC 3339 checker reject it, so generated
  output stays readable by the programs that consume it.
* ``duration``: RFC 3339 Appendix A (``P1Y2D`` and ``PT1H2S`` are not durations;
  weeks stand alone; no fractions).
* ``email``: RFC 5321 ``Mailbox``: dot-atom or quoted local part, then a domain or an
  address literal (IPv4 with ``Snum`` values 0–255, or ``IPv6:`` in RFC 5321's own
  IPv6 forms, whose ``::`` stands for at least two groups). The size limits of RFC
  5321 §4.5.3 are implementation limits, not syntax, and are not applied.
* ``hostname``: RFC 1123 labels (1–63 letters, digits, inner hyphens), total at most
  253, no trailing dot, and no label with ``--`` in positions 3–4. That last rule
  (RFC 5890's reserved-LDH labels) also removes ``xn--`` A-labels: whether one is
  valid needs Punycode decoding and the IDNA2008 tables, so rather than accept
  invalid ones, none is accepted.
* ``ipv4``: dotted quad, 0–255, no leading zeros. ``ipv6``: every RFC 4291 text form
  (RFC 3986 ``IPv6address``), no zone, no brackets.
* ``uri`` / ``uri-reference``: RFC 3986 ``URI`` / ``URI-reference`` (ASCII only);
  ``iri`` / ``iri-reference``: RFC 3987 ``IRI`` / ``IRI-reference`` (the same rules with
  ``ucschar`` among the unreserved characters, and ``iprivate`` in queries).
* ``uri-template``: RFC 6570 level 4 syntax, with erratum 6937 (``'`` is a literal).
* Case: ABNF string literals are case-insensitive, but many validators read
  ``IPv6:``, the ``v`` of an IPvFuture and the duration designators as written; only
  that spelling is accepted, which is valid under both readings. (RFC 3339 itself
  allows ``t`` and ``z`` in dates and times, and so do these nodes.)
* ``json-pointer``: RFC 6901. ``relative-json-pointer``: draft-bhutton-relative-json-
  pointer-00 (cited by 2020-12): ``N`` then ``#`` or ``N`` [``+``/``-`` ``M``] then a pointer.
* ``regex``: ECMA-262 patterns where it is regular and where ECMA-262 (with and without the
  ``u`` flag) and Python's ``re`` read a pattern alike: groups ``(…)`` and ``(?:…)`` nested
  at most :data:`REGEX_DEPTH` deep, classes with in-order ``0-9``/``a-z``/``A-Z`` ranges,
  the escapes both know, quantifiers (lazy too) whose ``{n,m}`` order shows in the digits.
  Lookaround, named groups, backreferences and Unicode property escapes are left out.

Everything else (``idn-email``, ``idn-hostname``, unknown names) returns None; the caller
decides what to do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from automask.regex import nodes as rx
from automask.regex.parser import parse_regex

__all__ = ["FORMATS", "format_node"]

# --------------------------------------------------------------------------- shared pieces

HEX = "[0-9A-Fa-f]"
DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{DEC_OCTET}(?:\.{DEC_OCTET}){{3}}"
H16 = f"{HEX}{{1,4}}"
LS32 = f"(?:{H16}:{H16}|{IPV4})"


def _ipv6_pattern() -> str:
    """RFC 3986 ``IPv6address``: the nine shapes of RFC 4291's text forms."""
    def left(n: int) -> str:  # [ *n( h16 ":" ) h16 ]
        return f"(?:(?:{H16}:){{0,{n}}}{H16})?" if n else f"(?:{H16})?"

    forms = [
        f"(?:{H16}:){{6}}{LS32}",
        f"::(?:{H16}:){{5}}{LS32}",
        f"{left(0)}::(?:{H16}:){{4}}{LS32}",
        f"{left(1)}::(?:{H16}:){{3}}{LS32}",
        f"{left(2)}::(?:{H16}:){{2}}{LS32}",
        f"{left(3)}::{H16}:{LS32}",
        f"{left(4)}::{LS32}",
        f"{left(5)}::{H16}",
        f"{left(6)}::",
    ]
    return "(?:" + "|".join(forms) + ")"


IPV6 = _ipv6_pattern()

UNRESERVED = r"A-Za-z0-9\-._~"
SUB_DELIMS = r"!$&'()*+,;="
PCT = f"%{HEX}{{2}}"
SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
IP_LITERAL = rf"\[(?:{IPV6}|v{HEX}+\.[{UNRESERVED}{SUB_DELIMS}:]+)\]"
UCSCHAR = (
    r"\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
    r"\u{10000}-\u{1fffd}\u{20000}-\u{2fffd}\u{30000}-\u{3fffd}\u{40000}-\u{4fffd}"
    r"\u{50000}-\u{5fffd}\u{60000}-\u{6fffd}\u{70000}-\u{7fffd}\u{80000}-\u{8fffd}"
    r"\u{90000}-\u{9fffd}\u{a0000}-\u{afffd}\u{b0000}-\u{bfffd}\u{c0000}-\u{cfffd}"
    r"\u{d0000}-\u{dfffd}\u{e1000}-\u{efffd}"
)
IPRIVATE = r"\ue000-\uf8ff\u{f0000}-\u{ffffd}\u{100000}-\u{10fffd}"


def _uri_patterns(unreserved: str, private: str = "") -> tuple[str, str]:
    """RFC 3986 ``URI`` and ``relative-ref`` with ``unreserved`` as the unreserved
    characters. RFC 3987's ``IRI`` and ``irelative-ref`` are the same rules with
    ``ucschar`` unreserved too and ``iprivate`` allowed in the query."""
    pchar = f"(?:[{unreserved}{SUB_DELIMS}:@]|{PCT})"
    segment, segment_nz = f"{pchar}*", f"{pchar}+"
    segment_nz_nc = f"(?:[{unreserved}{SUB_DELIMS}@]|{PCT})+"
    userinfo = f"(?:[{unreserved}{SUB_DELIMS}:]|{PCT})*"
    reg_name = f"(?:[{unreserved}{SUB_DELIMS}]|{PCT})*"
    authority = f"(?:{userinfo}@)?(?:{IP_LITERAL}|{IPV4}|{reg_name})(?::[0-9]*)?"
    path_abempty = f"(?:/{segment})*"
    path_absolute = f"/(?:{segment_nz}(?:/{segment})*)?"
    path_rootless = f"{segment_nz}(?:/{segment})*"
    path_noscheme = f"{segment_nz_nc}(?:/{segment})*"
    query = f"(?:{pchar}|[/?{private}])*"
    fragment = f"(?:{pchar}|[/?])*"
    tail = f"(?:\\?{query})?(?:#{fragment})?"
    hier_part = f"(?://{authority}{path_abempty}|{path_absolute}|{path_rootless})?"
    relative_part = f"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme})?"
    return f"{SCHEME}:{hier_part}{tail}", f"{relative_part}{tail}"


URI, RELATIVE_REF = _uri_patterns(UNRESERVED)
IRI, IRELATIVE_REF = _uri_patterns(UNRESERVED + UCSCHAR, IPRIVATE)

JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"
NON_NEGATIVE = "(?:0|[1-9][0-9]*)"

# --------------------------------------------------------------------------- dates and times

YEAR = "[0-9]{4}"
# Leap years: yy a nonzero multiple of 4, or yy = 00 and the century a multiple of 4.
MULT4 = "(?:0[48]|[2468][048]|[13579][26])"
LEAP_YEAR = f"(?:[0-9]{{2}}{MULT4}|(?:00|{MULT4})00)"
DATE = (
    f"(?:{YEAR}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    f"|{YEAR}-(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    f"|{YEAR}-02-(?:0[1-9]|1[0-9]|2[0-8])"
    f"|{LEAP_YEAR}-02-29)"
)
HOUR = "(?:[01][0-9]|2[0-3])"
MINUTE = "[0-5][0-9]"
SECFRAC = r"(?:\.[0-9]+)?"
OFFSET = f"(?:[Zz]|[+-]{HOUR}:{MINUTE})"
ORDINARY_TIME = f"{HOUR}:{MINUTE}:{MINUTE}{SECFRAC}{OFFSET}"


def _leap_second_time() -> rx.Node:
    """``hh:mm:60`` with exactly the offsets that put it at 23:59 UTC.

    With ``+`` the offset is the local time plus one minute, with ``-`` it is 23:59
    minus the local time. An exact plain node needs a 24 x 60 trie (the text after
    ``hh:mm:`` depends on both), about 20k nodes; instead this intersects a
    minutes-only check with an hours-only check (which knows whether mm is 59, the
    ``+`` carry): a few hundred nodes, and the same language.
    """
    frac = parse_regex(SECFRAC)
    zulu = parse_regex("[Zz]")
    any_hour, any_minute = parse_regex(HOUR), parse_regex(MINUTE)

    def two(n: int) -> rx.Node:
        return rx.literal(f"{n:02d}".encode())

    def offsets(plus_h, plus_m, minus_h, minus_m, utc: bool | int) -> rx.Node:
        return rx.alt(rx.concat(rx.literal(b"+"), plus_h, rx.literal(b":"), plus_m),
                      rx.concat(rx.literal(b"-"), minus_h, rx.literal(b":"), minus_m),
                      zulu if utc else rx.EMPTY)

    minutes = rx.concat(any_hour, rx.literal(b":"), rx.alt_of(
        rx.concat(two(mm), rx.literal(b":60"), frac,
                  offsets(any_hour, two((mm + 1) % 60), any_hour, two(59 - mm), mm == 59))
        for mm in range(60)))
    hours = rx.alt_of(
        rx.concat(two(hh), rx.literal(b":"),
                  rx.literal(b"59") if carry else parse_regex("[0-4][0-9]|5[0-8]"),
                  rx.literal(b":60"), frac,
                  offsets(two((hh + carry) % 24), any_minute, two(23 - hh), any_minute,
                          hh == 23 and carry))
        for hh in range(24) for carry in (0, 1))
    return rx.intersect(minutes, hours)


def _time() -> rx.Node:
    return rx.alt(parse_regex(ORDINARY_TIME), _leap_second_time())


def _date_time() -> rx.Node:
    return rx.concat(parse_regex(DATE), parse_regex("[Tt]"), _time())


def _date_time_no_leap() -> rx.Node:
    return rx.concat(parse_regex(DATE), parse_regex("[Tt]"), parse_regex(ORDINARY_TIME))


DUR_TIME = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
DURATION = (
    f"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:{DUR_TIME})?"
    f"|{DUR_TIME}|[0-9]+W)"
)

# --------------------------------------------------------------------------- names and addresses

LET_DIG = "[A-Za-z0-9]"
LDH = "[A-Za-z0-9-]"
# RFC 1123 label of 1..63 characters, without "--" in positions 3-4 (RFC 5890 R-LDH).
HOST_LABEL = f"(?:{LET_DIG}(?:{LDH}{{0,2}}{LET_DIG})?|{LET_DIG}{LDH}(?:{LET_DIG}{LDH}|-{LET_DIG})"\
             f"{LDH}{{0,58}}{LET_DIG})"
HOSTNAME = rf"{HOST_LABEL}(?:\.{HOST_LABEL})*"
MAX_HOSTNAME = 253


def _hostname() -> rx.Node:
    return rx.intersect(parse_regex(HOSTNAME), rx.repeat(rx.ANY_BYTE, 1, MAX_HOSTNAME))


ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
DOT_STRING = rf"{ATEXT}+(?:\.{ATEXT}+)*"
QUOTED_STRING = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"'
SUB_DOMAIN = f"{LET_DIG}(?:{LDH}*{LET_DIG})?"
DOMAIN = rf"{SUB_DOMAIN}(?:\.{SUB_DOMAIN})*"
SNUM = "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])"
SMTP_IPV4 = rf"{SNUM}(?:\.{SNUM}){{3}}"


def _ipv6_groups(n: int) -> str:
    """``n`` colon-separated IPv6 groups."""
    return "" if n == 0 else f"{H16}(?::{H16}){{{n - 1}}}"


def _ipv6_compressed(most: int, tail: str) -> list[str]:
    """The ``::`` forms with at most ``most`` groups around it, then ``tail``."""
    out = []
    for a in range(most + 1):
        right = [_ipv6_groups(b) for b in range(most - a + 1)]
        sep = ":" if tail else ""
        rights = "|".join((r + sep) if r else "" for r in right)
        out.append(f"{_ipv6_groups(a)}::(?:{rights}){tail}")
    return out


def _smtp_ipv6() -> str:
    """RFC 5321 ``IPv6-addr``: full forms, or ``::`` with at most 6 (4 before IPv4) groups."""
    forms = [_ipv6_groups(8), f"{_ipv6_groups(6)}:{SMTP_IPV4}"]
    forms += _ipv6_compressed(6, "") + _ipv6_compressed(4, SMTP_IPV4)
    return "(?:" + "|".join(forms) + ")"


ADDRESS_LITERAL = rf"\[(?:{SMTP_IPV4}|IPv6:{_smtp_ipv6()})\]"
EMAIL = f"(?:{DOT_STRING}|{QUOTED_STRING})@(?:{DOMAIN}|{ADDRESS_LITERAL})"

UUID = f"{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}}"

# --------------------------------------------------------------------------- URI templates

# %x21 / %x23-24 / %x26-3B (erratum 6937) / %x3D / %x3F-5B / %x5D / %x5F / %x61-7A / %x7E
TEMPLATE_LITERAL = rf"(?:[\x21\x23\x24\x26-\x3b\x3d\x3f-\x5b\x5d\x5f\x61-\x7a\x7e{UCSCHAR}" \
                   rf"{IPRIVATE}]|{PCT})"
VARCHAR = f"(?:[A-Za-z0-9_]|{PCT})"
VARSPEC = rf"{VARCHAR}(?:\.?{VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
EXPRESSION = rf"\{{[+#./;?&=,!@|]?{VARSPEC}(?:,{VARSPEC})*\}}"
URI_TEMPLATE = f"(?:{TEMPLATE_LITERAL}|{EXPRESSION})*"

# --------------------------------------------------------------------------- regex

# ``regex``: a pattern in the part of ECMA-262 syntax that Python's ``re`` (what most
# validators compile it with) reads the same way, in the Unicode mode and without it,
# with groups nested at most REGEX_DEPTH deep (a nesting depth is not regular).
REGEX_DEPTH = 3
SYNTAX_CHARS = r"\^$\\.*+?()\[\]{}|"
CODE_ESCAPE = f"x{HEX}{{2}}|u{HEX}{{4}}"
# Outside a class: no ``\-`` (Unicode mode refuses it there), no ``\0`` (``\01`` would be
# octal to Python), no letters but the ones both read alike.
RE_ESCAPE = rf"\\(?:[{SYNTAX_CHARS}/dDwWsSfnrtv]|{CODE_ESCAPE})"
RE_ATOM = rf"[^{SYNTAX_CHARS}]|\.|{RE_ESCAPE}"
RE_ASSERTION = r"\^|\$|\\[bB]"  # never quantified: both refuse it (Unicode mode, Python)


def _class_ranges() -> str:
    """``a-z``-style ranges inside one of digits, lower or upper case letters, in order."""
    runs = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return "|".join(f"{c}-[{c}-{run[-1]}]" for run in runs for c in run)


# A class holds at least one item (Python reads ``[]`` and ``[^]`` as unterminated); a
# bare ``-`` only in a range, a ``^`` only as the negation, no ``[`` (Python may read a
# nested set) and no ``&`` or ``~`` (doubled, Python warns of set operations).
RE_CLASS = (rf"\[\^?(?:{_class_ranges()}|\\(?:[{SYNTAX_CHARS}/\-dDwWsSfnrtvb]|{CODE_ESCAPE})"
            r"|[^\\\]\[\-\^&~])+\]")


def _repeat_counts() -> str:
    """``{n}``, ``{n,}`` and ``{n,m}`` with ``n <= m`` shown by the digits alone: both one
    or two digits, or ``m`` longer; counts below 10,000 (Python caps them)."""
    count = "(?:0|[1-9][0-9]{0,3})"
    one = "|".join(f"{a},[{a}-9]" for a in range(10))
    two_same_tens = "|".join(f"{a}{b},{a}[{b}-9]" for a in range(1, 10) for b in range(10))
    two_more_tens = "|".join(f"{a}[0-9],[{a + 1}-9][0-9]" for a in range(1, 9))
    longer = "[0-9],[1-9][0-9]{1,3}|[1-9][0-9],[1-9][0-9]{2,3}|[1-9][0-9]{2},[1-9][0-9]{3}"
    return rf"\{{(?:{count},?|{one}|{two_same_tens}|{two_more_tens}|{longer})\}}"


def _regex() -> rx.Node:
    """Alternatives of terms, each an atom with an optional quantifier (lazy or not) or an
    assertion; an atom is a character, an escape, a class or a group one level down."""
    atom = parse_regex(f"(?:{RE_ATOM}|{RE_CLASS})")
    quantifier = rx.optional(parse_regex(rf"(?:[*+?]|{_repeat_counts()})\??"))
    assertion = parse_regex(RE_ASSERTION)
    open_group, close, bar = parse_regex(r"\((?:\?:)?"), rx.literal(b")"), rx.literal(b"|")
    alternatives: rx.Node | None = None
    for _ in range(REGEX_DEPTH + 1):
        if alternatives is not None:
            atom = rx.alt(atom, rx.concat(open_group, alternatives, close))
        terms = rx.star(rx.alt(rx.concat(atom, quantifier), assertion))
        alternatives = rx.concat(terms, rx.star(rx.concat(bar, terms)))
    assert alternatives is not None  # (the loop runs)
    return alternatives


# --------------------------------------------------------------------------- the table

_BUILDERS: dict[str, Callable[[], rx.Node]] = {
    "date": lambda: parse_regex(DATE),
    "time": _time,
    "date-time": _date_time,
    "duration": lambda: parse_regex(DURATION),
    "email": lambda: parse_regex(EMAIL),
    "hostname": _hostname,
    "ipv4": lambda: parse_regex(IPV4),
    "ipv6": lambda: parse_regex(IPV6),
    "uuid": lambda: parse_regex(UUID),
    "uri": lambda: parse_regex(URI),
    "uri-reference": lambda: rx.alt(parse_regex(URI), parse_regex(RELATIVE_REF)),
    "iri": lambda: parse_regex(IRI),
    "iri-reference": lambda: rx.alt(parse_regex(IRI), parse_regex(IRELATIVE_REF)),
    "uri-template": lambda: parse_regex(URI_TEMPLATE),
    "json-pointer": lambda: parse_regex(JSON_POINTER),
    "relative-json-pointer": lambda: parse_regex(
        f"{NON_NEGATIVE}(?:#|(?:[+-]{NON_NEGATIVE})?{JSON_POINTER})"),
    "regex": _regex,
}

FORMATS: frozenset[str] = frozenset(_BUILDERS)
"""The format names :func:`format_node` knows."""


@functools.lru_cache(maxsize=64)
def _cached(name: str, build: Callable[[], rx.Node]) -> rx.Node:
    return build()


_NO_LEAP_SECONDS: dict[str, Callable[[], rx.Node]] = {
    "time": lambda: parse_regex(ORDINARY_TIME),
    "date-time": _date_time_no_leap,
}


def format_node(name: str, leap_seconds: bool = True) -> rx.Node | None:
    """The node for format ``name`` over the decoded string's UTF-8, or None if unsupported.

    ``leap_seconds=False`` drops ``:60`` from ``time`` and ``date-time`` (a subset of
    the format, for generation; see the module docstring)."""
    build = None if leap_seconds else _NO_LEAP_SECONDS.get(name)
    if build is not None:
        return _cached(name + "/no-leap", build)
    build = _BUILDERS.get(name)
    return None if build is None else _cached(name, build)
