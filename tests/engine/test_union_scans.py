"""Lexemes whose root scans would each be a walk are walked together, as one lexer state
(``MaskComputer.root_parts``), and the masks are those of one walk per lexeme.

A string under a ``oneOf`` of unanchored patterns is one lexeme per branch, each
alive on every text (it must contain its word and none of the others'), so no
shortcut makes their scans; on the real Llama-3.1 tokenizer, every mask along
instances that go in and out of such strings is compared with a compiler that
walks each lexeme on its own.
"""

import pytest
from support.walks import assert_same_masks, masks_along

from automask import Compiler
from automask.engine.masks import SHORTCUTS

pytestmark = pytest.mark.data

ROLE = {"oneOf": [{"pattern": "customer"}, {"pattern": "maker"}, {"pattern": "owner"},
                  {"pattern": "NEW"}, {"pattern": "ON_HOLD"}]}
SCHEMA = {
    "type": "object",
    "properties": {
        "roles": {"type": "array", "items": {"type": "string", **ROLE}},
        "state": ROLE,  # no type: a number or an object meets every pattern, so no branch
        "note": {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "string",
                                                                 "pattern": "z$"}]},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}
INSTANCES = [
    {"roles": ["customer", "the maker", "owner of news", "\u00e9 ON_HOLD"], "state": "NEW"},
    {"state": "a \"maker\"\\n", "note": "abcz", "name": "Ada"},
    {"roles": [], "state": "custom owner", "note": "z"},
]


def test_lexemes_walked_together_give_the_masks_of_one_walk_each(llama):
    compiler = Compiler(llama)
    together = masks_along(llama, SCHEMA, INSTANCES, compiler=compiler)
    assert compiler.stats().scans.get("union", 0) >= 2  # the oneOf strings, at least
    alone = Compiler(llama, shortcuts=SHORTCUTS - {"union"})
    assert_same_masks(together, masks_along(llama, SCHEMA, INSTANCES, compiler=alone))
    assert "union" not in alone.stats().scans


def test_with_no_shortcut_at_all_every_lexeme_is_walked_together(llama):
    # With no strategy to make a scan, every lexeme of a union state is cold: the whole
    # state is one walk, as before lexer states were split.
    bare = Compiler(llama, shortcuts={"union"})
    walked = masks_along(llama, SCHEMA, INSTANCES[1:], compiler=bare)
    assert bare.stats().scans.get("union", 0) > 0
    assert_same_masks(walked, masks_along(llama, SCHEMA, INSTANCES[1:], off=SHORTCUTS))
