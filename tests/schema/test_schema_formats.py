"""``format`` nodes: inline tables (fast tier), oracle-checked properties, and the JSON Schema Test
Suite's optional/format cases (data tier, skipped when ../shared/data is absent).
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import shutil
import subprocess
import uuid
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import SHARED_DATA

from automask.regex import nodes as rx
from automask.schema.formats import FORMATS, format_node

SUITE = (SHARED_DATA / "json-schema-test-suite" / "tests" / "draft2020-12" / "optional" / "format")
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _m(name: str, s: str) -> bool:
    return rx.matches(format_node(name), s.encode("utf-8"))


# --------------------------------------------------------------------------- inline tables

LONG_LABEL = "a" * 63
TABLE: dict[str, tuple[list[str], list[str]]] = {
    "date": (
        ["2024-02-29", "2000-02-29", "0000-02-29", "1600-02-29", "2023-02-28", "1999-12-31",
         "0001-01-01", "2024-04-30", "9999-12-31", "1996-02-29", "2400-02-29"],
        ["2023-02-29", "1900-02-29", "2100-02-29", "2024-02-30", "2024-04-31", "2024-13-01",
         "2024-00-10", "2024-01-00", "24-01-01", "2024-1-01", "2024/01/01", "", "2024-01-01T",
         "2024-06-31", "2024-11-31"],
    ),
    "time": (
        ["00:00:00Z", "23:59:59z", "12:34:56.789+05:30", "23:59:60Z", "23:59:60.5Z",
         "00:59:60+01:00", "22:59:60-01:00", "23:59:60+00:00", "11:59:60-12:00", "00:00:60+00:01",
         "23:58:60-00:01", "10:00:00-00:00"],
        ["24:00:00Z", "12:60:00Z", "12:00:61Z", "23:59:60+01:00", "22:59:60Z", "12:00:00",
         "12:00:00+1:00", "12:00:00+24:00", "12:00:00.Z", "12:00Z", "T12:00:00Z", "12:00:00 Z",
         "23:59:60-00:01", "00:00:60-00:01"],
    ),
    "date-time": (
        ["2024-02-29T12:00:00Z", "1985-04-12t23:20:50.52z", "1996-12-19T16:39:57-08:00",
         "1990-12-31T23:59:60Z", "1990-12-31T15:59:60-08:00"],
        ["2023-02-29T12:00:00Z", "2024-02-29 12:00:00Z", "2024-02-29T12:00:00",
         "1990-12-31T23:59:60+01:00", "2024-02-29", "12:00:00Z"],
    ),
    "duration": (
        ["P1Y", "P1M", "P1D", "P1W", "PT1H", "PT1M", "PT1S", "P1Y2M3DT4H5M6S", "P1M2D", "PT1H2M",
         "PT1M2S", "P0D", "P12W"],
        ["P", "PT", "P1Y2D", "PT1H2S", "P1W2D", "P1.5D", "P1D1Y", "PT1D", "1D", "p1d", "P1DT",
         "P-1D", "P1S", "PT1Y"],
    ),
    "email": (
        ["a@b", "a.b@example.com", "x!#$%&'*+-/=?^_`{|}~@ex.org", '"a b"@c.d', r'"a\"b"@c.d',
         '""@c.d', "a@[1.2.3.4]", "a@[001.002.003.255]", "a@[IPv6:::1]", "a@[IPv6:1:2:3:4:5:6:7:8]",
         "a@[IPv6:1::2:3:4:5:6]", "a@[IPv6:::ffff:1.2.3.4]", "a@[IPv6:1:2:3:4:5:6:1.2.3.4]",
         "a@sub-domain.x1", "a@1.2.3.4"],
        ["a", "@b", "a@", "a..b@c", ".a@c", "a.@c", "a@-b", "a@b-", "a@b..c", "a b@c", '"a"b@c',
         "a@[1.2.3.256]", "a@[1.2.3]", "a@[IPv6:1:2:3:4:5:6:7::]", "a@[IPv6:1::2:3:4:5:6:7]",
         "a@[::1]", "a@[IPv7:::1]", 'a"@b', "é@b.c", "a@b_c", '"a\x7f"@b'],
    ),
    "hostname": (
        ["a", "a.b", "a-b.c", "a--b.c", "abc-d.e", "123", "x" * 63, f"{LONG_LABEL}.{LONG_LABEL}",
         ".".join([LONG_LABEL] * 3 + ["a" * 61]), "A.B-C.D", "ab-c"],
        ["", ".", "a.", ".a", "-a", "a-", "a..b", "a_b", "a" * 64, "ab--c", "xn--bcher-kva",
         ".".join([LONG_LABEL] * 3 + ["a" * 62]), "é.com", "a b", "a.b.", "aa--"],
    ),
    "ipv4": (
        ["0.0.0.0", "255.255.255.255", "1.2.3.4", "10.0.0.10", "199.249.250.200"],
        ["256.0.0.0", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.04", "1..2.3", "1.2.3.-4", "a.b.c.d",
         " 1.2.3.4", "1.2.3.4 ", "00.0.0.0"],
    ),
    "ipv6": (
        ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1::8",
         "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "::ffff:255.255.255.255", "ABCD:ef01::", "0:0::0:0",
         "1:2:3:4:5::1.2.3.4"],
        [":", ":::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1::2::3", "12345::", "g::", "::1.2.3",
         "1:2:3:4:5:6:7:1.2.3.4", "1:2:3:4:5:6::1.2.3.4", "::01.2.3.4", "[::1]", "::1%eth0",
         "1:", ":1", "1:::2"],
    ),
    "uuid": (
        ["00000000-0000-0000-0000-000000000000", "123e4567-E89B-12d3-a456-426614174000"],
        ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
         "{123e4567-e89b-12d3-a456-426614174000}", "123e4567-e89b-12d3-a456-42661417400g"],
    ),
    "uri": (
        ["http://a", "a:", "a+b-c.d:x", "urn:isbn:0451450523", "http://u:p@h:8080/p/a/t/h?q#f",
         "http://[v1.fe]/", "http://[::1]:80", "file:///etc/hosts", "mailto:a@b", "x:/a//b",
         "http://h/%20", "http://h?#", "s://@:"],
        ["", "a", "/a", "1a:b", "a b:c", "http://h/ p", "http://h/%2", "http://h/%zz", "http://h#a#b",
         "http://[::1", "http://h:80a", "http://é", "http://h/<>", "http://[1::2::3]/", "a:\\b"],
    ),
    "uri-reference": (
        ["", "a", "/a", "//h", "?q", "#f", "./a:b", "a/b:c", "http://h", "../x?y#z", "%41"],
        ["a:b:c d", "1:x", ":x", "//h:x", "a b", "\\", "#a#b", "/%"],
    ),
    "iri": (
        ["http://ƒøø.ßår/?∂éœ=πîx#πîüx", "http://a", "urn:é", "x:/é/ü?\ue000#ô", "s://[::1]/é",
         "http://h/%C3%A9"],
        ["", "é", "/a", "http://h/ p", "http://h#\ue000", "http://h/\ufffe", "http://[é]/",
         "é:x", "http://h/%zz", "\\\\WINDOWS\\fileshare"],
    ),
    "iri-reference": (
        ["", "é", "/é/ü", "?ô", "#ƒrägmênt", "//é.ü/x", "http://ƒøø.ßår/?∂éœ=πîx#πîüx",
         "?\ue000"],
        ["\\\\WINDOWS\\filëßåré", "#ƒräg\\mênt", "é ü", "#\ue000", "http://[é]/",
         "/\ufffe"],
    ),
    "uri-template": (
        ["", "a", "{a}", "{+a}", "{#a,b}", "{a*}", "{a:1}", "{a:9999}", "{a.b_c}", "{%41b}",
         "x{a}y{b}", "a'b", "{=a}", "{|a}", "{,a}", "é", "\U000e1000"],
        ["{", "}", "{}", "{a", "a}", "{a,}", "{,}", "{a:0}", "{a:10000}", "{a:01}", "{a..b}",
         "{.a.}", "{a b}", "a b", "<", "\x7f", "{++a}", "{a*:1}", "\ufffe", "%4"],
    ),
    "json-pointer": (
        ["", "/", "//", "/a~0b~1c", "/ ", "/é😀", "/a/-", "/~01"],
        ["a", "#", "/~", "/~2", "/a~", "#/a", "~0"],
    ),
    "relative-json-pointer": (
        ["0", "1", "10#", "0/a", "2/a/b", "0#", "1+1/a", "1-0", "3-2/x~0", "0//"],
        ["", "-1", "01", "0##", "#", "/a", "0a", "1+#", "0+1#", "0/~2", "1+01/a", "+1"],
    ),
    "regex": (
        ["", "a", "^a$", "[a-z]+", "(a|b)*", "a{2,3}?", r"\d+\.\d*", "((a))", "(?:x)", "a|",
         "()*", r"[\]\-]", "[^a]", r"\u0041", r"\x4a", "é", r"\bword\b", "x{10,20}", "x{5,1000}",
         "x{3}", "x{0,}", "[.*+]", r"\/", "((()))", "a.b", "[a-cx-z0-9_]", r"^\s*$", "[b-b]",
         r"[\b\-]", "x{7,7}", "x{19,19}", "x{9,10}"],
        ["(", ")", "[", "]", "{", "}", "a**", "*a", "[]", "[^]", "a{3,2}", "x{21,20}", r"\1",
         r"\q", "^*", r"\b+", "(?=a)", "(?<n>a)", "(?P<n>a)", "[z-a]", "[a-Z]", "a{,3}",
         "((((a))))", r"\-", "[a-]", "[-a]", "[&&]", "a*+", r"\0", "x{01}", "x{10000}", r"\u41",
         "(?i)a", r"\p{L}", "[[a]]", "a{1,2", r"\c", "\\"],
    ),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_format_table(name):
    good, bad = TABLE[name]
    for s in good:
        assert _m(name, s), (name, s)
    for s in bad:
        assert not _m(name, s), (name, s)


def test_every_format_has_a_table():
    assert set(TABLE) == set(FORMATS)


@pytest.mark.parametrize("name", ["idn-email", "idn-hostname", "unknown", "Date", ""])
def test_unsupported_formats_are_none(name):
    assert format_node(name) is None


def test_nodes_are_cached():
    for name in FORMATS:
        assert format_node(name) is format_node(name)


# --------------------------------------------------------------------------- oracle properties

REGEX_CHARS = "ab()[]{}|*+?^$\\.-,0129:dwub&/é"


@SETTINGS
@given(s=st.text(REGEX_CHARS, max_size=12))
def test_regex_format_accepts_only_what_python_compiles(s):
    """Python's ``re`` is what ``jsonschema`` checks ``format: regex`` with."""
    if not _m("regex", s):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a FutureWarning (a nested set ahead) counts too
        re.compile(s)


