"""Shared fixtures: the shared-data folder and two tiny real tokenizers trained at test time.

The tiny tokenizers let fast tests exercise genuine byte-level and
SentencePiece-style vocabularies without ../shared/data or any download.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings
from support.models import ON_TRANSFORMERS, default_model_missing
from support.paths import SHARED_DATA

# Property tests draw the same examples on every run (set HYPOTHESIS_PROFILE=random
# to explore): a random draw once made Hypothesis's own regex strategy spin for
# many minutes, and a CI run must not depend on luck. Examples still differ per test.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("random")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

# A few KB of varied text: prose, code, JSON, numbers, several scripts, whitespace runs.
TRAINING_CORPUS: list[str] = [
    "The quick brown fox jumps over the lazy dog while the cat sleeps by the window.",
    "A grammar constrains what a model may write; a mask says which tokens stay legal.",
    "Every token is a string of bytes, and the output is the concatenation of them all.",
    "She said: \"It's not what you think, it's what you can prove.\" Then she left.",
    "Numbers like 3.14159, 2.5e-3, -42, 1000000 and 0x1F show up in real outputs.",
    "Dates such as 2024-05-17T12:30:00Z and times like 09:45 are common in JSON data.",
    '{"name": "Ada", "age": 36, "languages": ["en", "fr"], "active": true, "score": null}',
    '{"id": 17, "tags": [], "nested": {"a": [1, 2, 3], "b": {"c": "d"}}, "ok": false}',
    '[{"x": 1.5, "y": -2}, {"x": 0, "y": 1e10}, {"text": "line one\\nline two"}]',
    "def parse(text: str) -> list[int]:\n    return [int(x) for x in text.split(',')]\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += values[i] * weights[i];\n}\n",
    "SELECT name, count(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "if x == None:\n    raise ValueError('x must be set')\nelse:\n    print(x)\n",
    '<html><body><p class="note">Hello &amp; welcome</p></body></html>',
    "Les élèves étudient à l'école; où est la bibliothèque? Ça dépend, dit-il.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein, sagte der Pilot.",
    "El niño comió una manzana y la señora sonrió en la mañana de otoño.",
    "Ελληνικά γράμματα: άλφα, βήτα, γάμμα. Русский текст: привет, как дела?",
    "日本語の文章です。東京は大きな都市です。中文句子：我们今天去公园散步。",
    "한국어 문장도 있습니다. 안녕하세요, 반갑습니다!",
    "Emoji appear too: 🙂 😀 🚀 ✨ 👍🏽 and flags like 🇫🇷 in chat messages.",
    "Tabs\tand  double  spaces   and    more     spaces, trailing spaces   ",
    "   leading spaces, then a newline\nand a blank line\n\nand a third\n\n\nline.",
    'Punctuation!? Yes... (parentheses), [brackets], {braces}, <angles>, "quotes".',
    "Paths like /usr/local/bin and C:\\Windows\\System32 and URLs https://example.org/a?b=c.",
    "Math: a^2 + b^2 = c^2, x <= y, 5 % 3 == 2, ~mask & 0xFF | bits >> 2.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "The tokenizer splits words, merges frequent pairs, and stores the merges in order.",
    "Byte fallback keeps rare characters representable: every byte has its own token.",
    "UPPER CASE WORDS and MixedCase identifiers like getHTTPResponseCode or snake_case_name.",
]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder beside the repository, or a skip when a clone lacks it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            "../shared/data not found: data-tier tests need the shared data beside the repo"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def smollm():
    """The default SmolLM2 model on transformers, loaded once, torch on one thread."""
    reason = default_model_missing(*ON_TRANSFORMERS)
    if reason:
        pytest.skip(reason)
    import torch

    from automask.generation.models import load_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 135M model gains little from threads; contention costs a lot
    yield load_model()
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def llama(shared_data):
    """The real Llama-3.1 vocabulary (128k tokens), loaded once."""
    from automask.vocab import Vocabulary

    return Vocabulary.from_file(str(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json"))


@pytest.fixture(scope="session")
def training_corpus() -> list[str]:
    return list(TRAINING_CORPUS)


def _corpus_iter(repeat: int = 4):
    for _ in range(repeat):
        yield from TRAINING_CORPUS


def build_tiny_bpe(folder: Path) -> Path:
    """A byte-level BPE (GPT-2 style, ~500 ids) with specials, added tokens and a BOS template.

    ``add_prefix_space`` and the BOS template are there on purpose: a correct
    :meth:`Vocabulary.encode` must undo both.
    """
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=["<|endoftext|>", "<|bos|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus_iter(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", special_tokens=[("<|bos|>", tok.token_to_id("<|bos|>"))]
    )
    tok.add_tokens(
        [
            AddedToken("<think>", special=False, normalized=False),
            AddedToken("</think>", special=False, normalized=False),
        ]
    )
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    return folder / "tokenizer.json"


def build_tiny_spm(folder: Path) -> Path:
    """A llama-2 style SentencePiece BPE: ▁ for spaces, a Prepend dummy prefix, byte fallback.

    The trainer knows nothing of ``<0x00>``..``<0xFF>``, so they are spliced into the
    model vocabulary after training (ids 3..258, as in llama-2). The alphabet is
    limited so that rare characters really go through byte fallback. Non-special
    added tokens mimic gemma-3: a run of ▁ (decoded as spaces) and ``\\n\\n``.
    """
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=260,
        special_tokens=["<unk>", "<s>", "</s>"],
        limit_alphabet=70,
        show_progress=False,
    )
    tok.train_from_iterator(_corpus_iter(), trainer)

    data = json.loads(tok.to_str())
    old = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    specials = [piece for piece, _ in old[:3]]
    vocab = {piece: i for i, piece in enumerate(specials)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in old[3:]:
        vocab.setdefault(piece, len(vocab))
    data["model"]["vocab"] = vocab
    data["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    }
    data["pre_tokenizer"] = None
    data["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    }
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    }
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_tokens(
        [
            AddedToken("▁▁▁▁", special=False, normalized=True),
            AddedToken("\n\n", special=False, normalized=False),
        ]
    )
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


@pytest.fixture(scope="session")
def tiny_bpe_path(tmp_path_factory) -> Path:
    pytest.importorskip("tokenizers")
    return build_tiny_bpe(tmp_path_factory.mktemp("tiny_bpe"))


@pytest.fixture(scope="session")
def tiny_spm_path(tmp_path_factory) -> Path:
    pytest.importorskip("tokenizers")
    return build_tiny_spm(tmp_path_factory.mktemp("tiny_spm"))


@pytest.fixture(scope="session")
def tiny_bpe_vocab(tiny_bpe_path):
    """Byte-level BPE Vocabulary: ids 0-2 special, EOS (2, 0), ``<think>`` a normal added token."""
    from automask.vocab import Vocabulary

    return Vocabulary.from_file(tiny_bpe_path)


@pytest.fixture(scope="session")
def tiny_spm_vocab(tiny_spm_path):
    """SentencePiece-style Vocabulary: ids 0-2 special, ``<0xNN>`` at 3 + NN, EOS ``</s>``."""
    from automask.vocab import Vocabulary

    return Vocabulary.from_file(tiny_spm_path)


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="also run the full tiers (the whole MaskBench dev set: hours)")


def pytest_configure(config):
    # .ci/compiled runs the tests on the compiled engine's modules (PYTHONPATH before the
    # editable install): a run that silently imported the Python ones would prove nothing.
    from automask.engine import COMPILED

    if os.environ.get("AUTOMASK_EXPECT_COMPILED") == "1" and not COMPILED:
        pytest.exit("AUTOMASK_EXPECT_COMPILED=1, but automask.engine runs as Python", 2)


def pytest_collection_modifyitems(config, items):
    from automask.engine import COMPILED

    # Compiled code calls a module's own functions directly: a test that replaces one to
    # watch it (monkeypatch) can only watch the Python engine.
    if COMPILED:
        python_only = pytest.mark.skip(reason="patches an engine function (compiled engine)")
        for item in items:
            if "python_engine" in item.keywords:
                item.add_marker(python_only)
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="full tier: run with pytest --full")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)
