"""Vocabulary: exact token bytes for HF tokenizer.json, GGUF and tiktoken files.

The central property is the round trip: the bytes of ``encode(s)`` joined are
``s`` in UTF-8. It fails if any token's bytes are wrong (a lost space, an
unmapped byte-level character, a ``<0xNN>`` taken literally) or if the encoder
invents a BOS or dummy-prefix space. A second check compares every id with the
``tokenizers`` library's own decoder.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import pytest

from automask.errors import VocabularyError
from automask.vocab import Vocabulary
from automask.vocab.hf import gpt2_byte_to_unicode

ROUND_TRIP = [
    "hello world",
    "Hello, World! How are you?",
    "x",
    " ",
    "  ",
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "multiple     inner      spaces",
    "tabs\tand\ttabs\t\t",
    "line one\nline two\n\nline four\n",
    "\n\n\nstarts with newlines",
    "\r\nwindows line\r\n",
    "café naïve résumé déjà-vu Ångström",
    "東京は日本の首都です。北京是中国的首都。",
    "한국어와 ελληνικά και русский",
    "emoji 🙂🚀 and ZWJ 👩‍💻 and flag 🇯🇵 and skin 👍🏽",
    "rare: ☃ ∮ ⅋ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u00a0nbsp \u200bzwsp",
    '{"a": "x\\n\\"y\\"", "b": [1, 2.5e-3]}',
    '{"key": "value", "list": [true, false, null], "n": -0.5E+10}',
    '  {\n    "indented": {"deep": [1, 2, 3]}\n  }\n',
    "def f(x):\n    return x ** 2  # square\n",
    "C:\\path\\to\\file.txt and /usr/bin/env python3",
    "12345678901234567890 3.14159265358979",
    "<think>inner thoughts</think> done",
    "text naming specials: <|endoftext|> <|im_end|> <|eot_id|> </s> <s> <eos> <end_of_turn>",
    "<0x0A> looks like a byte token but is text",
    "Ġ and Ċ are ordinary letters here",
]


def assert_round_trip(vocab: Vocabulary, texts: list[str]) -> None:
    for s in texts:
        ids = vocab.encode(s)
        assert all(0 <= i < len(vocab.tokens) for i in ids), s
        got = b"".join(vocab.token_bytes(i) for i in ids)
        assert got == s.encode("utf-8"), (vocab.name, s, ids, got)


def assert_matches_tokenizers_decode(vocab: Vocabulary, path: Path, strip_one_space: bool) -> None:
    """Every id's bytes, read as UTF-8, equal what ``tokenizers`` decodes that id alone to.

    Decoders with a final ``Strip`` (llama-2 style) drop one leading space of the
    whole output; that space belongs to the token mid-output, so it is allowed.
    """
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    n = len(vocab.tokens)
    assert tok.get_vocab_size(with_added_tokens=True) <= n
    decoded = tok.decode_batch([[i] for i in range(n)], skip_special_tokens=False)
    bad = []
    for i, theirs in enumerate(decoded):
        ours = vocab.tokens[i].decode("utf-8", errors="replace")
        if ours == theirs or (strip_one_space and ours.startswith(" ") and ours[1:] == theirs):
            continue
        bad.append((i, vocab.tokens[i], theirs))
    assert not bad, bad[:10]


# --------------------------------------------------------------------------- core class


def test_byte_level_map_is_the_gpt2_bijection():
    table = gpt2_byte_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert table[ord("A")] == "A" and table[ord("~")] == "~" and table[0xE9] == "é"
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[0] == "Ā"
    assert table[0xAD] == "Ń"  # soft hyphen is one of the 68 moved bytes, the last one


def test_vocabulary_basics_and_ranges():
    v = Vocabulary([b"a", None, b"bc"], special_ids=[1], eos_token_ids=[1, 1], size=5, name="t")
    assert v.tokens == [b"a", b"", b"bc"]
    assert v.size == 5 and len(v) == 5
    assert v.special_ids == frozenset({1}) and v.eos_token_ids == (1,)
    assert v.token_bytes(2) == b"bc"
    assert v.token_bytes(4) == b""  # padding id: in range, no bytes
    for bad in (5, -1, 10**9):
        with pytest.raises(VocabularyError):
            v.token_bytes(bad)
    assert v.decode_bytes([0, 2, 0]) == b"abca"
    assert not v.can_encode
    with pytest.raises(VocabularyError):
        v.encode("a")
    with pytest.raises(VocabularyError):
        Vocabulary([b"a", b"b"], size=1)
    with pytest.raises(VocabularyError):
        Vocabulary([b"a"], eos_token_ids=[3])
    with pytest.raises(VocabularyError):
        Vocabulary([b"a"], special_ids=[-1])


def test_vocabulary_encoder_is_used():
    v = Vocabulary([b"a", b"b"], encoder=lambda s: [0 if c == "a" else 1 for c in s])
    assert v.can_encode
    assert v.encode("abba") == [0, 1, 1, 0]


# --------------------------------------------------------------------------- tiny HF tokenizers


@pytest.mark.parametrize("which", ["tiny_bpe_vocab", "tiny_spm_vocab"])
def test_tiny_round_trip(which, request, training_corpus):
    vocab = request.getfixturevalue(which)
    assert vocab.can_encode
    assert_round_trip(vocab, ROUND_TRIP + training_corpus)


@pytest.mark.parametrize(("which", "strip"), [("tiny_bpe_path", False), ("tiny_spm_path", True)])
def test_tiny_tokens_match_tokenizers_decode(which, strip, request):
    path = request.getfixturevalue(which)
    assert_matches_tokenizers_decode(Vocabulary.from_file(path), path, strip_one_space=strip)


def test_tiny_bpe_specials_added_and_eos(tiny_bpe_vocab):
    v = tiny_bpe_vocab
    assert v.special_ids == frozenset({0, 1, 2})
    assert [v.token_bytes(i) for i in range(3)] == [b"<|endoftext|>", b"<|bos|>", b"<|im_end|>"]
    think = v.tokens.index(b"<think>")
    assert think not in v.special_ids
    assert v.encode("<think>x</think>")[0] == think  # added tokens are matched, as in the model
    ids = v.encode("say <|im_end|> and <|bos|>")
    assert not set(ids) & v.special_ids  # special names in text are plain text
    # tokenizer_config.json names <|im_end|>, generation_config.json adds [2, 0]
    assert v.eos_token_ids == (2, 0)
    # byte-level: a space-prefixed piece means a real space; partial UTF-8 pieces exist
    assert any(t.startswith(b" ") and len(t) > 1 for t in v.tokens)
    assert bytes([0xE6]) in v.tokens


def test_encode_adds_no_bos_and_no_dummy_prefix(tiny_bpe_vocab, tiny_spm_vocab):
    for v in (tiny_bpe_vocab, tiny_spm_vocab):
        ids = v.encode("hello")
        assert not set(ids) & v.special_ids
        assert not v.token_bytes(ids[0]).startswith(b" ")
        assert v.encode("") == []


def test_tiny_spm_byte_fallback_and_spaces(tiny_spm_vocab):
    v = tiny_spm_vocab
    assert v.special_ids == frozenset({0, 1, 2})
    assert v.token_bytes(3 + 0x0A) == b"\n"
    assert v.token_bytes(3 + 0xE2) == b"\xe2"
    assert all(v.token_bytes(3 + b) == bytes([b]) for b in range(256))
    assert b"\xe2\x96\x81" not in b"".join(v.tokens[3:])  # no ▁ left anywhere
    # the non-special added token "▁▁▁▁" decodes to four spaces, gemma-3 style
    four = v.tokens.index(b"    ")
    assert four not in v.special_ids and four in v.encode("a    b")
    assert v.token_bytes(v.tokens.index(b"\n\n")) == b"\n\n"
    # rare characters really go through byte fallback
    assert all(3 <= i < 259 for i in v.encode("☃"))
    # no tokenizer_config.json: EOS is guessed from the special names
    assert v.eos_token_ids == (2,)


def test_eos_override_and_vocab_size(tiny_bpe_path):
    n = len(Vocabulary.from_file(tiny_bpe_path).tokens)
    v = Vocabulary.from_file(tiny_bpe_path, eos_token_ids=[0], vocab_size=n + 30)
    assert v.eos_token_ids == (0,)
    assert v.size == n + 30 and len(v.tokens) == n
    assert v.token_bytes(n + 29) == b""
    with pytest.raises(VocabularyError):
        v.token_bytes(n + 30)
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(tiny_bpe_path, vocab_size=n - 1)
    assert Vocabulary.from_file(tiny_bpe_path, eos_token_ids=[]).eos_token_ids == ()


def test_special_tokens_argument_adds_ids(tiny_bpe_path):
    n = len(Vocabulary.from_file(tiny_bpe_path).tokens)
    v = Vocabulary.from_file(tiny_bpe_path, special_tokens={"<|tool|>": n + 2, "<think>": n - 2})
    assert len(v.tokens) == n + 3 and v.token_bytes(n + 2) == b"<|tool|>"
    assert v.token_bytes(n + 1) == b""  # a hole
    assert {n + 2, n - 2} <= v.special_ids


def test_from_file_accepts_directory(tiny_bpe_path, tiny_bpe_vocab):
    v = Vocabulary.from_file(tiny_bpe_path.parent)
    assert v.tokens == tiny_bpe_vocab.tokens and v.name == tiny_bpe_path.parent.name


def test_from_file_errors(tmp_path):
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(tmp_path / "missing.json")
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(tmp_path)  # a directory without tokenizer.json
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(bad)
    bad.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0, "##b": 1}}}))
    with pytest.raises(VocabularyError, match="WordPiece"):
        Vocabulary.from_file(bad)
    fake = tmp_path / "x.gguf"
    fake.write_bytes(b"not a gguf at all")
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(fake)


def test_without_tokenizers_package_there_is_no_encoder(tiny_bpe_path, monkeypatch):
    import automask.vocab.hf as hf

    monkeypatch.setattr(hf, "_tokenizers_available", lambda: False)
    v = Vocabulary.from_file(tiny_bpe_path)
    assert not v.can_encode and len(v.tokens) > 256
    with pytest.raises(VocabularyError):
        v.encode("x")


def _retrained(tmp_path: Path, build) -> Path:
    tok = build()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def test_metaspace_style_round_trip(tmp_path, training_corpus):
    """Metaspace pre-tokenizer with prepend_scheme=always: the encoder must turn it off."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    def build():
        tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
        tok.decoder = decoders.Metaspace(prepend_scheme="always")
        trainer = trainers.BpeTrainer(
            vocab_size=400, special_tokens=["<unk>", "</s>"], show_progress=False
        )
        tok.train_from_iterator(training_corpus, trainer)
        return tok

    path = _retrained(tmp_path, build)
    v = Vocabulary.from_file(path)
    assert v.encode("hello")[0] != v.encode(" hello")[0]
    # without byte fallback, unseen characters become <unk>: round trip only seen text
    assert_round_trip(v, [s for s in training_corpus if "\t" not in s])
    assert v.eos_token_ids == (1,)


