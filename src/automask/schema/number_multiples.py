"""JSON number and integer texts that are (or are not) multiples of ``multipleOf``, within
exact bounds, as byte regexes (the bounds read as in :mod:`~automask.schema.numbers`).

Contracts (soundness is never traded: a matched text always satisfies every bound):

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

Sizes past :data:`MAX_MULTIPLE_STATES` raise :class:`UnsupportedFeature`.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction
from typing import cast

from automask.errors import GrammarError, UnsupportedFeature
from automask.regex import nodes as rx
from automask.schema.numbers import (
    ANY_FRAC,
    DIGIT,
    DIGITS,
    DOT,
    MINUS,
    ZERO,
    ZEROS,
    Bound,
    Lim,
    digit,
    int_bounds,
    int_range,
    limits,
    magnitude_sides,
    plain,
    split_decimal,
    to_decimal,
)

__all__ = [
    "EXACT_CYCLIC", "MAX_MULTIPLE_STATES", "UNBOUNDED_MULTIPLE_DIGITS", "decimal_multiple_node",
    "dfa_to_node", "integer_multiple_node", "non_multiple_node",
]

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


class _Exits:
    """What may follow an integer part whose value is ``r`` mod ``modulus``: ``exits(r)``.

    The scaled value ``(integer part) * 10**k + first k fraction digits`` (zero-padded)
    must be 0 mod ``modulus``, and fraction digits past the k-th must be zeros.
    Without ``fraction`` only the end of text may follow. (A class, not closures over a
    recursive one: those would hold themselves, a cycle per compile.)
    """

    def __init__(self, modulus: int, frac_digits: int, fraction: bool, budget: _Budget):
        self.modulus, self.k, self.fraction, self.budget = modulus, frac_digits, fraction, budget
        self.fracs: dict[tuple[int, int], tuple[bool, rx.Node]] = {}
        self.exits: dict[int, rx.Node] = {}

    def frac(self, p: int, s: int) -> tuple[bool, rx.Node]:
        """Fraction digits from the p-th on, the scaled value so far being ``s`` mod
        ``modulus``: (whether the fraction may end here, what may follow)."""
        key = (p, s)
        got = self.fracs.get(key)
        if got is not None:
            return got
        self.budget.take()
        modulus, k = self.modulus, self.k
        if p == k:
            got = (True, ZEROS) if s == 0 else (False, rx.EMPTY)
        else:
            groups: dict[int, int] = {}
            for d in range(10):
                t = (10 * s + d) % modulus
                groups[t] = groups.get(t, 0) | (1 << (0x30 + d))
            branches = []
            for t, bits in groups.items():
                eps, rest = self.frac(p + 1, t)
                branches.append(rx.concat(rx.byte_set(bits), rx.alt(rx.EPS, rest) if eps else rest))
            got = (s * 10 ** (k - p) % modulus == 0, rx.alt_of(branches))
        self.fracs[key] = got
        return got

    def __call__(self, r: int) -> rx.Node:
        node = self.exits.get(r)
        if node is None:
            if not self.fraction:
                node = rx.EPS if r % self.modulus == 0 else rx.EMPTY
            else:
                eps, rest = self.frac(0, r % self.modulus)
                node = rx.alt(rx.EPS if eps else rx.EMPTY, rx.concat(DOT, rest))
            self.exits[r] = node
        return node


def _suffix_part(q: int, t: int, k: int, fraction: bool, budget: _Budget) -> rx.Node:
    """Texts whose scaled value is 0 mod ``q = 2**a * 5**b`` (``q`` divides ``10**t``).

    An integer part's value mod q is that of its last t digits, so the language is
    ``[0-9]*`` then a t-digit window (or a shorter integer part, i.e. the window after
    leading zeros), then the fraction exit: no cycle beyond ``[0-9]*``.
    """
    exit_node = _Exits(q, k, fraction, budget)
    if k >= t:  # 10**k is 0 mod q: the integer part does not matter
        return rx.concat(DIGITS, exit_node(0))
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
    return rx.alt_of([rx.concat(rx.star(DIGIT), nodes[0])] + shorter)


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
    exit_node = _Exits(c, k, fraction, budget)
    start = c  # a state before the first digit: the integer part is not empty
    edges: dict[int, dict[int, rx.Node]] = {i: {} for i in range(c + 1)}
    for r in range(c + 1):
        for d in range(10):
            t = (d if r == start else 10 * r + d) % c
            edges[r][t] = rx.alt(edges[r].get(t, rx.EMPTY), digit(d))
    budget.take(c * c)
    return dfa_to_node(c + 1, start, edges, {r: exit_node(r) for r in range(c)})


def _unrolled_part(c: int, k: int, fraction: bool, max_digits: int, budget: _Budget) -> rx.Node:
    """Texts whose scaled value is 0 mod ``c`` and integer part has <= ``max_digits`` digits.

    Acyclic, so its derivatives are exactly (digits left, remainder): c * max_digits states.
    """
    if max_digits < 1:
        return rx.EMPTY
    exit_node = _Exits(c, k, fraction, budget)
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
    _, digits, exponent = m.as_tuple()
    exp = cast(int, exponent)  # finite: an int
    c = int("".join(map(str, digits)))
    while exp < 0 and c % 10 == 0:
        c //= 10
        exp += 1
    return (c * 10 ** exp, 0) if exp >= 0 else (c, -exp)


def _integer_digits(lo: Lim | None, hi: Lim | None) -> int | None:
    """Most integer-part digits a value in range can have; None when unbounded."""
    if lo is None or hi is None:
        return None
    return max(len(str(split_decimal(abs(v))[0])) for v in (lo[0], hi[0]))


def _no_multiple(m: Fraction, lo: Lim | None, hi: Lim | None) -> bool:
    """Whether a bounded range holds no multiple of ``m`` (decided by arithmetic, so the
    intersection never needs a long liveness search to find out)."""
    if lo is None or hi is None:
        return False
    n = math.ceil(Fraction(lo[0]) / m)
    if lo[1] and n * m == lo[0]:
        n += 1
    top = Fraction(hi[0])
    return n * m > top or (hi[1] and n * m == top)


def _with_sign(node: rx.Node) -> rx.Node:
    return rx.concat(rx.optional(MINUS), node)


def integer_multiple_node(multiple_of: int, minimum: Bound = None, maximum: Bound = None, *,
                          exclusive_minimum: Bound = None,
                          exclusive_maximum: Bound = None) -> rx.Node:
    """Canonical integer texts in range whose value is a multiple of ``multiple_of``.

    Exact (see the module contract for the one digit cap). Raises
    :class:`UnsupportedFeature` when the automaton would pass :data:`MAX_MULTIPLE_STATES`.
    """
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of <= 0:
        raise GrammarError(f"multipleOf must be a positive integer here, not {multiple_of!r}")
    lo, hi = limits(minimum, maximum, exclusive_minimum, exclusive_maximum)
    return _integer_multiple(multiple_of, lo, hi)


@functools.lru_cache(maxsize=256)
def _integer_multiple(m: int, lo: Lim | None, hi: Lim | None) -> rx.Node:
    ilo, ihi = int_bounds(lo, hi)
    base = int_range(ilo, ihi)
    if m == 1 or base is rx.EMPTY:
        return base
    if _no_multiple(Fraction(m), lo, hi):
        return rx.EMPTY
    digits = None if ilo is None or ihi is None else max(len(str(abs(ilo))), len(str(abs(ihi))))
    parts = _multiple_parts(m, 0, False, digits, str(m))
    return rx.intersect(base, *(_with_sign(p) for p in parts))


def decimal_multiple_node(multiple_of: int | float | Decimal, minimum: Bound = None,
                          maximum: Bound = None, exclusive_minimum: Bound = None,
                          exclusive_maximum: Bound = None) -> rx.Node:
    """Number texts (no exponent) in range whose value is an exact multiple of ``multiple_of``.

    ``multipleOf: 0.01`` admits ``1.5``, ``1.25``, ``1.250`` but not ``1.255``; an integer
    ``multiple_of`` admits ``10`` and ``10.0``. Values compare as decimals.
    """
    lo, hi = limits(minimum, maximum, exclusive_minimum, exclusive_maximum)
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
    m = to_decimal(multiple_of, "multipleOf")
    if m is None or m <= 0:
        raise GrammarError(f"multipleOf must be > 0, not {multiple_of!r}")
    return m


@functools.lru_cache(maxsize=64)
def _non_multiple(m: Decimal) -> rx.Node:
    integer_part = rx.alt(ZERO, rx.concat(rx.byte_range(0x31, 0x39),
                                           rx.repeat(DIGIT, 0, UNBOUNDED_MULTIPLE_DIGITS - 1)))
    where_exact = _with_sign(rx.concat(integer_part, ANY_FRAC))
    return rx.intersect(where_exact, rx.complement(_decimal_multiple(m, None, None)))


@functools.lru_cache(maxsize=256)
def _decimal_multiple(m: Decimal, lo: Lim | None, hi: Lim | None) -> rx.Node:
    pos, neg = magnitude_sides(lo, hi)
    base = rx.alt(rx.EMPTY if pos is None else plain(*pos),
                  rx.EMPTY if neg is None else rx.concat(MINUS, plain(*neg)))
    if base is rx.EMPTY or _no_multiple(Fraction(m), lo, hi):
        return rx.EMPTY
    c, k = _split_multiple(m)
    shape = rx.concat(DIGITS, rx.optional(rx.concat(
        DOT, rx.repeat(DIGIT, 1, k) if k else ZEROS, rx.star(ZERO))))
    parts = [shape] + (_multiple_parts(c, k, True, _integer_digits(lo, hi), str(m))
                       if c > 1 else [])
    return rx.intersect(base, *(_with_sign(p) for p in parts))
