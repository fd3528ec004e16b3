"""Masks along JSON instances: what every scan shortcut is checked against.

A shortcut (a scan read off another one) must give exactly the masks of the
walk it replaces. The tests walk the same instances twice, with and without
it (``Compiler(shortcuts=...)``, the engine's option), each time with a fresh
compiler, so no scan is left over from another walk, and compare every mask.
"""

import json
from collections.abc import Iterable

import numpy as np

from automask import Compiler, Grammar, Matcher
from automask.engine.masks import SHORTCUTS


def masks_along(vocab, schema, instances, indent: int | None = None, *,
                off: Iterable[str] = (), compiler: Compiler | None = None
                ) -> list[np.ndarray]:
    """Every mask met while walking each instance (``json.dumps``, ``ensure_ascii=False``,
    ``indent``) token by token with a compiler of its own, without the scan shortcuts
    named in ``off`` (engine/masks.py:SHORTCUTS), or with ``compiler`` (one whose
    caches a test prepared); each instance must be accepted whole."""
    if compiler is None:
        compiler = Compiler(vocab, shortcuts=SHORTCUTS - set(off))
    elif off:
        raise ValueError("off names shortcuts of a compiler of masks_along's own")
    matcher = Matcher(compiler.compile(Grammar.from_json_schema(schema)))
    out = []
    for x in instances:
        matcher.reset()
        for token in vocab.encode(json.dumps(x, ensure_ascii=False, indent=indent)):
            out.append(matcher.mask_words().copy())
            assert matcher.accept_token(token), x
        out.append(matcher.mask_words().copy())
        assert matcher.is_accepting(), x
    return out


def assert_same_masks(derived: list[np.ndarray], walked: list[np.ndarray]) -> None:
    assert len(derived) == len(walked)
    for step, (a, b) in enumerate(zip(derived, walked, strict=True)):
        assert np.array_equal(a, b), f"mask {step} differs"
