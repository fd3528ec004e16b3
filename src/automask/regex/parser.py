"""Regex patterns (JSON Schema ``pattern`` / ECMA-262, and the common Python ``re`` subset)
compiled to byte-level nodes.

Constraints arrive as text regexes but the engine works on UTF-8 bytes, so the
parser turns a pattern into a :mod:`automask.regex.nodes` node matching exactly
the UTF-8 encodings of the strings the pattern matches *as a whole*
(``re.fullmatch``-like). Counted repetition becomes one ``repeat`` node, never
copies, so ``[^"]{0,500}`` costs the same to build as ``[^"]*``.

Semantics follow ECMA-262 (with the ``u`` flag) where it and Python differ:

* ``\\d`` = ``[0-9]``, ``\\w`` = ``[A-Za-z0-9_]`` (ASCII, as Python's ``re.ASCII``);
  ``\\s`` = ECMA WhiteSpace + LineTerminator (``[\\t\\n\\v\\f\\r \\u00a0\\u1680
  \\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]``), unlike Python's
  ``\\s`` (which has ``\\x1c-\\x1f``, ``\\x85`` and lacks ``\\ufeff``).
* ``.`` = any code point except ``\\n \\r \\u2028 \\u2029`` (Python excludes only ``\\n``).
* ``[]`` matches nothing and ``[^]`` matches any code point (Python reads ``]``
  first in a class as a literal).
* ``{`` that does not start ``{m}``, ``{m,}`` or ``{m,n}`` is a literal (ECMA
  Annex B and Python agree); ``{,n}`` and ``{,}`` are rejected because Python
  reads them as quantifiers and ECMA as literal text.
* ``\\uXXXX``, ``\\u{X…}``, ``\\xNN``, ``\\cX``, ``\\0`` as in ECMA; a ``\\uD83D\\uDE00``
  surrogate pair is one code point. Python's ``\\UXXXXXXXX``, ``\\A`` (= ``^``) and
  ``\\Z`` / ``\\z`` (= ``$``) are accepted too. Any other escaped ASCII letter or
  digit is an error; any other escaped character stands for itself.
* A lone surrogate has no UTF-8 form: as a literal it is an error, inside a
  class it is dropped from the set.
* ``^`` / ``$`` (and ``\\A`` / ``\\Z``) are accepted only where they mark an edge
  of the whole match: at the start / end of a top-level alternative, or of an
  alternative of a group sitting at that edge (``(^a|b)c``). There they are
  ignored by :func:`parse_regex` (full-match semantics already) and honoured by
  :func:`parse_regex_search`. Elsewhere (``a^b``, ``(^a)*``) they raise
  :class:`UnsupportedFeature`.
* Named groups are ``(?<name>…)`` (ECMA) and ``(?P<name>…)`` (Python); lazy
  quantifiers match the same language as greedy ones.

Unsupported (raise :class:`UnsupportedFeature` naming the feature and its
column): lookaround, backreferences, word boundaries, inline flags and
comments, atomic groups, conditionals, possessive quantifiers, octal escapes,
``\\p{…}`` properties. Malformed patterns raise :class:`GrammarError`; bounds
above :data:`MAX_REPEAT` and nesting deeper than :data:`MAX_DEPTH` raise
:class:`LimitExceeded`. Columns are 1-based code-point offsets.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded, UnsupportedFeature
from automask.regex import nodes as rx
from automask.regex import utf8

__all__ = ["MAX_DEPTH", "MAX_REPEAT", "alternation", "literal_trie", "parse_regex",
           "parse_regex_search"]

MAX_REPEAT = 100_000
"""Largest bound accepted in ``{m,n}``: past it the automata stop being cheap."""

MAX_DEPTH = 64
"""Deepest group nesting accepted; keeps the recursive descent far from Python's limit."""

Ranges = tuple[tuple[int, int], ...]

_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Ranges = (
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
)
_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}

