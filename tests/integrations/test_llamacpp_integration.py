"""automask.integrations.llamacpp on a real llama.cpp (llama-cpp-python) and the default GGUF."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest
from support.models import default_model_missing

from automask import Grammar, Vocabulary, compile

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed (pip install 'automask[serve]')",
                allow_module_level=True)

from llama_cpp import Llama, LogitsProcessorList  # noqa: E402

from automask.generation.models import default_model_path  # noqa: E402
from automask.generation.runners import default_threads  # noqa: E402
from automask.integrations.llamacpp import (  # noqa: E402
    LogitsProcessor,
    ProcessorError,
    vocabulary_from_llama,
)

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0}}}


@pytest.fixture(scope="module")
def llm():
    reason = default_model_missing("llama_cpp")
    if reason:
        pytest.skip(reason)
    path = default_model_path()
    return Llama(model_path=str(path), n_ctx=2048, n_threads=default_threads(), seed=0,
                 verbose=False)


def _chat(llm, processor, content: str, **kw):
    out = llm.create_chat_completion([{"role": "user", "content": content}],
                                     logits_processor=LogitsProcessorList([processor]), **kw)
    choice = out["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def test_vocabulary_is_the_models_own(llm):
    vocab = vocabulary_from_llama(llm)
    from_file = Vocabulary.from_file(llm.model_path)
    assert vocab.size == from_file.size == llm.n_vocab()
    assert vocab.tokens == from_file.tokens
    assert vocab.special_ids == from_file.special_ids
    assert set(from_file.eos_token_ids) <= set(vocab.eos_token_ids)
    assert vocab.encode(' {"a": 1}') == llm.tokenize(b' {"a": 1}', add_bos=False)
    assert vocabulary_from_llama(llm) is vocab  # built once per Llama


def test_chat_completion_follows_a_json_schema(llm):
    jsonschema = pytest.importorskip("jsonschema")
    processor = LogitsProcessor(Grammar.from_json_schema(PERSON), llm)
    text, finish = _chat(llm, processor, "Describe a person as JSON.", max_tokens=96,
                         temperature=0)
    assert finish == "stop", text
    jsonschema.validate(json.loads(text), PERSON)
    assert processor.error is None
    assert processor.matcher.is_accepting()  # EOS came where the grammar accepts


@pytest.mark.parametrize("seed", [1, 2])
def test_sampled_completions_stay_in_the_language(llm, seed):
    pattern = r"[A-Z][a-z]{2,8} \d{2,3}(, [A-Z][a-z]{2,8} \d{2,3}){0,2}"
    processor = LogitsProcessor(Grammar.from_regex(pattern), llm)
    out = llm.create_completion("Names and scores:", max_tokens=48, temperature=1.3, top_p=1.0,
                                seed=seed, logits_processor=LogitsProcessorList([processor]))
    choice = out["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    assert re.fullmatch(pattern, choice["text"]), choice["text"]


def test_eos_only_where_the_grammar_accepts_and_only_eos_after(llm):
    processor = LogitsProcessor(Grammar.from_choices(["yes", "no", "not sure"]), llm)
    text, finish = _chat(llm, processor, "Is the sky green? Answer yes or no.", max_tokens=16,
                         temperature=0)
    assert (text, finish) in {("yes", "stop"), ("no", "stop"), ("not sure", "stop")}
    if text != "no":  # "no" may go on ("not sure"): EOS and more are allowed there
        allowed = set(processor.matcher.allowed_token_ids().tolist())
        assert allowed == set(processor.vocab.eos_token_ids)  # a complete choice: EOS only
    ends = LogitsProcessor(Grammar.from_choices(["no", "not sure"]), llm)
    ends(np.asarray(llm.tokenize(b"Q:"), dtype=np.intc), np.zeros(llm.n_vocab(), np.float32))
    for token in llm.tokenize(b"no", add_bos=False):
        assert ends.matcher.accept_token(token)
    allowed = set(ends.matcher.allowed_token_ids().tolist())
    assert set(ends.vocab.eos_token_ids) <= allowed  # "no" is complete: EOS allowed
    assert allowed - set(ends.vocab.eos_token_ids)  # and " sure" can follow
    start = LogitsProcessor(Grammar.from_choices(["no", "not sure"]), llm)
    assert not set(start.matcher.allowed_token_ids().tolist()) & set(start.vocab.eos_token_ids)


def test_a_reused_processor_ends_the_output_and_says_why(llm):
    processor = LogitsProcessor(Grammar.from_regex(r"[0-9]{1,4}"), llm)
    first = llm.create_completion("Year:", max_tokens=8, temperature=0,
                                  logits_processor=LogitsProcessorList([processor]))
    assert re.fullmatch(r"[0-9]{1,4}", first["choices"][0]["text"])
    with pytest.warns(RuntimeWarning, match="one processor per completion"):
        second = llm.create_completion("Another year:", max_tokens=8, temperature=0,
                                       logits_processor=LogitsProcessorList([processor]))
    assert second["choices"][0]["text"] == ""
    assert isinstance(processor.error, ProcessorError)
    with pytest.raises(ProcessorError, match="already served another generation"):
        processor.raise_error()


def test_a_refused_token_ends_the_output(llm):
    processor = LogitsProcessor(Grammar.from_regex(r"[0-9]+"), llm)
    prompt = llm.tokenize(b"Number:")
    scores = np.zeros(llm.n_vocab(), dtype=np.float32)
    processor(np.asarray(prompt, dtype=np.intc), scores)
    assert np.isinf(scores).sum() > llm.n_vocab() // 2  # the mask was applied
    letter = llm.tokenize(b"x", add_bos=False)[0]
    scores = np.zeros(llm.n_vocab(), dtype=np.float32)
    with pytest.warns(RuntimeWarning, match="outside the grammar"):
        processor(np.asarray([*prompt, letter], dtype=np.intc), scores)
    finite = np.flatnonzero(np.isfinite(scores))
    assert set(finite) == set(processor.vocab.eos_token_ids)


def test_bad_arguments_fail_at_construction(llm, llama):
    with pytest.raises(TypeError, match="Grammar or CompiledGrammar"):
        LogitsProcessor(r"\d+", llm)
    other = compile(Grammar.from_regex(r"\d+"), llama)  # Llama-3.1's 128k vocabulary
    with pytest.raises(ValueError, match="compiled for"):
        LogitsProcessor(other, llm)