def _random_matches(node: rx.Node, rng: random.Random, n: int, most: int = 24) -> list[str]:
    """``n`` strings of ``node`` (UTF-8 text), drawn by random byte steps that stay live."""
    out: list[str] = []
    while len(out) < n:
        cur, data = node, b""
        while len(data) < most and not (cur.nullable and rng.random() < 0.15):
            starts = [lo for lo, _ in rx.class_runs(rx.class_starts(cur))]
            steps = [(b, d) for b in starts if (d := rx.derive(cur, b)) is not rx.EMPTY
                     and rx.is_live(d)]
            if not steps:
                break
            byte, cur = rng.choice(steps)
            data += bytes([byte])
        if cur.nullable:
            try:
                out.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                continue
    return out


def test_regex_format_strings_compile_in_python_and_ecma262():
    """Random strings of the node compile with Python's ``re`` and, where Node.js is
    installed, as ECMA-262 patterns with and without the ``u`` flag."""
    samples = _random_matches(format_node("regex"), random.Random(5), 300)
    assert len(set(samples)) > 200  # the walk reaches groups, classes, counts
    for s in samples:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            re.compile(s)
    node = shutil.which("node")
    if node is None:
        return
    script = ("const xs = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];"
              "for (const x of xs) { for (const f of ['', 'u']) {"
              " try { new RegExp(x, f); } catch (e) { bad.push([x, f]); } } }"
              "console.log(JSON.stringify(bad));")
    done = subprocess.run([node, "-e", script], input=json.dumps(samples), text=True,
                          capture_output=True, timeout=60, check=True)
    assert json.loads(done.stdout) == []


