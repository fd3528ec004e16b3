"""The decode loop against adversarial, EOS-loving and random fake models (no torch needed).

The fake models are plain callables ``ids -> logits`` whose logits depend only
on the ids (seeded by them), so beams and fast-forwarding see a consistent
model. The engine is real: outputs are checked with jsonschema, ``re`` and
fresh matchers.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import automask
from automask import Grammar, Matcher, Vocabulary
from automask.generation import CallableLM, GenerationParams, generate
from automask.generation.session import Session

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 3},
    },
    "required": ["name", "age", "ok"],
}
REGEX = r"[a-z]{2,6}@(mail|web)\.(com|org)"
PROMPT = [5, 6, 7]


@pytest.fixture(scope="module")
def schema_grammar() -> Grammar:
    return Grammar.from_json_schema(SCHEMA, whitespace="compact", strict=True)


@pytest.fixture(scope="module")
def regex_grammar() -> Grammar:
    return Grammar.from_regex(REGEX)


def random_model(width: int, seed: int, scale: float = 3.0):
    """Logits that depend only on (seed, ids): a consistent random language model."""

    def fn(ids: list[int]) -> np.ndarray:
        rng = np.random.default_rng([seed, len(ids), *ids[-8:]])
        return rng.normal(0.0, scale, width).astype(np.float32)

    return fn


def adversarial_model(compiled, prompt_len: int, seed: int = 0):
    """Puts +40 on every token the grammar refuses after the output so far."""
    width = compiled.vocab.size
    base = random_model(width, seed, 1.0)

    def fn(ids: list[int]) -> np.ndarray:
        m = Matcher(compiled)
        assert m.accept_tokens(ids[prompt_len:]) == len(ids) - prompt_len
        logits = base(ids)
        illegal = np.ones(width, dtype=bool)
        illegal[m.allowed_token_ids()] = False
        logits[illegal] += 40.0
        return logits

    return fn


def eos_model(vocab: Vocabulary, seed: int = 0):
    """Wants to stop at every step."""
    base = random_model(vocab.size, seed)

    def fn(ids: list[int]) -> np.ndarray:
        logits = base(ids)
        logits[list(vocab.eos_token_ids)] = 50.0
        return logits

    return fn


def assert_valid_prefix(compiled, tokens: list[int]) -> Matcher:
    m = Matcher(compiled)
    assert m.accept_tokens(tokens) == len(tokens), "the output left the language"
    return m


def check_schema_output(result) -> None:
    assert result.complete
    assert result.finish_reason == "stop"
    value = json.loads(result.text)
    jsonschema.validate(value, SCHEMA)
    assert result.value == value


# ----------------------------------------------------------------------------- validity


def test_adversarial_model_stays_in_schema(tiny_bpe_vocab, schema_grammar):
    compiled = automask.compile(schema_grammar, tiny_bpe_vocab)
    for seed in range(3):
        model = adversarial_model(compiled, len(PROMPT), seed)
        r = generate(model, tiny_bpe_vocab, PROMPT, compiled,
                     GenerationParams(max_tokens=120, temperature=1.0, seed=seed))
        check_schema_output(r)
        free = [s for s in r.trace if not s.forced]
        assert free and all(not s.raw_argmax_legal for s in free)
        assert all(s.rejection_mass > 0.99 for s in free)


def test_adversarial_model_stays_in_regex(tiny_bpe_vocab, regex_grammar):
    compiled = automask.compile(regex_grammar, tiny_bpe_vocab)
    model = adversarial_model(compiled, len(PROMPT))
    r = generate(model, tiny_bpe_vocab, PROMPT, compiled, max_tokens=60)
    assert r.finish_reason == "stop" and r.complete
    assert re.fullmatch(REGEX, r.text)


def test_eos_loving_model_still_finishes_a_document(tiny_bpe_vocab, schema_grammar,
                                                     regex_grammar):
    r = generate(eos_model(tiny_bpe_vocab), tiny_bpe_vocab, PROMPT, schema_grammar,
                 max_tokens=120)
    check_schema_output(r)
    assert all(s.raw_argmax in tiny_bpe_vocab.eos_token_ids for s in r.trace)
    r = generate(eos_model(tiny_bpe_vocab), tiny_bpe_vocab, PROMPT, regex_grammar,
                 max_tokens=60)
    assert r.complete and re.fullmatch(REGEX, r.text)
    # EOS is taken the moment it is legal: right after the top-level domain
    assert r.trace[-1].token in tiny_bpe_vocab.eos_token_ids or r.text.endswith(("com", "org"))


def test_hundred_random_models_never_leave_the_language(tiny_bpe_vocab, schema_grammar,
                                                         regex_grammar):
    schema_c = automask.compile(schema_grammar, tiny_bpe_vocab)
    regex_c = automask.compile(regex_grammar, tiny_bpe_vocab)
    finished = 0
    for seed in range(100):
        compiled = schema_c if seed % 2 else regex_c
        model = random_model(tiny_bpe_vocab.size, seed)
        r = generate(model, tiny_bpe_vocab, PROMPT, compiled,
                     GenerationParams(max_tokens=40, temperature=1.0, seed=seed))
        m = assert_valid_prefix(compiled, r.tokens)
        assert r.complete == m.is_accepting()
        if r.finish_reason == "stop":
            finished += 1
            assert r.complete
            if compiled is regex_c:
                assert re.fullmatch(REGEX, r.text)
            else:
                jsonschema.validate(json.loads(r.text), SCHEMA)
        else:
            assert r.finish_reason == "length" and len(r.tokens) == 40
    assert finished > 50


# ----------------------------------------------------------------------------- identity


def byte_vocab() -> Vocabulary:
    """ASCII bytes 0..127 and an EOS: every token but EOS is ordinary."""
    return Vocabulary([bytes([i]) for i in range(128)] + [b"<eos>"], special_ids=[128],
                      eos_token_ids=[128])


@pytest.mark.parametrize("params", [
    GenerationParams(temperature=1.0, seed=7, max_tokens=40),
    GenerationParams(temperature=0.7, top_p=0.9, top_k=50, seed=3, max_tokens=40),
    GenerationParams(temperature=0.0, repetition_penalty=1.3, max_tokens=40),
])
def test_permissive_grammar_is_identical_to_unconstrained(params):
    vocab = byte_vocab()
    everything = Grammar.from_regex(r"[\s\S]*")
    for seed in range(5):
        model = random_model(vocab.size, seed, scale=2.0)
        a = generate(model, vocab, [65, 66], everything, params)
        b = generate(model, vocab, [65, 66], None, params)
        assert a.tokens == b.tokens
        assert a.finish_reason == b.finish_reason
        assert [s.token for s in a.trace] == [s.token for s in b.trace]
        assert all(s.rejection_mass == 0 and s.kl == 0 for s in a.trace)
        assert not b.constrained and a.constrained


# ----------------------------------------------------------------------------- forcing


def test_forced_steps_have_one_legal_token_and_kl_minus_log_p(tiny_bpe_vocab, schema_grammar):
    model = random_model(tiny_bpe_vocab.size, 11)
    r = generate(model, tiny_bpe_vocab, PROMPT, schema_grammar, max_tokens=120)
    check_schema_output(r)
    forced = [s for s in r.trace if s.forced]
    assert forced, "the schema's keys should be forced"
    assert 0 < r.forced_tokens <= len(forced)  # a sampled step with one legal token is forced too
    for s in forced:
        assert s.legal_count == 1
        logits = model(PROMPT + r.tokens[: s.step]).astype(np.float64)
        logp = logits[s.token] - (logits.max() + math.log(np.exp(logits - logits.max()).sum()))
        assert s.kl == pytest.approx(-logp, rel=1e-6, abs=1e-9)
        assert s.logprob == pytest.approx(logp, rel=1e-6, abs=1e-9)
        assert s.rejection_mass == pytest.approx(1 - math.exp(logp), abs=1e-9)
    assert [s.token for s in r.trace[: len(r.tokens)]] == r.tokens


def test_fast_forward_saves_passes_and_changes_nothing(tiny_bpe_vocab, schema_grammar):
    model = random_model(tiny_bpe_vocab.size, 5)
    fast = generate(CallableLM(model), tiny_bpe_vocab, PROMPT, schema_grammar, max_tokens=120)
    slow = generate(CallableLM(model), tiny_bpe_vocab, PROMPT, schema_grammar,
                    max_tokens=120, fast_forward=False)
    assert fast.tokens == slow.tokens and fast.text == slow.text
    assert [s.as_dict() for s in fast.trace] == [s.as_dict() for s in slow.trace]
    assert fast.forward_passes_saved == fast.forced_tokens > 0
    assert slow.forward_passes_saved == 0
    assert fast.forward_passes + fast.forward_passes_saved == slow.forward_passes
    reused = CallableLM(model)  # a decoder used twice counts each call's passes
    first = generate(reused, tiny_bpe_vocab, PROMPT, schema_grammar, max_tokens=120)
    again = generate(reused, tiny_bpe_vocab, PROMPT, schema_grammar, max_tokens=120)
    assert first.forward_passes == again.forward_passes == fast.forward_passes


# ----------------------------------------------------------------------------- stopping


def test_truncation_gives_length_and_a_valid_prefix(tiny_bpe_vocab, schema_grammar):
    compiled = automask.compile(schema_grammar, tiny_bpe_vocab)
    for max_tokens in (0, 1, 4, 9):
        r = generate(random_model(tiny_bpe_vocab.size, 2), tiny_bpe_vocab, PROMPT, compiled,
                     max_tokens=max_tokens)
        assert r.finish_reason == "length"
        assert not r.complete and r.value is None
        assert len(r.tokens) == max_tokens
        assert not assert_valid_prefix(compiled, r.tokens).is_accepting()


def test_stop_when_only_eos_is_left_without_a_forward_pass(tiny_bpe_vocab):
    grammar = Grammar.from_choices(["yes", "no"])
    model = CallableLM(random_model(tiny_bpe_vocab.size, 1))
    r = generate(model, tiny_bpe_vocab, PROMPT, grammar, max_tokens=10)
    assert r.finish_reason == "stop" and r.complete and r.text in ("yes", "no")
    # each token costs at most one pass, and nothing is spent once only EOS is legal
    assert r.forward_passes <= len(r.tokens)
    assert r.trace[-1].token not in tiny_bpe_vocab.eos_token_ids


def test_unconstrained_stops_at_eos():
    vocab = byte_vocab()
    r = generate(eos_model(vocab), vocab, [65], None, max_tokens=10)
    assert r.tokens == [] and r.finish_reason == "stop" and r.complete
    assert r.trace[0].token == 128 and r.trace[0].legal_count == vocab.size


# ----------------------------------------------------------------------------- beams


@pytest.mark.parametrize("length_normalize", [False, True])
def test_beams_stay_in_the_language(tiny_bpe_vocab, schema_grammar, regex_grammar,
                                    length_normalize):
    for seed, grammar in enumerate([schema_grammar, regex_grammar, schema_grammar]):
        compiled = automask.compile(grammar, tiny_bpe_vocab)
        model = random_model(tiny_bpe_vocab.size, 100 + seed)
        r = generate(model, tiny_bpe_vocab, PROMPT, compiled,
                     GenerationParams(num_beams=3, max_tokens=60,
                                      length_normalize=length_normalize))
        assert len(r.beams) >= 1
        for beam in r.beams:
            m = assert_valid_prefix(compiled, beam.tokens)
            assert beam.complete == m.is_accepting()
        if any(b.finish_reason == "stop" for b in r.beams):
            assert r.finish_reason == "stop" and r.complete
            assert r.beams[0].tokens == r.tokens
            best = max(b.score for b in r.beams if b.finish_reason == "stop")
            assert r.beams[0].score == best
        if r.complete and compiled.grammar is schema_grammar:
            jsonschema.validate(json.loads(r.text), SCHEMA)


def test_beam_scores_are_sums_of_legal_log_probs(tiny_bpe_vocab, regex_grammar):
    from automask.sampling import legal_log_probs

    model = random_model(tiny_bpe_vocab.size, 9)
    compiled = automask.compile(regex_grammar, tiny_bpe_vocab)
    r = generate(model, tiny_bpe_vocab, PROMPT, compiled, num_beams=2, max_tokens=40)
    assert r.complete and re.fullmatch(REGEX, r.text)
    # recompute the winner's score from its trace: free steps add their legal log-prob,
    # forced (fast-forwarded) tokens add nothing
    m = Matcher(compiled)
    mask = automask.allocate_bitmask(1, tiny_bpe_vocab.size)
    total = 0.0
    for s in r.trace:
        if not s.forced:
            m.fill_bitmask(mask)
            prefix = PROMPT + r.tokens[: m.num_accepted]
            total += float(legal_log_probs(model(prefix)[None], mask)[0, s.token])
        assert m.accept_token(s.token)
    assert r.beams[0].score == pytest.approx(total, abs=1e-6)
    finished = [b.score for b in r.beams if b.finish_reason == "stop"]
    assert r.beams[0].score == max(finished)


# ----------------------------------------------------------------------------- plumbing


def test_session_only_eos_left(tiny_bpe_vocab):
    compiled = automask.compile(Grammar.from_choices(["ab"]), tiny_bpe_vocab)
    s = Session(CallableLM(lambda ids: np.zeros(tiny_bpe_vocab.size)), tiny_bpe_vocab,
                compiled, [1], GenerationParams(), None)
    m = Matcher(compiled)
    assert not s.only_eos_left(m)
    assert m.accept_tokens(tiny_bpe_vocab.encode("ab")) == len(tiny_bpe_vocab.encode("ab"))
    assert s.only_eos_left(m)


def test_bad_params_and_models_raise(tiny_bpe_vocab):
    with pytest.raises(ValueError):
        GenerationParams(temperature=-1)
    with pytest.raises(ValueError):
        GenerationParams(num_beams=0)
    with pytest.raises(TypeError):
        generate(object(), tiny_bpe_vocab, PROMPT, None)
    narrow = lambda ids: np.zeros(10)  # noqa: E731
    with pytest.raises(ValueError, match="columns"):
        generate(narrow, tiny_bpe_vocab, PROMPT, None)


def test_result_is_plain_data(tiny_bpe_vocab, schema_grammar):
    r = generate(random_model(tiny_bpe_vocab.size, 4), tiny_bpe_vocab, PROMPT, schema_grammar,
                 num_beams=2, max_tokens=80)
    data = r.as_dict()
    json.dumps(data, allow_nan=True)
    assert set(data["trace"][0]) >= {"step", "token", "text", "legal_count", "rejection_mass",
                                      "kl", "forced", "raw_argmax_legal"}
    assert automask.generate is generate


@pytest.mark.parametrize("cache_name", ["past_key_values", "cache"])
def test_hf_signature_module_matches_callable(tiny_bpe_vocab, schema_grammar, cache_name):
    """A torch module with the HF forward signature and a KV "cache" gives the same tokens,
    with the cache named as before transformers 5.24 (``past_key_values``) or after
    (``cache``, in and out; the old name only warns there)."""
    torch = pytest.importorskip("torch")
    fn = random_model(tiny_bpe_vocab.size, 21)

    class Out:
        def __init__(self, logits, kept):
            self.logits = logits
            setattr(self, cache_name, kept)

    class Tiny(torch.nn.Module):
        vocab_size = tiny_bpe_vocab.size

        def _step(self, input_ids, kept):
            seen = [] if kept is None else list(kept)
            rows = []
            for t in input_ids[0].tolist():
                seen.append(t)
                rows.append(torch.from_numpy(fn(list(seen))))
            return Out(torch.stack(rows)[None], tuple(seen))

    class Old(Tiny):
        def forward(self, input_ids, past_key_values=None, use_cache=True):
            return self._step(input_ids, past_key_values)

    class New(Tiny):
        def forward(self, input_ids, cache=None, use_cache=True):
            return self._step(input_ids, cache)

    model = Old() if cache_name == "past_key_values" else New()
    for params in (GenerationParams(max_tokens=80), GenerationParams(max_tokens=80,
                                                                       num_beams=2)):
        a = generate(model, tiny_bpe_vocab, PROMPT, schema_grammar, params)
        b = generate(fn, tiny_bpe_vocab, PROMPT, schema_grammar, params)
        assert a.tokens == b.tokens and a.forward_passes == b.forward_passes


def test_repetition_penalty_counts_content_tokens_only():
    """JSON punctuation, quotes and whitespace repeat by design and never count."""
    from automask.generation.loop import _penalizable

    for structural in (b'","', b'{"', b"}", b"]}", b" ", b'":', b"\n  ", b""):
        assert not _penalizable(structural), structural
    for content in (b"000", b'"a', b"Python", b" the", b"-1", b"true"):
        assert _penalizable(content), content


def test_cache_keys_follow_the_content_not_the_path(tmp_path):
    """Derived files (requantized GGUFs, converted tokenizers and vLLM folders) are
    keyed by the source's bytes: a reinstall elsewhere reuses them, an edit does not."""
    import os

    from automask.generation.models import cache_key

    first = tmp_path / "a" / "model.gguf"
    second = tmp_path / "b" / "model.gguf"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(b"GGUF" + bytes(range(256)) * 4096)
    os.utime(second, ns=(1, 1))
    assert cache_key(first, 7) == cache_key(second, 7)
    assert cache_key(first, 7) != cache_key(first, 8)
    second.write_bytes(b"GGUF" + bytes(range(255, -1, -1)) * 4096)
    assert cache_key(first, 7) != cache_key(second, 7)
