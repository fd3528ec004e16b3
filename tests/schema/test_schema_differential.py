"""Random schemas against ``jsonschema``: never accept an invalid instance.

The keyword cases of ``test_schema_compiler`` check each keyword alone; the
complements (``not``, the failing side of ``if``, exact ``oneOf``), the rewrites
(dependencies), unevaluated* and the counted arrays interact, so a seeded
generator combines them: small schemas (nested ``not``/``anyOf``/``oneOf``/
``if``, objects, arrays, ``$ref`` and ``$dynamicRef``) and small instances,
each instance checked byte by byte. A schema that raises (unsupported, a limit)
is skipped; one that compiles must reject every instance the reference rejects.
Instances the reference accepts may be rejected (property order, spellings),
so acceptance is only counted, as a sanity check that the walk is not vacuous.
"""

from __future__ import annotations

import json
import random
import warnings

import pytest
from support.schema_reference import accepts_bytes, reference_accepts, reference_validator

import automask
from automask import EmptyLanguage, Grammar, GrammarError, LimitExceeded

jsonschema = pytest.importorskip("jsonschema")

KEYS = ["a", "b", "c", "xa"]
LEAVES = [True, False, {}, {"type": "string"}, {"type": "integer"}, {"type": "object"},
          {"type": "array"}, {"type": "null"}, {"const": 1}, {"const": "a"}, {"minimum": 1},
          {"maxLength": 1}, {"required": ["a"]}, {"enum": [1, "a", None]}]


def random_schema(r: random.Random, depth: int):
    """A schema of the keywords whose combinations are risky, ``depth`` levels deep."""
    if depth <= 0 or r.random() < 0.2:
        return json.loads(json.dumps(r.choice(LEAVES)))  # a copy: documents get $defs
    s: dict = {}
    for _ in range(r.randint(1, 3)):
        k = r.choice([
            "type", "not", "anyOf", "oneOf", "allOf", "if", "then", "else", "properties",
            "required", "patternProperties", "additionalProperties", "dependentRequired",
            "dependentSchemas", "contains", "minContains", "maxContains", "items",
            "prefixItems", "unevaluatedProperties", "unevaluatedItems", "minimum",
            "exclusiveMaximum", "minLength", "pattern", "enum", "const", "minItems",
            "maxItems", "maxProperties", "uniqueItems", "$ref", "$dynamicRef"])
        sub = depth - 1
        if k == "type":
            s[k] = r.choice(["string", "integer", "number", "object", "array", "null",
                             ["object", "array"], ["integer", "string"]])
        elif k in ("not", "if", "then", "else", "additionalProperties", "contains", "items",
                   "unevaluatedProperties", "unevaluatedItems"):
            s[k] = random_schema(r, sub)
        elif k in ("anyOf", "oneOf", "allOf", "prefixItems"):
            s[k] = [random_schema(r, sub) for _ in range(r.randint(1, 3))]
        elif k == "properties":
            s[k] = {x: random_schema(r, sub) for x in r.sample(KEYS, r.randint(1, 2))}
        elif k == "patternProperties":
            s[k] = {p: random_schema(r, sub) for p in r.sample(["a", "^x", "b$"], 2)}
        elif k == "required":
            s[k] = r.sample(KEYS, r.randint(1, 2))
        elif k == "dependentRequired":
            s[k] = {r.choice(KEYS): r.sample(KEYS, r.randint(0, 2))}
        elif k == "dependentSchemas":
            s[k] = {r.choice(KEYS): random_schema(r, sub)}
        elif k in ("minContains", "maxContains", "minItems", "maxItems", "maxProperties",
                   "minLength"):
            s[k] = r.randint(0, 2)
        elif k in ("minimum", "exclusiveMaximum"):
            s[k] = r.choice([0, 1, 1.5, 2])
        elif k == "pattern":
            s[k] = r.choice(["a", "^b", "c$"])
        elif k == "enum":
            s[k] = r.sample([1, "a", None, 2, [1], {"a": 1}, True], r.randint(1, 3))
        elif k == "const":
            s[k] = r.choice([1, "a", None, [1], {"a": 1}])
        elif k == "uniqueItems":
            s[k] = r.random() < 0.8
        else:
            s[k] = r.choice(["#", "#/$defs/d", "#dd"])
    return s


def random_instance(r: random.Random, depth: int = 2):
    c = r.random()
    if depth <= 0 or c < 0.5:
        return r.choice([None, True, False, 0, 1, 2, 1.5, -1, "", "a", "ab", "b", "ca"])
    if c < 0.75:
        out = [random_instance(r, depth - 1) for _ in range(r.randint(0, 3))]
        if out and r.random() < 0.3:
            out.append(out[0])
        return out
    return {k: random_instance(r, depth - 1) for k in r.sample(KEYS, r.randint(0, 3))}


def document(r: random.Random):
    schema = random_schema(r, 3)
    if isinstance(schema, dict):
        schema["$defs"] = {"d": random_schema(r, 2),
                           "e": {"$dynamicAnchor": "dd", "enum": [1, "a", [1]]}}
        if r.random() < 0.3:
            schema["$defs"]["f"] = {"$id": "https://example.com/f", "$dynamicAnchor": "dd"}
    return schema


SEEDS = 200
INSTANCES = 30


def test_random_schemas_never_accept_invalid_instances(tiny_bpe_vocab):
    compiled_count = accepted_valid = 0
    for seed in range(SEEDS):
        r = random.Random(seed)
        schema = document(r)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                compiled = automask.compile(Grammar.from_json_schema(schema), tiny_bpe_vocab)
        except EmptyLanguage:
            compiled = None
        except (GrammarError, LimitExceeded):
            continue  # unsupported (it says so) or too big: nothing to check
        try:
            ref = reference_validator(schema)
            ref.is_valid(None)
        except RecursionError:  # the reference loops on some "$ref": "#" cycles
            continue
        compiled_count += 1
        for _ in range(INSTANCES):
            text = json.dumps(random_instance(r))
            ours = compiled is not None and accepts_bytes(compiled, text)
            try:
                want = reference_accepts(ref, text)
            except RecursionError:
                break
            assert want or not ours, (seed, json.dumps(schema), text)
            accepted_valid += ours
    assert compiled_count >= SEEDS * 2 // 3
    assert accepted_valid >= SEEDS  # the walks do accept things
