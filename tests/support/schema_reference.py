"""The ``jsonschema`` reference for the JSON Schema tests, and our verdicts beside it.

The reference is ``jsonschema`` (Draft 2020-12, or Draft 7 / Draft 4 for their own
forms) with the format checker on (``format`` is asserted), reading numbers as
``Decimal``: JSON numbers are decimal, and with floats ``jsonschema`` finds 0.07 not a
multiple of 0.01. Ours are a compiled schema fed token by token (the tokenizer's own
encoding) and byte by byte. Importing this module skips the importing test module where
``jsonschema`` is not installed.
"""

from __future__ import annotations

import datetime
import json
import re
from decimal import Decimal, localcontext

import pytest

import automask
from automask import Grammar, Matcher

jsonschema = pytest.importorskip("jsonschema")
D2020 = jsonschema.Draft202012Validator
D7 = jsonschema.Draft7Validator
D4 = jsonschema.Draft4Validator



def dumps(x) -> str:
    return json.dumps(x, ensure_ascii=False)


def _is_integer(checker, x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    if isinstance(x, float):
        return x.is_integer()
    if isinstance(x, Decimal):
        return x.is_finite() and x == x.to_integral_value()
    return False


def _full_date(x) -> bool:
    """RFC 3339 ``full-date``. ``jsonschema`` uses ``date.fromisoformat``, which has no year
    0000; RFC 3339 has (a leap year, like 2000)."""
    if not isinstance(x, str):
        return True
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", x)
    if m is None:
        return False
    year, month, day = (int(g) for g in m.groups())
    datetime.date(year or 2000, month, day)  # ValueError when out of range
    return True


_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\.[0-9]+)?"
                   r"([Zz]|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))")


def _full_time(x) -> bool:
    """RFC 3339 ``full-time``, with a leap second only at 23:59 UTC. ``jsonschema``'s checker
    (rfc3339-validator) has no leap seconds; the JSON Schema test suite has them."""
    if not isinstance(x, str):
        return True
    m = _TIME.fullmatch(x)
    if m is None:
        return False
    if m[3] == "60":
        offset = 0 if m[6] is None else (1 if m[6] == "+" else -1) * (int(m[7]) * 60 + int(m[8]))
        return (int(m[1]) * 60 + int(m[2]) - offset) % 1440 == 23 * 60 + 59
    return True


def _date_time(x) -> bool:
    if not isinstance(x, str):
        return True
    date, sep, time = x[:10], x[10:11], x[11:]
    return sep in ("T", "t") and _full_date(date) and _full_time(time)


def reference_validator(schema, cls=D2020):
    """A ``jsonschema`` validator that reads numbers as Decimal and asserts ``format``."""
    exact = jsonschema.validators.extend(
        cls, type_checker=cls.TYPE_CHECKER.redefine("integer", _is_integer))
    formats = jsonschema.FormatChecker(())
    formats.checkers = dict(cls.FORMAT_CHECKER.checkers)
    for name, check in (("date", _full_date), ("time", _full_time), ("date-time", _date_time)):
        if name in formats.checkers:
            formats.checks(name, raises=ValueError)(check)
    return exact(json.loads(json.dumps(schema), parse_float=Decimal), format_checker=formats)


EXPONENT_CLAMP = 3000


def exact_number(text: str) -> Decimal:
    """A JSON number as a Decimal, exactly, except that an exponent beyond Decimal's range
    is clamped: a magnitude above 10**3000 or below 10**-3000 (nonzero) keeps its sign,
    digits, integrality and divisibility by any ``multipleOf`` with fewer digits."""
    mantissa, _, exp = text.lower().partition("e")
    digits = exp.lstrip("+-").lstrip("0") or "0"  # 1e0000000000000000005 is 1e5
    if len(digits) > 18:
        digits = "9" * 18
    exp = ("-" if exp.startswith("-") else "") + digits
    d = Decimal(mantissa)
    if not d:
        return d
    e = int(exp or 0)
    adjusted = d.adjusted() + e
    if adjusted > EXPONENT_CLAMP:
        e -= adjusted - EXPONENT_CLAMP
    elif adjusted < -EXPONENT_CLAMP:
        e += -EXPONENT_CLAMP - adjusted
    sign, ds, e0 = d.as_tuple()
    return Decimal((sign, ds, e0 + e))


def reference_accepts(validator, text: str) -> bool:
    """Whether the JSON text ``text`` is valid under ``validator`` (numbers exact)."""
    with localcontext() as ctx:
        ctx.prec = 4 * EXPONENT_CLAMP
        return validator.is_valid(json.loads(text, parse_float=exact_number))


def accepts_tokens(compiled, vocab, text: str) -> bool:
    """Token by token (the tokenizer's own encoding), ending accepting with EOS allowed."""
    ids = vocab.encode(text)
    m = Matcher(compiled)
    if m.accept_tokens(ids) != len(ids) or not m.is_accepting():
        return False
    assert all(m.is_allowed(e) for e in vocab.eos_token_ids), text
    return True


def accepts_bytes(compiled, text: str) -> bool:
    m = Matcher(compiled)
    return m.accept_bytes(text.encode("utf-8")) and m.is_accepting()


def mismatches(schema, instances, vocab, cls=D2020, reference_schema=None, **options):
    """[(text, reference, by tokens, by bytes)] wherever one of ours differs from the reference."""
    compiled = automask.compile(Grammar.from_json_schema(schema, **options), vocab)
    ref = reference_validator(schema if reference_schema is None else reference_schema, cls)
    out = []
    for x in instances:
        text = x if isinstance(x, RawText) else dumps(x)
        want = reference_accepts(ref, text)
        by_tokens = accepts_tokens(compiled, vocab, text)
        by_bytes = accepts_bytes(compiled, text)
        if not want == by_tokens == by_bytes:
            out.append((text, want, by_tokens, by_bytes))
    return out


class RawText(str):
    """An instance given as JSON text (not re-serialized)."""
