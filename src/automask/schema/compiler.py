"""JSON Schema → grammar IR.

A schema position compiles as a *conjunction*: the list of schema objects
that must all hold there (the schema itself, its ``allOf`` members, the
targets of its ``$ref``s). Combinators distribute over it (``anyOf``/
``oneOf`` become a choice of conjunctions), and for each JSON type the
members' keywords combine exactly: strings by regex intersection, numbers by
the tightest bounds, objects key by key, arrays position by position. Every
conjunction becomes one grammar rule, memoized by the schema positions it
holds, so recursive ``$ref``s become recursive rules with no depth limit.

The compile normalizes, then lowers: the whole document is checked (JSON, keyword
values) and its ``$id``s and anchors indexed up front; each position is interned the
first time a conjunction meets it, with its references and ``allOf`` resolved and its
schema object read into a typed :class:`~automask.schema.shapes.Shape` once; the
lowering reads shapes, and the schemas the compiler writes itself (complements,
rewrites) are shapes built typed (see ``docs/architecture.md``).

Nothing is ignored silently: a keyword with a validation meaning that is not
enforced raises :class:`UnsupportedFeature` naming it and its JSON pointer
(``lenient=True`` turns that into a warning and ignores the keyword).
Annotations (``title``, ``description``, ``default``, ``examples``, …) and
unknown keywords carry no validation meaning and are ignored by design.

Parts: :mod:`~automask.schema.conjunctions` (the rule per conjunction, and the
distribution of combinators), one module per keyword family
(:mod:`~automask.schema.strings`, :mod:`~automask.schema.number_keywords`,
:mod:`~automask.schema.objects`, :mod:`~automask.schema.arrays`,
:mod:`~automask.schema.values` and :mod:`~automask.schema.concrete` for ``enum``/
``const``, :mod:`~automask.schema.one_of`, :mod:`~automask.schema.conditionals`),
:mod:`~automask.schema.refs` (``$id``, anchors, ``$ref``, ``$dynamicRef``),
:mod:`~automask.schema.complement` (``not``, the failing side of ``if`` and
``oneOf``), :mod:`~automask.schema.annotations` (unevaluated*),
:mod:`~automask.schema.keywords` (well-formed values),
:mod:`~automask.schema.shapes` (the typed form of a schema object, and the shapes the
compiler writes), :mod:`~automask.schema.normalize` (the user's schema objects read into
shapes), :mod:`~automask.schema.lowering` (options, the reporter, the interface
the families lower through), and :mod:`~automask.schema.subschema` (positions and shared
helpers).
"""

from __future__ import annotations

import sys

from automask.budget import time_budget
from automask.errors import EmptyLanguage, LimitExceeded
from automask.gc_pause import RECURSION_ERRORS, paused_gc
from automask.grammar.ir import Choice, Expr, Grammar, Ref, Repeat, Seq, Terminal, lower
from automask.schema.annotations import mentions_unevaluated
from automask.schema.conjunctions import Conjunctions, position_of
from automask.schema.document import load_document
from automask.schema.json_text import JsonPieces, Layout
from automask.schema.keywords import check_document
from automask.schema.lowering import Options
from automask.schema.refs import References
from automask.schema.subschema import Subschema

__all__ = ["SCHEMA_SECONDS", "Options", "compile_schema"]

SCHEMA_SECONDS = 2.0  # default CPU-time limit of a JSON Schema compile


def compile_schema(schema, **options) -> Grammar:
    """The grammar of the JSON texts valid under ``schema`` (a dict, bool, or JSON text as
    str or bytes; checked first by :func:`~automask.schema.document.load_document`):
    ``Grammar.from_json_schema``, whose docstring lists the options. It runs under a
    CPU-time limit, ``max_seconds`` (default :data:`SCHEMA_SECONDS`; None: none)."""
    seconds = options.pop("max_seconds", SCHEMA_SECONDS)
    with paused_gc(), time_budget(seconds, "compiling the JSON Schema", start_now=True):
        return _compile_schema(schema, options)


