"""JSON Schema soundness (random masked walks) and completeness (MaskBench instances).

Soundness: for every schema of the keyword cases (``support.schema_cases``), a few
extra ones, and a deterministic sample of MaskBench schemas, random walks over
the masks (``fill_bitmask``, tokens drawn with a seeded RNG, biased towards
closing tokens and EOS so that walks end) must only ever reach accepting
states whose text is well-formed UTF-8, parses with ``json.loads`` and is valid
for ``jsonschema`` (numbers read exactly, formats asserted). Walks that do not
end with EOS within the step cap are discarded, but most must end.

Completeness (data tier): every valid MaskBench instance of a sample of
schemas that compile is accepted token by token under the Llama-3.1 tokenizer,
except instances whose properties are not in the schema's order (the
documented generation order; counted and reported); no invalid instance is
ever accepted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
from support.schema_cases import CASES, TREE
from support.schema_reference import (
    D4,
    D7,
    D2020,
    accepts_tokens,
    dumps,
    reference_accepts,
    reference_validator,
)

import automask
from automask import EmptyLanguage, Grammar, GrammarError, LimitExceeded, Matcher, Vocabulary

jsonschema = pytest.importorskip("jsonschema")

# --------------------------------------------------------------------------- walks

@dataclass(frozen=True)
class TokenClasses:
    """Per token id: EOS, whitespace only, holds an opener ``{[``, a quote, a closer ``}]``."""

    is_eos: np.ndarray
    blank: np.ndarray
    opens: np.ndarray
    quotes: np.ndarray
    closes: np.ndarray


_CLASSES: dict[int, tuple[Vocabulary, TokenClasses]] = {}


def token_classes(vocab: Vocabulary) -> TokenClasses:
    found = _CLASSES.get(id(vocab))
    if found is None or found[0] is not vocab:
        data = [vocab.token_bytes(i) for i in range(vocab.size)]
        is_eos = np.zeros(vocab.size, dtype=bool)
        is_eos[list(vocab.eos_token_ids)] = True

        def has(chars: bytes) -> np.ndarray:
            return np.array([any(c in d for c in chars) for d in data], dtype=bool)

        blank = np.array([bool(d) and not d.strip(b" \t\r\n") for d in data], dtype=bool)
        found = _CLASSES[id(vocab)] = (
            vocab, TokenClasses(is_eos, blank, has(b"{["), has(b'"'), has(b"}]")))
    return found[1]


def masked_walk(compiled, vocab: Vocabulary, rng: np.random.Generator, check,
                max_steps: int = 300, p_eos: float = 0.5) -> list[int] | None:
    """Random tokens from the mask; ``check(text)`` at every accepting state.

    Tokens are drawn with weights that favour ending things more and more as the
    walk goes on (quotes, then closing brackets; few blank tokens, fewer openers),
    and every other step a few candidates are tried for one that completes the
    output. Returns the tokens when the walk ended with EOS, None at ``max_steps``.
    """
    k = token_classes(vocab)
    m = Matcher(compiled)
    bitmask = automask.allocate_bitmask(1, vocab.size)
    out: list[int] = []
    for step in range(max_steps):
        m.fill_bitmask(bitmask)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: vocab.size]
        allowed = np.flatnonzero(bits)
        assert np.array_equal(allowed, m.allowed_token_ids())
        eos_ok = bool(k.is_eos[allowed].any())
        assert eos_ok == m.is_accepting()
        if eos_ok:
            assert all(bits[e] for e in vocab.eos_token_ids)
            check(vocab.decode_bytes(out))
        ids = allowed[~k.is_eos[allowed]]
        if eos_ok and (len(ids) == 0 or rng.random() < p_eos):
            assert m.accept_token(vocab.eos_token_ids[0])
            assert m.is_terminated()
            return out
        assert len(ids), "empty mask outside an accepting state"
        weights = np.ones(len(ids))
        weights[k.blank[ids]] = 0.05
        weights[k.opens[ids]] /= 1 + step / 10
        weights[k.closes[ids]] *= 1 + step / 10
        weights[k.quotes[ids]] *= 3 + step / 5
        weights /= weights.sum()
        token = None
        if step >= 8 and rng.random() < 0.5:
            for t in rng.choice(ids, size=8, p=weights):
                probe = m.fork()
                if probe.accept_token(int(t)) and probe.is_accepting():
                    token = int(t)
                    break
        if token is None:
            token = int(rng.choice(ids, p=weights))
        assert m.accept_token(token), token
        out.append(token)
    return None


@dataclass
class WalkReport:
    finished: int = 0
    walks: int = 0
    outputs: list[str] = field(default_factory=list)


def soundness_checker(validator, extra=None):
    def check(data: bytes) -> None:
        text = data.decode("utf-8")  # strict: only well-formed UTF-8
        json.loads(text)
        assert reference_accepts(validator, text), f"invalid output: {text!r}"
        if extra is not None:
            extra(text)
    return check


def run_walks(schema, vocab, name: str, walks: int, cls=D2020, reference_schema=None,
              extra=None, max_steps: int = 300, compiled=None, **options) -> WalkReport:
    if compiled is None:
        compiled = automask.compile(Grammar.from_json_schema(schema, **options), vocab)
    check = soundness_checker(
        reference_validator(schema if reference_schema is None else reference_schema, cls),
        extra)
    report = WalkReport()
    for i in range(walks):
        rng = np.random.default_rng(zlib.crc32(f"{name}/{i}".encode()))
        out = masked_walk(compiled, vocab, rng, check, max_steps=max_steps)
        report.walks += 1
        if out is not None:
            report.finished += 1
            report.outputs.append(vocab.decode_bytes(out).decode("utf-8"))
    return report


# --------------------------------------------------------------------------- fast tier

# Schemas whose walks cannot end within the cap on purpose are not here; these may miss
# a walk or two (deep structures), but most walks must end.
EXTRA = [
    ("closed-nested", {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        "pos": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                "items": False, "minItems": 2},
    }, "required": ["id", "name"], "additionalProperties": False}, {}),
    ("strict", {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "boolean"}}},
        "b": {"type": "null"}}}, {"strict": True}),
    ("compact", {"type": "array", "items": {"type": "object", "properties": {
        "k": {"type": "string", "format": "date"}}, "required": ["k"]}}, {"whitespace": "compact"}),
    ("indent", {"type": "object", "properties": {"v": {"type": "array"}}}, {"whitespace": 2}),
    ("numbers", {"type": "array", "prefixItems": [
        {"type": "number", "exclusiveMinimum": -0.5, "maximum": 0.25},
        {"type": "number", "multipleOf": 0.01, "minimum": -1, "maximum": 1},
        {"type": "integer", "multipleOf": 3, "exclusiveMaximum": 10},
        {"type": "number", "not": {"type": "integer"}},
    ], "items": False, "minItems": 4}, {}),
    ("formats", {"type": "array", "prefixItems": [
        {"type": "string", "format": f} for f in ("date", "email", "ipv4", "uuid", "date-time",
                                                   "time", "ipv6")
    ], "items": False}, {}),
    ("fizz-or-buzz", {"type": "array", "items": {"type": "number", "oneOf": [
        {"multipleOf": 3}, {"multipleOf": 0.5}]}}, {}),
    ("oneOf-closed-optional", {"type": "array", "items": {"oneOf": [
        {"properties": {"value": {"type": "string"}, "unit": {"enum": ["s", "m"]}},
         "additionalProperties": False},
        {"properties": {"text": {"type": "string"}}, "additionalProperties": False}]},
        "maxItems": 3}, {}),
    ("not-propertyNames-walk", {"type": "object", "properties": {"b": {"type": "null"}},
                                "not": {"propertyNames": {"pattern": "^[b-z]"}},
                                "additionalProperties": {"type": "null"}}, {}),
    ("format-regex-items", {"type": "array", "items": {"type": "string", "format": "regex"},
                            "maxItems": 3}, {}),
    ("patternProperties-e", {"type": "object", "patternProperties": {"e": {"type": "integer"}},
                             "additionalProperties": False}, {}),
    ("strings", {"type": "array", "items": {"anyOf": [
        {"type": "string", "pattern": "^[a-c]+x?$", "maxLength": 4},
        {"type": "string", "minLength": 3, "maxLength": 3},
        {"type": "string", "pattern": "^[^a-d]*[eé]"},
    ]}}, {}),
]

# Random keys seldom contain "num": walks stay in the key (see "patternProperties-e").
# Untyped array items (maxContains) often open nested containers and strings; random
# items seldom meet several contains counts at once.
# (not-propertyNames: only a key named exactly "0" ends the object; a random walk seldom
# writes one, and the walk below checks the same complement with keys easy to reach.)
HARD_TO_FINISH = {"patternProperties-unanchored": 0, "maxContains": 1, "contains-several": 0,
                  "not-propertyNames": 0}

STRICT_CLOSED = {"type": "object", "properties": {
    "a": {"type": "object", "properties": {"x": {"type": "boolean"}},
          "additionalProperties": False},
    "b": {"type": "null"}}, "additionalProperties": False}

# minProperties >= 2 with open extra keys: duplicate keys collapse under json.loads (see
# test_schema_compiler.test_duplicate_keys_do_not_satisfy_minproperties).
DUPLICATE_PRONE = {"minProperties-with-properties"}

FAST = ([pytest.param(name, schema, cls, {}, id=name) for name, schema, _, cls in CASES
         if name not in DUPLICATE_PRONE]
        + [pytest.param(name, schema, D2020, options, id=name)
           for name, schema, options in EXTRA])


@pytest.fixture(params=["tiny-bpe", "tiny-spm"])
def tiny_vocab(request):
    return request.getfixturevalue("tiny_bpe_vocab" if request.param == "tiny-bpe"
                                   else "tiny_spm_vocab")


@pytest.mark.parametrize("name, schema, cls, options", FAST)
def test_walks_are_sound(name, schema, cls, options, tiny_vocab):
    reference = STRICT_CLOSED if options.get("strict") else None
    extra = None
    if options.get("whitespace") == "compact":
        def extra(text):
            assert text == json.dumps(json.loads(text), ensure_ascii=False,
                                      separators=(",", ":"))
    report = run_walks(schema, tiny_vocab, name, walks=6, cls=cls, reference_schema=reference,
                       extra=extra, **options)
    assert report.finished >= HARD_TO_FINISH.get(name, report.walks // 2), report


def test_walks_reach_deep_recursion(tiny_bpe_vocab):
    """The tree schema walks: sound, and some output nests a few levels."""
    report = run_walks(TREE, tiny_bpe_vocab, "tree-deep", walks=12, max_steps=300)
    assert report.finished >= 6
    assert max(text.count("children") for text in report.outputs) >= 1


def test_walks_minproperties_counts_declared_keys_only(tiny_bpe_vocab):
    # Extra keys may repeat, so only declared keys (each at most once) count towards
    # minProperties: every finished walk must validate, duplicates or not.
    schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                               "b": {"type": "integer"}}, "minProperties": 2}
    report = run_walks(schema, tiny_bpe_vocab, "dup", walks=20)
    assert report.finished >= 10


def test_pydantic_walks_validate_with_pydantic(tiny_vocab):
    pydantic = pytest.importorskip("pydantic")
    from typing import Literal

    class Item(pydantic.BaseModel):
        sku: str = pydantic.Field(pattern=r"^[A-Z]{2}[0-9]{2}$")
        qty: int = pydantic.Field(ge=1, le=9)

    class Order(pydantic.BaseModel):
        id: int
        status: Literal["new", "paid"]
        items: list[Item] = pydantic.Field(max_length=2)
        note: str | None = None

    report = run_walks(Order.model_json_schema(), tiny_vocab, "pydantic-order", walks=6,
                       extra=Order.model_validate_json)
    assert report.finished >= 3, report


# --------------------------------------------------------------------------- data tier

_LLAMA: dict[str, Vocabulary] = {}


def load_llama(shared_data: Path) -> Vocabulary:
    if "v" not in _LLAMA:
        _LLAMA["v"] = Vocabulary.from_file(shared_data / "tokenizers" / "llama-3.1" /
                                           "tokenizer.json")
    return _LLAMA["v"]


@pytest.fixture(scope="module")
def llama(shared_data) -> Vocabulary:
    return load_llama(shared_data)


LLAMA_HAND = ["properties-required", "patternProperties", "propertyNames", "prefixItems-open",
              "minContains", "min-maxLength", "format-date", "format-uuid",
              "multipleOf-decimal", "exclusive-decimal", "anyOf", "oneOf-discriminated",
              "not-enum-untyped", "recursion-tree", "enum"]


@pytest.mark.data
def test_walks_are_sound_llama(llama):
    cases = {name: (schema, cls) for name, schema, _, cls in CASES}
    extras = {name: (schema, options) for name, schema, options in EXTRA}
    ended = total = 0
    for name in LLAMA_HAND:
        schema, cls = cases[name]
        report = run_walks(schema, llama, "llama/" + name, walks=3, cls=cls)
        ended, total = ended + report.finished, total + report.walks
    for name in ("closed-nested", "numbers", "formats"):
        schema, options = extras[name]
        report = run_walks(schema, llama, "llama/" + name, walks=3, **options)
        ended, total = ended + report.finished, total + report.walks
    assert ended >= total * 2 // 3


# ---- MaskBench

MASKBENCH_SCHEMAS = 150   # completeness sample size
MASKBENCH_WALKED = 40     # of which the soundness walks use the first ones
BOUND_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties",
                  "maxProperties")


def _heavy(x) -> bool:
    """Large counted repetitions (long strings, many items) are slow to build and to walk."""
    if isinstance(x, dict):
        return any((k in BOUND_KEYWORDS and isinstance(v, (int, float)) and v > 64)
                   or _heavy(v) for k, v in x.items())
    if isinstance(x, list):
        return any(_heavy(v) for v in x)
    return False


def reference_class(schema):
    cls = jsonschema.validators.validator_for(schema, default=D2020)
    return cls if cls in (D2020, D7, D4, jsonschema.Draft6Validator,
                          jsonschema.Draft201909Validator) else D2020


@dataclass
class Selected:
    row: dict
    compiled: object


@dataclass
class MaskBench:
    selected: list[Selected]
    skipped: dict[str, int]
    empty_with_valid: list[str]  # ids of schemas with valid instances and EmptyLanguage


def _pointer_target(root, ref: str):
    if ref != "#" and not ref.startswith("#/"):
        return None
    node = root
    for part in ref[2:].split("/") if ref != "#" else []:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


@pytest.fixture(scope="module")
def maskbench(shared_data, llama) -> MaskBench:
    """The first schemas, in a fixed hashed order, that are light and compile."""
    with gzip.open(shared_data / "maskbench-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    rows.sort(key=lambda r: hashlib.sha256(("automask/" + r["id"]).encode()).hexdigest())
    out = MaskBench([], {}, [])

    def skip(reason):
        out.skipped[reason] = out.skipped.get(reason, 0) + 1

    for row in rows:
        if len(out.selected) >= MASKBENCH_SCHEMAS:
            break
        schema = row["schema"]
        if not row["tests"] or len(json.dumps(schema)) > 3000 or _heavy(schema):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                grammar = Grammar.from_json_schema(schema)
        except EmptyLanguage:
            skip("EmptyLanguage")
            if any(t["valid"] for t in row["tests"]):
                out.empty_with_valid.append(row["id"])
            continue
        except automask.UnsupportedFeature:
            skip("UnsupportedFeature")
            continue
        except (GrammarError, LimitExceeded) as e:
            skip(type(e).__name__)
            continue
        out.selected.append(Selected(row, automask.compile(grammar, llama)))
    assert len(out.selected) == MASKBENCH_SCHEMAS
    return out


@pytest.mark.data
def test_maskbench_walks_are_sound(maskbench, llama):
    ended = total = 0
    for sel in maskbench.selected[:MASKBENCH_WALKED]:
        schema = sel.row["schema"]
        report = run_walks(schema, llama, "mb/" + sel.row["id"], walks=2,
                           cls=reference_class(schema), compiled=sel.compiled)
        ended, total = ended + report.finished, total + report.walks
    assert ended >= total // 2


@pytest.mark.data
@pytest.mark.slow
def test_maskbench_walks_are_sound_more(maskbench, llama):
    for sel in maskbench.selected:
        schema = sel.row["schema"]
        run_walks(schema, llama, "mb-more/" + sel.row["id"], walks=4,
                  cls=reference_class(schema), compiled=sel.compiled)


# ---- property order


class PropertyOrder:
    """Whether an instance lists its properties in the order the compiler generates:
    ``properties`` order over the conjunction (``$ref``, ``allOf``, the anyOf/oneOf
    branches the value is valid for), then ``required``, then other keys."""

    def __init__(self, root, validator):
        self.root = root
        self.validator = validator

    def expand(self, schemas) -> list[dict] | None:
        out: list[dict] = []
        seen: set[int] = set()
        todo = list(schemas)
        while todo:
            s = todo.pop(0)
            if s is True or id(s) in seen:
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                raise ValueError(f"not a schema: {s!r}")
            seen.add(id(s))
            out.append(s)
            if isinstance(s.get("$ref"), str):
                target = _pointer_target(self.root, s["$ref"])
                if target is None:
                    raise ValueError(f"unresolved $ref {s['$ref']!r}")
                todo.append(target)
            todo.extend(s.get("allOf") or [])
        return out

    def alternatives(self, schemas, value, depth: int = 0):
        if depth > 40:
            raise ValueError("anyOf/oneOf nested too deeply")
        members = self.expand(schemas)
        if members is None:
            return
        for m in members:
            for kw in ("anyOf", "oneOf"):
                if kw in m:
                    # Drop what expand() followed already, and the combinator being split.
                    rest = [{k: v for k, v in x.items()
                             if k not in ("$ref", "allOf") and (x is not m or k != kw)}
                            for x in members]
                    for branch in m[kw]:
                        if self.validator.evolve(schema=branch).is_valid(value):
                            yield from self.alternatives(rest + [branch], value, depth + 1)
                    return
        yield members

    def ok(self, value, schemas) -> bool:
        if not isinstance(value, (dict, list)):
            return True
        return any(self._ok(value, members) for members in self.alternatives(schemas, value))

    def _ok(self, value, members) -> bool:
        if isinstance(value, dict):
            order: list[str] = []
            for m in members:
                order += [k for k in m.get("properties") or {} if k not in order]
            for m in members:
                order += [k for k in m.get("required") or [] if k not in order]
            pos = [order.index(k) if k in order else len(order) for k in value]
            if pos != sorted(pos):
                return False
            return all(self.ok(x, self.value_schemas(members, k)) for k, x in value.items())
        contains = [m["contains"] for m in members if "contains" in m]
        for i, x in enumerate(value):
            subs = self.item_schemas(members, i)
            if not (self.ok(x, subs) or (contains and self.ok(x, subs + contains))):
                return False
        return True

    @staticmethod
    def value_schemas(members, key: str) -> list:
        out = []
        for m in members:
            mine = []
            if key in (m.get("properties") or {}):
                mine.append(m["properties"][key])
            for pattern, sub in (m.get("patternProperties") or {}).items():
                if re.search(pattern, key):
                    mine.append(sub)
            if not mine and "additionalProperties" in m:
                mine.append(m["additionalProperties"])
            out += mine
        return out

    @staticmethod
    def item_schemas(members, i: int) -> list:
        out = []
        for m in members:
            prefix = m.get("prefixItems") if isinstance(m.get("prefixItems"), list) else (
                m.get("items") if isinstance(m.get("items"), list) else [])
            if i < len(prefix):
                out.append(prefix[i])
            elif isinstance(m.get("items"), list):
                if "additionalItems" in m:
                    out.append(m["additionalItems"])
            elif "items" in m:
                out.append(m["items"])
        return out


def test_property_order_detection():
    schema = {"type": "object", "properties": {"a": {}, "b": {
        "anyOf": [{"type": "object", "properties": {"x": {}, "y": {}}},
                  {"type": "array", "items": {"$ref": "#/$defs/p"}}]}},
        "required": ["z"], "$defs": {"p": {"properties": {"m": {}, "n": {}}}}}
    order = PropertyOrder(schema, D2020(schema))
    for x, want in [({"a": 1, "b": 2, "z": 3, "extra": 4}, True), ({"b": 1, "a": 2}, False),
                    ({"a": 1, "extra": 1, "z": 1}, False), ({"b": {"x": 1, "y": 2}}, True),
                    ({"b": {"y": 1, "x": 2}}, False), ({"b": [{"m": 1, "n": 2}]}, True),
                    ({"b": [{"n": 1, "m": 2}]}, False), ({"z": 1, "q": 2}, True)]:
        assert order.ok(x, [schema]) == want, x


# ---- completeness


OLD_DRAFTS = (D4, jsonschema.Draft6Validator, D7)


def ref_siblings_ignored(schema) -> bool:
    """Whether ``schema`` is draft-04/06/07 and has a ``$ref`` with sibling keywords, which
    those drafts ignore and the compiler applies (documented: 2020-12 semantics)."""
    def walk(x) -> bool:
        if isinstance(x, dict):
            if "$ref" in x and set(x) - {"$ref", "description", "title", "$comment",
                                         "default", "examples"}:
                return True
            return any(walk(v) for k, v in x.items() if k not in ("enum", "const"))
        if isinstance(x, list):
            return any(walk(v) for v in x)
        return False

    return jsonschema.validators.validator_for(schema, default=D2020) in OLD_DRAFTS and walk(
        schema)


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1


def check_instances(selected: list[Selected], vocab: Vocabulary) -> Tally:
    tally = Tally()
    for sel in selected:
        row, schema = sel.row, sel.row["schema"]
        ref = reference_validator(schema, reference_class(schema))
        order = PropertyOrder(schema, ref)
        for case in row["tests"]:
            try:
                text = dumps(case["data"])
                text.encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                tally.add("not UTF-8 JSON text (skipped)")
                continue
            accepted = accepts_tokens(sel.compiled, vocab, text)
            if not case["valid"]:
                if accepted:
                    tally.failures.append(
                        f"UNSOUND {row['id']}: invalid instance accepted (jsonschema: "
                        f"{'valid' if reference_accepts(ref, text) else 'invalid'}): "
                        f"{text[:300]}")
                else:
                    tally.add("invalid rejected")
                continue
            if not reference_accepts(ref, text):
                tally.add("valid by label, invalid for jsonschema+formats (skipped)")
                continue
            try:
                in_order = order.ok(case["data"], [schema])
            except ValueError:
                tally.add("property order undecided (skipped)")
                continue
            if not in_order:
                tally.add("properties out of schema order (skipped)")
                continue
            if accepted:
                tally.add("valid accepted")
            elif ref_siblings_ignored(schema) and not reference_accepts(
                    reference_validator(schema, D2020), text):
                tally.add("valid only as $ref siblings are ignored before 2019-09 (skipped)")
            else:
                tally.failures.append(f"INCOMPLETE {row['id']}: valid instance rejected: "
                                      f"{text[:300]}")
    return tally


@pytest.mark.data
def test_maskbench_completeness(maskbench, llama, capsys):
    tally = check_instances(maskbench.selected, llama)
    with capsys.disabled():
        print(f"\nMaskBench completeness: {len(maskbench.selected)} schemas (passed over while "
              f"selecting: {maskbench.skipped}), instances: {tally.counts}")
    assert tally.failures == []
    assert tally.counts.get("valid accepted", 0) >= 150
    assert tally.counts.get("invalid rejected", 0) >= 150
    assert maskbench.empty_with_valid == []
