"""lexer.distinct, the engine's ``np.unique``: the same values, and masks that never import
``numpy.ma`` (NumPy 2's ``np.unique`` does, on its first call: a stall inside a mask)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from automask.engine.lexer import distinct


@pytest.mark.parametrize("size", [0, 1, 2, 7, 255, 256, 257, 1000, 30_000])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.intp])
def test_distinct_is_numpy_unique(size, dtype):
    rng = np.random.default_rng(size)
    for high in (2, size // 3 + 1, 1 << 20):
        values = rng.integers(-5, high, size).astype(dtype)
        got = distinct(values)
        assert got == np.unique(values).tolist()
        assert all(type(v) is int for v in got)


def test_masks_do_not_import_numpy_ma(shared_data):
    """Keys of up to 255 characters: the key's cold masks walk the vocabulary's trie
    and gather transitions not computed yet (the first call that met ``np.unique``)."""
    code = textwrap.dedent("""
        import sys
        import automask
        vocab = automask.Vocabulary.from_file(sys.argv[1])
        schema = {"type": "object", "patternProperties": {"^.{1,255}$": {}}}
        matcher = automask.Matcher(automask.compile(automask.Grammar.from_json_schema(schema),
                                                    vocab))
        bitmask = automask.allocate_bitmask(1, vocab.size)
        for piece in (b'{"', b"key", b"1", b'":', b" {},", b' "', b"other", b'": {}}'):
            matcher.fill_bitmask(bitmask)
            assert matcher.accept_bytes(piece), piece
        assert matcher.is_accepting()
        print("numpy.ma" in sys.modules)
    """)
    tokenizer = shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json"
    done = subprocess.run([sys.executable, "-c", code, str(tokenizer)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
