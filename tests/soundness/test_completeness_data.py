"""Completeness on real data: MaskBench instances under llama.cpp's ``json.gbnf``.

Valid MaskBench instances (JSON objects, serialized the MaskBench way) must be
allowed token by token, accepted, and end in an accepting state with EOS
allowed, for three real tokenizers. Instances that ``json.gbnf`` itself does not
cover (its numbers are limited: at most 16 integer digits, an odd exponent
rule) are told apart by an independent check written here, and must be
rejected, like malformed JSON. Needs ``../shared/data``.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
from support.oracle import Recognizer, oracle_allowed

import automask
from automask import Grammar, Matcher, Vocabulary

pytestmark = pytest.mark.data

# json.gbnf's number rule, transcribed to a Python regex.
GBNF_NUMBER = re.compile(r"-?(?:[0-9]|[1-9][0-9]{0,15})(?:\.[0-9]+)?(?:[eE][-+]?[0-9][1-9]{0,15})?")


def covered_by_json_gbnf(data) -> bool:
    """Whether ``json.dumps(data, ensure_ascii=False)`` is in json.gbnf's language.

    json.dumps writes strings that json.gbnf accepts (escapes ``"``, ``\\`` and the
    controls below 0x20) except for a raw DEL (0x7F), which the grammar excludes;
    numbers must match the grammar's number rule; lone surrogates have no UTF-8.
    """
    if isinstance(data, bool) or data is None:
        return True
    if isinstance(data, (int, float)):
        if isinstance(data, float) and not math.isfinite(data):
            return False
        return GBNF_NUMBER.fullmatch(json.dumps(data)) is not None
    if isinstance(data, str):
        if "\x7f" in data:
            return False
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(data, list):
        return all(covered_by_json_gbnf(x) for x in data)
    if isinstance(data, dict):
        return all(covered_by_json_gbnf(k) and covered_by_json_gbnf(v) for k, v in data.items())
    return False


@pytest.fixture(scope="module")
def instances(shared_data: Path) -> dict[str, list[str]]:
    """Serialized MaskBench object instances: ``covered`` (valid JSON in json.gbnf's language,
    a fixed sample of 300) and ``uncovered`` (valid JSON the grammar excludes)."""
    covered, uncovered = [], []
    with gzip.open(shared_data / "maskbench-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            for case in row["tests"]:
                if not case["valid"] or not isinstance(case["data"], dict):
                    continue
                try:
                    text = json.dumps(case["data"], ensure_ascii=False)
                    text.encode("utf-8")
                except (ValueError, UnicodeEncodeError):
                    uncovered.append(None)
                    continue
                (covered if covered_by_json_gbnf(case["data"]) else uncovered).append(text)
    rng = random.Random(20240517)
    sample = rng.sample(covered, 300)
    sample.sort(key=len)
    return {"covered": sample, "uncovered": [t for t in uncovered if t is not None]}


@pytest.fixture(scope="module")
def json_gbnf(shared_data: Path) -> Grammar:
    return Grammar.from_gbnf((shared_data / "grammars" / "gbnf" / "json.gbnf").read_text())


_VOCABS: dict[str, Vocabulary] = {}


def load(shared_data: Path, name: str) -> Vocabulary:
    if name not in _VOCABS:
        _VOCABS[name] = Vocabulary.from_file(shared_data / "tokenizers" / name / "tokenizer.json")
    return _VOCABS[name]


def run_instance(m: Matcher, vocab: Vocabulary, text: str, bitmask: np.ndarray) -> str | None:
    """Feed ``text``'s tokens with a mask check before each; None when all is well."""
    for i, t in enumerate(vocab.encode(text)):
        m.fill_bitmask(bitmask)
        if not (int(bitmask[0, t >> 5]) >> (t & 31)) & 1:
            return f"token {i} {vocab.tokens[t]!r} not allowed"
        if not m.accept_token(t):
            return f"token {i} {vocab.tokens[t]!r} allowed but refused"
    if not m.is_accepting():
        return "does not end accepting"
    m.fill_bitmask(bitmask)
    for e in vocab.eos_token_ids:
        if not (int(bitmask[0, e >> 5]) >> (e & 31)) & 1:
            return f"EOS {e} not allowed at the end"
    if not m.accept_token(vocab.eos_token_ids[0]) or not m.is_terminated():
        return "EOS refused"
    return None