def test_unigram_model_round_trip(tmp_path, training_corpus):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    def build():
        tok = tokenizers.Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.decoder = decoders.Metaspace(prepend_scheme="first")
        trainer = trainers.UnigramTrainer(
            vocab_size=300,
            special_tokens=["<unk>", "<eos>"],
            unk_token="<unk>",
            show_progress=False,
        )
        tok.train_from_iterator(training_corpus, trainer)
        return tok

    path = _retrained(tmp_path, build)
    v = Vocabulary.from_file(path)
    assert {0, 1} <= v.special_ids and v.eos_token_ids == (1,)
    assert_round_trip(v, ["hello world", "  the  model  ", "a grammar constrains"])
    assert_matches_tokenizers_decode(v, path, strip_one_space=True)


# --------------------------------------------------------------------------- transformers


def test_from_hf_fast_tokenizer_matches_file(tiny_bpe_path, tiny_bpe_vocab):
    transformers = pytest.importorskip("transformers")
    hf_tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tiny_bpe_path), eos_token="<|im_end|>", bos_token="<|bos|>"
    )
    v = Vocabulary.from_hf(hf_tok)
    assert v.tokens == tiny_bpe_vocab.tokens
    assert {0, 1, 2} <= v.special_ids
    assert v.eos_token_ids[0] == 2
    assert_round_trip(v, ROUND_TRIP)
    assert Vocabulary.from_hf(hf_tok, eos_token_ids=[0], vocab_size=600).size == 600