@SETTINGS
@given(parts=st.lists(st.integers(0, 300).map(str) | st.sampled_from(["00", "01", "a", ""]),
                      min_size=3, max_size=5))
def test_ipv4_matches_ipaddress(parts):
    s = ".".join(parts)
    try:
        ipaddress.IPv4Address(s)
        want = True
    except ValueError:
        want = False
    assert _m("ipv4", s) == want, s


@st.composite
def ipv6_like(draw) -> str:
    group = st.text("0123456789abcdefABCDEF", min_size=0, max_size=5)
    groups = draw(st.lists(group, min_size=0, max_size=9))
    s = ":".join(groups)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(s)))
        s = s[:at] + "::" + s[at:]
    if draw(st.booleans()):
        s += draw(st.sampled_from([":", ""])) + ".".join(
            draw(st.lists(st.integers(0, 260).map(str) | st.just("01"), min_size=3, max_size=5)))
    return s


@SETTINGS
@given(s=ipv6_like())
def test_ipv6_matches_ipaddress(s):
    try:
        ipaddress.IPv6Address(s)
        want = True
    except ValueError:
        want = False
    assert _m("ipv6", s) == want, s


def _date_ok(s: str) -> bool:
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", s)
    if not m:
        return False
    y, mo, d = map(int, m.groups())
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return 1 <= mo <= 12 and 1 <= d <= days[mo - 1]


