"""Tagged segments: free text in which a trigger opens a constrained segment.

Tool calls and reasoning blocks are text of this shape: the model writes
what it likes until it writes a *trigger* (``<tool_call>``, ``<function=``),
and from there on the output must be one of the *tags* that begin with that
trigger, ``begin content end``, after which free text starts again.
:func:`tagged_segments` (``Grammar.from_tags``) builds that language;
:func:`after_reasoning` (``Grammar.after_reasoning``) is the special case of
one segment that must come last: free text closed by a marker, then the
constrained output.

Semantics. A trigger *fires* at the first byte where the text since the
start (or since the last segment's end) ends with a trigger; the segment is
one of the tags whose ``begin`` starts with a trigger that ends at that byte
(several triggers may end at one byte; then any of their tags). Detection is
streaming, as a tool-call parser reading the output reads it: by earliest
end, and it starts afresh after a segment, so a trigger inside a segment's
content or end string opens nothing. Free text is valid UTF-8.

Construction. Everything textual is a regex built with the node algebra,
not an automaton of its own: with ``Σ`` any byte and ``T`` the alternation
of the triggers,

* the text that precedes a segment opened by trigger ``t``, ``t`` included,
  is ``(utf8* · t) ∩ ¬(Σ* T Σ+)``: no trigger ends before its last byte;
* the free text after the last segment is ``utf8* ∩ ¬(Σ* T Σ*)``.

Each is one lexeme, so a token that straddles a trigger (``<tool`` then
``_call>{``) is decided by the lexer byte by byte, like any other token.
The content grammars are embedded whole (rules renamed under a prefix,
lexemes re-indexed), so any front-end's grammar can be a segment's content.
A content grammar's ignored lexemes (Lark's ``%ignore``) work exactly: a
flat grammar's ``ignore`` would let ignored text stand anywhere in the whole
output, free text and markers included, so the embedding writes them into
the content's own rules instead (see :meth:`_Assembly.embed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded
from automask.grammar.ir import MAX_PRODUCTIONS, Grammar, Production, Symbol, _productive
from automask.regex import nodes as rx

#: the most whitespace bytes allowed between segments (``free_text=False``) and after a
#: reasoning block: bounded, as JSON's layout bounds it, so a model cannot pad forever
MAX_WHITESPACE = 24
#: the largest finite min_segments / max_segments: a count is a chain of rules, one per
#: segment (unbounded repetition is one rule, whatever the count)
MAX_COUNTED_SEGMENTS = 1000


@dataclass(frozen=True)
class Tag:
    """A constrained segment: ``begin``, then text of ``content``, then ``end``.

    ``content`` is any :class:`Grammar` (JSON Schema, regex, GBNF, Lark,
    choices, or another ``from_tags``). ``end`` may be empty: the content's
    own language then says where the segment stops.
    """

    begin: str
    content: Grammar
    end: str


def tagged_segments(tags: Sequence[Tag], *, triggers: Iterable[str] | None = None,
                    free_text: bool = True, min_segments: int = 0,
                    max_segments: int | None = None) -> Grammar:
    """The language of ``Grammar.from_tags`` (see the module docstring).

    ``triggers`` default to the tags' begins. With ``free_text=False`` only
    whitespace (at most :data:`MAX_WHITESPACE` bytes) may stand before, between
    and after the segments: "a tool call is required" is ``free_text=False,
    min_segments=1``. ``max_segments=None`` puts no bound on their number.
    """
    tags = list(tags)
    if not tags:
        raise GrammarError("from_tags needs at least one tag")
    for tag in tags:
        if not isinstance(tag, Tag):
            raise TypeError(f"from_tags takes Tag objects, not {type(tag).__name__}")
        if not isinstance(tag.content, Grammar):
            raise TypeError(f"a Tag's content is a Grammar, not {type(tag.content).__name__}")
        _check_text(tag.begin, "a tag's begin")
        _check_text(tag.end, "a tag's end")
        if not tag.begin:
            raise GrammarError("a tag's begin string is empty")
    if isinstance(min_segments, bool) or not isinstance(min_segments, int) or min_segments < 0:
        raise GrammarError(f"min_segments must be an integer >= 0, not {min_segments!r}")
    if max_segments is not None and (isinstance(max_segments, bool) or not isinstance(
            max_segments, int) or max_segments < min_segments):
        raise GrammarError(f"max_segments must be None or an integer >= min_segments "
                           f"({min_segments}), not {max_segments!r}")
    if max(min_segments, max_segments or 0) > MAX_COUNTED_SEGMENTS:
        raise LimitExceeded(f"segment counts above {MAX_COUNTED_SEGMENTS} are not supported "
                            "(max_segments=None puts no bound)")
    if isinstance(triggers, str):
        raise TypeError("triggers is a list of strings, not one string")
    words = _check_triggers([t.begin for t in tags] if triggers is None else list(triggers))
    opened = _opening_triggers(tags, words)

    if free_text:
        # One lead per trigger, not per tag: tags that share a trigger share the free
        # text before it (one lexeme the lexer follows), and their begins part after it.
        texts = _FreeText(words)
        leads = [texts.until(t) for t in opened]
        tail = texts.rest
    else:
        tail = _whitespace()
        leads = [rx.concat(tail, rx.literal(t.encode())) for t in opened]
    pieces = [(lead, tag.begin.encode()[len(t.encode()):], tag.content, tag.end.encode())
              for lead, t, tag in zip(leads, opened, tags, strict=True)]
    return _assemble(pieces, tail, min_segments, max_segments, "tags")


def _check_text(value, what: str) -> None:
    """``value`` is a ``str`` with a UTF-8 form (no lone surrogate)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise GrammarError(f"{what} {value!r} has a lone surrogate "
                           f"U+{ord(value[e.start]):04X}, which has no UTF-8 form") from None