class _SlowByteLevel:
    """A stand-in for a slow (pure Python) GPT-2 tokenizer, duck-typed like transformers'."""

    byte_encoder = gpt2_byte_to_unicode()
    all_special_ids = [0, 1, 2]
    eos_token_id = 2
    name_or_path = "slow-fake"

    def __init__(self, path: Path, vocab: Vocabulary, add_bos: bool):
        data = json.loads(path.read_text(encoding="utf-8"))
        self.pieces = {i: p for p, i in data["model"]["vocab"].items()}
        for tok in data["added_tokens"]:
            self.pieces[tok["id"]] = tok["content"]
        self.vocab, self.add_bos = vocab, add_bos

    def __len__(self) -> int:
        return len(self.pieces)

    def convert_ids_to_tokens(self, ids):
        return [self.pieces[i] for i in ids]

    def encode(self, text, add_special_tokens=True):
        return ([1] if self.add_bos else []) + self.vocab.encode(text)


def test_from_hf_slow_tokenizer_best_effort(tiny_bpe_path, tiny_bpe_vocab):
    good = Vocabulary.from_hf(_SlowByteLevel(tiny_bpe_path, tiny_bpe_vocab, add_bos=False))
    assert good.tokens == tiny_bpe_vocab.tokens
    assert good.special_ids == frozenset({0, 1, 2}) and good.eos_token_ids == (2,)
    assert good.can_encode and good.encode("hi there") == tiny_bpe_vocab.encode("hi there")
    # an encoder that adds BOS fails the probe and is dropped rather than trusted
    bad = Vocabulary.from_hf(_SlowByteLevel(tiny_bpe_path, tiny_bpe_vocab, add_bos=True))
    assert not bad.can_encode


