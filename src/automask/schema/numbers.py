"""JSON number and integer texts with exact numeric bounds and ``multipleOf``, as byte regexes.

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
* :func:`integer_multiple_node`: canonical integer texts in range that are multiples of
  ``m``. ``m = 2**a * 5**b * k`` with k coprime to 10: the first factor depends only
  on the last ``max(a, b)`` digits and is always exact; ``k`` is exact when it factors
  into :data:`EXACT_CYCLIC` prime powers (3, 7, 9, 11 and products like 21) or when
  both bounds are finite (an automaton unrolled to the bounds' digit count); otherwise
  integers are limited to :data:`UNBOUNDED_MULTIPLE_DIGITS` digits (sound, incomplete
  beyond: no int64 is missed).
* :func:`decimal_multiple_node`: texts without exponent, in range, whose value is an
  exact decimal multiple of any finite ``multipleOf`` (``0.01``, ``0.5``, ``2.5``, ``0.3``:
  ``0.9`` is a multiple of ``0.3``, unlike with float division). Writing the multiple
  as ``c * 10**-j``, the same rules apply to ``c`` (the digit cap counts integer-part
  digits). Exponent texts (``5e-1``) are not accepted.
* :func:`non_multiple_node`: the texts above where that node is exact (no exponent, at
  most :data:`UNBOUNDED_MULTIPLE_DIGITS` integer digits) whose value is *not* a multiple.

Sizes past :data:`MAX_MULTIPLE_STATES` raise :class:`UnsupportedFeature`; bounds with more
than :data:`MAX_BOUND_DIGITS` digits raise :class:`LimitExceeded`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

from automask.errors import GrammarError, LimitExceeded, UnsupportedFeature
from automask.regex import nodes as rx

__all__ = [
    "EXACT_CYCLIC", "MANTISSA_DECADES", "MAX_BOUND_DIGITS", "MAX_MULTIPLE_STATES",
    "UNBOUNDED_MULTIPLE_DIGITS", "decimal_multiple_node", "dfa_to_node", "integer_multiple_node",
    "integer_node", "non_multiple_node", "number_node",
]

MANTISSA_DECADES = 8
"""Exponent texts are exact when the mantissa lies in ``[10**-8, 10**9)`` (see module doc)."""

MAX_BOUND_DIGITS = 400
"""Most digits (integer + fraction) a bound may have; every float fits (5e-324 has 324)."""

MAX_MULTIPLE_STATES = 10_000
"""Most automaton states a ``multipleOf`` construction may build before giving up."""

UNBOUNDED_MULTIPLE_DIGITS = 20
"""Integer-part digit cap for non-:data:`EXACT_CYCLIC` moduli on an unbounded side."""

EXACT_CYCLIC: dict[int, int] = {3: 4, 7: 64, 9: 256, 11: 1024}
"""Prime powers coprime to 10 handled exactly for unbounded lengths, with the number of
derivative states their eliminated regex has. Mod-k regexes have ~2**(k-1) derivatives
(no regex for them is deterministic), so only these small ones are worth it; a coprime part
is exact when it factors into these with a state product of at most
:data:`EXACT_CYCLIC_BUDGET`."""

EXACT_CYCLIC_BUDGET = 1024

Bound = int | float | Decimal | None
_Lim = tuple[Decimal, bool]  # (value, strict)

_D = rx.byte_range(0x30, 0x39)
_DIGITS = rx.plus(_D)
_ZERO = rx.literal(b"0")
_ZEROS = rx.plus(_ZERO)
_DOT = rx.literal(b".")
_MINUS = rx.literal(b"-")
_E = rx.byte_set((1 << ord("e")) | (1 << ord("E")))
_ANY_FRAC = rx.optional(rx.concat(_DOT, _DIGITS))
_NONZERO_DIGITS = rx.concat(rx.star(_ZERO), rx.byte_range(0x31, 0x39), rx.star(_D))
_EXP_ANY = rx.concat(_E, rx.optional(rx.byte_set((1 << ord("+")) | (1 << ord("-")))), _DIGITS)
_ZERO_MANTISSA = rx.concat(_ZERO, rx.optional(rx.concat(_DOT, _ZEROS)))
_NONZERO_MANTISSA = rx.alt(
    rx.concat(rx.byte_range(0x31, 0x39), rx.star(_D), _ANY_FRAC),
    rx.concat(_ZERO, _DOT, _NONZERO_DIGITS),
)


def _digit(d: int) -> rx.Node:
    return rx.byte_set(1 << (0x30 + d))


def _digits(lo: int, hi: int) -> rx.Node:
    return rx.byte_range(0x30 + lo, 0x30 + hi)


def _text(s: str) -> rx.Node:
    return rx.literal(s.encode("ascii"))


# --------------------------------------------------------------------------- bounds


def _decimal(x: Bound, name: str) -> Decimal | None:
    """Bounds as exact decimals; floats through ``repr`` (``0.1`` means 0.1, not 0.1000…0555)."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float, Decimal)):
        raise GrammarError(f"{name} must be a number, not {x!r}")
    d = Decimal(repr(x)) if isinstance(x, float) else Decimal(x)
    if not d.is_finite():
        raise GrammarError(f"{name} must be finite, not {x!r}")
    _, digits, exp = d.as_tuple()
    if len(digits) + max(exp, 0) + max(-exp - len(digits), 0) > MAX_BOUND_DIGITS:
        raise LimitExceeded(f"{name} {x!r} has more than {MAX_BOUND_DIGITS} digits")
    return d