_BRACES = re.compile(r"\{([0-9]+)(?:(,)([0-9]*))?\}")
_AMBIGUOUS_BRACES = re.compile(r"\{,[0-9]*\}")
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_HEX8 = re.compile(r"[0-9A-Fa-f]{8}")
_HEX_BRACED = re.compile(r"\{([0-9A-Fa-f]+)\}")
_FLAG_CHARS = set("aiLmsux-")

# The AST is small tuples so that anchors can be checked against their context
# before anything is built:
#   ("n", node)            a leaf already compiled to bytes
#   ("^", pos) / ("$", pos) an anchor and its offset
#   ("seq", items) / ("alt", branches) / ("rep", child, lo, hi)
Ast = tuple

# Compiled parts are keyed by (anchored at start, anchored at end).
Key = tuple[bool, bool]
_PLAIN: Key = (False, False)


# --------------------------------------------------------------------------- public API


def parse_regex(pattern: str, *, anchored_ends_only: bool = True) -> rx.Node:
    """The byte node matching the UTF-8 strings that ``pattern`` matches as a whole.

    With ``anchored_ends_only`` (the default) ``^``/``$`` are accepted at the
    edges and ignored; with it off, every anchor is rejected, for callers (such
    as grammar terminals) where an edge anchor cannot be honoured by ignoring it.
    """
    return rx.known_text(rx.alt_of(node for _, node in _compile_pattern(pattern,
                                                                       anchored_ends_only)))


def parse_regex_search(pattern: str) -> rx.Node:
    """The byte node for JSON Schema's unanchored ``pattern``: a match anywhere suffices.

    Equivalent to ``[\\s\\S]*?(pattern)[\\s\\S]*?``, except that a ``^`` / ``$`` on a
    path through the pattern pins that side of the match to the string's edge.
    """
    pad = rx.any_text()
    return rx.known_text(rx.alt_of(
        _cat(*(([] if start else [pad]) + [_free_edges(node, start, end)]
               + ([] if end else [pad])))
        for (start, end), node in _compile_pattern(pattern, True)
    ))


def _free_edges(node: rx.Node, start: bool, end: bool) -> rx.Node:
    """``node`` with a count on an unpinned edge cut to its minimum: beside the pad,
    ``.*x{1,255}`` matches what ``.*x`` does (the pad takes the rest), and its
    derivatives stay one node instead of an alternation of every count so far."""
    parts = []
    while node.kind == rx.K_CONCAT:
        parts.append(node.a)
        node = node.b
    parts.append(node)
    if not end:
        parts[-1] = _minimum(parts[-1])
    if not start:
        parts[0] = _minimum(parts[0])
    return _cat(*parts)


def _minimum(node: rx.Node) -> rx.Node:
    """``x{m,n}`` as ``x{m}`` (any other node as it is)."""
    return rx.repeat(node.a, node.lo, node.lo) if node.kind == rx.K_REPEAT else node


# --------------------------------------------------------------------------- helpers


def _err(message: str, pos: int) -> GrammarError:
    return GrammarError(message, location=f"col {pos + 1}")


def _unsupported(feature: str, pos: int) -> UnsupportedFeature:
    return UnsupportedFeature(f"{feature} is not supported", location=f"col {pos + 1}")


@functools.lru_cache(maxsize=4096)
def _ranges_node(ranges: Ranges) -> rx.Node:
    """Class nodes are cached: the same few classes recur in every schema."""
    return utf8.ranges_to_node(ranges)


@functools.lru_cache(maxsize=1)
def _dot() -> rx.Node:
    return _ranges_node(tuple(utf8.negate_ranges(_LINE_TERMINATORS)))


def _cat(*parts: rx.Node) -> rx.Node:
    """Concatenate, flattening the chains of all but the last part first.

    ``rx.concat`` re-nests a left operand that is itself a chain recursively, so
    a long literal followed by anything would recurse once per byte. The last
    part is the right end already and is kept whole, which keeps building a
    sequence linear in its length.
    """
    flat: list[rx.Node] = []
    for part in parts[:-1]:
        while part.kind == rx.K_CONCAT:
            flat.append(part.a)
            part = part.b
        flat.append(part)
    return rx.concat(*flat, *parts[-1:])