# --------------------------------------------------------------------------- GGUF


def _write_gguf(path: Path, model: str, tokens: list[str], types: list[int], eos: int, eot=None):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_name("tiny")
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_eos_token_id(eos)
    if eot is not None:
        w.add_eot_token_id(eot)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_gpt2_style(tmp_path):
    m = gpt2_byte_to_unicode()
    tokens = [
        "<|endoftext|>",  # CONTROL
        "Ġhello",
        "Ċ",
        m[0xC3] + m[0xA9],  # "é" in byte-level form
        m[0xF0],  # a lone UTF-8 lead byte
        "<tool>",  # USER_DEFINED: literal
        "<|eot|>",  # CONTROL
        "<unk>",  # UNKNOWN
        "<unused0>",  # UNUSED
        "ĠĠ",
    ]
    types = [3, 1, 1, 1, 1, 4, 3, 2, 5, 1]
    path = tmp_path / "tiny-gpt2.gguf"
    _write_gguf(path, "gpt2", tokens, types, eos=0, eot=6)
    v = Vocabulary.from_file(path)
    assert v.tokens == [
        b"<|endoftext|>", b" hello", b"\n", "é".encode(), b"\xf0", b"<tool>",
        b"<|eot|>", b"<unk>", b"<unused0>", b"  ",
    ]  # fmt: skip
    assert v.special_ids == frozenset({0, 6, 7, 8})
    assert v.eos_token_ids == (0, 6)
    assert v.name == "tiny" and not v.can_encode
    assert Vocabulary.from_file(path, eos_token_ids=[6]).eos_token_ids == (6,)