def _tighter(a: _Lim | None, b: _Lim | None, lower: bool) -> _Lim | None:
    if a is None or b is None:
        return a or b
    if a[0] != b[0]:
        return a if (a[0] > b[0]) == lower else b
    return (a[0], a[1] or b[1])


def _limits(minimum: Bound, maximum: Bound, exclusive_minimum: Bound,
            exclusive_maximum: Bound) -> tuple[_Lim | None, _Lim | None]:
    lo = _tighter(*(None if v is None else (v, strict) for v, strict in (
        (_decimal(minimum, "minimum"), False),
        (_decimal(exclusive_minimum, "exclusiveMinimum"), True))), lower=True)
    hi = _tighter(*(None if v is None else (v, strict) for v, strict in (
        (_decimal(maximum, "maximum"), False),
        (_decimal(exclusive_maximum, "exclusiveMaximum"), True))), lower=False)
    return lo, hi


def _split(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    _, digits, exp = d.as_tuple()
    s = "".join(map(str, digits))
    if exp >= 0:
        return int(s) * 10 ** exp, ""
    s = s.rjust(-exp + 1, "0")
    return int(s[:exp]), s[exp:].rstrip("0")


def _shift(d: Decimal, k: int) -> Decimal:
    """``d * 10**k`` exactly (Decimal arithmetic would round to the context precision)."""
    sign, digits, exp = d.as_tuple()
    return Decimal((sign, digits, exp + k))


def _pow10(k: int) -> Decimal:
    return Decimal((0, (1,), k))


def _magnitude_sides(lo: _Lim | None, hi: _Lim | None):
    """Magnitude ranges for the texts without and with a ``-``: (lo, hi) pairs or None."""
    zero: _Lim = (Decimal(0), False)
    pos_lo = zero if lo is None or lo[0] < 0 else lo
    pos = None if hi is not None and hi[0] < 0 else (pos_lo, hi)
    neg_lo = zero if hi is None or hi[0] > 0 else (hi[0].copy_negate(), hi[1])
    neg_hi = None if lo is None else (lo[0].copy_negate(), lo[1])
    neg = None if neg_hi is not None and neg_hi[0] < 0 else (neg_lo, neg_hi)
    return pos, neg


def _empty(lo: _Lim, hi: _Lim | None) -> bool:
    return hi is not None and (hi[0] < lo[0] or (hi[0] == lo[0] and (lo[1] or hi[1])))


# --------------------------------------------------------------------------- integers


@functools.lru_cache(maxsize=4096)
def _same_length(a: str, b: str) -> rx.Node:
    """Digit strings of ``len(a)`` digits between ``a`` and ``b`` (``len(a) == len(b)``)."""
    if not a:
        return rx.EPS
    if a[0] == b[0]:
        return rx.concat(_digit(int(a[0])), _same_length(a[1:], b[1:]))
    n = len(a) - 1
    first, last = int(a[0]), int(b[0])
    low_full, high_full = a[1:] == "0" * n, b[1:] == "9" * n
    parts = []
    if not low_full:
        parts.append(rx.concat(_digit(first), _same_length(a[1:], "9" * n)))
    mid_lo, mid_hi = first + (not low_full), last - (not high_full)
    if mid_lo <= mid_hi:
        parts.append(rx.concat(_digits(mid_lo, mid_hi), rx.repeat(_D, n, n)))
    if not high_full:
        parts.append(rx.concat(_digit(last), _same_length("0" * n, b[1:])))
    return rx.alt_of(parts)


@functools.lru_cache(maxsize=4096)
def _nat(lo: int, hi: int | None) -> rx.Node:
    """Canonical decimal texts (no leading zeros) of the integers in ``[lo, hi]``, lo >= 0."""
    if hi is not None and hi < lo:
        return rx.EMPTY
    parts = []
    if lo == 0:
        parts.append(_ZERO)
        lo = 1
        if hi is not None and hi < 1:
            return _ZERO
    ls = str(lo)
    if hi is None:
        parts.append(_same_length(ls, "9" * len(ls)))
        parts.append(rx.concat(_digits(1, 9), rx.repeat(_D, len(ls), None)))
        return rx.alt_of(parts)
    hs = str(hi)
    full_from = full_to = None  # lengths whose every number is in range
    for length in range(len(ls), len(hs) + 1):
        a = ls if length == len(ls) else "1" + "0" * (length - 1)
        b = hs if length == len(hs) else "9" * length
        if a == "1" + "0" * (length - 1) and b == "9" * length:
            full_from = length if full_from is None else full_from
            full_to = length
        else:
            parts.append(_same_length(a, b))
    if full_from is not None:
        parts.append(rx.concat(_digits(1, 9), rx.repeat(_D, full_from - 1, full_to - 1)))
    return rx.alt_of(parts)


def _int_bounds(lo: _Lim | None, hi: _Lim | None) -> tuple[int | None, int | None]:
    ilo = ihi = None
    if lo is not None:
        v = lo[0]
        ilo = math.floor(v) + 1 if lo[1] and v == v.to_integral_value() else math.ceil(v)
    if hi is not None:
        v = hi[0]
        ihi = math.ceil(v) - 1 if hi[1] and v == v.to_integral_value() else math.floor(v)
    return ilo, ihi


def _int_range(ilo: int | None, ihi: int | None) -> rx.Node:
    parts = []
    plo = 0 if ilo is None else max(ilo, 0)
    if ihi is None or ihi >= plo:
        parts.append(_nat(plo, ihi))
    nlo = 0 if ihi is None else max(-ihi, 0)
    nhi = None if ilo is None else -ilo
    if nhi is None or nhi >= nlo:
        parts.append(rx.concat(_MINUS, _nat(nlo, nhi)))
    return rx.alt_of(parts)


def integer_node(minimum: Bound = None, maximum: Bound = None, *, exclusive_minimum: Bound = None,
                 exclusive_maximum: Bound = None, zero_fraction: bool = False) -> rx.Node:
    """Canonical integer texts with a value in range; ``EMPTY`` when no integer is.

    Non-integer bounds round inward (``minimum: 1.5`` starts at 2). ``zero_fraction``
    also admits ``5.0``-style texts, for validating rather than generating.
    """
    node = _int_range(*_int_bounds(*_limits(minimum, maximum, exclusive_minimum,
                                            exclusive_maximum)))
    if zero_fraction and node is not rx.EMPTY:
        node = rx.concat(node, rx.optional(rx.concat(_DOT, _ZEROS)))
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
        return (True, _ZEROS) if lo is None and not hi[1] else (False, rx.EMPTY)
    if hi is None and lo is None:
        return True, _DIGITS
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
    return rx.alt(rx.EPS if eps else rx.EMPTY, rx.concat(_DOT, rest))


@functools.lru_cache(maxsize=4096)
def _plain(lo: _Lim, hi: _Lim | None) -> rx.Node:
    """Unsigned texts ``(0|[1-9][0-9]*)(\\.[0-9]+)?`` whose value is between the limits."""
    if _empty(lo, hi):
        return rx.EMPTY
    a_int, a_frac = _split(lo[0])
    flo: _FracLim = None if a_frac == "" and not lo[1] else (a_frac, lo[1])
    parts = []
    if flo is not None:
        top = None if hi is None else _split(hi[0])
        if top is not None and top[0] == a_int:
            return rx.concat(_text(str(a_int)), _frac_text(flo, (top[1], hi[1])))
        parts.append(rx.concat(_text(str(a_int)), _frac_text(flo, None)))
    start = a_int + (flo is not None)
    if hi is None:
        parts.append(rx.concat(_nat(start, None), _ANY_FRAC))
        return rx.alt_of(parts)
    b_int, b_frac = _split(hi[0])
    parts.append(rx.concat(_nat(start, b_int - 1), _ANY_FRAC))
    if b_int >= start:
        parts.append(rx.concat(_text(str(b_int)), _frac_text(None, (b_frac, hi[1]))))
    return rx.alt_of(parts)


# --------------------------------------------------------------------------- exponents


def _zero_padded(lo: int, hi: int | None) -> rx.Node:
    """Digit strings with leading zeros allowed, value in ``[lo, hi]``."""
    parts = [_ZEROS] if lo == 0 else []
    if hi is None or hi >= max(lo, 1):
        parts.append(rx.concat(rx.star(_ZERO), _nat(max(lo, 1), hi)))
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
        parts.append(rx.concat(_MINUS, _zero_padded(nlo, nhi)))
    return rx.concat(_E, rx.alt_of(parts)) if parts else rx.EMPTY


def _decade(s: int) -> rx.Node:
    """Mantissa texts with a value in ``[10**s, 10**(s+1))``."""
    return _plain((_pow10(s), False), (_pow10(s + 1), True))


@functools.lru_cache(maxsize=1024)
def _exponential(lo: _Lim, hi: _Lim | None) -> rx.Node:
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
        top: _Lim = (_pow10(s + 1), True)
        if d_lo is not None:
            e = d_lo - s
            m_hi = (_shift(hi[0], -e), hi[1]) if d_hi == d_lo else top
            parts.append(rx.concat(_plain((_shift(lo[0], -e), lo[1]), m_hi), _exponent(e, e)))
        if d_hi is not None and d_hi != d_lo:
            e = d_hi - s
            m_hi = (_shift(hi[0], -e), hi[1])
            parts.append(rx.concat(_plain((_pow10(s), False), m_hi), _exponent(e, e)))
    return rx.alt_of(parts)


def number_node(minimum: Bound = None, maximum: Bound = None, exclusive_minimum: Bound = None,
                exclusive_maximum: Bound = None) -> rx.Node:
    """JSON number texts whose value satisfies every given bound (see the module contract).

    ``EMPTY`` when the range is empty. Bounds may be ints, floats (read via ``repr``)
    or Decimals; when both an inclusive and an exclusive bound are given the tighter wins.
    """
    lo, hi = _limits(minimum, maximum, exclusive_minimum, exclusive_maximum)
    return _number(lo, hi)


@functools.lru_cache(maxsize=1024)
def _number(lo: _Lim | None, hi: _Lim | None) -> rx.Node:
    pos, neg = _magnitude_sides(lo, hi)
    parts = []
    if pos is not None:
        parts += [_plain(*pos), _exponential(*pos)]
    if neg is not None:
        parts.append(rx.concat(_MINUS, rx.alt(_plain(*neg), _exponential(*neg))))
    return rx.alt_of(parts)


# --------------------------------------------------------------------------- automata → nodes


def dfa_to_node(n_states: int, start: int, edges: dict[int, dict[int, rx.Node]],
                exits: dict[int, rx.Node]) -> rx.Node:
    """A node for an automaton, by state elimination: the nodes have no cycle kind of their own.

    ``edges[i][j]`` labels the move i → j (any node, usually a byte set) and ``exits[i]``
    what may follow once in state ``i`` (``EPS`` for a plain accepting state). Interning
    keeps the result's DAG polynomial, but its derivative count can grow exponentially
    with cycles, so keep automata with cycles small.
    """
    final = n_states + 1
    table: dict[int, dict[int, rx.Node]] = {i: dict(edges.get(i, {})) for i in range(n_states)}
    table[n_states] = {start: rx.EPS}
    for i, node in exits.items():
        table[i][final] = rx.alt(table[i].get(final, rx.EMPTY), node)
    incoming: dict[int, set[int]] = {i: set() for i in range(n_states + 2)}
    for i, row in table.items():
        for j in row:
            incoming[j].add(i)
    remaining = set(range(n_states))
    while remaining:
        q = min(remaining, key=lambda s: (len(incoming[s] - {s}) * len(table[s]), s))
        remaining.discard(q)
        loop = table[q].pop(q, None)
        incoming[q].discard(q)
        middle = rx.EPS if loop is None else rx.star(loop)
        outs = list(table[q].items())
        for i in incoming[q]:
            head = rx.concat(table[i].pop(q), middle)
            for j, tail in outs:
                table[i][j] = rx.alt(table[i].get(j, rx.EMPTY), rx.concat(head, tail))
                incoming[j].add(i)
        for j, _ in outs:
            incoming[j].discard(q)
        del table[q]
    return table[n_states].get(final, rx.EMPTY)


# --------------------------------------------------------------------------- multiples


class _Budget:
    """Counts states built by one ``multipleOf`` construction and stops runaway sizes."""

    def __init__(self, what: str):
        self.what = what
        self.used = 0

    def take(self, n: int = 1) -> None:
        self.used += n
        if self.used > MAX_MULTIPLE_STATES:
            raise UnsupportedFeature(
                f"multipleOf {self.what}: needs more than {MAX_MULTIPLE_STATES} automaton states")


def _exit_factory(modulus: int, frac_digits: int, fraction: bool,
                  budget: _Budget) -> Callable[[int], rx.Node]:
    """What may follow an integer part whose value is ``r`` mod ``modulus``.

    The scaled value ``(integer part) * 10**k + first k fraction digits`` (zero-padded)
    must be 0 mod ``modulus``, and fraction digits past the k-th must be zeros.
    Without ``fraction`` only the end of text may follow.
    """
    k = frac_digits
    memo: dict[tuple[int, int], tuple[bool, rx.Node]] = {}

    def frac(p: int, s: int) -> tuple[bool, rx.Node]:
        key = (p, s)
        got = memo.get(key)
        if got is not None:
            return got
        budget.take()
        if p == k:
            got = (True, _ZEROS) if s == 0 else (False, rx.EMPTY)
        else:
            groups: dict[int, int] = {}
            for d in range(10):
                t = (10 * s + d) % modulus
                groups[t] = groups.get(t, 0) | (1 << (0x30 + d))
            branches = []
            for t, bits in groups.items():
                eps, rest = frac(p + 1, t)
                branches.append(rx.concat(rx.byte_set(bits), rx.alt(rx.EPS, rest) if eps else rest))
            got = (s * 10 ** (k - p) % modulus == 0, rx.alt_of(branches))
        memo[key] = got
        return got

    @functools.cache
    def exit_node(r: int) -> rx.Node:
        if not fraction:
            return rx.EPS if r % modulus == 0 else rx.EMPTY
        eps, rest = frac(0, r % modulus)
        return rx.alt(rx.EPS if eps else rx.EMPTY, rx.concat(_DOT, rest))

    return exit_node


def _suffix_part(q: int, t: int, k: int, fraction: bool, budget: _Budget) -> rx.Node:
    """Texts whose scaled value is 0 mod ``q = 2**a * 5**b`` (``q`` divides ``10**t``).

    An integer part's value mod q is that of its last t digits, so the language is
    ``[0-9]*`` then a t-digit window (or a shorter integer part, i.e. the window after
    leading zeros), then the fraction exit: no cycle beyond ``[0-9]*``.
    """
    exit_node = _exit_factory(q, k, fraction, budget)
    if k >= t:  # 10**k is 0 mod q: the integer part does not matter
        return rx.concat(_DIGITS, exit_node(0))
    # After i window digits only s mod g[i] still matters (s * 10**(t - i + k) mod q), so
    # states are keyed by that: 2**i states at level i for q = 2**a, not q.
    g = [q // math.gcd(q, 10 ** (t - i + k)) for i in range(t + 1)]

    def live(i: int, s: int) -> bool:
        span = 10 ** (t - i + k)
        return (-s * span) % q < span

    # Forward: the live states of each level (level i also starts the (t-i)-digit integers).
    moves: list[dict[int, dict[int, int]]] = []
    level = {0}
    for i in range(t):
        budget.take(len(level))
        row: dict[int, dict[int, int]] = {}
        for s in level:
            groups: dict[int, int] = {}
            for d in range(10):
                u = (10 * s + d) % g[i + 1]
                if live(i + 1, u):
                    groups[u] = groups.get(u, 0) | (1 << (0x30 + d))
            row[s] = groups
        moves.append(row)
        level = {u for groups in row.values() for u in groups} | {0}
    # Backward: nodes of each level from those of the next (no recursion).
    nodes = {s: exit_node(s) for s in level}
    shorter = []
    for i in range(t - 1, -1, -1):
        nodes = {s: rx.alt_of(rx.concat(rx.byte_set(bits), nodes[u]) for u, bits in groups.items())
                 for s, groups in moves[i].items()}
        if i > 0:
            shorter.append(nodes[0])
    return rx.alt_of([rx.concat(rx.star(_D), nodes[0])] + shorter)


def _prime_powers(n: int) -> list[int]:
    out = []
    p = 2
    while p * p <= n:
        if n % p == 0:
            pp = 1
            while n % p == 0:
                n //= p
                pp *= p
            out.append(pp)
        p += 1
    if n > 1:
        out.append(n)
    return out


def _cyclic_part(c: int, k: int, fraction: bool, budget: _Budget) -> rx.Node:
    """Texts whose scaled value is 0 mod ``c`` (coprime to 10), for any length, exactly."""
    exit_node = _exit_factory(c, k, fraction, budget)
    start = c  # a state before the first digit: the integer part is not empty
    edges: dict[int, dict[int, rx.Node]] = {i: {} for i in range(c + 1)}
    for r in range(c + 1):
        for d in range(10):
            t = (d if r == start else 10 * r + d) % c
            edges[r][t] = rx.alt(edges[r].get(t, rx.EMPTY), _digit(d))
    budget.take(c * c)
    return dfa_to_node(c + 1, start, edges, {r: exit_node(r) for r in range(c)})


def _unrolled_part(c: int, k: int, fraction: bool, max_digits: int, budget: _Budget) -> rx.Node:
    """Texts whose scaled value is 0 mod ``c`` and integer part has <= ``max_digits`` digits.

    Acyclic, so its derivatives are exactly (digits left, remainder): c * max_digits states.
    """
    if max_digits < 1:
        return rx.EMPTY
    exit_node = _exit_factory(c, k, fraction, budget)
    moves = []  # per remainder: (byte set, next remainder) groups
    for r in range(c):
        groups: dict[int, int] = {}
        for d in range(10):
            u = (10 * r + d) % c
            groups[u] = groups.get(u, 0) | (1 << (0x30 + d))
        moves.append(list(groups.items()))
    # layer[r]: what may follow an integer part with remainder r and n more digits allowed;
    # built bottom-up (no recursion, so long bounds cannot overflow the stack).
    layer = [exit_node(r) for r in range(c)]
    for _ in range(max_digits - 1):
        layer = [rx.alt_of([exit_node(r)] + [rx.concat(rx.byte_set(bits), layer[u])
                                             for u, bits in moves[r]]) for r in range(c)]
    start: dict[int, int] = {}
    for d in range(10):
        start[d % c] = start.get(d % c, 0) | (1 << (0x30 + d))
    return rx.alt_of(rx.concat(rx.byte_set(bits), layer[u]) for u, bits in start.items())


def _multiple_parts(c: int, k: int, fraction: bool, max_digits: int | None,
                    what: str) -> list[rx.Node]:
    """Unsigned-text nodes whose intersection is "scaled value is a multiple of ``c``".

    ``c = 2**a * 5**b * (coprime part)``: the first factor is decided by a suffix window,
    the coprime part by a small cyclic automaton when :data:`EXACT_CYCLIC` covers it, else
    by an automaton unrolled to ``max_digits`` integer digits.
    """
    budget = _Budget(what)
    q, t = 1, 0
    for p in (2, 5):
        e = 0
        while c % p == 0:
            c //= p
            q *= p
            e += 1
        t = max(t, e)
    parts = [_suffix_part(q, t, k, fraction, budget)] if q > 1 else []
    if c > 1:
        factors = _prime_powers(c)
        cost = math.prod(EXACT_CYCLIC.get(f, EXACT_CYCLIC_BUDGET + 1) for f in factors)
        if cost <= EXACT_CYCLIC_BUDGET and (max_digits is None or c * max_digits > cost):
            parts += [_cyclic_part(f, k, fraction, budget) for f in factors]
        else:
            if max_digits is None:
                max_digits = UNBOUNDED_MULTIPLE_DIGITS
            budget.take(c * max_digits)
            parts.append(_unrolled_part(c, k, fraction, max_digits, budget))
    return parts


def _split_multiple(m: Decimal) -> tuple[int, int]:
    """``m`` as ``c * 10**-k`` with integers c >= 1, k >= 0 and k minimal."""
    _, digits, exp = m.as_tuple()
    c = int("".join(map(str, digits)))
    while exp < 0 and c % 10 == 0:
        c //= 10
        exp += 1
    return (c * 10 ** exp, 0) if exp >= 0 else (c, -exp)


def _integer_digits(lo: _Lim | None, hi: _Lim | None) -> int | None:
    """Most integer-part digits a value in range can have; None when unbounded."""
    if lo is None or hi is None:
        return None
    return max(len(str(_split(abs(v))[0])) for v in (lo[0], hi[0]))


def _no_multiple(m: Fraction, lo: _Lim | None, hi: _Lim | None) -> bool:
    """Whether a bounded range holds no multiple of ``m`` (decided by arithmetic, so the
    intersection never needs a long liveness search to find out)."""
    if lo is None or hi is None:
        return False
    n = math.ceil(Fraction(lo[0]) / m)
    if lo[1] and n * m == lo[0]:
        n += 1
    top = Fraction(hi[0])
    return n * m > top or (hi[1] and n * m == top)


def _signed(node: rx.Node) -> rx.Node:
    return rx.concat(rx.optional(_MINUS), node)


def integer_multiple_node(multiple_of: int, minimum: Bound = None, maximum: Bound = None, *,
                          exclusive_minimum: Bound = None,
                          exclusive_maximum: Bound = None) -> rx.Node:
    """Canonical integer texts in range whose value is a multiple of ``multiple_of``.

    Exact (see the module contract for the one digit cap). Raises
    :class:`UnsupportedFeature` when the automaton would pass :data:`MAX_MULTIPLE_STATES`.
    """
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of <= 0:
        raise GrammarError(f"multipleOf must be a positive integer here, not {multiple_of!r}")
    lo, hi = _limits(minimum, maximum, exclusive_minimum, exclusive_maximum)
    return _integer_multiple(multiple_of, lo, hi)


@functools.lru_cache(maxsize=256)
def _integer_multiple(m: int, lo: _Lim | None, hi: _Lim | None) -> rx.Node:
    ilo, ihi = _int_bounds(lo, hi)
    base = _int_range(ilo, ihi)
    if m == 1 or base is rx.EMPTY:
        return base
    if _no_multiple(Fraction(m), lo, hi):
        return rx.EMPTY
    digits = None if ilo is None or ihi is None else max(len(str(abs(ilo))), len(str(abs(ihi))))
    parts = _multiple_parts(m, 0, False, digits, str(m))
    return rx.intersect(base, *(_signed(p) for p in parts))


def decimal_multiple_node(multiple_of: int | float | Decimal, minimum: Bound = None,
                          maximum: Bound = None, exclusive_minimum: Bound = None,
                          exclusive_maximum: Bound = None) -> rx.Node:
    """Number texts (no exponent) in range whose value is an exact multiple of ``multiple_of``.

    ``multipleOf: 0.01`` admits ``1.5``, ``1.25``, ``1.250`` but not ``1.255``; an integer
    ``multiple_of`` admits ``10`` and ``10.0``. Values compare as decimals.
    """
    lo, hi = _limits(minimum, maximum, exclusive_minimum, exclusive_maximum)
    return _decimal_multiple(_positive(multiple_of), lo, hi)


def non_multiple_node(multiple_of: int | float | Decimal) -> rx.Node:
    """Number texts whose value is *not* a multiple of ``multiple_of`` (``not: {multipleOf}``).

    The complement of :func:`decimal_multiple_node` among the texts where that node is
    exact: no exponent, at most :data:`UNBOUNDED_MULTIPLE_DIGITS` integer digits. So
    no multiple is ever matched (sound); non-multiples outside those texts are left out.
    """
    return _non_multiple(_positive(multiple_of))


def _positive(multiple_of: int | float | Decimal) -> Decimal:
    """A ``multipleOf`` as an exact Decimal (a GrammarError unless it is > 0)."""
    m = _decimal(multiple_of, "multipleOf")
    if m is None or m <= 0:
        raise GrammarError(f"multipleOf must be > 0, not {multiple_of!r}")
    return m


@functools.lru_cache(maxsize=64)
def _non_multiple(m: Decimal) -> rx.Node:
    integer_part = rx.alt(_ZERO, rx.concat(rx.byte_range(0x31, 0x39),
                                           rx.repeat(_D, 0, UNBOUNDED_MULTIPLE_DIGITS - 1)))
    where_exact = _signed(rx.concat(integer_part, _ANY_FRAC))
    return rx.intersect(where_exact, rx.complement(_decimal_multiple(m, None, None)))


@functools.lru_cache(maxsize=256)
def _decimal_multiple(m: Decimal, lo: _Lim | None, hi: _Lim | None) -> rx.Node:
    pos, neg = _magnitude_sides(lo, hi)
    base = rx.alt(rx.EMPTY if pos is None else _plain(*pos),
                  rx.EMPTY if neg is None else rx.concat(_MINUS, _plain(*neg)))
    if base is rx.EMPTY or _no_multiple(Fraction(m), lo, hi):
        return rx.EMPTY
    c, k = _split_multiple(m)
    shape = rx.concat(_DIGITS, rx.optional(rx.concat(
        _DOT, rx.repeat(_D, 1, k) if k else _ZEROS, rx.star(_ZERO))))
    parts = [shape] + (_multiple_parts(c, k, True, _integer_digits(lo, hi), str(m))
                       if c > 1 else [])
    return rx.intersect(base, *(_signed(p) for p in parts))
