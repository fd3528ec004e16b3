"""JSON number and integer texts with exact numeric bounds, as byte regexes.

A schema's ``minimum`` / ``maximum`` / ``multipleOf`` constrain the *value* of a number,
but the lexer sees text. Every node here is built structurally from the digits of the
bounds (the classic regex range construction, generalized to fractions and exponents),
never by enumerating values, so ``maximum: 2**63`` costs as little as ``maximum: 9``.

Texts follow RFC 8259: ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``; values are
compared exactly (as decimals), so ``1``, ``1.0``, ``1.00`` and ``10e-1`` are the same
number, and ``-0`` / ``-0.0`` are zero.

Contracts (soundness is never traded: a matched text always satisfies every bound):

* :func:`integer_node`: exactly the canonical integer texts ``-?(0|[1-9][0-9]*)`` with a
  value in range (``-0`` included iff 0 is). With ``zero_fraction=True`` also their
  ``.0+`` forms (``5.0``; JSON Schema counts those as integers). Exponent forms
  (``1e3``) are never produced: generation wants the canonical spelling.
* :func:`number_node`: every text *without* an exponent is accepted iff in range. A
  text *with* an exponent, mantissa ``m`` and exponent ``E``, is accepted iff in range
  whenever ``m`` is zero or ``1e-8 <= m < 1e9`` (the mantissa has at most 9 integer
  digits, or is ``0.`` and at most 7 zeros before its first nonzero digit; every
  ``json.dumps``/``repr`` float qualifies, its mantissa is in ``[1, 10)``). A nonzero
  mantissa outside that window is accepted only when every number of its sign is in
  range (``minimum: 0`` alone admits all positive texts), otherwise rejected.

The ``multipleOf`` texts are in :mod:`~automask.schema.number_multiples`. Bounds with more
than :data:`MAX_BOUND_DIGITS` digits raise :class:`LimitExceeded`.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from typing import cast

from automask.errors import GrammarError, LimitExceeded
from automask.regex import nodes as rx

__all__ = [
    "MANTISSA_DECADES", "MAX_BOUND_DIGITS", "integer_node", "number_node", "number_spellings",
]

MANTISSA_DECADES = 8
"""Exponent texts are exact when the mantissa lies in ``[10**-8, 10**9)`` (see module doc)."""

MAX_BOUND_DIGITS = 400
"""Most digits (integer + fraction) a bound may have; every float fits (5e-324 has 324)."""

Bound = int | float | Decimal | None
Lim = tuple[Decimal, bool]  # (value, strict)

DIGIT = rx.byte_range(0x30, 0x39)
DIGITS = rx.plus(DIGIT)
ZERO = rx.literal(b"0")
ZEROS = rx.plus(ZERO)
DOT = rx.literal(b".")
MINUS = rx.literal(b"-")
_E = rx.byte_set((1 << ord("e")) | (1 << ord("E")))
ANY_FRAC = rx.optional(rx.concat(DOT, DIGITS))
_NONZERO_DIGITS = rx.concat(rx.star(ZERO), rx.byte_range(0x31, 0x39), rx.star(DIGIT))
_EXP_ANY = rx.concat(_E, rx.optional(rx.byte_set((1 << ord("+")) | (1 << ord("-")))), DIGITS)
_ZERO_MANTISSA = rx.concat(ZERO, rx.optional(rx.concat(DOT, ZEROS)))
_NONZERO_MANTISSA = rx.alt(
    rx.concat(rx.byte_range(0x31, 0x39), rx.star(DIGIT), ANY_FRAC),
    rx.concat(ZERO, DOT, _NONZERO_DIGITS),
)


def digit(d: int) -> rx.Node:
    return rx.byte_set(1 << (0x30 + d))


def digit_range(lo: int, hi: int) -> rx.Node:
    return rx.byte_range(0x30 + lo, 0x30 + hi)


def _text(s: str) -> rx.Node:
    return rx.literal(s.encode("ascii"))


# --------------------------------------------------------------------------- bounds


def to_decimal(x: Bound, name: str) -> Decimal | None:
    """Bounds as exact decimals; floats through ``repr`` (``0.1`` means 0.1, not 0.1000…0555)."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float, Decimal)):
        raise GrammarError(f"{name} must be a number, not {x!r}")
    d = Decimal(repr(x)) if isinstance(x, float) else Decimal(x)
    if not d.is_finite():
        raise GrammarError(f"{name} must be finite, not {x!r}")
    _, digits, exponent = d.as_tuple()
    exp = cast(int, exponent)  # finite: an int
    if len(digits) + max(exp, 0) + max(-exp - len(digits), 0) > MAX_BOUND_DIGITS:
        raise LimitExceeded(f"{name} {x!r} has more than {MAX_BOUND_DIGITS} digits")
    return d


