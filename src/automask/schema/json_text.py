"""JSON text as grammar pieces: whitespace, strings with escapes, literals, any value.

String constraints (pattern, length, format, enum) are regexes over the
*decoded* text; :data:`JSON_STRING_CODE` spells that text the way JSON writes
it, so the constraint and the escaping compose exactly. Escapes accepted:
the short forms (``\\" \\\\ \\/ \\b \\f \\n \\r \\t``) and ``\\uXXXX`` for control
characters, ``"`` and ``\\`` (what ``json.dumps`` writes); other characters
are written as themselves (UTF-8), never as ``\\u`` escapes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass

from automask.errors import GrammarError
from automask.grammar.ir import Choice, Expr, Ref, Repeat, Seq, Terminal, text
from automask.regex import nodes as rx
from automask.regex import utf8
from automask.regex.parser import (
    TRIE_BRANCHES,
    alternation,
    chain_trie,
    concatenated_parts,
    literal_trie,
)
from automask.schema.subschema import is_number


def _json_spellings() -> dict[int, list[bytes]]:
    def hex_forms(b: int) -> list[bytes]:
        lower = f"\\u{b:04x}".encode()
        upper = f"\\u{b:04X}".encode()
        return [lower] if lower == upper else [lower, upper]

    spellings: dict[int, list[bytes]] = {b: [bytes([b])] for b in range(0x20, 256)
                                         if b not in (0x22, 0x5C)}
    for b in range(0x20):
        spellings[b] = hex_forms(b)
    for b, short in zip(b"\b\f\n\r\t", b"bfnrt", strict=True):
        spellings[b].append(b"\\" + bytes([short]))
    spellings[0x22] = [b'\\"'] + hex_forms(0x22)
    spellings[0x5C] = [b"\\\\"] + hex_forms(0x5C)
    spellings[0x2F] = [b"/", b"\\/"]
    return spellings


JSON_STRING_CODE = rx.Code(_json_spellings(), "json")
ANY_CHAR = rx.any_char()
ANY_TEXT = rx.any_text()
QUOTE = rx.literal(b'"')


def string_node(content: rx.Node) -> rx.Node:
    """A JSON string literal whose decoded text matches ``content``."""
    return rx.concat(QUOTE, rx.encoded(content, JSON_STRING_CODE), QUOTE)


def literal_string_node(value: str, after: rx.Node = rx.EPS) -> rx.Node:
    """The JSON string ``value`` (with any escapes), then ``after``.

    A text that JSON spells only as itself (no quote, backslash, slash or control
    character: most keys and enum values) is one chain of bytes, ``after`` built
    in: its derivatives are its own suffixes, so stepping through a key makes
    no new nodes, and a chain joined to ``after`` later would be rebuilt.
    """
    spelled = only_spelling(value)
    if spelled is not None:
        return rx.literal(spelled, after)
    return rx.concat(string_node(utf8.literal_text(value)), after)


_KEYWORD_TEXTS = {None: b"null", True: b"true", False: b"false"}


def only_spelling(value) -> bytes | None:
    """The one JSON text of a scalar that has one: ``null``, the booleans, and a string
    JSON spells only as itself (see :func:`literal_string_node`); None for any other
    (a number: ``1`` is ``1.0`` too; a string with escapes)."""
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: literal_text reports it
            return None
        return None if data.translate(None, JSON_STRING_CODE.plain) else b'"%s"' % data
    if value is None or value is True or value is False:
        return _KEYWORD_TEXTS[value]
    return None


@functools.lru_cache(maxsize=4096)
def key_lexeme(name: str, ws: rx.Node, sep: rx.Node) -> rx.Node:
    """``ws "name" sep``: a declared key with its colon, one lexeme. Kept across schemas
    (by node identity: interning makes equal layouts the same nodes), since names recur
    (``name``, ``type``, ``description``) and made afresh a key is a node per byte."""
    return rx.concat(ws, literal_string_node(name, sep))


INTEGER_TEXT = r"-?(0|[1-9][0-9]*)"
NUMBER_TEXT = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"


@dataclass(frozen=True)
class Layout:
    """Where whitespace may go, and how much (always bounded).

    Every gap sits at the front of the lexeme after it (``ws ,``, ``ws :``,
    ``ws "key"``, ``ws }``, ``ws`` before each value), never at the end of the
    one before: a lexeme then ends at its last non-space byte, where nothing
    can extend it, so after ``":`` or ``,`` the parser holds one configuration
    (the next lexeme's start), not two (more whitespace, or the next lexeme),
    and a token such as `` "`` or `` {`` lies inside one lexeme instead of
    crossing from a whitespace tail into the next (a parser decision each).
    """

    ws: rx.Node          # before any value, key, comma, colon or closing bracket
    item_sep: rx.Node    # ws ,
    key_sep: rx.Node     # ws :

    @classmethod
    def make(cls, whitespace: str | int = "flexible", max_whitespace: int = 24) -> Layout:
        if whitespace == "flexible":
            ws = rx.repeat(rx.byte_set(sum(1 << b for b in b" \t\n\r")), 0, max_whitespace)
        elif whitespace == "compact":
            ws = rx.EPS
        elif isinstance(whitespace, int) and not isinstance(whitespace, bool) and whitespace >= 0:
            # A newline and indentation (any depth, bounded), or a single space.
            ws = rx.alt(rx.EPS, rx.literal(b" "),
                        rx.concat(rx.literal(b"\n"), rx.repeat(rx.literal(b" "), 0,
                                                               max(max_whitespace, 64))))
        else:
            raise GrammarError(f"whitespace must be 'flexible', 'compact' or an indent, "
                               f"not {whitespace!r}")
        return cls(ws, rx.concat(ws, rx.literal(b",")), rx.concat(ws, rx.literal(b":")))


class JsonPieces:
    """Grammar fragments for one layout; ``any_value`` is a recursive rule.

    A value is placed through :meth:`lead`, which puts the gap before it into
    its first lexemes (see :class:`Layout`); call :meth:`finish` once every
    rule is written, to write the leading forms of the rules that needed one.
    """

    def __init__(self, layout: Layout, rules: dict[str, Expr], prefix: str = "json"):
        self.layout = layout
        self.rules = rules
        self.prefix = prefix
        self._any: Ref | None = None
        self._led: dict[int, tuple[Expr, Expr]] = {}  # id(expr) -> (expr, its leading form)
        self._leading_rules: dict[str, str] = {}  # rule -> the rule of its leading form
        self._unwritten: list[str] = []  # leading rules named but not yet written

    def item_sep(self) -> Terminal:
        return Terminal(self.layout.item_sep)

    def lead(self, value: Expr) -> Expr:
        """``ws value``, the gap joined to each first lexeme of ``value`` (same language).

        A rule gets a leading twin (written by :meth:`finish`, since a recursive
        rule may not be written yet); the original stays for any other use.
        """
        found = self._led.get(id(value))
        if found is not None:
            return found[1]
        ws = self.layout.ws
        if isinstance(value, Terminal):
            out: Expr = Terminal(rx.concat(ws, value.regex))
        elif isinstance(value, Ref):
            name = self._leading_rules.get(value.name)
            if name is None:
                name = self._leading_rules[value.name] = f"{value.name}+ws"
                self._unwritten.append(value.name)
            out = Ref(name, value.location)
        elif isinstance(value, Seq):
            out = Seq((self.lead(value.items[0]),) + value.items[1:]) if value.items else \
                Terminal(ws)
        elif isinstance(value, Choice):
            out = Choice(tuple(self.lead(item) for item in value.items))
        elif isinstance(value, Repeat):
            hi = None if value.hi is None else value.hi - 1
            if value.hi == 0:
                out = Terminal(ws)
            else:
                some = Seq((self.lead(value.item), Repeat(value.item, max(value.lo - 1, 0), hi)))
                out = some if value.lo else Choice((Terminal(ws), some))
        else:
            raise TypeError(f"not an expression: {value!r}")
        self._led[id(value)] = (value, out)
        return out

    def finish(self) -> None:
        """Write the leading twin of every rule :meth:`lead` was given."""
        while self._unwritten:
            name = self._unwritten.pop()
            self.rules[self._leading_rules[name]] = self.lead(self.rules[name])

    def member(self, key: rx.Node | str, value: Expr) -> Seq:
        """``ws key ws : ws value``, the key and its colon one lexeme: a token such as
        ``":`` stays inside it, so a key costs the parser one step, not two. ``key``:
        a string node, or a declared name (its lexeme built once per name)."""
        layout = self.layout
        if isinstance(key, rx.Node):
            return Seq((Terminal(rx.concat(layout.ws, key, layout.key_sep)), self.lead(value)))
        return Seq((Terminal(key_lexeme(key, layout.ws, layout.key_sep)), self.lead(value)))

    def any_value(self) -> Ref:
        """Any JSON value (a rule, built once)."""
        if self._any is None:
            p = self.prefix
            self._any = Ref(f"{p}:value")
            member = self.member(string_node(ANY_TEXT), self._any)
            self.rules[f"{p}:value"] = Choice((
                Terminal(rx.alt(literal_node(None), literal_node(True), literal_node(False),
                                number_regex(), string_node(ANY_TEXT))),
                self.wrap("{", member, "}"),
                self.wrap("[", self.lead(self._any), "]"),
            ))
        return self._any

    def wrap(self, open_: str, element: Expr, close: str, lo: int = 0,
             hi: int | None = None) -> Expr:
        """``open [element (sep element)*] ws close`` with lo..hi elements (each
        element led by its whitespace)."""
        some = separated(element, self.item_sep(), max(lo, 1), hi)
        return self.enclose(open_, some, close, empty=lo == 0)

    def enclose(self, open_: str, body: Expr | None, close: str, empty: bool) -> Expr:
        """``open body ws close`` for a body that is never empty and starts with its
        whitespace (None: no body), and ``open ws close`` too when ``empty``."""
        closing = Terminal(rx.concat(self.layout.ws, rx.literal(close.encode())))
        bare = Seq((text(open_), closing))
        if body is None:
            return bare
        full = Seq((text(open_), body, closing))
        return Choice((bare, full)) if empty else full

    def value(self, value) -> Expr:
        """Exactly the JSON value ``value`` (numbers by value, strings with any escapes)."""
        if isinstance(value, dict):
            members = [self.member(k, self.value(v))
                       for k, v in value.items()]
            return self.enclose("{", _join(members, self.item_sep()), "}", empty=False)
        if isinstance(value, list):
            items = [self.lead(self.value(v)) for v in value]
            return self.enclose("[", _join(items, self.item_sep()), "]", empty=False)
        return Terminal(literal_node(value))


def _join(items: Sequence[Expr], sep: Expr) -> Expr | None:
    if not items:
        return None
    out: list[Expr] = [items[0]]
    for item in items[1:]:
        out += [sep, item]
    return Seq(tuple(out))


def separated(element: Expr, sep: Expr, lo: int = 0, hi: int | None = None) -> Expr:
    """``element (sep element)*`` with ``lo..hi`` elements (zero allowed when lo == 0)."""
    if hi is not None and hi < lo:
        return Terminal(rx.EMPTY)
    if hi == 0:
        return Terminal(rx.EPS)
    more = Repeat(Seq((sep, element)), max(lo - 1, 0), None if hi is None else hi - 1)
    some = Seq((element, more))
    return some if lo > 0 else Choice((Terminal(rx.EPS), some))


def repeat_with_sep(item: Expr, sep: Expr, lo: int, hi: int | None) -> Expr:
    """``(sep item)`` ``lo..hi`` times (the items after a first one)."""
    if hi is not None and hi < lo:
        return Terminal(rx.EMPTY)
    return Repeat(Seq((sep, item)), lo, hi)


@functools.lru_cache(maxsize=1)
def number_regex() -> rx.Node:
    from automask.regex.parser import parse_regex

    return parse_regex(NUMBER_TEXT)


def values_node(values: Sequence) -> rx.Node:
    """The texts of the scalar JSON ``values`` as one node (:func:`alternation`: a prefix
    tree when wider than a plain alternation).

    Where every value has one spelling (an enum of thousands of names), the tree is
    made from the spellings at once: a chain of nodes per value would only be taken
    apart again by the tree. A number has many spellings (``15``, ``15.0``,
    ``1.5e1``, ``150e-1``…); in a wide enum each joins the tree beside every other
    value's, as its leading bytes and the node of what may follow them, so that a
    digit typed is followed once through the branches sharing it, not once per
    value. Narrower enums keep one branch per value: there the tree costs more to
    build than the masks save.
    """
    if len(values) <= TRIE_BRANCHES:
        return alternation([literal_node(v) for v in values])
    texts = [only_spelling(v) for v in values]
    if None not in texts:
        return literal_trie(texts)  # type: ignore[arg-type]  # (none is None)
    from automask.schema.numbers import number_spellings

    chains: list[tuple[rx.Node, ...]] = []
    for v in values:
        if is_number(v):
            chains += [tuple(map(_single_byte, text)) + (() if tail is rx.EPS else (tail,))
                       for text, tail in number_spellings(v)]
        else:
            node = literal_node(v)
            chains += map(concatenated_parts, node.items if node.kind == rx.K_ALT else (node,))
    return chain_trie(chains)


def _single_byte(c: int) -> rx.Node:
    return rx.byte_set(1 << c)


def literal_node(value) -> rx.Node:
    """The texts of a scalar JSON value: numbers compare by value (``1`` == ``1.0``)."""
    if value is None or value is True or value is False:
        return rx.literal(_KEYWORD_TEXTS[value])
    if isinstance(value, str):
        return literal_string_node(value)
    if isinstance(value, (int, float)):
        from automask.schema.numbers import number_node

        return number_node(minimum=value, maximum=value)
    raise GrammarError(f"not a JSON scalar: {json.dumps(value)[:60]}")
