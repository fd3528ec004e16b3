"""Masks along JSON instances: what every scan shortcut is checked against.

A shortcut (a scan read off another one) must give exactly the masks of the
walk it replaces. The tests walk the same instances twice, with and without
it, each time from a fresh compile and an empty shared scan cache, and
compare every mask.
"""

import json

import numpy as np

from automask import Grammar, Matcher, compile
from automask.engine.compiled import compiler_for


def masks_along(vocab, schema, instances, indent: int | None = None) -> list[np.ndarray]:
    """Every mask met while walking each instance (``json.dumps``, ``ensure_ascii=False``,
    ``indent``) token by token; each instance must be accepted whole."""
    compiler_for(vocab).clear()  # no scan left over from another walk
    matcher = Matcher(compile(Grammar.from_json_schema(schema), vocab))
    out = []
    for x in instances:
        matcher.reset()
        for token in vocab.encode(json.dumps(x, ensure_ascii=False, indent=indent)):
            out.append(matcher.mask_words().copy())
            assert matcher.accept_token(token), x
        out.append(matcher.mask_words().copy())
        assert matcher.is_accepting(), x
    compiler_for(vocab).clear()  # nor one for the next test
    return out


def assert_same_masks(derived: list[np.ndarray], walked: list[np.ndarray]) -> None:
    assert len(derived) == len(walked)
    for step, (a, b) in enumerate(zip(derived, walked, strict=True)):
        assert np.array_equal(a, b), f"mask {step} differs"
