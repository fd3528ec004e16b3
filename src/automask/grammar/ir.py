"""The grammar IR: a context-free grammar whose terminals are lexemes (byte regexes).

Front-ends (regex, choices, GBNF, Lark, JSON Schema) describe their language
as EBNF expressions (:class:`Terminal`, :class:`Ref`, :class:`Seq`,
:class:`Choice`, :class:`Repeat`) and hand them to :func:`lower`, which
produces the flat :class:`Grammar` the engine compiles:

* regular parts are fused into as few lexemes as possible (a non-recursive
  rule becomes one regex; adjacent regular items of a sequence become one
  lexeme), because the lexer is cheap and the parser is not;
* lexemes never match the empty string (a nullable regex ``r`` becomes an
  optional symbol over ``nonempty(r)``), so every lexeme makes progress;
* rules that derive no string are removed; a start rule that derives none is
  an error.

Fusion preserves the language exactly because the engine lexes
non-deterministically (every way to split the bytes into lexemes is kept).
With ``%ignore`` (Lark) fusion is off: ignored text may stand between any
two terminals, so terminals must stay separate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from automask.budget import check_time, time_budget
from automask.errors import EmptyLanguage, GrammarError, LimitExceeded
from automask.gc_pause import RECURSION_ERRORS, paused_gc, untrack
from automask.regex import nodes as rx
from automask.regex.parser import alternation, literal_trie, parse_regex

# --------------------------------------------------------------------------- expressions


class Expr:
    """An EBNF expression; the base of the classes below."""

    __slots__ = ()


@dataclass(frozen=True)
class Terminal(Expr):
    """A regular piece of text, as a byte regex node."""

    regex: rx.Node
    name: str | None = None


@dataclass(frozen=True)
class Ref(Expr):
    """A reference to a named rule."""

    name: str
    location: str | None = None


@dataclass(frozen=True)
class Seq(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Choice(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Repeat(Expr):
    item: Expr
    lo: int
    hi: int | None  # None: unbounded


def seq(*items: Expr) -> Expr:
    return items[0] if len(items) == 1 else Seq(tuple(items))


def choice(*items: Expr) -> Expr:
    return items[0] if len(items) == 1 else Choice(tuple(items))


def text(s: str | bytes) -> Terminal:
    data = s.encode("utf-8") if isinstance(s, str) else s
    return Terminal(rx.literal(data))


# --------------------------------------------------------------------------- the flat IR

GRAMMAR_SECONDS = 2.0  # default CPU-time limit of a regex, choices, GBNF or Lark front end

Symbol = str | int  # str: a rule (nonterminal); int: a lexeme index


@dataclass(frozen=True)
class Production:
    lhs: str
    rhs: tuple[Symbol, ...]

    def __post_init__(self) -> None:
        untrack(self)  # strings and ints: in no cycle, and a grammar holds thousands


@dataclass(frozen=True)
class Grammar:
    """A CFG over lexemes: what :func:`automask.compile` takes.

    Build one with the ``from_*`` constructors rather than by hand.
    """

    productions: tuple[Production, ...]
    lexemes: tuple[rx.Node, ...]
    start: str
    ignore: tuple[int, ...] = ()
    source: str = field(default="", compare=False)

    # The front-ends live in their own modules (found through register_front_end, since
    # they import this one); these are the public doors. Each one runs under a CPU-time
    # budget (``max_seconds``, past which LimitExceeded) and takes at most
    # MAX_GRAMMAR_CHARS characters of text, so no input can hold it for long.
    @classmethod
    def from_regex(cls, pattern: str, *, max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
        """The language of ``pattern`` (whole-output match; see :mod:`automask.regex.parser`).

        ``max_seconds``: CPU-time limit (default 2, :data:`GRAMMAR_SECONDS`; None: none),
        past which :class:`LimitExceeded`; a pattern longer than :data:`MAX_GRAMMAR_CHARS`
        is refused at once.
        """
        if not isinstance(pattern, str):
            raise TypeError(f"regex pattern must be str, not {type(pattern).__name__}")
        check_length(pattern, "regex", lambda at: f"col {at + 1}")
        with paused_gc(), time_budget(max_seconds, "reading the regex", start_now=True):
            return lower({"root": Terminal(parse_regex(pattern))}, "root", source="regex")

    @classmethod
    def from_choices(cls, choices: Sequence[str], *,
                     max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
        """Exactly one of the given strings (a list, tuple or other iterable of ``str``).

        ``max_seconds`` as for :meth:`from_regex`; the choices may have at most
        :data:`MAX_GRAMMAR_CHARS` characters together.
        """
        if isinstance(choices, (str, bytes, bytearray)):
            raise TypeError(f"from_choices takes a sequence of strings, not one "
                            f"{type(choices).__name__}: wrap it in a list ([text])")
        # typed as what they may be (a request's JSON), so that a compiled build reaches
        # the check below instead of refusing a non-str at the loop variable
        items: list[object] = list(choices)
        if not items:
            raise GrammarError("from_choices needs at least one choice")
        total = 0
        for i, c in enumerate(items):
            if not isinstance(c, str):
                # a grammar's content, from the network as often as not: a GrammarError
                raise GrammarError(f"a choice must be a str, not {type(c).__name__}: "
                                   f"{c!r:.80}", location=f"choice {i}")
            total += len(c)
            if total > MAX_GRAMMAR_CHARS:
                raise LimitExceeded(f"the {len(items):,} choices are more than "
                                    f"{MAX_GRAMMAR_CHARS:,} characters long together (the "
                                    "limit)", f"choice {i}")
        with paused_gc(), time_budget(max_seconds, "reading the choices", start_now=True):
            texts = []
            for i, c in enumerate(cast("list[str]", items)):  # (each checked above)
                try:
                    texts.append(c.encode("utf-8"))
                except UnicodeEncodeError as e:
                    raise GrammarError(f"choice {i} has a lone surrogate U+{ord(c[e.start]):04X}"
                                       ", which has no UTF-8 form", f"choice {i}, col {e.start + 1}"
                                       ) from None
            node = (literal_trie(texts) if len(texts) > TRIE_CHOICES
                    else rx.alt_of(rx.literal(t) for t in texts))
            return lower({"root": Terminal(node)}, "root", source="choices")

    @classmethod
    def from_gbnf(cls, text: str, *, max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
        """A llama.cpp GBNF grammar; ``root`` is the start rule. ``max_seconds`` and the
        length limit as for :meth:`from_regex`."""
        return _front_end("gbnf")(text, max_seconds=max_seconds)

    @classmethod
    def from_lark(cls, text: str, start: str = "start", *,
                  max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
        """A Lark grammar (the language of Lark's Earley parser, every match length).
        ``max_seconds`` and the length limit as for :meth:`from_regex`."""
        return _front_end("lark")(text, start, max_seconds=max_seconds)

    @classmethod
    def from_tags(cls, tags: Any, *, triggers: Any = None, free_text: bool = True,
                  min_segments: int = 0,
                  max_segments: int | None = None) -> Grammar:
        """Free text in which a trigger opens a segment ``begin content end`` of one of the
        ``tags`` (tool calls); see :mod:`automask.grammar.segments`."""
        return _front_end("tags")(tags, triggers=triggers, free_text=free_text,
                                  min_segments=min_segments, max_segments=max_segments)

    @classmethod
    def after_reasoning(cls, inner: Grammar, *, begin: str = "<think>", end: str = "</think>",
                        required: bool = False) -> Grammar:
        """Free text closed by ``end`` (after an optional, or ``required``, ``begin``), then
        ``inner``: a reasoning block before the constrained answer."""
        return _front_end("after_reasoning")(inner, begin=begin, end=end, required=required)

    @classmethod
    def from_json_schema(cls, schema: Any, *, whitespace: str | int = "flexible",
                         strict: bool = False, lenient: bool = False, max_whitespace: int = 24,
                         max_rules: int = 20_000,
                         max_seconds: float | None = GRAMMAR_SECONDS) -> Grammar:
        """JSON texts valid under a JSON Schema (dict, bool, or JSON text as str or bytes).

        The schema must be a JSON document (no cycles, string keys, JSON values,
        no lone surrogates, at most 256 levels deep): anything else is a typed
        error at its JSON pointer (see :mod:`automask.schema.document`).

        ``whitespace``: "flexible" (any JSON whitespace between tokens, at most
        ``max_whitespace`` characters in a row), "compact" (none) or an indent
        width (``json.dumps(indent=n)`` layout). ``strict``: an absent
        ``additionalProperties`` means false (as OpenAI's strict mode reads it),
        and ``time`` / ``date-time`` have no leap second ``:60``. ``lenient``:
        warn about and ignore unsupported keywords instead of raising
        :class:`UnsupportedFeature`. ``max_rules``: grammar rules the schema may
        need; ``max_seconds``: CPU-time limit (None: none). Past either,
        :class:`LimitExceeded`. See :mod:`automask.schema.compiler`.
        """
        return _front_end("json_schema")(
            schema, whitespace=whitespace, strict=strict, lenient=lenient,
            max_whitespace=max_whitespace, max_rules=max_rules, max_seconds=max_seconds)

    @classmethod
    def from_pydantic(cls, model: Any, **options: Any) -> Grammar:
        """JSON texts valid for a pydantic model class (its ``model_json_schema()``);
        ``options`` as for :meth:`from_json_schema`."""
        schema_of = getattr(model, "model_json_schema", None)
        if schema_of is None:
            raise TypeError("from_pydantic takes a pydantic v2 model class")
        # (through `of`: compiled, a direct call with **options passed the dict itself as
        # the first keyword argument, mypyc 2.4)
        return cls.of("json_schema", schema_of(), **options)

    @classmethod
    def of(cls, kind: str, source: Any, **options: Any) -> Grammar:
        """The grammar of ``source`` read by the front end named ``kind``, one of
        :data:`SOURCE_KINDS` (``json_schema``: a schema as data or JSON text;
        ``choices``: a list of strings; the others: their text); ``options`` go to
        that front end (``whitespace``, ``strict``, ... for a schema). For callers
        that hold the kind as data: a request, a benchmark record, a form."""
        constructor = _SOURCE_CONSTRUCTORS.get(kind)
        if constructor is None:
            raise ValueError(f"unknown grammar kind {kind!r} (one of "
                             f"{', '.join(SOURCE_KINDS)})")
        build: Callable[..., Grammar] = getattr(cls, constructor)
        return build(source, **options)

    @property
    def rules(self) -> dict[str, list[tuple[Symbol, ...]]]:
        out: dict[str, list[tuple[Symbol, ...]]] = {}
        for p in self.productions:
            out.setdefault(p.lhs, []).append(p.rhs)
        return out

    def describe(self) -> str:
        """A readable dump: productions, then lexemes."""
        lines = []
        for p in self.productions:
            rhs = " ".join(s if isinstance(s, str) else f"L{s}" for s in p.rhs) or "ε"
            lines.append(f"{p.lhs} ::= {rhs}")
        for i, node in enumerate(self.lexemes):
            lines.append(f"L{i} = /{rx.to_pattern(node)}/")
        return "\n".join(lines)


# --------------------------------------------------------------------------- front ends

#: The entry function of each front end in another module, by its ``Grammar``
#: constructor: "gbnf", "lark", "tags", "after_reasoning", "json_schema". The front ends
#: build on this module, so it imports none of them: :mod:`automask.grammar` and
#: :mod:`automask.schema` register theirs (each imported on its first use), and the
#: package ``automask`` imports both, which always runs before this module can be used.
_FRONT_ENDS: dict[str, Callable[..., Grammar]] = {}


#: the front ends :meth:`Grammar.of` reads a source with: name -> constructor
_SOURCE_CONSTRUCTORS = {"json_schema": "from_json_schema", "regex": "from_regex",
                        "gbnf": "from_gbnf", "lark": "from_lark", "choices": "from_choices"}
SOURCE_KINDS = tuple(_SOURCE_CONSTRUCTORS)


def register_front_end(name: str, build: Callable[..., Grammar]) -> None:
    """Make ``build`` the function behind the ``Grammar`` constructor ``name``."""
    _FRONT_ENDS[name] = build


def _front_end(name: str) -> Callable[..., Grammar]:
    try:
        return _FRONT_ENDS[name]
    except KeyError:  # only if the package's __init__ files were bypassed
        raise RuntimeError(f"no {name!r} front end is registered with the grammar IR "
                           "(import automask)") from None


# --------------------------------------------------------------------------- lowering

MAX_PRODUCTIONS = 200_000
#: repetitions of a non-regular item with counts up to this are written out (``item item
#: ...``, nested optionals); larger ones are counted in O(log n) rules (see _counted)
UNROLLED = 64
#: the longest regex, GBNF or Lark text (code points) the front ends read, and the most
#: characters that choices may have together: past it :class:`LimitExceeded` at once
#: (reading costs ~10 microseconds and ~0.5 KB per character of literal text, so what is
#: longer could not be read within the default time limit anyway)
MAX_GRAMMAR_CHARS = 1 << 20
#: groups (and repetitions of repetitions) nested deeper than this are refused by the
#: grammar text front ends, where they are read: they are parsed and lowered recursively
#: (real grammars nest a few levels; a regex allows 64 groups)
MAX_NESTING = 100


#: more choices than this are one prefix tree (see regex.parser.literal_trie), fewer an
#: alternation of literals
TRIE_CHOICES = 256


def check_length(text: str, what: str, where: Callable[[int], str]) -> None:
    """Refuse a text longer than :data:`MAX_GRAMMAR_CHARS`, located where it passes it."""
    if len(text) > MAX_GRAMMAR_CHARS:
        raise LimitExceeded(f"the {what} is {len(text):,} characters long, more than the "
                            f"limit of {MAX_GRAMMAR_CHARS:,}", where(MAX_GRAMMAR_CHARS))


def line_col(text: str, pos: int) -> str:
    """``line L, col C`` (1-based) of position ``pos`` of ``text``."""
    line_start = text.rfind("\n", 0, pos) + 1
    return f"line {text.count(chr(10), 0, pos) + 1}, col {pos - line_start + 1}"


def lower(rules: Mapping[str, Expr], start: str, *, ignore: Sequence[Expr] = (),
          fuse: bool | None = None, source: str = "",
          locations: Mapping[str, str] | None = None) -> Grammar:
    """Lower EBNF rules to the flat :class:`Grammar` (see the module docstring).

    ``locations`` (rule name -> where it is defined) locates an
    :class:`EmptyLanguage` error; its ``rule`` names the rule to blame.
    """
    if start not in rules:
        raise GrammarError(f"start rule {start!r} is not defined")
    if fuse is None:
        fuse = not ignore
    lowerer = _Lowerer(rules, fuse)
    try:
        return lowerer.run(start, ignore, source, locations or {})
    except RECURSION_ERRORS:  # rules nested hundreds deep: walked recursively, so refused
        raise LimitExceeded("the grammar's rules are nested too deeply "
                            "(Python's recursion limit)",
                            # current is None before the first rule: get gives None
                            (locations or {}).get(lowerer.current)) from None  # type: ignore[arg-type]
    except LimitExceeded as e:
        where = (locations or {}).get(lowerer.current)  # type: ignore[arg-type]  # (as above)
        if e.location is None and where is not None:  # the rule being lowered
            raise LimitExceeded(e.message, where) from None
        raise


class _Lowerer:
    def __init__(self, rules: Mapping[str, Expr], fuse: bool):
        self.rules = rules
        self.fuse = fuse
        self.productions: list[Production] = []
        self.lexemes: list[rx.Node] = []
        self.lexeme_index: dict[int, int] = {}
        self.helper_count = 0
        self.owner: dict[str, str] = {}  # helper rule -> the rule it was made for
        self.regular: dict[str, rx.Node | None] = {}
        self._symbol_cache: dict[int, Symbol | None] = {}
        self._optional_cache: dict[int, str] = {}
        self.current: str | None = None  # the rule being lowered (to locate a limit)

    # ---- regularity: which expressions are regular (no recursion through them)
    def rule_regex(self, name: str) -> rx.Node | None:
        """The regex of rule ``name`` if it is regular (it reaches no recursion), else None.

        Rules are settled in dependency order by an iterative search for strongly
        connected components (Tarjan's), so a chain of thousands of rules costs no
        Python recursion: a rule in a cycle is not regular, nor is one that uses such a
        rule; any other is the regex of its expression over its rules' regexes.
        """
        if name not in self.regular:
            self._settle_from(name)
        return self.regular[name]

    def _rule_refs(self, name: str) -> list[str]:
        """The rules ``name``'s expression refers to (each once, in order)."""
        refs: dict[str, None] = {}
        todo: list[Expr] = [self.rules[name]]
        while todo:
            e = todo.pop()
            if isinstance(e, Ref):
                self._check_ref(e)
                refs[e.name] = None
            elif isinstance(e, (Seq, Choice)):
                todo.extend(reversed(e.items))
            elif isinstance(e, Repeat):
                todo.append(e.item)
        return list(refs)

    def _settle_from(self, root: str) -> None:
        """Settle ``root`` and every unsettled rule it reaches (see :meth:`rule_regex`)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        uses: dict[str, list[str]] = {}

        def enter(name: str) -> None:
            index[name] = low[name] = len(index)
            stack.append(name)
            on_stack.add(name)
            uses[name] = self._rule_refs(name)
            work.append((name, iter(uses[name])))

        work: list[tuple[str, Iterator[str]]] = []
        enter(root)
        while work:
            check_time()
            name, successors = work[-1]
            for nxt in successors:
                if nxt in self.regular:
                    continue
                if nxt not in index:
                    enter(nxt)
                    break
                if nxt in on_stack:
                    low[name] = min(low[name], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[name])
                if low[name] == index[name]:  # name roots a component: settle it
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == name:
                            break
                    if len(component) > 1 or name in uses[name]:
                        for member in component:
                            self.regular[member] = None  # recursive
                    else:  # what it uses is settled: the expression is read without descent
                        self.regular[name] = self.expr_regex(self.rules[name])

    def expr_regex(self, e: Expr) -> rx.Node | None:
        """The regex of ``e`` if it is regular (and fusion is on), else None."""
        if isinstance(e, Terminal):
            return e.regex
        if not self.fuse:
            return None
        if isinstance(e, Ref):
            self._check_ref(e)
            return self.rule_regex(e.name)
        if isinstance(e, (Seq, Choice)):
            parts = [self.expr_regex(i) for i in e.items]
            if any(p is None for p in parts):
                return None
            # no None left in parts (checked above)
            return rx.concat(*parts) if isinstance(e, Seq) else alternation(parts)  # type: ignore[arg-type]
        if isinstance(e, Repeat):
            inner = self.expr_regex(e.item)
            return None if inner is None else rx.repeat(inner, e.lo, e.hi)
        raise TypeError(f"not an expression: {e!r}")

    def _check_ref(self, e: Ref) -> None:
        if e.name not in self.rules:
            raise GrammarError(f"undefined rule {e.name!r}", e.location)

    # ---- symbols
    def lexeme(self, node: rx.Node) -> int:
        idx = self.lexeme_index.get(node.uid)
        if idx is None:
            idx = len(self.lexemes)
            self.lexemes.append(node)
            self.lexeme_index[node.uid] = idx
        return idx

    def helper(self, base: str) -> str:
        self.helper_count += 1
        name = f"{base}~{self.helper_count}"
        self.owner[name] = self.owner.get(base, base)
        return name

    def add(self, lhs: str, rhs: Sequence[Symbol]) -> None:
        check_time()  # (it reads the clock every 32nd call: a lowering can take seconds)
        if len(self.productions) >= MAX_PRODUCTIONS:
            raise LimitExceeded(f"grammar has more than {MAX_PRODUCTIONS} productions")
        self.productions.append(Production(lhs, tuple(rhs)))

    def regex_symbols(self, node: rx.Node) -> list[Symbol] | None:
        """Symbols for a regex: [] for ε, None for ∅, an optional helper when nullable."""
        if node is rx.EMPTY:
            return None
        if node is rx.EPS:
            return []
        if not node.nullable:
            return [self.lexeme(node)]
        name = self._optional_cache.get(node.uid)
        if name is None:
            name = self.helper("opt")
            self._optional_cache[node.uid] = name
            self.add(name, [])
            self.add(name, [self.lexeme(rx.nonempty(node))])
        return [name]

    def sequences(self, e: Expr, ctx: str) -> list[list[Symbol]]:
        """The alternatives (symbol sequences) of ``e``."""
        node = self.expr_regex(e)
        if node is not None:
            syms = self.regex_symbols(node)
            return [] if syms is None else [syms]
        if isinstance(e, Choice):
            out = []
            for item in e.items:
                out.extend(self.sequences(item, ctx))
            return out
        if isinstance(e, Seq):
            if not self.fuse:
                return self._unfused(e, ctx)
            out_seq: list[Symbol] = []
            pending: list[rx.Node] = []

            def flush() -> bool:
                if pending:
                    syms = self.regex_symbols(rx.concat(*pending))
                    pending.clear()
                    if syms is None:
                        return False
                    out_seq.extend(syms)
                return True

            for item in e.items:
                node = self.expr_regex(item)
                if node is not None:
                    pending.append(node)
                    continue
                if not flush():
                    return []
                sym = self.symbol(item, ctx)
                if sym is None:
                    return []
                if sym != "":
                    out_seq.append(sym)
            if not flush():
                return []
            return [out_seq]
        sym = self.symbol(e, ctx)
        if sym is None:
            return []
        return [[] if sym == "" else [sym]]

    def _unfused(self, e: Seq, ctx: str) -> list[list[Symbol]]:
        """:meth:`sequences` of a Seq without fusion: a lexeme per Terminal, in place, and
        a Seq inside it spliced in (a JSON member, ``key value``, inside ``sep member``
        inside the object's sequence): a helper rule per nested Seq made a third of a
        schema grammar's productions, each one more item in every Earley set there."""
        listed = self._separated_list(e, ctx)
        if listed is not None:
            return [[listed]]
        out: list[Symbol] = []
        for item in e.items:
            if type(item) is Terminal:
                syms = self.regex_symbols(item.regex)
                if syms is None:
                    return []
                out += syms
                continue
            if type(item) is Seq:
                spliced = self._unfused(item, ctx)
                if not spliced:
                    return []
                out += spliced[0]
                continue
            sym = self.symbol(item, ctx)
            if sym is None:
                return []
            if sym != "":
                out.append(sym)
        return [out]

    def _separated_list(self, e: Seq, ctx: str) -> Symbol | None:
        """``item (sep item)*`` (a JSON array's or object's members) as one left-recursive
        rule, ``list ::= item | list sep item``: two productions, where the general
        lowering makes four over three helper rules (a ``sep item`` rule, a ``tail ::= ε |
        tail (sep item)`` and the sequence), every one of them more items in each Earley
        set the list passes through. None where ``e`` is not of that form (``item`` is
        the same object both times, ``sep`` a lexeme, neither ε nor empty)."""
        items = e.items
        if len(items) != 2 or type(items[1]) is not Repeat:
            return None
        more = items[1]
        pair = more.item
        if more.lo or more.hi is not None or type(pair) is not Seq or len(pair.items) != 2 \
                or pair.items[1] is not items[0] or type(pair.items[0]) is not Terminal:
            return None
        sep = pair.items[0].regex
        if sep is rx.EMPTY or sep.nullable:
            return None
        item = self.symbol(items[0], ctx)
        if not item:  # ε or the empty language: the general lowering says what that gives
            return None
        name = self.helper(ctx)
        self.add(name, [item])
        self.add(name, [name, self.lexeme(sep), item])
        return name

    def symbol(self, e: Expr, ctx: str) -> Symbol | None:
        """One symbol standing for ``e`` ('' for ε, None for the empty language)."""
        if isinstance(e, Ref):
            self._check_ref(e)
            node = self.expr_regex(e)
            if node is None:
                return e.name
        key = id(e)
        if key in self._symbol_cache:
            return self._symbol_cache[key]
        node = self.expr_regex(e)
        if node is not None:
            syms = self.regex_symbols(node)
            if syms is None:
                result: Symbol | None = None
            elif not syms:
                result = ""
            elif len(syms) == 1:
                result = syms[0]
            else:
                result = self._rule_for([syms], ctx)
        elif isinstance(e, Repeat):
            result = self._repeat(e, ctx)
        else:
            alternatives = self.sequences(e, ctx)
            if len(alternatives) == 1 and len(alternatives[0]) == 1:
                result = alternatives[0][0]  # no helper rule that only renames a symbol
            else:
                result = self._rule_for(alternatives, ctx)
        self._symbol_cache[key] = result
        return result

    def _rule_for(self, alternatives: list[list[Symbol]], ctx: str) -> Symbol | None:
        if not alternatives:
            return None
        name = self.helper(ctx)
        for a in alternatives:
            self.add(name, a)
        return name

    def _repeat(self, e: Repeat, ctx: str) -> Symbol | None:
        item = self.symbol(e.item, ctx)
        if item is None:
            return "" if e.lo == 0 else None
        if item == "":
            return ""
        if e.lo > UNROLLED or (e.hi is not None and e.hi - e.lo > UNROLLED):
            return self._counted(item, e.lo, e.hi, ctx)
        head = [item] * e.lo
        if e.hi is None:
            # name ::= item^lo tail ; tail ::= ε | tail item   (left recursion suits Earley)
            tail = self._star(item, ctx)
            if not head:
                return tail
            name = self.helper(ctx)
            self.add(name, head + [tail])
        else:
            # name ::= item^lo opt_{hi-lo};  opt_k ::= ε | item opt_{k-1}
            name = self.helper(ctx)
            rest: list[Symbol] = []
            for _ in range(e.hi - e.lo):
                opt = self.helper(ctx)
                self.add(opt, [])
                self.add(opt, [item] + rest)
                rest = [opt]
            self.add(name, head + rest)
        return name

    def _star(self, item: Symbol, ctx: str) -> str:
        """``tail ::= ε | tail item``."""
        tail = self.helper(ctx)
        self.add(tail, [])
        self.add(tail, [tail, item])
        return tail

    def _counted(self, item: Symbol, lo: int, hi: int | None, ctx: str) -> str:
        """``item{lo,hi}`` in O(log hi) productions, however large the counts (10**9
        items are ~60 productions, never copies): ``P_j`` (2**j items) is ``P_{j-1}
        P_{j-1}``; ``item{lo}`` is the ``P_j`` of the bits of ``lo``; ``item{0,2**j-1}`` is
        ``A_j ::= A_{j-1} | P_{j-1} A_{j-1}``; ``item{0,k}`` for ``2**m <= k < 2**(m+1)`` is
        ``A_m | P_m item{0,k-2**m}``. Each count has one derivation (no ambiguity)."""
        powers = [item]  # powers[j]: exactly 2**j items

        def power(j: int) -> Symbol:
            while len(powers) <= j:
                p = self.helper(ctx)
                self.add(p, [powers[-1], powers[-1]])
                powers.append(p)
            return powers[j]

        below: list[Symbol | None] = [None]  # below[j]: 0 .. 2**j - 1 items (None: ε)

        def up_to_power(j: int) -> list[Symbol]:
            while len(below) <= j:
                k = len(below) - 1  # below[k + 1] ::= below[k] | P_k below[k]
                a = self.helper(ctx)
                below_k = below[k]
                prev: list[Symbol] = [] if below_k is None else [below_k]
                self.add(a, prev)
                self.add(a, [power(k)] + prev)
                below.append(a)
            below_j = below[j]
            return [] if below_j is None else [below_j]

        def up_to(k: int) -> list[Symbol]:
            out: list[Symbol] = []  # up to the count of the bits below m, built upwards
            for m in range(k.bit_length()):
                if k >> m & 1:
                    a = self.helper(ctx)
                    self.add(a, up_to_power(m))
                    self.add(a, [power(m), *out])
                    out = [a]
            return out

        try:
            head = [power(j) for j in range(lo.bit_length() - 1, -1, -1) if lo >> j & 1]
            tail: list[Symbol] = [self._star(item, ctx)] if hi is None else up_to(hi - lo)
        finally:
            # Nested functions that call one another: compiled (mypyc), they share one
            # environment object that each of them holds, a cycle left to the collector.
            power = up_to_power = up_to = None  # type: ignore[assignment]
        name = self.helper(ctx)
        self.add(name, head + tail)
        return name

    # ---- the whole grammar
    def run(self, start: str, ignore: Sequence[Expr], source: str,
            locations: Mapping[str, str]) -> Grammar:
        todo = [start]
        done: set[str] = set()
        while todo:
            name = todo.pop()
            if name in done:
                continue
            done.add(name)
            self.current = name
            before = len(self.productions)
            for alternative in self.sequences(self.rules[name], name):
                self.add(name, alternative)
            for p in self.productions[before:]:
                for s in p.rhs:
                    if isinstance(s, str) and s in self.rules and s not in done:
                        todo.append(s)
        ignore_ids = []
        for item in ignore:
            node = self.expr_regex(item) if self.fuse else (
                item.regex if isinstance(item, Terminal) else None)
            if node is None:
                raise GrammarError("an ignored item must be regular")
            node = rx.nonempty(node)
            if node is not rx.EMPTY:
                ignore_ids.append(self.lexeme(node))
        try:
            productions = _productive(self.productions, start)
        except EmptyLanguage as e:
            # e.rule is set where EmptyLanguage is raised by _productive
            rule = self.owner.get(e.rule, e.rule)  # type: ignore[arg-type]
            e = EmptyLanguage(e.message if rule == start else
                              f"{e.message}: rule {rule!r} derives none",
                              locations.get(rule))  # type: ignore[arg-type]
            e.rule = rule
            raise e from None
        lexemes = tuple(self.lexemes)
        return Grammar(tuple(productions), lexemes, start, tuple(ignore_ids), source)


def _blame(productions: list[Production], start: str, productive: set[str]) -> str:
    """The rule to blame for an empty language: the deepest rule below ``start`` that
    every way to derive ``start`` goes through and that derives no string. A rule with
    no alternative blames itself; otherwise each alternative follows its first dead
    symbol (not an ancestor: recursion blames the rule), and the rule passes the blame
    down when all its alternatives agree, else keeps it. Iterative (chains of rules
    may be thousands long)."""
    by_lhs: dict[str, list[Production]] = {}
    for p in productions:
        by_lhs.setdefault(p.lhs, []).append(p)
    blamed: dict[str, str] = {}
    follow: dict[str, list[str | None]] = {}
    stack = [start]
    while stack:
        rule = stack[-1]
        if rule in blamed:
            stack.pop()
            continue
        alternatives = by_lhs.get(rule)
        if not alternatives:
            blamed[rule] = rule
            stack.pop()
            continue
        if rule not in follow:  # first visit: follow a dead symbol of each alternative
            follow[rule] = [next((s for s in p.rhs if isinstance(s, str) and s not in productive
                                  and (s not in follow or s in blamed)), None)
                            for p in alternatives]
            stack += [s for s in follow[rule] if s is not None and s not in blamed]
            continue
        found = {blamed.get(s, rule) if s is not None else rule for s in follow[rule]}
        blamed[rule] = found.pop() if len(found) == 1 else rule
        stack.pop()
    return blamed[start]


def _productive(productions: list[Production], start: str) -> list[Production]:
    """Keep the productions that derive a string and are reachable from ``start``."""
    # Worklist: a production waits on each rule name in its right side (a name twice,
    # twice); when the last one becomes productive, so does its left side (linear,
    # however deep the chains). No set per production: most have one name or none.
    waiting = [0] * len(productions)
    users: dict[str, list[int]] = {}
    todo: list[str] = []
    for i, p in enumerate(productions):
        n = 0
        for s in p.rhs:
            if type(s) is str:
                n += 1
                if s in users:
                    users[s].append(i)
                else:
                    users[s] = [i]
        if n:
            waiting[i] = n
        else:
            todo.append(p.lhs)
    productive: set[str] = set()
    while todo:
        name = todo.pop()
        if name in productive:
            continue
        productive.add(name)
        for i in users.get(name, ()):
            waiting[i] -= 1
            if not waiting[i]:
                todo.append(productions[i].lhs)
    if start not in productive:
        e = EmptyLanguage("the grammar accepts no string at all")
        e.rule = _blame(productions, start, productive)
        raise e
    # a production whose names are all productive: waiting counted down to 0
    by_lhs: dict[str, list[Production]] = {}
    for p, w in zip(productions, waiting, strict=True):
        if not w:
            if p.lhs in by_lhs:
                by_lhs[p.lhs].append(p)
            else:
                by_lhs[p.lhs] = [p]
    reachable = {start}
    todo = [start]
    while todo:
        for p in by_lhs.get(todo.pop(), ()):
            for s in p.rhs:
                if type(s) is str and s not in reachable:
                    reachable.add(s)
                    todo.append(s)
    # Repeats dropped, in order; keyed by (lhs, rhs) tuples, hashed without a Python call.
    out = {(p.lhs, p.rhs): p for p, w in zip(productions, waiting, strict=True)
           if not w and p.lhs in reachable}
    return list(out.values())
