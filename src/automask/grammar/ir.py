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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from automask.budget import check_time, time_budget
from automask.errors import EmptyLanguage, GrammarError, LimitExceeded
from automask.gc_pause import paused_gc, untrack
from automask.regex import nodes as rx

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

    # The front-ends live in their own modules; these are the public doors.
    @classmethod
    def from_regex(cls, pattern: str) -> Grammar:
        """The language of ``pattern`` (whole-output match; see :mod:`automask.regex.parser`)."""
        from automask.regex.parser import parse_regex

        return lower({"root": Terminal(parse_regex(pattern))}, "root", source="regex")

    @classmethod
    def from_choices(cls, choices: Sequence[str]) -> Grammar:
        """Exactly one of the given strings (a list, tuple or other iterable of ``str``)."""
        if isinstance(choices, (str, bytes, bytearray)):
            raise TypeError(f"from_choices takes a sequence of strings, not one "
                            f"{type(choices).__name__}: wrap it in a list ([text])")
        choices = list(choices)
        if not choices:
            raise GrammarError("from_choices needs at least one choice")
        literals = []
        for i, c in enumerate(choices):
            if not isinstance(c, str):
                raise TypeError(f"choice {i} must be a str, not {type(c).__name__}: {c!r}")
            try:
                literals.append(rx.literal(c.encode("utf-8")))
            except UnicodeEncodeError as e:
                raise GrammarError(f"choice {i} has a lone surrogate U+{ord(c[e.start]):04X}, "
                                   "which has no UTF-8 form", f"choice {i}, col {e.start + 1}"
                                   ) from None
        return lower({"root": Terminal(rx.alt_of(literals))}, "root", source="choices")

    @classmethod
    def from_gbnf(cls, text: str) -> Grammar:
        """A llama.cpp GBNF grammar; ``root`` is the start rule."""
        from automask.grammar.gbnf import parse_gbnf

        return parse_gbnf(text)

    @classmethod
    def from_lark(cls, text: str, start: str = "start") -> Grammar:
        """A Lark grammar (the language of Lark's Earley parser, every match length)."""
        from automask.grammar.lark import parse_lark

        return parse_lark(text, start=start)

    @classmethod
    def from_tags(cls, tags, *, triggers=None, free_text: bool = True, min_segments: int = 0,
                  max_segments: int | None = None) -> Grammar:
        """Free text in which a trigger opens a segment ``begin content end`` of one of the
        ``tags`` (tool calls); see :mod:`automask.grammar.segments`."""
        from automask.grammar.segments import tagged_segments

        return tagged_segments(tags, triggers=triggers, free_text=free_text,
                               min_segments=min_segments, max_segments=max_segments)

    @classmethod
    def after_reasoning(cls, inner: Grammar, *, begin: str = "<think>", end: str = "</think>",
                        required: bool = False) -> Grammar:
        """Free text closed by ``end`` (after an optional, or ``required``, ``begin``), then
        ``inner``: a reasoning block before the constrained answer."""
        from automask.grammar.segments import after_reasoning

        return after_reasoning(inner, begin=begin, end=end, required=required)

    @classmethod
    def from_json_schema(cls, schema, **options) -> Grammar:
        """JSON texts valid under a JSON Schema (dict, bool, or JSON text as str or bytes).

        The schema must be a JSON document (no cycles, string keys, JSON values,
        no lone surrogates, at most 256 levels deep): anything else is a typed
        error at its JSON pointer (see :mod:`automask.schema.document`).

        Options: ``whitespace`` ("flexible", "compact" or an indent),
        ``strict`` (absent additionalProperties means false, and ``time`` /
        ``date-time`` have no leap second ``:60``), ``lenient``
        (warn about and ignore unsupported keywords instead of raising),
        ``max_whitespace``, ``max_rules``, ``max_seconds`` (CPU-time limit,
        default 2; None: none; past it :class:`LimitExceeded`). See
        :mod:`automask.schema.compiler`.
        """
        from automask.schema.compiler import compile_schema

        seconds = options.pop("max_seconds", SCHEMA_SECONDS)
        with paused_gc(), time_budget(seconds, "compiling the JSON Schema"):
            return compile_schema(schema, **options)

    @classmethod
    def from_pydantic(cls, model, **options) -> Grammar:
        """JSON texts valid for a pydantic model class (its ``model_json_schema()``)."""
        schema_of = getattr(model, "model_json_schema", None)
        if schema_of is None:
            raise TypeError("from_pydantic takes a pydantic v2 model class")
        return cls.from_json_schema(schema_of(), **options)

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


# --------------------------------------------------------------------------- lowering

