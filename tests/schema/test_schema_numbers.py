"""Number and integer texts with bounds and multipleOf: always sound, complete as documented.

The oracle is :class:`decimal.Decimal` on the text itself, so ``1e-5``, ``1.50`` and ``-0.0``
are compared by exact value, never through floats.
"""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.languages import same_language

from automask import Grammar
from automask.errors import EmptyLanguage, GrammarError, LimitExceeded, UnsupportedFeature
from automask.regex import nodes as rx
from automask.schema import number_multiples, numbers
from automask.schema.number_multiples import (
    UNBOUNDED_MULTIPLE_DIGITS,
    decimal_multiple_node,
    integer_multiple_node,
)
from automask.schema.numbers import MANTISSA_DECADES, integer_node, number_node

NUMBER_RE = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
INTEGER_RE = re.compile(r"-?(0|[1-9][0-9]*)")
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _m(node: rx.Node, text: str) -> bool:
    return rx.matches(node, text.encode())


def _in_range(v: Decimal, kw: dict) -> bool:
    checks = {
        "minimum": lambda b: v >= b, "maximum": lambda b: v <= b,
        "exclusive_minimum": lambda b: v > b, "exclusive_maximum": lambda b: v < b,
    }
    return all(checks[k](_dec(b)) for k, b in kw.items() if b is not None)


def _dec(x) -> Decimal:
    return Decimal(repr(x)) if isinstance(x, float) else Decimal(x)


def _exact_window(text: str) -> bool:
    """Whether number_node promises exactness for this text (module contract)."""
    mantissa = re.split("[eE]", text.lstrip("-"))[0]
    if mantissa == text.lstrip("-"):
        return True  # no exponent
    m = Decimal(mantissa)
    return m == 0 or Decimal(10) ** -MANTISSA_DECADES <= m < Decimal(10) ** (MANTISSA_DECADES + 1)


def _whole_sign_class(text: str, kw: dict) -> bool:
    """Whether every number of the text's sign (with a nonzero mantissa) is in range."""
    v = Decimal(text)
    if v == 0:
        return False
    neg = text.startswith("-")
    lo = [_dec(kw[k]) for k in ("minimum", "exclusive_minimum") if kw.get(k) is not None]
    hi = [_dec(kw[k]) for k in ("maximum", "exclusive_maximum") if kw.get(k) is not None]
    if neg:
        return not lo and all(b >= 0 for b in hi)
    return not hi and all(b <= 0 for b in lo)


# --------------------------------------------------------------------------- strategies

digit_strings = st.text("0123456789", min_size=1, max_size=6)


