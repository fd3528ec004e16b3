"""Root scans that borrow another state's scan on shared first bytes give the same masks.

The borrowing (``engine/shortcuts/reuse.py``) only pays on a big vocabulary, so
this runs on the real Llama-3.1 tokenizer: every mask along real instances
is compared with the masks of the same grammar computed with borrowing
turned off and the per-vocabulary scan cache emptied.
"""

import pytest
from support.shortcuts import watch_shortcut
from support.walks import assert_same_masks, masks_along

pytestmark = pytest.mark.data

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "nickname": {"type": "string", "pattern": "^[a-z]+$"},
        "age": {"type": "integer"},
        "émoji": {"type": "string", "maxLength": 3},
        "code": {"type": "string", "not": {"pattern": "^#"}},
    },
    "patternProperties": {"^x-": {"type": "boolean"}},
    "additionalProperties": {"type": "string", "pattern": "^[A-Za-z ]+$"},
}

INSTANCES = [
    {"name": "Ada", "nickname": "ada", "age": 36, "émoji": "✨", "code": "A1 b", "x-ok": True,
     "comment": "Hello world", "ag": "Old Text"},
    {"nickname": "zed", "x-": False, "name\u00e9": "Name E", "n": "N"},
    {"notes": "Any key that is no declared name", "émojis": "x"},
]


def test_borrowed_scans_give_the_same_masks(llama, monkeypatch):
    borrowed = []

    def spy(real, self, state, finish):
        found = real(self, state, finish)
        borrowed.append(found is not None)
        return found

    watch_shortcut(monkeypatch, "reuse", spy)
    with_reuse = masks_along(llama, SCHEMA, INSTANCES)
    assert sum(borrowed) >= 3  # inside keys and patterns

    assert_same_masks(with_reuse, masks_along(llama, SCHEMA, INSTANCES, off={"reuse"}))