def _tighter(a: Lim | None, b: Lim | None, lower: bool) -> Lim | None:
    if a is None or b is None:
        return a or b
    if a[0] != b[0]:
        return a if (a[0] > b[0]) == lower else b
    return (a[0], a[1] or b[1])


def limits(minimum: Bound, maximum: Bound, exclusive_minimum: Bound,
            exclusive_maximum: Bound) -> tuple[Lim | None, Lim | None]:
    lo = _tighter(*_lims(to_decimal(minimum, "minimum"),
                         to_decimal(exclusive_minimum, "exclusiveMinimum")), lower=True)
    hi = _tighter(*_lims(to_decimal(maximum, "maximum"),
                         to_decimal(exclusive_maximum, "exclusiveMaximum")), lower=False)
    return lo, hi


def _lims(inclusive: Decimal | None, exclusive: Decimal | None) -> tuple[Lim | None, Lim | None]:
    return (None if inclusive is None else (inclusive, False),
            None if exclusive is None else (exclusive, True))


def split_decimal(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    _, digits, exponent = d.as_tuple()
    exp = cast(int, exponent)  # finite: an int
    s = "".join(map(str, digits))
    if exp >= 0:
        return int(s) * 10 ** exp, ""
    s = s.rjust(-exp + 1, "0")
    return int(s[:exp]), s[exp:].rstrip("0")


def _shift(d: Decimal, k: int) -> Decimal:
    """``d * 10**k`` exactly (Decimal arithmetic would round to the context precision)."""
    sign, digits, exp = d.as_tuple()
    return Decimal((sign, digits, cast(int, exp) + k))


def _pow10(k: int) -> Decimal:
    return Decimal((0, (1,), k))


def magnitude_sides(lo: Lim | None, hi: Lim | None):
    """Magnitude ranges for the texts without and with a ``-``: (lo, hi) pairs or None."""
    zero: Lim = (Decimal(0), False)
    pos_lo = zero if lo is None or lo[0] < 0 else lo
    pos = None if hi is not None and hi[0] < 0 else (pos_lo, hi)
    neg_lo = zero if hi is None or hi[0] > 0 else (hi[0].copy_negate(), hi[1])
    neg_hi = None if lo is None else (lo[0].copy_negate(), lo[1])
    neg = None if neg_hi is not None and neg_hi[0] < 0 else (neg_lo, neg_hi)
    return pos, neg


def _empty(lo: Lim, hi: Lim | None) -> bool:
    return hi is not None and (hi[0] < lo[0] or (hi[0] == lo[0] and (lo[1] or hi[1])))


# --------------------------------------------------------------------------- integers


@functools.lru_cache(maxsize=4096)
def _same_length(a: str, b: str) -> rx.Node:
    """Digit strings of ``len(a)`` digits between ``a`` and ``b`` (``len(a) == len(b)``)."""
    if not a:
        return rx.EPS
    if a[0] == b[0]:
        return rx.concat(digit(int(a[0])), _same_length(a[1:], b[1:]))
    n = len(a) - 1
    first, last = int(a[0]), int(b[0])
    low_full, high_full = a[1:] == "0" * n, b[1:] == "9" * n
    parts = []
    if not low_full:
        parts.append(rx.concat(digit(first), _same_length(a[1:], "9" * n)))
    mid_lo, mid_hi = first + (not low_full), last - (not high_full)
    if mid_lo <= mid_hi:
        parts.append(rx.concat(digit_range(mid_lo, mid_hi), rx.repeat(DIGIT, n, n)))
    if not high_full:
        parts.append(rx.concat(digit(last), _same_length("0" * n, b[1:])))
    return rx.alt_of(parts)


@functools.lru_cache(maxsize=4096)
def _nat(lo: int, hi: int | None) -> rx.Node:
    """Canonical decimal texts (no leading zeros) of the integers in ``[lo, hi]``, lo >= 0."""
    if hi is not None and hi < lo:
        return rx.EMPTY
    parts = []
    if lo == 0:
        parts.append(ZERO)
        lo = 1
        if hi is not None and hi < 1:
            return ZERO
    ls = str(lo)
    if hi is None:
        parts.append(_same_length(ls, "9" * len(ls)))
        parts.append(rx.concat(digit_range(1, 9), rx.repeat(DIGIT, len(ls), None)))
        return rx.alt_of(parts)
    hs = str(hi)
    full_from: int | None = None  # lengths whose every number is in range
    full_to = 0
    for length in range(len(ls), len(hs) + 1):
        a = ls if length == len(ls) else "1" + "0" * (length - 1)
        b = hs if length == len(hs) else "9" * length
        if a == "1" + "0" * (length - 1) and b == "9" * length:
            full_from = length if full_from is None else full_from
            full_to = length
        else:
            parts.append(_same_length(a, b))
    if full_from is not None:
        parts.append(rx.concat(digit_range(1, 9), rx.repeat(DIGIT, full_from - 1, full_to - 1)))
    return rx.alt_of(parts)


def int_bounds(lo: Lim | None, hi: Lim | None) -> tuple[int | None, int | None]:
    ilo = ihi = None
    if lo is not None:
        v = lo[0]
        ilo = math.floor(v) + 1 if lo[1] and v == v.to_integral_value() else math.ceil(v)
    if hi is not None:
        v = hi[0]
        ihi = math.ceil(v) - 1 if hi[1] and v == v.to_integral_value() else math.floor(v)
    return ilo, ihi


def int_range(ilo: int | None, ihi: int | None) -> rx.Node:
    parts = []
    plo = 0 if ilo is None else max(ilo, 0)
    if ihi is None or ihi >= plo:
        parts.append(_nat(plo, ihi))
    nlo = 0 if ihi is None else max(-ihi, 0)
    nhi = None if ilo is None else -ilo
    if nhi is None or nhi >= nlo:
        parts.append(rx.concat(MINUS, _nat(nlo, nhi)))
    return rx.alt_of(parts)


def integer_node(minimum: Bound = None, maximum: Bound = None, *, exclusive_minimum: Bound = None,
                 exclusive_maximum: Bound = None, zero_fraction: bool = False) -> rx.Node:
    """Canonical integer texts with a value in range; ``EMPTY`` when no integer is.

    Non-integer bounds round inward (``minimum: 1.5`` starts at 2). ``zero_fraction``
    also admits ``5.0``-style texts, for validating rather than generating.
    """
    node = int_range(*int_bounds(*limits(minimum, maximum, exclusive_minimum,
                                            exclusive_maximum)))
    if zero_fraction and node is not rx.EMPTY:
        node = rx.concat(node, rx.optional(rx.concat(DOT, ZEROS)))
    return node


# --------------------------------------------------------------------------- fractions

_FracLim = tuple[str, bool] | None  # (digits without trailing zeros, strict); None = free


@functools.lru_cache(maxsize=4096)
def _frac(lo: _FracLim, hi: _FracLim) -> tuple[bool, rx.Node]:
    """Fraction digit strings ``d`` with ``0.d`` between the limits.

    Returns (whether the empty string qualifies, node of the non-empty ones), so the
    caller can put the ``.`` in front of non-empty fractions only.
    """
    if lo == ("", False):
        lo = None
    if hi is not None and hi[0] == "":  # 0.d <= 0 (or < 0)
        return (True, ZEROS) if lo is None and not hi[1] else (False, rx.EMPTY)
    if hi is None and lo is None:
        return True, DIGITS
    if hi is None and lo == ("", True):
        return False, _NONZERO_DIGITS
    a0 = int(lo[0][0]) if lo is not None and lo[0] else 0
    lo_rest = None if lo is None else ((lo[0][1:], lo[1]) if lo[0] else lo)
    b0 = int(hi[0][0]) if hi is not None else 9
    hi_rest = None if hi is None else (hi[0][1:], hi[1])
    groups: dict[tuple[_FracLim, _FracLim], int] = {}
    for x in range(10):
        if lo is not None and x < a0 or hi is not None and x > b0:
            continue
        key = (lo_rest if lo is not None and x == a0 else None,
               hi_rest if hi is not None and x == b0 else None)
        groups[key] = groups.get(key, 0) | (1 << (0x30 + x))
    branches = []
    for (lc, hc), bits in groups.items():
        eps, rest = _frac(lc, hc)
        branches.append(rx.concat(rx.byte_set(bits), rx.alt(rx.EPS, rest) if eps else rest))
    return lo is None, rx.alt_of(branches)


def _frac_text(lo: _FracLim, hi: _FracLim) -> rx.Node:
    eps, rest = _frac(lo, hi)
    return rx.alt(rx.EPS if eps else rx.EMPTY, rx.concat(DOT, rest))


@functools.lru_cache(maxsize=4096)
def plain(lo: Lim, hi: Lim | None) -> rx.Node:
    """Unsigned texts ``(0|[1-9][0-9]*)(\\.[0-9]+)?`` whose value is between the limits."""
    if _empty(lo, hi):
        return rx.EMPTY
    a_int, a_frac = split_decimal(lo[0])
    flo: _FracLim = None if a_frac == "" and not lo[1] else (a_frac, lo[1])
    parts = []
    if flo is not None:
        top = None if hi is None else split_decimal(hi[0])
        if top is not None and top[0] == a_int:
            return rx.concat(_text(str(a_int)), _frac_text(flo, (top[1], cast(Lim, hi)[1])))
        parts.append(rx.concat(_text(str(a_int)), _frac_text(flo, None)))
    start = a_int + (flo is not None)
    if hi is None:
        parts.append(rx.concat(_nat(start, None), ANY_FRAC))
        return rx.alt_of(parts)
    b_int, b_frac = split_decimal(hi[0])
    parts.append(rx.concat(_nat(start, b_int - 1), ANY_FRAC))
    if b_int >= start:
        parts.append(rx.concat(_text(str(b_int)), _frac_text(None, (b_frac, hi[1]))))
    return rx.alt_of(parts)


# --------------------------------------------------------------------------- exponents


def _zero_padded(lo: int, hi: int | None) -> rx.Node:
    """Digit strings with leading zeros allowed, value in ``[lo, hi]``."""
    parts = [ZEROS] if lo == 0 else []
    if hi is None or hi >= max(lo, 1):
        parts.append(rx.concat(rx.star(ZERO), _nat(max(lo, 1), hi)))
    return rx.alt_of(parts)


@functools.lru_cache(maxsize=4096)
def _exponent(lo: int | None, hi: int | None) -> rx.Node:
    """``[eE][+-]?[0-9]+`` with the exponent's value in ``[lo, hi]`` (None = unbounded)."""
    parts = []
    plo = 0 if lo is None else max(lo, 0)
    if hi is None or hi >= plo:
        parts.append(rx.concat(rx.optional(_text("+")), _zero_padded(plo, hi)))
    nlo = 0 if hi is None else max(-hi, 0)
    nhi = None if lo is None else -lo
    if nhi is None or nhi >= nlo:
        parts.append(rx.concat(MINUS, _zero_padded(nlo, nhi)))
    return rx.concat(_E, rx.alt_of(parts)) if parts else rx.EMPTY


def _decade(s: int) -> rx.Node:
    """Mantissa texts with a value in ``[10**s, 10**(s+1))``."""
    return plain((_pow10(s), False), (_pow10(s + 1), True))


@functools.lru_cache(maxsize=1024)
def _exponential(lo: Lim, hi: Lim | None) -> rx.Node:
    """Unsigned exponent texts in range: exact within the mantissa window (module doc)."""
    if _empty(lo, hi):
        return rx.EMPTY
    parts = []
    if lo[0] == 0 and not lo[1]:
        parts.append(rx.concat(_ZERO_MANTISSA, _EXP_ANY))
    if lo[0] == 0 and hi is None:
        parts.append(rx.concat(_NONZERO_MANTISSA, _EXP_ANY))
        return rx.alt_of(parts)
    if hi is not None and hi[0] == 0:
        return rx.alt_of(parts)
    # A nonzero mantissa of decade s with exponent E has a value of decade s + E.
    d_lo = lo[0].adjusted() if lo[0] > 0 else None
    d_hi = hi[0].adjusted() if hi is not None else None
    for s in range(-MANTISSA_DECADES, MANTISSA_DECADES + 1):
        e_lo = None if d_lo is None else d_lo + 1 - s
        e_hi = None if d_hi is None else d_hi - 1 - s
        if e_lo is None or e_hi is None or e_lo <= e_hi:
            parts.append(rx.concat(_decade(s), _exponent(e_lo, e_hi)))
        top: Lim = (_pow10(s + 1), True)
        if d_lo is not None:
            e = d_lo - s
            m_hi = ((_shift(cast(Lim, hi)[0], -e), cast(Lim, hi)[1]) if d_hi == d_lo
                    else top)
            parts.append(rx.concat(plain((_shift(lo[0], -e), lo[1]), m_hi), _exponent(e, e)))
        if d_hi is not None and d_hi != d_lo:
            e = d_hi - s
            m_hi = (_shift(cast(Lim, hi)[0], -e), cast(Lim, hi)[1])
            parts.append(rx.concat(plain((_pow10(s), False), m_hi), _exponent(e, e)))
    return rx.alt_of(parts)


def number_node(minimum: Bound = None, maximum: Bound = None, exclusive_minimum: Bound = None,
                exclusive_maximum: Bound = None) -> rx.Node:
    """JSON number texts whose value satisfies every given bound (see the module contract).

    ``EMPTY`` when the range is empty. Bounds may be ints, floats (read via ``repr``)
    or Decimals; when both an inclusive and an exclusive bound are given the tighter wins.
    """
    lo, hi = limits(minimum, maximum, exclusive_minimum, exclusive_maximum)
    return _number(lo, hi)


@functools.lru_cache(maxsize=1024)
def _number(lo: Lim | None, hi: Lim | None) -> rx.Node:
    pos, neg = magnitude_sides(lo, hi)
    parts = []
    if pos is not None:
        parts.append(_unsigned(*pos))
    if neg is not None:
        parts.append(rx.concat(MINUS, _unsigned(*neg)))
    return rx.alt_of(parts)


def _unsigned(lo: Lim, hi: Lim | None) -> rx.Node:
    """Unsigned texts, with or without an exponent, whose value is between the limits."""
    if hi is not None and lo == hi and not lo[1] and not hi[1]:
        return _point(lo[0])
    return rx.alt(plain(lo, hi), _exponential(lo, hi))


_ZERO_FRACTION = rx.optional(rx.concat(DOT, ZEROS))
_TRAILING_ZEROS = rx.star(ZERO)
#: what follows the ``0`` of a zero: ``.0+`` or not, then an exponent or not
_AFTER_ZERO = rx.alt(_ZERO_FRACTION, rx.concat(_ZERO_FRACTION, _EXP_ANY))

#: a text of one number: its leading bytes, and the node of what may follow them
Spelling = tuple[bytes, rx.Node]


def _point(x: Decimal) -> rx.Node:
    """The unsigned texts of exactly the value ``x`` (an enum's or a ``const``'s number):
    the language ``alt(plain(x, x), _exponential(x, x))`` describes, written directly
    from :func:`_point_spellings`."""
    return rx.alt_of(rx.literal(text, tail) for text, tail in _point_spellings(x))


def number_spellings(value: Bound) -> list[Spelling]:
    """The texts of exactly the JSON number ``value`` (``number_node(value, value)``), as
    a few leading byte strings each with the node of what may follow it: for a wide
    enum, whose values' strings go into one prefix tree (``-0`` is zero too)."""
    x = cast(Decimal, to_decimal(value, "value"))
    unsigned = _point_spellings(abs(x))
    if x > 0:
        return unsigned
    signed = [(b"-" + text, tail) for text, tail in unsigned]
    return signed if x < 0 else unsigned + signed


def _point_spellings(x: Decimal) -> list[Spelling]:
    """The unsigned texts of the value ``x`` >= 0.

    A single value has one shortest plain text, which only trailing zeros may
    lengthen, and in each mantissa decade of the window exactly one mantissa (``x``
    with its point moved) with one exponent: eighteen strings, each to be built
    backwards onto its tail (:func:`rx.literal`'s ``after``), where the range
    construction takes each through the digit-by-digit bounds of :func:`plain` and
    then concatenates it to its exponent, rebuilding the string's chain of nodes.
    """
    if x == 0:
        return [(b"0", _AFTER_ZERO)]
    decade = x.adjusted()
    out = [_plain_spelling(x, rx.EPS)]
    for s in range(-MANTISSA_DECADES, MANTISSA_DECADES + 1):
        e = decade - s
        out.append(_plain_spelling(_shift(x, -e), _exponent(e, e)))
    return out


def _plain_spelling(x: Decimal, after: rx.Node) -> Spelling:
    """The plain texts of the value ``x`` > 0 (``15``, ``15.0``…; ``1.5``, ``1.50``…),
    then ``after``."""
    whole, fraction = split_decimal(x)
    if fraction:
        return f"{whole}.{fraction}".encode(), rx.concat(_TRAILING_ZEROS, after)
    return str(whole).encode(), rx.concat(_ZERO_FRACTION, after)