MAX_PRODUCTIONS = 200_000
#: groups (and repetitions of repetitions) nested deeper than this are refused by the
#: grammar text front ends, where they are read: they are parsed and lowered recursively
#: (real grammars nest a few levels; a regex allows 64 groups)
MAX_NESTING = 100
SCHEMA_SECONDS = 2.0  # default CPU-time limit of a JSON Schema compile


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
    try:
        return _Lowerer(rules, fuse).run(start, ignore, source, locations or {})
    except RecursionError:  # rules nested hundreds deep: walked recursively, so refused
        raise LimitExceeded("the grammar's rules are nested too deeply "
                            "(Python's recursion limit)") from None


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

    # ---- regularity: which expressions are regular (no recursion through them)
    def rule_regex(self, name: str, visiting: set[str]) -> rx.Node | None:
        if name in self.regular:
            return self.regular[name]
        if name in visiting:
            return None  # recursive
        visiting.add(name)
        node = self.expr_regex(self.rules[name], visiting)
        visiting.discard(name)
        self.regular[name] = node
        return node

    def expr_regex(self, e: Expr, visiting: set[str]) -> rx.Node | None:
        """The regex of ``e`` if it is regular (and fusion is on), else None."""
        if isinstance(e, Terminal):
            return e.regex
        if not self.fuse:
            return None
        if isinstance(e, Ref):
            self._check_ref(e)
            return self.rule_regex(e.name, visiting)
        if isinstance(e, (Seq, Choice)):
            parts = [self.expr_regex(i, visiting) for i in e.items]
            if any(p is None for p in parts):
                return None
            return rx.concat(*parts) if isinstance(e, Seq) else rx.alt_of(parts)
        if isinstance(e, Repeat):
            inner = self.expr_regex(e.item, visiting)
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
        node = self.expr_regex(e, set())
        if node is not None:
            syms = self.regex_symbols(node)
            return [] if syms is None else [syms]
        if isinstance(e, Choice):
            out = []
            for item in e.items:
                out.extend(self.sequences(item, ctx))
            return out
        if isinstance(e, Seq):
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
                node = self.expr_regex(item, set())
                if node is not None:
                    pending.append(node)
                    if not self.fuse and not flush():
                        return []
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

    def symbol(self, e: Expr, ctx: str) -> Symbol | None:
        """One symbol standing for ``e`` ('' for ε, None for the empty language)."""
        if isinstance(e, Ref):
            self._check_ref(e)
            node = self.expr_regex(e, set())
            if node is None:
                return e.name
        key = id(e)
        if key in self._symbol_cache:
            return self._symbol_cache[key]
        node = self.expr_regex(e, set())
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
            result = self._rule_for(self.sequences(e, ctx), ctx)
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
        head = [item] * e.lo
        if e.hi is None:
            # name ::= item^lo tail ; tail ::= ε | tail item   (left recursion suits Earley)
            tail = self.helper(ctx)
            self.add(tail, [])
            self.add(tail, [tail, item])
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
            before = len(self.productions)
            for alternative in self.sequences(self.rules[name], name):
                self.add(name, alternative)
            for p in self.productions[before:]:
                for s in p.rhs:
                    if isinstance(s, str) and s in self.rules and s not in done:
                        todo.append(s)
        ignore_ids = []
        for e in ignore:
            node = self.expr_regex(e, set()) if self.fuse else (
                e.regex if isinstance(e, Terminal) else None)
            if node is None:
                raise GrammarError("an ignored item must be regular")
            node = rx.nonempty(node)
            if node is not rx.EMPTY:
                ignore_ids.append(self.lexeme(node))
        try:
            productions = _productive(self.productions, start)
        except EmptyLanguage as e:
            rule = self.owner.get(e.rule, e.rule)
            e = EmptyLanguage(e.message if rule == start else
                              f"{e.message}: rule {rule!r} derives none", locations.get(rule))
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
    # Worklist: a production waits on its distinct rule names; when the last one
    # becomes productive, so does its left side (linear, however deep the chains).
    waiting = [len({s for s in p.rhs if isinstance(s, str)}) for p in productions]
    users: dict[str, list[int]] = {}
    for i, p in enumerate(productions):
        for name in {s for s in p.rhs if isinstance(s, str)}:
            users.setdefault(name, []).append(i)
    productive: set[str] = set()
    todo = [p.lhs for p, w in zip(productions, waiting, strict=True) if w == 0]
    while todo:
        name = todo.pop()
        if name in productive:
            continue
        productive.add(name)
        for i in users.get(name, ()):
            waiting[i] -= 1
            if waiting[i] == 0:
                todo.append(productions[i].lhs)
    if start not in productive:
        e = EmptyLanguage("the grammar accepts no string at all")
        e.rule = _blame(productions, start, productive)
        raise e
    kept = [p for p in productions
            if p.lhs in productive and all(isinstance(s, int) or s in productive for s in p.rhs)]
    by_lhs: dict[str, list[Production]] = {}
    for p in kept:
        by_lhs.setdefault(p.lhs, []).append(p)
    reachable = {start}
    todo = [start]
    while todo:
        for p in by_lhs.get(todo.pop(), []):
            for s in p.rhs:
                if isinstance(s, str) and s not in reachable:
                    reachable.add(s)
                    todo.append(s)
    seen: set[Production] = set()
    out = []
    for p in kept:
        if p.lhs in reachable and p not in seen:
            seen.add(p)
            out.append(p)
    return out