TRIE_BRANCHES = 256
"""Alternations of more branches than this are built as a prefix tree (:func:`alternation`)."""


def literal_trie(texts: list[bytes]) -> rx.Node:
    """The byte strings ``texts`` as a prefix tree: ``a(bc|d)|x`` rather than ``abc|ad|x``.

    The same language as their alternation, but a derivative by one byte is the one
    branch under that byte, where the alternation's is a pass over every string: the
    first mask of 50,000 words took 5.3 s of CPU as an alternation, 0.5 s as a tree.
    """
    texts = sorted(set(texts))
    return _prefix_tree(texts, lambda t, d: rx.byte_set(1 << t[d]),
                        lambda t, d: rx.literal(t[d:]),
                        lambda t, d: None if t[d] == 255 else t[:d] + bytes([t[d] + 1]))


def alternation(nodes: list[rx.Node]) -> rx.Node:
    """``rx.alt_of(nodes)``, a wide one as a prefix tree: of bytes when every branch is a
    literal (:func:`literal_trie`), else of the branches' concatenated parts
    (``[0-9]a|[0-9]b|x`` as ``[0-9](a|b)|x``), so that its derivatives pass over the
    branches that share a first part once, not over every branch."""
    if len(nodes) <= TRIE_BRANCHES:
        return rx.alt_of(nodes)
    texts = [_literal_bytes(n) for n in nodes]
    if all(t is not None for t in texts):
        return literal_trie(texts)  # type: ignore[arg-type]  # (none is None)
    return chain_trie([concatenated_parts(n) for n in nodes])


def concatenated_parts(node: rx.Node) -> tuple[rx.Node, ...]:
    """The parts ``node`` concatenates, in order (itself alone if it is no concatenation)."""
    parts = []
    while node.kind == rx.K_CONCAT:
        parts.append(node.a)
        node = node.b
    if node is not rx.EPS:
        parts.append(node)
    return tuple(parts)


def chain_trie(chains: Iterable[tuple[rx.Node, ...]]) -> rx.Node:
    """The alternation of the concatenations ``chains`` (each given by its parts) as a
    prefix tree over the parts: :func:`alternation`'s tree, for callers that have the
    parts (a wide numeric enum's spellings) without making each chain first."""
    by_key = {tuple(p.uid for p in parts): parts for parts in chains}
    keys = sorted(by_key)
    return _prefix_tree(keys, lambda k, d: by_key[k][d],
                        lambda k, d: rx.concat(*by_key[k][d:]),
                        lambda k, d: k[:d] + (k[d] + 1,))


def _prefix_tree(keys: list, part, rest, above) -> rx.Node:
    """The alternation of the sequences ``keys`` (sorted, distinct) as a prefix tree.

    ``part(k, d)``: the node of the ``d``-th element of ``k``; ``rest(k, d)``: the node
    of ``k`` from its ``d``-th element on; ``above(k, d)``: the least sequence after every
    one that starts like ``k[:d + 1]`` (None: none). Built with a stack of our own
    (the sequences may be long), one frame per shared prefix.
    """
    # a frame: [lo, hi, depth, next, branches, key that led here]: keys[lo:hi] share their
    # first ``depth`` elements; the branches so far stand for keys[lo:next]
    stack: list[list] = [[0, len(keys), 0, 0, [], None]]
    while True:
        check_time()
        frame = stack[-1]
        lo, hi, depth, i, branches, _ = frame
        if i == lo and i < hi and len(keys[i]) == depth:  # (the shortest sorts first)
            branches.append(rx.EPS)
            i += 1
        if i < hi:
            bound = above(keys[i], depth)
            j = hi if bound is None else bisect.bisect_left(keys, bound, i, hi)
            frame[3] = j
            if j - i == 1:  # one sequence below: the rest of it
                branches.append(rest(keys[i], depth))
            else:
                stack.append([i, j, depth + 1, i, [], keys[i]])
            continue
        node = rx.alt_of(branches)
        stack.pop()
        if not stack:
            return node
        stack[-1][4].append(rx.concat(part(frame[5], depth - 1), node))