def rejected(m: Matcher, vocab: Vocabulary, text: str) -> bool:
    ids = vocab.encode(text)
    return m.accept_tokens(ids) < len(ids) or not m.is_accepting()


@pytest.mark.parametrize("name, count", [("llama-3.1", 300), ("llama-2", 30), ("gemma-3", 30)])
def test_valid_instances_accepted(name, count, shared_data, instances, json_gbnf):
    vocab = load(shared_data, name)
    compiled = automask.compile(json_gbnf, vocab)
    bitmask = automask.allocate_bitmask(1, vocab.size)
    sample = instances["covered"]
    if count < len(sample):  # spread over all lengths
        sample = sample[:: len(sample) // count][:count]
    assert len(sample) == count
    failures = []
    for text in sample:
        problem = run_instance(Matcher(compiled), vocab, text, bitmask)
        if problem:
            failures.append((problem, text[:200]))
    assert not failures, f"{len(failures)}/{count} failed, first: {failures[:3]}"


INVALID = [
    '{"a": 1',  # truncated
    '{"a": ',
    '{"a": "text',
    '{"a": 1,}',  # trailing comma
    '{"a": [1, 2,]}',
    '{"a": "\\x41"}',  # bad escapes
    '{"a": "\\u12"}',
    '{"a": "\\q"}',
    "{'a': 1}",  # single quotes
    "{a: 1}",  # unquoted key
    '{"a": 01}',  # leading zero
    '{"a": .5}',
    '{"a": +1}',
    '{"a": "b\x01"}',  # raw control character
    '{"a": tru}',
    '{"a": True}',
    '{"a" 1}',
    '{"a": 1 "b": 2}',
    "[1, 2]",  # json.gbnf's root is an object
    '"just a string"',
    "{}{}",
    '{"a": 1}}',
    '{"a": NaN}',
]


@pytest.mark.parametrize("name", ["llama-3.1", "llama-2", "gemma-3"])
def test_invalid_rejected(name, shared_data, instances, json_gbnf):
    vocab = load(shared_data, name)
    compiled = automask.compile(json_gbnf, vocab)
    for text in INVALID:
        assert rejected(Matcher(compiled), vocab, text), text
    # Valid JSON that json.gbnf does not cover (e.g. 17-digit integers, 1e+100) is refused too:
    # MaskBench's few such instances, and some made here.
    made = [{"a": 12345678901234567}, {"a": 1e100}, {"a": [1, {"b": "x\x7fy"}]}, {"a": -1e-100}]
    assert not any(covered_by_json_gbnf(d) for d in made)
    uncovered = instances["uncovered"] + [json.dumps(d, ensure_ascii=False) for d in made]
    for text in uncovered[:: max(1, len(uncovered) // 20)]:
        assert rejected(Matcher(compiled), vocab, text), text[:200]


def test_uncovered_check_is_not_vacuous():
    assert not covered_by_json_gbnf({"a": 12345678901234567})
    assert not covered_by_json_gbnf({"a": 1e100})
    assert not covered_by_json_gbnf({"a": "\x7f"})
    assert covered_by_json_gbnf({"a": [1.5, -2, 1e-05, "é", None, True, {"b": {}}]})


def test_llama_start_mask(shared_data, json_gbnf):
    """At the start only tokens beginning with ``{`` are allowed, exactly those the byte-level
    oracle finds viable, and the plain ``{`` is one of them; later states too."""
    vocab = load(shared_data, "llama-3.1")
    compiled = automask.compile(json_gbnf, vocab)
    m = Matcher(compiled)
    allowed = set(m.allowed_token_ids().tolist())
    assert allowed
    assert all(vocab.tokens[t].startswith(b"{") for t in allowed)
    assert vocab.encode("{") and vocab.encode("{")[0] in allowed
    oracle = Recognizer(json_gbnf)
    assert allowed == oracle_allowed(oracle, oracle.initial, vocab)
    for prefix in ['{"key": ', '{"key": 12', '{"key": [true, ', '{"a": {"b": null}']:
        m = Matcher(compiled)
        ids = vocab.encode(prefix)
        assert m.accept_tokens(ids) == len(ids)
        state = oracle.feed(prefix.encode())
        got = set(m.allowed_token_ids().tolist())
        want = oracle_allowed(oracle, state, vocab)
        assert got == want, (prefix, sorted(vocab.tokens[t] for t in got ^ want)[:10])
