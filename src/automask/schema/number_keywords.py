"""Number keywords: ``minimum``/``maximum`` (draft-04 booleans included), the exclusive
bounds and ``multipleOf`` of a conjunction, lowered to number or integer texts (the
regexes of :mod:`~automask.schema.numbers` and :mod:`~automask.schema.number_multiples`).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

from automask.regex import nodes as rx
from automask.schema.lowering import Report
from automask.schema.normalize import shape
from automask.schema.subschema import Subschema


class Bounds(NamedTuple):
    """What the number keywords of a conjunction combine to (None: no such bound)."""

    lo: Decimal | None
    lo_x: bool  # the lower bound is exclusive
    hi: Decimal | None
    hi_x: bool
    multiple_of: Decimal | None


class NumberKeywords:
    """The number keywords of a conjunction."""

    def __init__(self, report: Report):
        self.report = report

    def bounds(self, members: list[Subschema]) -> Bounds:
        """The tightest bounds and the combined ``multipleOf`` of ``members``."""
        lo = hi = None
        lo_x = hi_x = False
        mult = None
        for m in members:
            view = shape(m).number
            for v, x in view.lower:
                if lo is None or v > lo or (v == lo and x):
                    lo, lo_x = v, x
            for v, x in view.upper:
                if hi is None or v < hi or (v == hi and x):
                    hi, hi_x = v, x
            if view.multiple_of is not None:
                v = view.multiple_of
                if mult is None:
                    mult = v
                elif mult == mult.to_integral_value() and v == v.to_integral_value():
                    mult = Decimal(math.lcm(int(mult), int(v)))
                elif is_multiple(mult, v):
                    pass
                elif is_multiple(v, mult):
                    mult = v
                else:
                    self.report.unsupported("several non-integer multipleOf", m, "multipleOf")
        return Bounds(lo, lo_x, hi, hi_x, mult)

    def number(self, members: list[Subschema], integer: bool) -> rx.Node:
        from automask.schema import number_multiples

        bounds = self.bounds(members)
        excluded = [v for m in members if (v := shape(m).number.not_multiple_of) is not None]
        mult = bounds.multiple_of
        if mult is not None and any(is_multiple(mult, v) for v in excluded):
            # Every multiple of ``mult`` is one of ``v``: nothing is left (a oneOf of
            # branches with the same multipleOf). Exact, and it saves the regex
            # intersection, whose emptiness test walks the product of two
            # divisibility automata (seconds for multipleOf 11 on numbers).
            return rx.EMPTY
        node = self.bounded_number(members, integer, bounds)
        if excluded and node is not rx.EMPTY:
            node = rx.intersect(node, *(number_multiples.non_multiple_node(v) for v in excluded))
        return node

    def bounded_number(self, members: list[Subschema], integer: bool, bounds: Bounds
                       ) -> rx.Node:
        """Number (or integer) texts within the members' ``bounds`` and ``multipleOf``
        (as :meth:`bounds` reads them)."""
        from automask.schema import number_multiples, numbers

        lo, lo_x, hi, hi_x, mult = bounds
        if mult is not None and not integer:  # 6000.0 is a number and a multiple of 1
            return number_multiples.decimal_multiple_node(mult, **number_bounds(lo, lo_x, hi, hi_x))
        if mult is not None and mult != mult.to_integral_value():
            if (1 / mult) != (1 / mult).to_integral_value():
                self.report.unsupported("non-integer multipleOf on integers", members[0],
                                        "multipleOf")
            mult = None  # every integer is a multiple of 1/k
        if integer:
            ilo = None if lo is None else int(math.floor(lo)) + 1 if (
                lo_x and lo == lo.to_integral_value()) else int(math.ceil(lo))
            ihi = None if hi is None else int(math.ceil(hi)) - 1 if (
                hi_x and hi == hi.to_integral_value()) else int(math.floor(hi))
            if mult is not None:
                node = number_multiples.integer_multiple_node(int(mult), ilo, ihi)
            else:
                node = numbers.integer_node(ilo, ihi)
            return node
        return numbers.number_node(**number_bounds(lo, lo_x, hi, hi_x))


def is_multiple(v: Decimal, m: Decimal) -> bool:
    """Exactly (as fractions: Decimal's ``%`` gives up on quotients past its precision,
    1e308 by 0.123456789)."""
    return Fraction(v) % Fraction(m) == 0



def number_bounds(lo, lo_x, hi, hi_x) -> dict:
    out = {}
    if lo is not None:
        out["exclusive_minimum" if lo_x else "minimum"] = lo
    if hi is not None:
        out["exclusive_maximum" if hi_x else "maximum"] = hi
    return out