def test_gguf_llama_style(tmp_path):
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "▁hello", "▁▁", "world", "<0x41>x"]
    types = [2, 3, 3, 6, 6, 1, 4, 1, 1]
    path = tmp_path / "tiny-llama.gguf"
    _write_gguf(path, "llama", tokens, types, eos=2)
    v = Vocabulary.from_file(path, vocab_size=16)
    assert v.tokens == [
        b"<unk>", b"<s>", b"</s>", b"\n", b"\xe2", b" hello", "▁▁".encode(), b"world",
        b"<0x41>x",
    ]  # fmt: skip
    assert v.special_ids == frozenset({0, 1, 2})
    assert v.eos_token_ids == (2,) and v.size == 16


def test_gguf_unsupported_model_and_bad_files(tmp_path):
    path = tmp_path / "bert.gguf"
    _write_gguf(path, "bert", ["[CLS]", "a"], [3, 1], eos=0)
    with pytest.raises(VocabularyError, match="bert"):
        Vocabulary.from_file(path)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(truncated)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(empty)


def test_gguf_reading_needs_no_gguf_package(tmp_path, monkeypatch):
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, "gpt2", ["a", "Ġb", "<|endoftext|>"], [1, 1, 3], eos=2)
    monkeypatch.setitem(sys.modules, "gguf", None)  # any import of gguf now fails
    v = Vocabulary.from_file(path)
    assert v.tokens == [b"a", b" b", b"<|endoftext|>"] and v.eos_token_ids == (2,)