def _literal_bytes(node: rx.Node) -> bytes | None:
    """The one byte string ``node`` matches, if it is a chain of single bytes."""
    out = bytearray()
    while node.kind == rx.K_CONCAT:
        if node.a.kind != rx.K_BYTES or node.a.bits & (node.a.bits - 1):
            return None
        out.append(node.a.bits.bit_length() - 1)
        node = node.b
    if node is rx.EPS:
        return bytes(out)
    if node.kind != rx.K_BYTES or node.bits & (node.bits - 1):
        return None
    out.append(node.bits.bit_length() - 1)
    return bytes(out)


def _is_surrogate(cp: int) -> bool:
    return 0xD800 <= cp <= 0xDFFF


def _show(cp: int) -> str:
    return chr(cp) if 0x20 < cp < 0x7F else f"U+{cp:04X}"


# --------------------------------------------------------------------------- parser

Escape = int | Ranges


class _Parser:
    """Recursive descent over the pattern text, producing the tuple AST."""

    def __init__(self, pattern: str):
        self.p = pattern
        self.n = len(pattern)
        self.i = 0
        self.depth = 0
        self.names: set[str] = set()

    def parse(self) -> Ast:
        ast = self.alternation()
        if self.i < self.n:  # only an unmatched ')' stops the top level early
            raise _err("unbalanced ')'", self.i)
        return ast

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < self.n else ""

    def alternation(self) -> Ast:
        branches = [self.sequence()]
        while self.peek() == "|":
            check_time()  # (a count: the parse of a long pattern stops at the time limit)
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", tuple(branches))

    def sequence(self) -> Ast:
        items: list[Ast] = []
        while self.i < self.n and self.p[self.i] not in "|)":
            check_time()
            start = self.i
            items.append(self.quantified(self.atom(), start))
        return items[0] if len(items) == 1 else ("seq", tuple(items))

    # ---------------------------------------------------------------- atoms

    def atom(self) -> Ast:
        start = self.i
        c = self.p[start]
        if c == "(":
            return self.group()
        if c == "[":
            return ("n", self.char_class())
        if c == ".":
            self.i += 1
            return ("n", _dot())
        if c in "^$":
            self.i += 1
            return (c, start)
        if c == "\\":
            return self.escape_atom()
        if c in "*+?" or (c == "{" and self.braces() is not None):
            raise _err(f"nothing to repeat before '{c}'", start)
        cp = self.literal_char()
        if _is_surrogate(cp):
            raise _err(f"lone surrogate {_show(cp)} has no UTF-8 form", start)
        return ("n", utf8.literal_text(chr(cp)))

    def literal_char(self) -> int:
        """One code point of pattern text; a surrogate pair in the str counts as one."""
        cp = ord(self.p[self.i])
        self.i += 1
        if 0xD800 <= cp <= 0xDBFF and self.i < self.n and 0xDC00 <= ord(self.p[self.i]) <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.p[self.i]) - 0xDC00)
            self.i += 1
        return cp

    def group(self) -> Ast:
        start = self.i
        self.i += 1
        if self.peek() == "?":
            self.group_prefix(start)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise LimitExceeded(f"regex groups nested deeper than {MAX_DEPTH}",
                                f"col {start + 1}")
        body = self.alternation()
        if self.peek() != ")":
            raise _err("missing ')' for this '('", start)
        self.i += 1
        self.depth -= 1
        return body

    def group_prefix(self, start: int) -> None:
        """Consume what follows ``(?``; only non-capturing and named groups pass."""
        p, j = self.p, self.i + 1
        head2 = p[j:j + 2]
        if p.startswith(":", j):
            self.i = j + 1
        elif p.startswith("=", j):
            raise _unsupported("lookahead '(?='", start)
        elif p.startswith("!", j):
            raise _unsupported("negative lookahead '(?!'", start)
        elif head2 == "<=":
            raise _unsupported("lookbehind '(?<='", start)
        elif head2 == "<!":
            raise _unsupported("negative lookbehind '(?<!'", start)
        elif head2 == "P=":
            raise _unsupported("backreference '(?P='", start)
        elif head2 == "P<":
            self.i = j + 2
            self.group_name(start)
        elif p.startswith("<", j):
            self.i = j + 1
            self.group_name(start)
        elif p.startswith(">", j):
            raise _unsupported("atomic group '(?>'", start)
        elif p.startswith("#", j):
            raise _unsupported("inline comment '(?#'", start)
        elif p.startswith("(", j):
            raise _unsupported("conditional group '(?('", start)
        elif j < self.n and p[j] in _FLAG_CHARS:
            end = j
            while end < self.n and p[end] in _FLAG_CHARS:
                end += 1
            raise _unsupported(f"inline flag group '(?{p[j:end]}'", start)
        else:
            raise _err(f"unknown group syntax '(?{p[j:j + 1]}'", start)

    def group_name(self, start: int) -> None:
        end = self.p.find(">", self.i)
        if end < 0:
            raise _err("unterminated group name", start)
        name = self.p[self.i:end]
        if not name or not name.replace("$", "_").isidentifier():
            raise _err(f"bad group name {name!r}", start)
        if name in self.names:
            raise _err(f"duplicate group name {name!r}", start)
        self.names.add(name)
        self.i = end + 1

    # ---------------------------------------------------------------- quantifiers

    def braces(self) -> tuple[int, int | None, int] | None:
        """Parse a ``{m,n}`` quantifier at the cursor without consuming it: (lo, hi, end)."""
        m = _BRACES.match(self.p, self.i)
        if m is None:
            if _AMBIGUOUS_BRACES.match(self.p, self.i):
                raise _err("'{,n}' is ambiguous (a quantifier in Python, text in ECMA)", self.i)
            return None
        lo_s, comma, hi_s = m.groups()
        col = self.i + 1
        if len(lo_s.lstrip("0")) > 7 or (hi_s and len(hi_s.lstrip("0")) > 7):
            raise LimitExceeded(f"regex repetition bound above {MAX_REPEAT}", f"col {col}")
        lo = int(lo_s)
        hi = lo if comma is None else (int(hi_s) if hi_s else None)
        if hi is not None and hi < lo:
            raise _err(f"repetition bounds out of order {{{lo},{hi}}}", self.i)
        if max(lo, hi or 0) > MAX_REPEAT:
            raise LimitExceeded(f"regex repetition bound above {MAX_REPEAT}", f"col {col}")
        return lo, hi, m.end()

    def quantified(self, atom: Ast, start: int) -> Ast:
        c = self.peek()
        qpos = self.i
        if c in ("*", "+", "?"):
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            self.i += 1
        elif c == "{":
            q = self.braces()
            if q is None:
                return atom
            lo, hi, self.i = q
        else:
            return atom
        if atom[0] in "^$" and atom[1] == start:
            raise _err("nothing to repeat: an anchor cannot be quantified", qpos)
        nxt = self.peek()
        if nxt == "?":
            self.i += 1  # lazy: same language
        elif nxt == "+":
            raise _unsupported("possessive quantifier", qpos)
        nxt = self.peek()
        if nxt in ("*", "+", "?") or (nxt == "{" and self.braces() is not None):
            raise _err("multiple repeat", self.i)
        return ("rep", atom, lo, hi)

    # ---------------------------------------------------------------- escapes

    def escape_atom(self) -> Ast:
        start = self.i
        self.i += 1
        c = self.peek()
        if not c:
            raise _err("pattern ends with a lone backslash", start)
        if c in "bB":
            raise _unsupported(f"word boundary '\\{c}'", start)
        if c == "A":
            self.i += 1
            return ("^", start)
        if c in "Zz":
            self.i += 1
            return ("$", start)
        if c in "123456789":
            raise _unsupported(f"backreference '\\{c}'", start)
        if c == "k":
            raise _unsupported("named backreference '\\k'", start)
        value = self.escape_common(start, in_class=False)
        if isinstance(value, tuple):
            return ("n", _ranges_node(value))
        if _is_surrogate(value):
            raise _err(f"lone surrogate {_show(value)} has no UTF-8 form", start)
        return ("n", utf8.literal_text(chr(value)))

    def escape_common(self, start: int, *, in_class: bool) -> Escape:
        """An escape valid both in and out of classes; the cursor is past the backslash."""
        p = self.p
        c = p[self.i]
        if c in "dDwWsS":
            self.i += 1
            ranges = _CLASS_ESCAPES[c.lower()]
            return tuple(utf8.negate_ranges(ranges)) if c.isupper() else ranges
        if c in _CONTROL_ESCAPES:
            self.i += 1
            return _CONTROL_ESCAPES[c]
        if c == "0":
            if self.peek(1) in tuple("0123456789"):
                raise _unsupported("octal escape", start)
            self.i += 1
            return 0
        if c in "123456789":
            raise _unsupported("octal escape" if in_class else "backreference", start)
        if c == "x":
            return self.hex_escape(_HEX2, start, "\\x needs 2 hex digits")
        if c == "U":
            cp = self.hex_escape(_HEX8, start, "\\U needs 8 hex digits")
            if cp > utf8.MAX_CODE_POINT:
                raise _err("code point above U+10FFFF", start)
            return cp
        if c == "u":
            return self.unicode_escape(start)
        if c == "c":
            letter = self.peek(1)
            if not (letter.isascii() and letter.isalpha()):
                raise _err("\\c must be followed by an ASCII letter", start)
            self.i += 2
            return ord(letter) % 32
        if c in "pP":
            raise _unsupported(f"Unicode property escape '\\{c}'", start)
        if c.isascii() and c.isalnum():
            raise _err(f"unknown escape '\\{c}'", start)
        return self.literal_char()

    def hex_escape(self, pattern: re.Pattern[str], start: int, message: str) -> int:
        m = pattern.match(self.p, self.i + 1)
        if m is None:
            raise _err(message, start)
        self.i = m.end()
        return int(m.group(), 16)

    def unicode_escape(self, start: int) -> int:
        m = _HEX_BRACED.match(self.p, self.i + 1)
        if m is not None:
            digits = m.group(1).lstrip("0") or "0"
            if len(digits) > 6 or int(digits, 16) > utf8.MAX_CODE_POINT:
                raise _err("code point above U+10FFFF", start)
            self.i = m.end()
            return int(digits, 16)
        cp = self.hex_escape(_HEX4, start, "\\u needs 4 hex digits or {hex}")
        if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
            low = _HEX4.match(self.p, self.i + 2)
            if low is not None and 0xDC00 <= int(low.group(), 16) <= 0xDFFF:
                self.i = low.end()
                cp = 0x10000 + ((cp - 0xD800) << 10) + (int(low.group(), 16) - 0xDC00)
        return cp

    # ---------------------------------------------------------------- classes

    def char_class(self) -> rx.Node:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if self.i >= self.n:
                raise _err("unterminated character class", start)
            if self.p[self.i] == "]":
                self.i += 1
                break
            check_time()
            atom_pos = self.i
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_atom()
                if isinstance(lo, tuple) or isinstance(hi, tuple):
                    raise _err("a class escape like \\d cannot bound a range", atom_pos)
                if lo > hi:
                    raise _err(f"range out of order {_show(lo)}-{_show(hi)}", atom_pos)
                ranges.append((lo, hi))
            elif isinstance(lo, tuple):
                ranges.extend(lo)
            else:
                ranges.append((lo, lo))
        if negate:
            ranges = utf8.negate_ranges(ranges)
        return _ranges_node(tuple(utf8.normalize_ranges(ranges)))

    def class_atom(self) -> Escape:
        if self.p[self.i] != "\\":
            return self.literal_char()
        start = self.i
        self.i += 1
        c = self.peek()
        if not c:
            raise _err("pattern ends with a lone backslash", start)
        if c == "b":  # backspace inside a class
            self.i += 1
            return 0x08
        if c == "B":
            raise _err("'\\B' is not allowed in a character class", start)
        return self.escape_common(start, in_class=True)


