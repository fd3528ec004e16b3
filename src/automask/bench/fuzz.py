"""``automask bench fuzz``: a seeded, bounded campaign of hostile inputs, by family.

Each case is an input anyone could send a server (a regex, a JSON Schema as
text or as a Python object, a GBNF grammar, a list of choices), built by a
seeded generator: the shapes the hostile-input campaign found (deep nesting,
huge counts, long alternations, lone surrogates, non-JSON values, cycles),
plus random mutations of MaskBench schemas and of the GBNF files beside the
repository. A case compiles the input and takes up to a few masked steps
(each step picks a random allowed token), and ends in one of:

* ``ok``: compiled and masked (or proved empty, which is typed too);
* ``typed``: an :class:`~automask.errors.AutomaskError` (the promise);
* ``untyped``: any other exception (a bug: its type is counted);
* ``overrun``: took longer than the time limits plus :data:`MARGIN_S`, whatever
  it ended in (a limit that did not fire).

Peak memory is the process's resident high-water mark after each family, and
the largest resident growth of a single case (read from ``/proc``). A
campaign holds everything in one process, as a server would.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from automask.bench.maskbench import SHARED_DATA, load_records
from automask.bench.stats import printer, text_table
from automask.errors import AutomaskError

#: seconds past the compile + mask limits a case may take before it counts as an overrun
MARGIN_S = 1.0
MASK_STEPS = 4
FAMILIES = ("regex", "schema-text", "schema-object", "schema-mutation", "gbnf",
            "gbnf-mutation", "choices")
OUTCOMES = ("ok", "typed", "untyped", "overrun")


@dataclass
class Case:
    family: str
    kind: str  # regex, json, gbnf, choices
    value: Any
    label: str


@dataclass
class FamilyResult:
    family: str
    outcomes: Counter = field(default_factory=Counter)
    untyped: Counter = field(default_factory=Counter)  # exception type -> count
    examples: list[dict] = field(default_factory=list)  # the first few bad cases
    slowest_s: float = 0.0
    largest_rss_growth_mb: float = 0.0
    peak_rss_mb: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.family, "cases": sum(self.outcomes.values()),
                **{k: self.outcomes.get(k, 0) for k in OUTCOMES},
                "untyped_types": dict(self.untyped), "examples": self.examples,
                "slowest_s": self.slowest_s, "largest_rss_growth_mb": self.largest_rss_growth_mb,
                "peak_rss_mb": self.peak_rss_mb}


# ----------------------------------------------------------------------------- generators

def _nested(depth: int, wrap: Callable[[Any], Any], leaf: Any) -> Any:
    out = leaf
    for _ in range(depth):
        out = wrap(out)
    return out


def _regexes(rng: random.Random) -> Iterator[tuple[str, str]]:
    atoms = ["a", "[a-z]", r"\d", ".", "(ab|cd)", "[^x]", r"\w+", "é", "\ud800", "(", ")",
             "[", "]", "{2,", "*", "+?", "\\", "\x00"]
    while True:
        pick = rng.randrange(7)
        if pick == 0:
            n = rng.choice([100, 1_000, 5_000])
            yield f"paren depth {n}", "(" * n + "a" + ")" * n
        elif pick == 1:
            n = rng.choice([10**4, 10**6, 10**9])
            yield f"count {n}", f"[a-z]{{{n}}}"
        elif pick == 2:
            n = rng.choice([1_000, 30_000])
            yield f"alternation of {n}", "|".join(f"w{i}x{i * 7}" for i in range(n))
        elif pick == 3:
            yield "long literal", "ab" * rng.choice([10_000, 200_000])
        elif pick == 4:
            yield "nested counts", "((a{1,30}){1,30}){1,30}"
        else:
            yield "random atoms", "".join(rng.choice(atoms) for _ in range(rng.randrange(1, 40)))


def _schema_objects(rng: random.Random) -> Iterator[tuple[str, Any]]:
    while True:
        pick = rng.randrange(9)
        if pick == 0:
            d: dict[str, Any] = {"type": "object", "properties": {}}
            d["properties"]["self"] = d  # a cycle
            yield "cycle", d
        elif pick == 1:
            n = rng.choice([1_000, 20_000])
            yield f"dict depth {n}", _nested(n, lambda s: {"items": s}, {})
        elif pick == 2:
            yield "non-string key", {"type": "object", "properties": {1: {"type": "string"}}}
        elif pick == 3:
            yield "const object()", {"const": object()}
        elif pick == 4:
            yield "surrogate const", {"const": "a\udc00b"}
        elif pick == 5:
            yield "NaN enum", {"enum": [float("nan"), 1]}
        elif pick == 6:
            yield "huge minItems", {"type": "array", "minItems": rng.choice([10**6, 10**9])}
        elif pick == 7:
            yield "long keys deep", _nested(300, lambda s: {"properties": {"k" * 2_000: s}},
                                            {"type": "string"})
        else:
            yield "$schema int", {"$schema": 42, "type": "string"}


def _schema_texts(rng: random.Random) -> Iterator[tuple[str, str | bytes]]:  # bytes: not UTF-8
    while True:
        pick = rng.randrange(6)
        if pick == 0:
            n = rng.choice([500, 5_000])
            yield f"text depth {n}", '{"items":' * n + "{}" + "}" * n
        elif pick == 1:
            n = rng.choice([5_000, 60_000])
            props = ",".join(f'"p{i}":{{"type":"integer"}}' for i in range(n))
            yield f"{n} properties", '{"type":"object","properties":{' + props + "}}"
        elif pick == 2:
            yield "not UTF-8", b'{"type": "string", "\xff": 1}'
        elif pick == 3:
            yield "truncated", '{"type": "object", "properties": {"a": {"type": '
        elif pick == 4:
            yield "anyOf self", '{"anyOf": [{"$ref": "#"}]}'
        else:
            yield "big pattern", json.dumps({"type": "string",
                                             "pattern": "(a|b)" * rng.choice([50, 2_000])})


def _mutate_json(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """One random, often hostile, change somewhere inside a JSON value."""
    hostile = [float("nan"), 10**12, -1, "", "\ud800", None, True, [], {}, 1.5,
               {"$ref": "#"}, {"$ref": "#/nowhere"}, {"not": {}}, "x" * 10_000]
    if isinstance(value, dict) and value and depth < 20 and rng.random() < 0.8:
        key = rng.choice(list(value))
        out = dict(value)
        if rng.random() < 0.3:
            out[key] = rng.choice(hostile)
        else:
            out[key] = _mutate_json(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and depth < 20 and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return [*value[:i], _mutate_json(rng, value[i], depth + 1), *value[i + 1:]]
    return rng.choice(hostile)


def _schema_mutations(rng: random.Random, records: list[dict]) -> Iterator[tuple[str, Any]]:
    while True:
        rec = rng.choice(records)
        yield rec["id"], _mutate_json(rng, rec["schema"])


def _gbnf(rng: random.Random) -> Iterator[tuple[str, str]]:
    while True:
        pick = rng.randrange(5)
        if pick == 0:
            n = rng.choice([500, 2_000])
            yield f"paren depth {n}", "root ::= " + "(" * n + '"a"' + ")" * n
        elif pick == 1:
            n = rng.choice([250, 5_000])
            rules = [f'r{i} ::= "a" r{i + 1}' for i in range(n)] + [f'r{n} ::= "b"']
            yield f"chain of {n}", "root ::= r0\n" + "\n".join(rules)
        elif pick == 2:
            yield "undefined rule", 'root ::= "a" missing'
        elif pick == 3:
            yield "left recursion", 'root ::= root "a" | "b"'
        else:
            yield "huge repeat", f'root ::= "a"{{{rng.choice([10**5, 10**9])}}}'


def _gbnf_files() -> list[tuple[str, str]]:
    folder = SHARED_DATA / "grammars" / "gbnf"
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.gbnf"))]


def _gbnf_mutations(rng: random.Random, files: list[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    noise = ["(", ")", "|", '"', "[", "]", "::=", "*", "{3,}", "\\", "\n", "root", "\ud800"]
    while True:
        name, text = rng.choice(files)
        chars = list(text)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(chars) + 1)
            if rng.random() < 0.5 and i < len(chars):
                del chars[i:i + rng.randrange(1, 8)]
            else:
                chars.insert(i, rng.choice(noise))
        yield name, "".join(chars)


def _choices(rng: random.Random) -> Iterator[tuple[str, Any]]:
    while True:
        pick = rng.randrange(4)
        if pick == 0:
            n = rng.choice([10_000, 300_000])
            yield f"{n} words", [f"word{i}" for i in range(n)]
        elif pick == 1:
            yield "JSON list of mixed values", json.loads('["a", 1, null, {"b": 2}]')
        elif pick == 2:
            yield "empty strings", ["", "", "a"]
        else:
            yield "surrogate", ["ok", "\udfff"]


def cases(family: str, rng: random.Random, records: list[dict],
          files: list[tuple[str, str]]) -> Iterator[Case]:
    if family == "regex":
        return (Case(family, "regex", v, label) for label, v in _regexes(rng))
    if family == "schema-text":
        return (Case(family, "json", v, label) for label, v in _schema_texts(rng))
    if family == "schema-object":
        return (Case(family, "json", v, label) for label, v in _schema_objects(rng))
    if family == "schema-mutation":
        return (Case(family, "json", v, label) for label, v in _schema_mutations(rng, records))
    if family == "gbnf":
        return (Case(family, "gbnf", v, label) for label, v in _gbnf(rng))
    if family == "gbnf-mutation":
        return (Case(family, "gbnf", v, label) for label, v in _gbnf_mutations(rng, files))
    if family == "choices":
        return (Case(family, "choices", v, label) for label, v in _choices(rng))
    raise ValueError(f"unknown family {family!r} (one of {', '.join(FAMILIES)})")


# ----------------------------------------------------------------------------- running

def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20
    except OSError:
        return 0.0


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: Case, vocab: Any, limits: Any, rng: random.Random) -> None:
    """Compile ``case`` and take up to :data:`MASK_STEPS` masked steps (raises what it raises)."""
    from automask.bitmask import allocate_bitmask, unpack_bitmask
    from automask.engine.compiled import compile as compile_grammar
    from automask.engine.matcher import Matcher
    from automask.errors import EmptyLanguage
    from automask.grammar.ir import Grammar

    builders: dict[str, Callable[[Any], Grammar]] = {
        "regex": Grammar.from_regex, "json": Grammar.from_json_schema,
        "gbnf": Grammar.from_gbnf, "choices": Grammar.from_choices}
    build = builders[case.kind]
    try:
        grammar = build(case.value)
        compiled = compile_grammar(grammar, vocab, limits=limits)
    except EmptyLanguage:
        return
    matcher = Matcher(compiled)
    bitmask = allocate_bitmask(1, vocab.size)
    for _ in range(MASK_STEPS):
        if matcher.is_terminated():
            break
        matcher.fill_bitmask(bitmask, 0)
        allowed = np.flatnonzero(unpack_bitmask(bitmask[0], vocab.size))
        if allowed.size == 0:
            break
        matcher.accept_token(int(allowed[rng.randrange(allowed.size)]))


def run_fuzz(*, cases_per_family: int = 20, seed: int = 0,
             families: tuple[str, ...] | list[str] = FAMILIES, tokenizer_path: str | None = None,
             data_path: str | None = None, compile_seconds: float = 2.0,
             mask_seconds: float = 2.0, stream: TextIO | None = None) -> dict[str, Any]:
    """The whole campaign; returns the JSON-ready result (see the module docstring)."""
    from automask.bench.maskbench import DEFAULT_DATA, DEFAULT_TOKENIZER
    from automask.engine.compiled import Limits
    from automask.vocab import Vocabulary

    out = stream if stream is not None else sys.stdout
    p = printer(out)
    tokenizer_path = tokenizer_path or DEFAULT_TOKENIZER
    vocab = Vocabulary.from_file(tokenizer_path)
    limits = Limits(max_compile_seconds=compile_seconds, max_mask_seconds=mask_seconds)
    # A case's whole budget: front end and compile, then each step's mask and commit.
    budget = 2 * compile_seconds + MASK_STEPS * 2 * mask_seconds + MARGIN_S
    needs_records = any(f == "schema-mutation" for f in families)
    records = load_records(data_path or DEFAULT_DATA) if needs_records else []
    files = _gbnf_files() if "gbnf-mutation" in families and \
        (SHARED_DATA / "grammars" / "gbnf").is_dir() else []
    p(f"bench fuzz: {cases_per_family} cases per family, seed {seed}, tokenizer "
      f"{tokenizer_path} ({vocab.size} ids); limits: compile {compile_seconds} s, mask "
      f"{mask_seconds} s; a case over {budget:g} s is an overrun")
    results: list[FamilyResult] = []
    for family in families:
        rng = random.Random(f"{seed}:{family}")
        result = FamilyResult(family)
        if family == "gbnf-mutation" and not files:
            p(f"  {family}: skipped (no GBNF files in {SHARED_DATA / 'grammars' / 'gbnf'})")
            continue
        source = cases(family, rng, records, files)
        for _ in range(cases_per_family):
            case = next(source)
            gc.collect()
            before = _rss_mb()
            t0 = time.perf_counter()
            error: Exception | None  # (any exception: the untyped ones are counted)
            outcome, error = "ok", None
            try:
                run_case(case, vocab, limits, rng)
            except AutomaskError as e:
                outcome, error = "typed", e
            except Exception as e:  # noqa: BLE001 - counting these is the campaign's point
                outcome, error = "untyped", e
                result.untyped[type(e).__name__] += 1
            elapsed = time.perf_counter() - t0
            if elapsed > budget:
                outcome = "overrun"
            result.outcomes[outcome] += 1
            result.slowest_s = max(result.slowest_s, elapsed)
            result.largest_rss_growth_mb = max(result.largest_rss_growth_mb,
                                               _rss_mb() - before)
            if outcome in ("untyped", "overrun") and len(result.examples) < 5:
                result.examples.append({
                    "label": case.label, "outcome": outcome, "seconds": round(elapsed, 2),
                    "error": None if error is None else
                    f"{type(error).__name__}: {' '.join(str(error).split())[:160]}"})
            del case
        result.peak_rss_mb = _peak_rss_mb()
        results.append(result)
        p(f"  {family}: " + ", ".join(f"{k} {result.outcomes.get(k, 0)}" for k in OUTCOMES)
          + f"; slowest {result.slowest_s:.2f} s")
    rows = [[r.family, sum(r.outcomes.values()), *(r.outcomes.get(k, 0) for k in OUTCOMES),
             f"{r.slowest_s:.2f}", f"{r.largest_rss_growth_mb:.0f}", f"{r.peak_rss_mb:.0f}"]
            for r in results]
    p(text_table(["family", "cases", *OUTCOMES, "slowest s", "case +MB", "peak MB"], rows))
    for r in results:
        for ex in r.examples:
            p(f"  {r.family} / {ex['label']}: {ex['outcome']} in {ex['seconds']} s"
              + (f" ({ex['error']})" if ex["error"] else ""))
    return {"command": "bench fuzz", "seed": seed, "cases_per_family": cases_per_family,
            "tokenizer": tokenizer_path, "limits": {"compile_s": compile_seconds,
                                                    "mask_s": mask_seconds},
            "overrun_after_s": budget, "families": [r.as_dict() for r in results]}


def failed_targets(result: dict[str, Any]) -> list[str]:
    """Families with an untyped error or an overrun."""
    return [f"{f['family']}: {f['untyped']} untyped, {f['overrun']} overruns"
            for f in result["families"] if f["untyped"] or f["overrun"]]

