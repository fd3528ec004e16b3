"""Root scans that borrow another state's scan on shared first bytes give the same masks.

The borrowing (``MaskComputer._reuse``) only pays on a big vocabulary, so
this runs on the real Llama-3.1 tokenizer: every mask along real instances
is compared with the masks of the same grammar computed with borrowing
turned off and the per-vocabulary scan cache emptied.
"""

import json

import numpy as np
import pytest

from automask import Grammar, Matcher, Vocabulary, compile
from automask.engine import masks
from automask.engine.compiled import root_tokens

pytestmark = pytest.mark.data

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "nickname": {"type": "string", "pattern": "^[a-z]+$"},
        "age": {"type": "integer"},
        "émoji": {"type": "string", "maxLength": 3},
    },
    "patternProperties": {"^x-": {"type": "boolean"}},
    "additionalProperties": {"type": "string", "pattern": "^[A-Za-z ]+$"},
}

INSTANCES = [
    {"name": "Ada", "nickname": "ada", "age": 36, "émoji": "✨", "x-ok": True,
     "comment": "Hello world", "ag": "Old Text"},
    {"nickname": "zed", "x-": False, "name\u00e9": "Name E", "n": "N"},
    {"notes": "Any key that is no declared name", "émojis": "x"},
]


@pytest.fixture(scope="module")
def llama(shared_data):
    return Vocabulary.from_file(str(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json"))


def _masks(vocab, schema, texts) -> list[np.ndarray]:
    matcher = Matcher(compile(Grammar.from_json_schema(schema), vocab))
    out = []
    for text in texts:
        matcher.reset()
        for token in vocab.encode(text):
            out.append(matcher.mask_words().copy())
            assert matcher.accept_token(token), text
        out.append(matcher.mask_words().copy())
    return out


def test_borrowed_scans_give_the_same_masks(llama, monkeypatch):
    texts = [json.dumps(x, ensure_ascii=False) for x in INSTANCES]
    root = root_tokens(llama)
    borrowed = []
    real_reuse = masks.MaskComputer._reuse

    def spy(self, state, finish):
        found = real_reuse(self, state, finish)
        borrowed.append(found is not None)
        return found

    monkeypatch.setattr(masks.MaskComputer, "_reuse", spy)
    root.shared_scans = None
    with_reuse = _masks(llama, SCHEMA, texts)
    assert sum(borrowed) >= 3  # the "any other key" start, and inside keys and patterns

    monkeypatch.setattr(masks, "REUSE_MIN_ROWS", 10**9)
    root.shared_scans = None
    plain = _masks(llama, SCHEMA, texts)
    root.shared_scans = None
    assert len(with_reuse) == len(plain)
    for step, (a, b) in enumerate(zip(with_reuse, plain, strict=True)):
        assert np.array_equal(a, b), f"mask {step} differs"