@SETTINGS
@given(y=st.integers(0, 9999), mo=st.integers(0, 13), d=st.integers(0, 32))
def test_date_matches_calendar(y, mo, d):
    s = f"{y:04d}-{mo:02d}-{d:02d}"
    assert _m("date", s) == _date_ok(s), s


def test_every_leap_year_of_four_centuries():
    for y in range(2000, 2400):
        s = f"{y:04d}-02-29"
        assert _m("date", s) == _date_ok(s), s


@SETTINGS
@given(hh=st.integers(0, 24), mm=st.integers(0, 60), ss=st.sampled_from([0, 59, 60, 61]),
       sign=st.sampled_from("+-"), oh=st.integers(0, 24), om=st.integers(0, 60),
       frac=st.sampled_from(["", ".5", ".123456"]))
def test_time_leap_second_rule(hh, mm, ss, sign, oh, om, frac):
    s = f"{hh:02d}:{mm:02d}:{ss:02d}{frac}{sign}{oh:02d}:{om:02d}"
    ok = hh < 24 and mm < 60 and oh < 24 and om < 60 and ss <= 60
    if ok and ss == 60:
        offset = (oh * 60 + om) * (1 if sign == "+" else -1)
        ok = (hh * 60 + mm - offset) % 1440 == 23 * 60 + 59
    assert _m("time", s) == ok, s


@SETTINGS
@given(hh=st.integers(0, 23), mm=st.integers(0, 59), ss=st.sampled_from([0, 59, 60]),
       offset=st.sampled_from(["Z", "+00:00", "-08:00", "+01:00"]),
       frac=st.sampled_from(["", ".5"]))
def test_without_leap_seconds_is_the_ordinary_times(hh, mm, ss, offset, frac):
    """``leap_seconds=False`` (``strict``) is the full node minus exactly the ``:60`` times."""
    t = f"{hh:02d}:{mm:02d}:{ss:02d}{frac}{offset}"
    for name, s in (("time", t), ("date-time", "1998-12-31T" + t)):
        plain = rx.matches(format_node(name, leap_seconds=False), s.encode())
        assert plain == (_m(name, s) and ss != 60), s