def after_reasoning(inner: Grammar, *, begin: str = "<think>", end: str = "</think>",
                    required: bool = False) -> Grammar:
    """Free text up to ``end``, then ``inner``: reasoning, then the constrained answer.

    The output is ``begin`` (optional unless ``required``: chat templates
    often open the block themselves), text that does not contain ``end``,
    ``end``, at most :data:`MAX_WHITESPACE` bytes of whitespace, then a text of
    ``inner``. The block itself is never optional: a template that lets the
    model skip thinking should compile ``inner`` alone for that turn.
    """
    if not isinstance(inner, Grammar):
        raise TypeError(f"after_reasoning takes a Grammar, not {type(inner).__name__}")
    _check_text(begin, "the begin marker")
    _check_text(end, "the end marker")
    if not begin or not end:
        raise GrammarError("after_reasoning needs a non-empty begin and end marker")
    if end in begin:
        raise GrammarError(f"the begin marker {begin!r} contains the end marker {end!r}")
    opening = rx.literal(begin.encode())
    lead = rx.concat(opening if required else rx.optional(opening),
                     _FreeText([end]).until(end), _whitespace())
    return _assemble([(lead, b"", inner, b"")], rx.EPS, 1, 1, "reasoning")


# --------------------------------------------------------------------------- checks


def _check_triggers(words: list[str]) -> list[str]:
    """The distinct triggers, each one able to fire.

    A trigger that contains another one ending before its own last
    character could never fire (the other fires first), and one that is a
    prefix of another makes the longer one such a trigger: both are
    refused rather than silently never matched.
    """
    for w in words:
        _check_text(w, "a trigger")
        if not w:
            raise GrammarError("a trigger is empty")
    distinct = list(dict.fromkeys(words))
    if not distinct:
        raise GrammarError("from_tags needs at least one trigger")
    for w in distinct:
        for other in distinct:
            if other != w and other in w[:-1]:
                raise GrammarError(
                    f"trigger {w!r} contains trigger {other!r} before its end: {other!r} "
                    "would always fire first (the triggers default to the tags' begins; "
                    "pass triggers= to open several tags with one)")
    return distinct


def _opening_triggers(tags: list[Tag], words: list[str]) -> list[str]:
    """The trigger each tag's begin starts with (after :func:`_check_triggers`, at most one),
    and a refusal for a trigger that opens no tag (it would be a dead end in free text)."""
    opened = []
    for tag in tags:
        found = [w for w in words if tag.begin.startswith(w)]
        if not found:
            raise GrammarError(f"tag begin {tag.begin!r} starts with none of the triggers "
                               f"{words!r}")
        opened.append(found[0])
    unused = [w for w in words if w not in opened]
    if unused:
        raise GrammarError(f"trigger {unused[0]!r} opens no tag (no begin starts with it)")
    return opened


# --------------------------------------------------------------------------- regexes


class _FreeText:
    """The free-text regexes for one set of triggers (see the module docstring)."""

    def __init__(self, words: Sequence[str]):
        anything = rx.star(rx.ANY_BYTE)
        fired = rx.alt_of(rx.literal(w.encode()) for w in words)
        self.text = rx.any_text()
        #: text with no trigger in it: what may follow the last segment
        self.rest = rx.intersect(self.text, rx.complement(rx.concat(anything, fired, anything)))
        # some trigger ends before the last byte: text the trigger should have cut short
        self._too_late = rx.complement(rx.concat(anything, fired, rx.plus(rx.ANY_BYTE)))

    def until(self, word: str) -> rx.Node:
        """Free text and then ``word``, where the first trigger to end ends at the last byte."""
        return rx.intersect(rx.concat(self.text, rx.literal(word.encode())), self._too_late)