# --------------------------------------------------------------------------- tiktoken

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _write_ranks(path: Path) -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for merged in (b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor", b"ld", b" world"):
        ranks[merged] = len(ranks)
    lines = [f"{base64.b64encode(t).decode()} {r}" for t, r in ranks.items()]
    path.write_text("\n".join(lines) + "\n")
    return ranks


def test_tiktoken_file(tmp_path):
    path = tmp_path / "tiny.tiktoken"
    ranks = _write_ranks(path)
    n = len(ranks)
    v = Vocabulary.from_file(path, special_tokens={"<|endoftext|>": n + 1, "<|fim|>": n + 2})
    assert len(v.tokens) == n + 3 and v.token_bytes(n) == b""  # a hole before the specials
    assert v.token_bytes(ranks[b" world"]) == b" world" and v.token_bytes(0x80) == b"\x80"
    assert v.special_ids == frozenset({n + 1, n + 2})
    assert v.eos_token_ids == (n + 1,)  # guessed from the name
    assert not v.can_encode  # no pattern given


def test_tiktoken_encoder(tmp_path):
    pytest.importorskip("tiktoken")
    path = tmp_path / "tiny.tiktoken"
    ranks = _write_ranks(path)
    v = Vocabulary.from_file(
        path, special_tokens={"<|endoftext|>": len(ranks)}, pattern=GPT2_PATTERN
    )
    assert v.can_encode
    assert v.encode("hello world") == [ranks[b"hello"], ranks[b" world"]]
    assert_round_trip(v, ROUND_TRIP)


def test_tiktoken_malformed(tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_text("aGVsbG8= 0\nnot-base64!! 1\n")
    with pytest.raises(VocabularyError, match=":2"):
        Vocabulary.from_file(path)
    path.write_text("aGVsbG8= 0\nd29ybGQ= 0\n")
    with pytest.raises(VocabularyError):
        Vocabulary.from_file(path)


# --------------------------------------------------------------------------- real tokenizers

REAL = ["llama-3.1", "qwen3", "llama-2", "gemma-3", "deepseek-v3", "gpt-4o"]

# strings equal to non-special added tokens, per tokenizer
REAL_EXTRA = {
    "qwen3": [
        "<think>\nLet me think.\n</think>\n\nAnswer.",
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
        "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    ],
    "gemma-3": ["<mask> [multimodal] <unused5>", "a\n\n\n\nb", "x" + " " * 40 + "y"],
    "deepseek-v3": ["<｜fim▁hole｜> and <｜fim▁begin｜>x<｜fim▁end｜>"],
}


@pytest.fixture(scope="module")
def real_vocabs(shared_data) -> dict[str, Vocabulary]:
    pytest.importorskip("tokenizers")
    return {name: Vocabulary.from_file(shared_data / "tokenizers" / name) for name in REAL}


@pytest.mark.data
@pytest.mark.parametrize("name", REAL)
def test_real_round_trip(real_vocabs, name, training_corpus):
    v = real_vocabs[name]
    texts = ROUND_TRIP + training_corpus + REAL_EXTRA.get(name, [])
    assert_round_trip(v, texts)
    for s in texts:
        assert not set(v.encode(s)) & v.special_ids, (name, s)


@pytest.mark.data
@pytest.mark.parametrize("name", REAL)
def test_real_tokens_match_tokenizers_decode(real_vocabs, shared_data, name):
    path = shared_data / "tokenizers" / name / "tokenizer.json"
    assert_matches_tokenizers_decode(real_vocabs[name], path, strip_one_space=name == "llama-2")


@pytest.mark.data
def test_real_known_facts(real_vocabs):
    llama3 = real_vocabs["llama-3.1"]
    assert llama3.size == len(llama3.tokens) == 128256
    assert {128001, 128009} <= llama3.special_ids
    assert llama3.token_bytes(128009) == b"<|eot_id|>"
    assert llama3.eos_token_ids == (128009,)
    assert llama3.encode("hello world") == [15339, 1917]

    qwen = real_vocabs["qwen3"]
    assert qwen.size == 151669 and qwen.eos_token_ids == (151645,)
    assert qwen.token_bytes(151667) == b"<think>" and 151667 not in qwen.special_ids
    assert 151667 in qwen.encode("<think>")

    llama2 = real_vocabs["llama-2"]
    assert llama2.size == 32000 and llama2.special_ids == frozenset({0, 1, 2})
    assert llama2.token_bytes(13) == b"\n" and llama2.token_bytes(3) == b"\x00"
    assert llama2.token_bytes(3 + 0x20) == b" " and llama2.eos_token_ids == (2,)
    # this file's ids are Mistral-7B's (its "▁" is 28705): no dummy prefix on "hello"
    assert llama2.token_bytes(28705) == b" "
    assert llama2.encode("hello") == [21558] and llama2.encode(" hello") == [6312, 28709]

    gemma = real_vocabs["gemma-3"]
    assert gemma.size == 262145 and 106 in gemma.eos_token_ids
    assert {0, 1, 2, 106} <= gemma.special_ids and len(gemma.special_ids) == 9
    assert gemma.token_bytes(138) == b"  " and gemma.token_bytes(107) == b"\n"
    assert gemma.token_bytes(4) == b"<mask>" and 4 not in gemma.special_ids

    deepseek = real_vocabs["deepseek-v3"]
    assert deepseek.size == 128815 and deepseek.eos_token_ids == (1,)
    assert deepseek.token_bytes(128800) == "<｜fim▁hole｜>".encode()
    assert 128800 not in deepseek.special_ids

    gpt4o = real_vocabs["gpt-4o"]
    assert len(gpt4o.tokens) == 200019  # ids run to <|endofprompt|> = 200018
    assert sum(1 for t in gpt4o.tokens if t) == 200000  # 19 ids in between have no token
    assert gpt4o.token_bytes(200005) == b""
    assert gpt4o.special_ids == frozenset({199999, 200018})
    assert gpt4o.eos_token_ids == (199999,)


@pytest.mark.data
def test_real_load_is_fast(shared_data):
    start = time.perf_counter()
    v = Vocabulary.from_file(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json")
    elapsed = time.perf_counter() - start
    assert len(v.tokens) == 128256
    assert elapsed < 2.0, f"loading llama-3.1 took {elapsed:.2f}s"


def test_every_loader_is_registered_in_a_fresh_process():
    """The loaders register themselves (vocabulary.py imports none of them), and importing
    just the vocabulary module is enough to have them all (its package imports them)."""
    import subprocess

    code = ("from automask.vocab.vocabulary import _LOADERS; "
            "print(' '.join(sorted(_LOADERS)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["gguf", "json", "tiktoken", "transformers"]
