"""Our bitmask and xgrammar's / llguidance's are one layout: each side applies the other's.

int32 words, ``(batch, ceil(V/32))``, token ``t`` at bit ``t % 32`` of word
``t // 32``. Masks come from real engines on the real Llama-3.1 vocabulary,
in mid-output states, and logits wider than the vocabulary (padded
embedding matrices) are included.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

import automask
from automask import Grammar, Matcher, apply_bitmask, fill_bitmasks

torch = pytest.importorskip("torch")

HAS = {name: importlib.util.find_spec(name) is not None for name in ("xgrammar", "llguidance")}
SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["id"]}
DOC = json.dumps({"id": 7, "tags": ["a", "b"]})
PAD = 64  # logits columns past the vocabulary


@pytest.fixture(scope="module")
def tokenizer_path(shared_data):
    return str(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json")


@pytest.fixture(scope="module")
def our_matchers(llama):
    """Matchers after 0..5 tokens of DOC."""
    compiled = automask.compile(Grammar.from_json_schema(SCHEMA), llama)
    ids = llama.encode(DOC)
    matchers = []
    for k in range(6):
        m = Matcher(compiled)
        assert m.accept_tokens(ids[:k]) == k
        matchers.append(m)
    return matchers


@pytest.fixture(scope="module")
def our_masks(llama, our_matchers):
    """Our masks of those matchers, one row each, in a torch int32 tensor."""
    bitmask = torch.from_numpy(automask.allocate_bitmask(len(our_matchers), llama.size))
    fill_bitmasks(our_matchers, bitmask)
    return bitmask


def _logits(rows: int, width: int) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(0))


def _ours(logits: torch.Tensor, bitmask) -> torch.Tensor:
    return apply_bitmask(logits.clone(), bitmask)


def _their_mask(name: str, tokenizer_path: str, vocab) -> np.ndarray:
    """The peer's own masks after 0..5 tokens of DOC (its bench adapter), stacked."""
    from automask.bench.peers import GrammarSpec, make_peer

    engine = make_peer(name)
    engine.prepare(tokenizer_path, vocab)
    compiled = engine.compile(engine.parse(GrammarSpec("json", json.dumps(SCHEMA), "t")))
    ids = vocab.encode(DOC)
    rows = []
    for k in range(6):
        bitmask = engine.allocate_bitmask()  # first: xgrammar's adapter fills a view of it
        seq = engine.new_sequence(compiled)
        for t in ids[:k]:
            assert seq.accept(t)
        seq.fill(bitmask)
        rows.append(np.asarray(bitmask).reshape(-1, bitmask.shape[-1])[0].copy())
    return np.stack(rows)


def test_allocation_agrees(llama):
    ours = automask.allocate_bitmask(3, llama.size)
    if HAS["xgrammar"]:
        import xgrammar

        theirs = xgrammar.allocate_token_bitmask(3, llama.size)
        assert tuple(theirs.shape) == ours.shape and theirs.dtype == torch.int32
        assert (theirs.numpy() == ours).all()  # every token allowed
    if HAS["llguidance"]:
        import llguidance.numpy

        theirs = llguidance.numpy.allocate_token_bitmask(3, llama.size)
        assert theirs.shape == ours.shape and theirs.dtype == np.int32


@pytest.mark.skipif(not HAS["xgrammar"], reason="xgrammar is not installed")
def test_xgrammar_applies_our_masks_and_we_apply_theirs(llama, our_matchers, our_masks,
                                                        tokenizer_path):
    import xgrammar

    logits = _logits(our_masks.shape[0], llama.size)
    theirs = logits.clone()
    xgrammar.apply_token_bitmask_inplace(theirs, our_masks)
    assert torch.equal(theirs, _ours(logits, our_masks))
    # Logits wider than the vocabulary: xgrammar leaves columns past the mask unmasked
    # (with a warning) where we mask them, so such logits take a mask as wide as they are,
    # which fill_bitmasks zeroes past the vocabulary.
    wide = torch.from_numpy(automask.allocate_bitmask(our_masks.shape[0], llama.size + PAD))
    fill_bitmasks(our_matchers, wide)
    assert (wide[:, our_masks.shape[1]:] == 0).all()
    logits = _logits(our_masks.shape[0], llama.size + PAD)
    theirs = logits.clone()
    xgrammar.apply_token_bitmask_inplace(theirs, wide)
    ours = _ours(logits, our_masks)
    assert torch.equal(theirs, ours)
    assert torch.isinf(ours[:, llama.size:]).all()  # a padding id is never allowed
    # a subset of rows by index, as engines apply only the constrained rows
    logits = _logits(our_masks.shape[0], llama.size)
    theirs = logits.clone()
    xgrammar.apply_token_bitmask_inplace(theirs, our_masks, indices=[1, 4])
    expected = logits.clone()
    for i in (1, 4):
        apply_bitmask(expected[i], our_masks[i])
    assert torch.equal(theirs, expected)

    masks = torch.from_numpy(_their_mask("xgrammar", tokenizer_path, llama))
    logits = _logits(masks.shape[0], llama.size)
    theirs = logits.clone()
    xgrammar.apply_token_bitmask_inplace(theirs, masks)
    assert torch.equal(_ours(logits, masks), theirs)
    assert torch.isinf(theirs).any() and torch.isfinite(theirs).any()  # a real mask


@pytest.mark.skipif(not HAS["llguidance"], reason="llguidance is not installed")
def test_llguidance_applies_our_masks_and_we_apply_theirs(llama, our_masks, tokenizer_path):
    import llguidance.numpy
    import llguidance.torch

    for width in (llama.size, llama.size + PAD):
        logits = _logits(our_masks.shape[0], width)
        theirs = logits.clone()
        llguidance.torch.apply_token_bitmask_inplace(theirs, our_masks)
        assert torch.equal(theirs, _ours(logits, our_masks))
        theirs_np = logits.numpy().copy()
        llguidance.numpy.apply_token_bitmask_inplace(theirs_np, our_masks.numpy())
        assert np.array_equal(theirs_np, _ours(logits, our_masks).numpy())

    masks = _their_mask("llguidance", tokenizer_path, llama)
    logits = _logits(masks.shape[0], llama.size + PAD)
    theirs = logits.clone()
    llguidance.torch.apply_token_bitmask_inplace(theirs, torch.from_numpy(masks))
    assert torch.equal(_ours(logits, masks), theirs)
    assert torch.isinf(theirs).any() and torch.isfinite(theirs).any()


def test_the_masks_mean_the_same_tokens(llama, our_masks, tokenizer_path):
    """Beyond layout: at the start of the object every engine allows '{' and refuses 'x'."""
    brace, letter = llama.encode("{")[0], llama.encode("x")[0]
    masks = {"automask": our_masks.numpy()}
    for name in ("xgrammar", "llguidance"):
        if HAS[name]:
            masks[name] = _their_mask(name, tokenizer_path, llama)
    for name, m in masks.items():
        row = automask.unpack_bitmask(m[0], llama.size)
        assert row[brace] and not row[letter], name