@st.composite
def number_texts(draw) -> str:
    """JSON number texts: from json.dumps (ints, floats) or assembled from random parts."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return json.dumps(draw(st.integers(-10**25, 10**25)))
    if kind == 1:
        return json.dumps(draw(st.floats(allow_nan=False, allow_infinity=False)))
    if kind == 2:
        x = draw(st.integers(-10**6, 10**6))
        return json.dumps(x / 10 ** draw(st.integers(0, 8)))
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.sampled_from(["0", "1", "9"]) | digit_strings.map(lambda s: "1" + s))
    frac = draw(st.sampled_from(["", ".0", ".5", ".00"]) | digit_strings.map(lambda s: "." + s))
    exp = draw(st.sampled_from(["", "", "e0", "E+1", "e-2", "e-05", "e+20", "E-0"])
               | st.integers(0, 400).map(lambda e: f"e{e}")
               | st.integers(0, 400).map(lambda e: f"e-{e}"))
    return sign + whole + frac + exp


def _bound_value():
    return st.one_of(
        st.integers(-1000, 1000),
        st.integers(-10**22, 10**22),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
        st.builds(lambda i, k: Decimal(i).scaleb(-k), st.integers(-10**6, 10**6),
                  st.integers(0, 8)),
        st.sampled_from([0, 0.0, 1.5, -1.5, Decimal("0.001"), Decimal("-0.001"), 1e-05, 1e20]),
    )


@st.composite
def bounds(draw) -> dict:
    kw = {}
    if draw(st.booleans()):
        kw[draw(st.sampled_from(["minimum", "exclusive_minimum"]))] = draw(_bound_value())
    if draw(st.booleans()):
        kw[draw(st.sampled_from(["maximum", "exclusive_maximum"]))] = draw(_bound_value())
    if draw(st.integers(0, 5)) == 0:  # both kinds on one side: the tighter must win
        kw["minimum"] = draw(_bound_value())
        kw["exclusive_minimum"] = draw(_bound_value())
    return kw


def _texts_near(kw: dict) -> list[str]:
    """Texts at and around each bound, where off-by-one mistakes live."""
    out = []
    for b in kw.values():
        d = _dec(b)
        ulp = Decimal((0, (1,), min(d.as_tuple().exponent, 0) - 1))
        for v in (d, d + ulp, d - ulp, d + 1, d - 1, d / 3, -d):
            if not v.is_finite():
                continue
            t = format(v, "f")
            out += [t, t + "0" if "." in t else t + ".0", format(v, "e").replace("+", "")]
    return [t for t in out if NUMBER_RE.fullmatch(t)]


# --------------------------------------------------------------------------- number_node


@SETTINGS
@given(kw=bounds(), texts=st.lists(number_texts(), min_size=1, max_size=25))
def test_number_node_sound_and_complete(kw, texts):
    _check_sound_and_complete(kw, texts)


def _check_sound_and_complete(kw: dict, texts: list[str]) -> None:
    node = number_node(**kw)
    for text in texts + _texts_near(kw):
        assert NUMBER_RE.fullmatch(text), text
        inside = _in_range(Decimal(text), kw)
        got = _m(node, text)
        if got:
            assert inside, (kw, text)  # soundness: always
        elif inside:  # completeness: exact within the window, else only whole sign classes
            assert not _exact_window(text) and not _whole_sign_class(text, kw), (kw, text)


@settings(SETTINGS, max_examples=40)
@given(texts=st.lists(number_texts(), min_size=1, max_size=20),
       junk=st.lists(st.text("0123456789.eE+-x ", max_size=8), max_size=10))
def test_unbounded_is_exactly_json_number_syntax(texts, junk):
    node = number_node()
    for t in texts + junk:
        assert _m(node, t) == bool(NUMBER_RE.fullmatch(t)), t


NUMBER_CASES: list[tuple[dict, list[str], list[str]]] = [
    (dict(exclusive_minimum=0),
     ["0.0001", "1", "1e-05", "5e-324", "1.5e+20", "0.1E1"],
     ["0", "0.0", "-0", "-0.0", "-0.0001", "0e5", "0.000e-3", "-1e-05"]),
    (dict(minimum=0),
     ["0", "-0", "-0.0", "0e10", "-0E-2", "7", "1e400", "123456789012345678901234567890e-2"],
     ["-1", "-1e-400", "-0.0000001"]),
    (dict(maximum=1.5),
     ["1.5", "1.50", "1.5000", "1", "-100", "15e-1", "0.15e1", "1.4999999", "-1e300", "1.5e0"],
     ["1.500001", "1.6", "2", "16e-1", "1e1", "0.16E1"]),
    (dict(exclusive_maximum=1.5), ["1.4999", "1.49999999999999999999", "-5"],
     ["1.5", "1.50", "15e-1", "2"]),
    (dict(minimum=-10, maximum=-2.5),
     ["-10", "-10.0", "-2.5", "-2.50", "-3", "-9.999", "-1e1", "-25e-1"],
     ["-10.0001", "-2.4", "0", "2.5", "-0", "-1.1e1", "10"]),
    (dict(minimum=100, maximum=100), ["100", "100.0", "1e2", "1E+2", "0.1e3", "1000e-1", "10e1"],
     ["99.9", "100.01", "1e3", "-100"]),
    (dict(minimum=Decimal("0.001"), exclusive_maximum=Decimal("0.002")),
     ["0.001", "0.0010", "0.0019999", "1e-3", "1.5e-3", "0.15e-2"],
     ["0.002", "0.0009", "2e-3", "9.99e-4", "0"]),
    (dict(minimum=2**63), [str(2**63), str(2**63 + 1), "1e19", "9.3e18", "1e400"],
     [str(2**63 - 1), "9.2e18", "-1"]),
    (dict(minimum=-1e-05, maximum=1e-05),
     ["0", "-0", "1e-05", "-1e-05", "0.00001", "-0.000010", "1e-6", "-9.99e-6", "0e99"],
     ["0.0000101", "1.1e-05", "-2e-05", "1", "1e5"]),
    (dict(minimum=5, maximum=4), [], ["4", "5", "4.5", "0"]),
    (dict(minimum=1, exclusive_maximum=1), [], ["1", "1.0"]),
    (dict(minimum=1, maximum=1), ["1", "1.00", "1e0", "10e-1"], ["1.01", "0.99"]),
]


@pytest.mark.parametrize("kw, good, bad", NUMBER_CASES)
def test_number_node_table(kw, good, bad):
    node = number_node(**kw)
    for t in good:
        assert _m(node, t), (kw, t)
    for t in bad:
        assert not _m(node, t), (kw, t)


_POINT_EDGES = [0, 1, 9, 10, 1500, 123456789, 10**9 - 1, 10**9, 10**25, 0.5, 0.25, 3.14159,
                1e-7, 1e-8, 1e-9, 2.5e-12, 1e20, 1e300, 5e-324, 1.7976931348623157e308,
                Decimal("0.000"), Decimal("1.500"), Decimal("120E3")]


@SETTINGS
@given(value=_bound_value() | st.sampled_from(_POINT_EDGES),
       texts=st.lists(number_texts(), max_size=10))
def test_a_single_value_is_the_range_from_it_to_itself(value, texts):
    """The texts of one value (an enum's number) are written directly: the same language
    as the general construction of the range [x, x]; ``number_node(x, x)``, which uses
    them, is sound and complete on its spellings and its neighbours."""
    x = abs(_dec(value))
    lim = (x, False)
    general = rx.alt(numbers.plain(lim, lim), numbers._exponential(lim, lim))
    assert same_language(numbers._point(x), general), value
    spellings = [json.dumps(value) if not isinstance(value, Decimal) else str(value),
                 format(_dec(value), "e"), format(_dec(value), "f") + "00"]
    _check_sound_and_complete({"minimum": value, "maximum": value},
                              texts + [t for t in spellings if NUMBER_RE.fullmatch(t)])


def test_empty_ranges_are_empty():
    assert number_node(minimum=5, maximum=4) is rx.EMPTY
    assert number_node(exclusive_minimum=1, maximum=1) is rx.EMPTY
    assert integer_node(1.2, 1.8) is rx.EMPTY
    assert integer_multiple_node(7, 1, 6) is rx.EMPTY
    assert decimal_multiple_node(Decimal("0.5"), Decimal("0.1"), Decimal("0.4")) is rx.EMPTY


def test_far_mantissas_only_with_whole_sign_classes():
    """Outside the mantissa window exponent texts are accepted only when trivially safe."""
    far = "1234567890e-5"  # mantissa 1.2e9 is past the window: value 12345.6789
    assert _m(number_node(minimum=0), far)
    assert not _m(number_node(minimum=0, maximum=10**6), far)  # in range, documented miss
    assert not _m(number_node(minimum=0, maximum=10**4), far)
    assert _m(number_node(maximum=0), "-" + far)


def test_bad_bounds():
    with pytest.raises(GrammarError):
        number_node(minimum=float("nan"))
    with pytest.raises(GrammarError):
        number_node(maximum=float("inf"))
    with pytest.raises(GrammarError):
        number_node(minimum=True)
    with pytest.raises(LimitExceeded):
        number_node(minimum=Decimal("1e500"))


# --------------------------------------------------------------------------- integer_node


@st.composite
def int_bounds(draw):
    small = st.integers(-300, 300)
    big = st.integers(-10**30, 10**30)
    value = st.one_of(small, big, st.sampled_from([0, -1, 1, 2**63, -(2**63), 10**30]))
    lo = draw(st.none() | value)
    hi = draw(st.none() | value)
    return lo, hi


@SETTINGS
@given(b=int_bounds(), xs=st.lists(st.integers(-10**31, 10**31) | st.integers(-400, 400),
                                    max_size=30))
def test_integer_node_exact(b, xs):
    lo, hi = b
    node = integer_node(lo, hi)
    probes = list(xs) + [v + d for v in b if v is not None for d in (-1, 0, 1)]
    for x in probes:
        inside = (lo is None or x >= lo) and (hi is None or x <= hi)
        assert _m(node, str(x)) == inside, (lo, hi, x)
    zero = (lo is None or lo <= 0) and (hi is None or hi >= 0)
    assert _m(node, "-0") == zero
    for t in ("00", "01", "-01", "1.0", "1e2", "+1", "", "-"):
        assert not _m(node, t)


def test_integer_node_rounds_inward_and_zero_fraction():
    node = integer_node(Decimal("1.5"), 4.5)
    assert [x for x in range(-3, 8) if _m(node, str(x))] == [2, 3, 4]
    node = integer_node(exclusive_minimum=2, exclusive_maximum=5)
    assert [x for x in range(-3, 8) if _m(node, str(x))] == [3, 4]
    node = integer_node(0, 10, zero_fraction=True)
    assert _m(node, "5") and _m(node, "5.0") and _m(node, "5.000") and _m(node, "-0.0")
    assert not _m(node, "5.5") and not _m(node, "11.0") and not _m(node, "5.")


def test_integer_node_builds_fast_for_huge_bounds():
    numbers._nat.cache_clear()
    numbers._same_length.cache_clear()
    for lo, hi in ((-(2**63), 2**63 - 1), (-(10**30) + 7, 10**30 - 3), (12345, None)):
        t0 = time.perf_counter()
        node = integer_node(lo, hi)
        assert time.perf_counter() - t0 < 0.05  # ~0.5 ms in practice; loose for slow CI
        assert _m(node, str(lo)) and not _m(node, str(lo - 1))


# --------------------------------------------------------------------------- multiples

MULTIPLES = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 20, 21, 25, 30, 37, 64, 99,
             100, 125, 1000, 1024]


@settings(SETTINGS, max_examples=50)
@given(m=st.sampled_from(MULTIPLES), lo=st.none() | st.integers(-10**6, 10**6),
       hi=st.none() | st.integers(-10**6, 10**6), data=st.data())
def test_integer_multiple_exact(m, lo, hi, data):
    node = integer_multiple_node(m, lo, hi)
    digits = UNBOUNDED_MULTIPLE_DIGITS
    xs = data.draw(st.lists(st.integers(-10**digits + 1, 10**digits - 1)
                            | st.integers(-10**7, 10**7).map(lambda k: k * m)
                            | st.integers(-500, 500), min_size=20, max_size=40))
    xs += [v + d for v in (lo, hi) if v is not None for d in range(-m - 1, m + 2)]
    for x in xs:
        want = x % m == 0 and (lo is None or x >= lo) and (hi is None or x <= hi)
        assert _m(node, str(x)) == want, (m, lo, hi, x)


@pytest.mark.parametrize("m", [3, 7, 9, 11, 21, 6, 14, 1000, 1024, 2**5 * 5**3])
def test_exact_multiples_have_no_length_cap(m):
    """Moduli covered by EXACT_CYCLIC (times any 2**a 5**b) stay exact for any length."""
    node = integer_multiple_node(m)
    big = 10**40 + 17
    for x in (big - big % m, big - big % m + m, -(big - big % m), big - big % m + 1):
        assert _m(node, str(x)) == (x % m == 0), x


def test_capped_multiples_are_sound_beyond_the_cap():
    node = integer_multiple_node(17)
    x = 17 * 10**UNBOUNDED_MULTIPLE_DIGITS
    assert not _m(node, str(x))  # documented incompleteness, never unsoundness
    assert _m(node, str(17 * 10**(UNBOUNDED_MULTIPLE_DIGITS - 3)))
    assert not _m(node, str(17 * 10**5 + 1))


def test_multiple_errors():
    with pytest.raises(UnsupportedFeature, match="multipleOf"):
        integer_multiple_node(2**20)
    with pytest.raises(UnsupportedFeature, match="multipleOf"):
        integer_multiple_node(10007, -(10**30), 10**30)
    with pytest.raises(GrammarError):
        integer_multiple_node(0)
    with pytest.raises(GrammarError):
        decimal_multiple_node(-0.5)


DECIMAL_MULTIPLES = ["0.01", "0.1", "0.5", "0.25", "2.5", "0.3", "0.07", "1.2", "0.125",
                     "0.001", "5", "0.0625", "1e-6"]


@st.composite
def decimal_texts(draw) -> str:
    whole = draw(st.integers(-10**6, 10**6))
    frac = draw(st.text("0123456789", max_size=7))
    text = str(whole) + ("." + frac if frac else "")
    if whole == 0 and draw(st.booleans()):
        text = "-" + text
    return text


@settings(SETTINGS, max_examples=50)
@given(m=st.sampled_from(DECIMAL_MULTIPLES), kw=bounds(), data=st.data())
def test_decimal_multiple_exact(m, kw, data):
    mult = Decimal(m)
    try:
        node = decimal_multiple_node(mult, **kw)
    except UnsupportedFeature:
        assume(False)
    texts = data.draw(st.lists(decimal_texts() | number_texts(), min_size=10, max_size=30))
    step = Fraction(mult)
    texts += [str(Decimal(k) * mult) for k in data.draw(
        st.lists(st.integers(-10**5, 10**5), max_size=10))]
    for text in texts:
        v = Decimal(text)
        want = Fraction(v) % step == 0 and _in_range(v, kw)
        got = _m(node, text)
        if got:
            assert want, (m, kw, text)
        elif want:
            assert "e" in text.lower(), (m, kw, text)  # exponent forms: documented miss


@settings(SETTINGS, max_examples=40)
@given(m=st.sampled_from(DECIMAL_MULTIPLES + ["3", "7", "13", "6", "1"]), data=st.data())
def test_non_multiples_never_match_a_multiple(m, data):
    """``not: {multipleOf}``: sound (no multiple, in any spelling), and complete on the
    texts without exponent and with at most UNBOUNDED_MULTIPLE_DIGITS integer digits."""
    node = number_multiples.non_multiple_node(Decimal(m))
    texts = data.draw(st.lists(decimal_texts() | number_texts(), min_size=10, max_size=30))
    step = Fraction(Decimal(m))
    texts += [str(Decimal(k) * Decimal(m)) for k in data.draw(
        st.lists(st.integers(-10**5, 10**5), max_size=10))]
    texts += ["0", "-0", "0.0", "-0.000", str(3 * 10**25)]
    for text in texts:
        v = Decimal(text)
        multiple = Fraction(v) % step == 0
        if _m(node, text):
            assert not multiple, (m, text)
        elif not multiple:
            integer_digits = len(text.lstrip("-").split(".")[0].lower().split("e")[0])
            assert "e" in text.lower() or integer_digits > UNBOUNDED_MULTIPLE_DIGITS, \
                (m, text)


def test_decimal_multiple_table():
    node = decimal_multiple_node(Decimal("0.01"), minimum=0, maximum=100)
    for t in ("0", "1.5", "1.25", "1.250", "99.99", "100", "100.00", "0.10"):
        assert _m(node, t), t
    for t in ("1.255", "100.01", "-0.01", "1e-2", "0.001"):
        assert not _m(node, t), t
    node = decimal_multiple_node(0.5)
    assert _m(node, "-2.5") and _m(node, "3") and _m(node, "3.50") and not _m(node, "3.25")
    node = decimal_multiple_node(Decimal("0.3"))  # exact decimals: 0.9 is 3 * 0.3
    assert _m(node, "0.9") and _m(node, "-1.2") and not _m(node, "1") and not _m(node, "0.31")
    node = decimal_multiple_node(5)
    assert _m(node, "10") and _m(node, "10.0") and not _m(node, "10.5") and not _m(node, "7")


@pytest.mark.parametrize("schema", [
    {"type": "number", "multipleOf": 0.5, "not": {"multipleOf": 0.25}},
    {"type": "integer", "multipleOf": 6, "not": {"multipleOf": 3}},
    {"type": "number", "multipleOf": 11, "not": {"multipleOf": 11}},
])
def test_a_multiple_that_must_not_be_a_multiple_of_a_divisor_is_empty(schema):
    """Every multiple of 0.5 is one of 0.25: nothing is valid (decided from the divisors,
    not by intersecting the regexes)."""
    with pytest.raises(EmptyLanguage):
        Grammar.from_json_schema(schema)
    left = Grammar.from_json_schema({**schema, "not": {"multipleOf": 7}})  # 7 divides none
    assert left.productions