# --------------------------------------------------------------------------- compiler


class _Compiler:
    """AST → nodes, keyed by which edges each path is anchored to.

    Anchors are legal only at positions that start (end) the whole match, so
    a sequence's key is the union of its items' keys and no finer position
    tracking is needed.
    """

    def __init__(self, allow_anchors: bool):
        self.allow_anchors = allow_anchors

    def compile(self, ast: Ast, can_start: bool, can_end: bool) -> dict[Key, rx.Node]:
        check_time()
        kind = ast[0]
        if kind == "n":
            return {_PLAIN: ast[1]}
        if kind == "^" or kind == "$":
            return self.anchor(kind, ast[1], can_start if kind == "^" else can_end)
        if kind == "rep":
            child = self.compile(ast[1], False, False)
            return {_PLAIN: rx.repeat(child[_PLAIN], ast[2], ast[3])}
        if kind == "alt":
            collected: dict[Key, list[rx.Node]] = {}
            for branch in ast[1]:
                for key, node in self.compile(branch, can_start, can_end).items():
                    collected.setdefault(key, []).append(node)
            return {key: alternation(nodes) for key, nodes in collected.items()}
        return self.sequence(ast[1], can_start, can_end)

    def anchor(self, kind: str, pos: int, allowed: bool) -> dict[Key, rx.Node]:
        if not self.allow_anchors:
            raise _unsupported(f"'{kind}' anchor (with anchored_ends_only=False)", pos)
        if not allowed:
            edge = "start" if kind == "^" else "end"
            raise _unsupported(f"'{kind}' anchor that is not at the {edge} of the pattern", pos)
        return {(True, False): rx.EPS} if kind == "^" else {(False, True): rx.EPS}

    def sequence(self, items: tuple, can_start: bool, can_end: bool) -> dict[Key, rx.Node]:
        m = len(items)
        first_real = next((j for j, it in enumerate(items) if it[0] != "^"), m)
        last_real = next((j for j in range(m - 1, -1, -1) if items[j][0] != "$"), -1)
        suffix: dict[Key, rx.Node] = {_PLAIN: rx.EPS}
        for j in range(m - 1, -1, -1):
            part = self.compile(items[j], can_start and j <= first_real,
                                can_end and j >= last_real)
            if len(part) == 1 and len(suffix) == 1:  # the common case, no dict product
                (k1, n1), (k2, n2) = next(iter(part.items())), next(iter(suffix.items()))
                suffix = {(k1[0] or k2[0], k1[1] or k2[1]): _cat(n1, n2)}
                continue
            collected: dict[Key, list[rx.Node]] = {}
            for k1, n1 in part.items():
                for k2, n2 in suffix.items():
                    key = (k1[0] or k2[0], k1[1] or k2[1])
                    collected.setdefault(key, []).append(_cat(n1, n2))
            suffix = {key: rx.alt_of(nodes) for key, nodes in collected.items()}
        return suffix


@functools.lru_cache(maxsize=1024)
def _compile_pattern(pattern: str, allow_anchors: bool) -> tuple[tuple[Key, rx.Node], ...]:
    """Parse and compile once per pattern; nodes are immutable, so sharing is safe."""
    if not isinstance(pattern, str):
        raise TypeError(f"regex pattern must be str, not {type(pattern).__name__}")
    parser = _Parser(pattern)
    try:
        ast = parser.parse()
    except LimitExceeded as e:
        if e.location is None:  # a time limit: where reading had got to
            raise LimitExceeded(e.message, f"col {parser.i + 1}") from None
        raise
    parts = _Compiler(allow_anchors).compile(ast, True, True)
    return tuple(sorted(parts.items()))