def _compile_schema(schema, options: dict) -> Grammar:
    schema = load_document(schema)  # JSON, acyclic, UTF-8 strings, bounded depth
    unknown = set(options) - set(Options.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        compiler = SchemaCompiler(schema, Options(**options))
        try:
            return compiler.run()
        except EmptyLanguage:
            if not compiler.conj.same.shared:
                raise
            # Blamed anew with each position compiled apart: a rule shared by equal
            # subschemas would name the first of them, maybe not the one that is required.
            return SchemaCompiler(schema, Options(**options), share_equal=False).run()
    except RECURSION_ERRORS:
        raise LimitExceeded("schema is nested too deeply to compile", "#") from None
    except LimitExceeded as e:
        if e.location is None:  # a pass over the whole document (or the lowering)
            raise LimitExceeded(e.message, "#") from None
        raise
    finally:
        sys.setrecursionlimit(limit)



class SchemaCompiler:
    """One compile: the document's references, the conjunction builder, and the driver."""

    def __init__(self, schema, options: Options, *, share_equal: bool = True):
        self.options = options
        self.rules: dict[str, Expr] = {}
        self.json = JsonPieces(Layout.make(options.whitespace, options.max_whitespace),
                               self.rules)
        self.root_base = "file:///automask/root.json"
        self.refs = refs = References(schema, self.root_base)
        check_document(schema, self.root_base)
        self.conj = Conjunctions(options, self.json, refs, mentions_unevaluated(schema),
                                 self.root_base, share_equal=share_equal)
        root_base = refs.base_of.get(id(schema), self.root_base)
        self.root = Subschema(refs.scoped_uri(self.root_base + "#", refs.enter(0, root_base)),
                              schema, self.root_base)

    def run(self) -> Grammar:
        try:
            return self._run()
        finally:
            # The grammar holds none of the compile's state. Freed here, while the
            # collector is paused: an error's traceback keeps this compiler alive past the
            # pause, and the first young collection after it would walk every rule and
            # member (a compile stopped at its time limit: 400,000 objects, 130 ms).
            self.conj.close()
            self.rules.clear()

    def _run(self) -> Grammar:
        js = self.json
        self.rules["root"] = Seq((js.lead(self.conj.conj_ref([self.root])), Terminal(js.layout.ws)))
        js.finish()
        # Lexemes stay JSON-token sized (keys, strings, numbers, punctuation), not
        # fused into one regex per object: a lexer state inside a string or a key
        # then recurs across positions and schemas, so its token scan is shared.
        try:
            return lower(self.rules, "root", fuse=False, source="json-schema")
        except EmptyLanguage as e:
            raise self.empty_at(e.rule) from None

    def empty_at(self, rule: str | None) -> EmptyLanguage:
        """The error for a schema that accepts nothing, at the position to blame (the
        conjunction behind ``rule``: a lone member, or the members that contradict)."""
        names = self.conj.keys
        if rule is not None and rule.endswith("+ws"):  # a rule's leading twin (JsonPieces)
            rule = rule[:-3]
        if rule not in names:  # a helper rule of an object or array: its conjunction's
            rule = self._rule_owner(rule, names)
        site = self.root.uri if rule is None else self.conj.sites.get(rule, self.root.uri)
        where = position_of(site, self.root_base)
        others: list[str] = []
        for uri in () if rule is None else names.get(rule, ()):
            pointer = position_of(uri, self.root_base)
            if pointer != where and pointer not in others:
                others.append(pointer)
        also = f" (where {', '.join(others)} must hold too)" if others else ""
        e = EmptyLanguage(f"the schema accepts no JSON value: nothing is valid at {where}{also}",
                          where)
        e.rule = rule
        return e

    def _rule_owner(self, rule: str | None, names: dict) -> str | None:
        """The conjunction rule whose expression made ``rule`` (found through the helper
        rules it refers to, which are not conjunctions; each helper walked once)."""
        seen: set[str] = set()
        for owner in names:
            todo: list[Expr] = [self.rules[owner]]
            while todo:
                e = todo.pop()
                if isinstance(e, Ref):
                    if e.name == rule:
                        return owner
                    if e.name not in names and e.name not in seen and e.name in self.rules:
                        seen.add(e.name)
                        todo.append(self.rules[e.name])
                elif isinstance(e, (Seq, Choice)):
                    todo += e.items
                elif isinstance(e, Repeat):
                    todo.append(e.item)
        return None