def test_leap_second_offsets_exhaustively_for_some_hours():
    for hh in (0, 11, 23):
        for mm in range(60):
            local = hh * 60 + mm
            plus, minus = (local + 1) % 1440, (23 * 60 + 59 - local) % 1440
            assert _m("time", f"{hh:02d}:{mm:02d}:60+{plus // 60:02d}:{plus % 60:02d}")
            assert _m("time", f"{hh:02d}:{mm:02d}:60-{minus // 60:02d}:{minus % 60:02d}")
            wrong = (plus + 1) % 1440
            assert not _m("time", f"{hh:02d}:{mm:02d}:60+{wrong // 60:02d}:{wrong % 60:02d}")


def _hostname_ok(s: str) -> bool:
    labels = s.split(".")
    return 0 < len(s) <= 253 and all(
        re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", lab) and lab[2:4] != "--"
        for lab in labels)


@SETTINGS
@given(labels=st.lists(st.text("ab0-.", max_size=6) | st.integers(60, 66).map(lambda n: "a" * n),
                       min_size=1, max_size=5), pad=st.integers(0, 5))
def test_hostname_matches_oracle(labels, pad):
    s = ".".join(labels)
    if pad:  # reach the 253 total limit
        s = ".".join(["b" * 63] * pad) + "." + s
    assert _m("hostname", s) == _hostname_ok(s), s


@SETTINGS
@given(parts=st.lists(st.sampled_from(["/", "~", "~0", "~1", "a", "é", "\x00", "#"]), max_size=8))
def test_json_pointer_matches_oracle(parts):
    s = "".join(parts)
    ok = (s == "" or s.startswith("/")) and re.fullmatch(r"(?:[^~]|~[01])*", s) is not None
    assert _m("json-pointer", s) == ok, s


@SETTINGS
@given(u=st.uuids(), upper=st.booleans())
def test_uuid_roundtrip(u: uuid.UUID, upper):
    s = str(u).upper() if upper else str(u)
    assert _m("uuid", s) and not _m("uuid", s.replace("-", ""))


# --------------------------------------------------------------------------- the test suite

A_LABEL_REASON = ("xn-- A-labels are rejected: validating one needs Punycode decoding and the "
                  "IDNA2008 tables, so none is accepted rather than some invalid ones")
# Cases where this module deliberately disagrees with the suite (all sound-side: valid → False).
DISAGREE: dict[tuple[str, str], str] = {
    ("hostname", s): A_LABEL_REASON for s in (
        "xn--9n2bp8q.xn--9t4b11yi5a", "xn--zca29lwxobi7a", "xn--qmbc", "xn--ll-0ea", "xn--wva3je",
        "xn--4dbc5h", "xn--4dbc8h", "xn--k8j5u", "xn--bck0j", "xn--vek778f", "xn--ngba1o",
        "xn--0-gyc", "xn--11b2ezcw70k", "xn--11b2ezcs70k", "xn--ngba5hb2804a")
} | {("iri", "http://[V1.fe]"): "the v of an IPvFuture is accepted as written (lower case), "
                                  "the one spelling every reader of the ABNF takes"}


def _suite_cases():
    if not SUITE.is_dir():
        return [pytest.param(None, None, None, id="suite-missing", marks=pytest.mark.data)]
    out = []
    for name in sorted(FORMATS):
        for group in json.loads((SUITE / f"{name}.json").read_text(encoding="utf-8")):
            for i, case in enumerate(group["tests"]):
                if not isinstance(case["data"], str):
                    continue  # non-strings are the type layer's business
                marks = [pytest.mark.data]
                reason = DISAGREE.get((name, case["data"]))
                if reason:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                out.append(pytest.param(name, case["data"], case["valid"], marks=marks,
                                        id=f"{name}-{i}-{case['description'][:40]}"))
    return out


@pytest.mark.parametrize("name, data, valid", _suite_cases())
def test_suite(shared_data, name, data, valid):
    assert _m(name, data) == valid, (name, data)


@pytest.mark.data
def test_suite_disagreements_are_all_listed(shared_data):
    """Agreement per format; every disagreement must be one of the deliberate ones."""
    found = set()
    for name in sorted(FORMATS):
        for group in json.loads((SUITE / f"{name}.json").read_text(encoding="utf-8")):
            for case in group["tests"]:
                data = case["data"]
                if isinstance(data, str) and _m(name, data) != case["valid"]:
                    found.add((name, data))
    assert found == set(DISAGREE)