def _whitespace() -> rx.Node:
    return rx.repeat(rx.byte_set(sum(1 << b for b in b" \t\n\r")), 0, MAX_WHITESPACE)


# --------------------------------------------------------------------------- assembly


def _assemble(pieces: list[tuple[rx.Node, bytes, Grammar, bytes]], tail: rx.Node, lo: int,
              hi: int | None, source: str) -> Grammar:
    """``(lead begin content end){lo,hi} tail``, the one shape both constructors build.

    ``pieces`` are the alternatives of a segment: a lead regex (the text up
    to and including the trigger), the rest of the tag's begin, a content
    grammar, an end string.
    """
    out = _Assembly()
    segment = "segment"
    embedded: dict[int, str] = {}  # id(content grammar) -> its start rule in the assembly
    for lead, begin, content, end in pieces:
        start = embedded.get(id(content))
        if start is None:
            start = embedded[id(content)] = out.embed(content, len(embedded))
        out.add(segment, [*out.regex(lead), *out.regex(rx.literal(begin)), start,
                          *out.regex(rx.literal(end))])
    # root ::= segment^lo rest tail, rest the optional further segments (up to hi)
    if hi is None:
        rest = out.helper("more")
        out.add(rest, [])
        out.add(rest, [rest, segment])  # left recursion suits Earley
        further = [rest]
    else:
        further = []
        for _ in range(hi - lo):
            more = out.helper("more")
            out.add(more, [])
            out.add(more, [segment, *further])
            further = [more]
    out.add("root", [*[segment] * lo, *further, *out.regex(tail)])
    return out.grammar("root", source)


class _Assembly:
    """Flat productions and lexemes being put together (content grammars embedded whole)."""

    def __init__(self) -> None:
        self.productions: list[Production] = []
        self.lexemes: list[rx.Node] = []
        self._index: dict[int, int] = {}  # regex uid -> lexeme index
        self._helpers = 0

    def lexeme(self, node: rx.Node) -> int:
        idx = self._index.get(node.uid)
        if idx is None:
            idx = self._index[node.uid] = len(self.lexemes)
            self.lexemes.append(node)
        return idx

    def helper(self, base: str) -> str:
        # a name no embedded rule has: those all start with "c<n>", these never do
        self._helpers += 1
        return f"{base}~{self._helpers}"

    def add(self, lhs: str, rhs: Sequence[Symbol]) -> None:
        check_time()
        if len(self.productions) >= MAX_PRODUCTIONS:
            raise LimitExceeded(f"grammar has more than {MAX_PRODUCTIONS} productions")
        self.productions.append(Production(lhs, tuple(rhs)))

    def regex(self, node: rx.Node) -> list[Symbol]:
        """Symbols for a regex (lexemes never match ε: a nullable one becomes optional)."""
        if node is rx.EPS:
            return []
        if node is rx.EMPTY:  # the checks above rule it out: a trigger can always fire
            raise GrammarError(f"/{rx.to_pattern(node)}/ matches nothing")
        if not node.nullable:
            return [self.lexeme(node)]
        name = self.helper("opt")
        self.add(name, [])
        self.add(name, [self.lexeme(rx.nonempty(node))])
        return [name]

    def embed(self, grammar: Grammar, n: int) -> str:
        """Copy ``grammar``'s productions in, rules renamed ``c<n>:name``; its start rule.

        Ignored lexemes (Lark's ``%ignore``) may stand before any lexeme and
        at the end of the text, and nowhere else matters: between two
        lexemes is before the second. So each lexeme ``L`` of a right side
        becomes ``I L`` and the start ``S`` becomes ``S I``, where
        ``I ::= ε | I k`` for every ignored ``k``: the same language, with
        the ignored text kept inside this grammar's segments (a grammar's
        ``ignore`` would let it stand anywhere in the output).
        """
        # Renamed rules start "c<n>:", this grammar's own helpers "c<n>~": no name of one
        # embedded grammar is that of another, of a helper of another, or of the assembly's.
        prefix = f"c{n}:"
        index = [self.lexeme(node) for node in grammar.lexemes]
        ignored = f"c{n}~ignored" if grammar.ignore else None
        for p in grammar.productions:
            rhs: list[Symbol] = []
            for s in p.rhs:
                if isinstance(s, str):
                    rhs.append(prefix + s)
                else:
                    if ignored:
                        rhs.append(ignored)
                    rhs.append(index[s])
            self.add(prefix + p.lhs, rhs)
        start = prefix + grammar.start
        if ignored is None:
            return start
        self.add(ignored, [])
        for k in grammar.ignore:
            self.add(ignored, [ignored, index[k]])
        whole = f"c{n}~start"
        self.add(whole, [start, ignored])
        return whole

    def grammar(self, start: str, source: str) -> Grammar:
        productions = _productive(self.productions, start)
        return Grammar(tuple(productions), tuple(self.lexemes), start, (), source)
