"""Issue 29, hostile input: vocabulary loaders and the command line.

Loaders: an id space far wider than the tokens in a file (a 3 KB tiktoken file
whose last rank is 500,000,000) fails fast with a located ``VocabularyError``
instead of padding gigabytes; string, float and shared ids, and nesting deep
enough to overflow Python's stack, are typed errors with a location too.

CLI: hostile constraints give one line on stderr and exit 2 (never a
traceback), a bench's ``--json OUT`` is checked before the bench runs, and
long benches print progress lines when stderr is not a terminal.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from automask import Vocabulary
from automask.errors import VocabularyError
from automask.vocab.vocabulary import MAX_TOKEN_IDS, id_space_limit

CAP_BYTES = 1_500_000_000  # address space of the subprocesses: the old loaders hit it at once

# One subprocess, memory-capped: load each path, print one JSON line per path.
LOAD_CAPPED = textwrap.dedent("""
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (%d, %d))
    from automask import Vocabulary
    for path in sys.argv[1:]:
        t = time.process_time()
        try:
            Vocabulary.from_file(path)
            out = {"error": None, "message": ""}
        except Exception as e:  # MemoryError included: the test names what it got
            out = {"error": type(e).__name__, "message": str(e)}
        out["cpu"] = time.process_time() - t
        print(json.dumps(out), flush=True)
""") % (CAP_BYTES, CAP_BYTES)

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _capped(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def _tokenizer_json(path: Path, vocab, added=None, **extra) -> Path:
    data = {"model": {"type": "BPE", "vocab": vocab, "merges": []}, **extra}
    if added is not None:
        data["added_tokens"] = added
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _tiktoken(path: Path, last_rank: int) -> Path:
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(200)]
    lines.append(f"{base64.b64encode(b'zz').decode()} {last_rank}")
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- id space


def test_huge_ids_fail_fast_with_a_located_typed_error(tmp_path):
    """Before: 34 s and 5.9 GB, then MemoryError (here, under the cap: MemoryError)."""
    tik = _tiktoken(tmp_path / "big.tiktoken", 500_000_000)
    assert tik.stat().st_size < 4000
    tj = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "b": 1, "c": 4_000_000_000})
    proc = _capped(LOAD_CAPPED, str(tik), str(tj))
    assert proc.returncode == 0, proc.stderr
    (r_tik, r_tj) = [json.loads(line) for line in proc.stdout.splitlines()]
    for r in (r_tik, r_tj):
        assert r["error"] == "VocabularyError", r
        assert r["cpu"] < 5
    assert "big.tiktoken:201:" in r_tik["message"] and "500,000,000" in r_tik["message"]
    assert "tokenizer.json" in r_tj["message"] and "model.vocab['c']" in r_tj["message"]
    assert "4,000,000,000" in r_tj["message"]


def test_huge_added_token_id(tmp_path):
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0},
                           added=[{"id": 3 * 10**9, "content": "<x>", "special": True}])
    with pytest.raises(VocabularyError, match=r"added_tokens\[0\] \('<x>'\).*3,000,000,000"):
        Vocabulary.from_file(path)


def test_the_id_space_rule():
    assert id_space_limit(1) == 4 + 2**20
    assert id_space_limit(262_144) == 4 * 262_144 + 2**20  # Gemma-3 with 4x room to spare
    assert id_space_limit(10**7) == MAX_TOKEN_IDS == 2**24


def test_holes_within_the_rule_still_load(tmp_path):
    v = Vocabulary.from_file(_tiktoken(tmp_path / "holes.tiktoken", 2**20))
    assert v.size == 2**20 + 1 and v.token_bytes(2**20) == b"zz" and v.token_bytes(500) == b""
    with pytest.raises(VocabularyError, match="holes.tiktoken:201"):
        Vocabulary.from_file(_tiktoken(tmp_path / "holes.tiktoken", id_space_limit(201)))


def test_caller_ids_are_bounded_too(tmp_path):
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "b": 1})
    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary.from_file(path, vocab_size=2**40)
    with pytest.raises(VocabularyError, match="special token '<s>'"):
        Vocabulary.from_file(path, special_tokens={"<s>": 2**40})
    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary([b"a"], size=MAX_TOKEN_IDS + 1)


# ----------------------------------------------------------------------------- id types, shared ids


@pytest.mark.parametrize(("vocab", "added", "where"), [
    ({"a": "0", "b": "1"}, None, r"model\.vocab\['a'\]: token id '0' is not an integer"),
    ({"a": 0, "b": 1.0}, None, r"model\.vocab\['b'\]: token id 1\.0 is not an integer"),
    ({"a": 0, "b": True}, None, r"model\.vocab\['b'\]: token id True"),
    ({"a": 0, "b": -3}, None, r"model\.vocab\['b'\]: negative token id -3"),
    ({"a": 0}, [{"id": 1.5, "content": "<x>"}], r"added_tokens\[0\] \('<x>'\): token id 1\.5"),
    ({"a": 0}, [{"id": "x", "content": "<x>"}], r"added_tokens\[0\] \('<x>'\): token id 'x'"),
    ({"a": 0}, [{"id": None, "content": "<x>"}], r"added_tokens\[0\] \('<x>'\): token id None"),
    ({"a": 0}, [{"id": 1}], r"added_tokens\[0\]: 'content' None is not a string"),
    ({"a": 0}, ["<x>"], r"added_tokens\[0\] is not an object"),
    ({"a": 0}, {"id": 1}, r"'added_tokens' is not a list"),
])
def test_malformed_ids_are_located(tmp_path, vocab, added, where):
    path = _tokenizer_json(tmp_path / "tokenizer.json", vocab, added)
    with pytest.raises(VocabularyError, match=where) as e:
        Vocabulary.from_file(path)
    assert str(path) in str(e.value)


def test_shared_ids_are_rejected(tmp_path):
    """Before: three tokens on id 0 loaded as a vocabulary of size 1."""
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "b": 0, "c": 0})
    with pytest.raises(VocabularyError, match=r"model\.vocab\['b'\]: id 0 is also the id of 'a'"):
        Vocabulary.from_file(path)
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0},
                           added=[{"id": 1, "content": "<x>"}, {"id": 1, "content": "<y>"}])
    with pytest.raises(VocabularyError, match=r"added_tokens\[1\] \('<y>'\): id 1 .*'<x>'"):
        Vocabulary.from_file(path)


def test_added_tokens_may_mark_model_pieces(tmp_path):
    """The usual way files mark a piece special (GPT-2's <|endoftext|>), and exact repeats."""
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0, "<|endoftext|>": 1},
                           added=[{"id": 1, "content": "<|endoftext|>", "special": True},
                                  {"id": 1, "content": "<|endoftext|>", "special": True}])
    v = Vocabulary.from_file(path)
    assert v.size == 2 and v.special_ids == {1} and v.eos_token_ids == (1,)


def test_malformed_shapes_are_typed(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": [1, 2]}))
    with pytest.raises(VocabularyError, match="'model' is not an object"):
        Vocabulary.from_file(path)
    _tokenizer_json(path, {"a": 0}, decoder=["ByteLevel"])
    with pytest.raises(VocabularyError, match="decoder is not an object"):
        Vocabulary.from_file(path)
    _tokenizer_json(path, {"a": 0}, decoder={"type": "Replace", "pattern": {"String": 5},
                                             "content": " "})
    with pytest.raises(VocabularyError, match="tokenizer.json"):
        Vocabulary.from_file(path)
    path.write_text(json.dumps({"model": {"type": "Unigram", "vocab": [["a", 0.0], 7]}}))
    with pytest.raises(VocabularyError, match=r"model\.vocab\[1\] is not a \[piece, score\]"):
        Vocabulary.from_file(path)


# ----------------------------------------------------------------------------- nesting


def test_deeply_nested_tokenizer_json(tmp_path):
    """Before: RecursionError from the JSON reader."""
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},\n "x": '
                    + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(VocabularyError, match=r"nested 100,001 levels deep \(deepest at line 2"):
        Vocabulary.from_file(path)


def test_deeply_nested_decoder_sequences(tmp_path):
    dec: dict = {"type": "ByteLevel"}
    for _ in range(300):
        dec = {"type": "Sequence", "decoders": [dec]}
    path = _tokenizer_json(tmp_path / "tokenizer.json", {"a": 0}, decoder=dec)
    with pytest.raises(VocabularyError, match="decoder.*Sequence nested more than"):
        Vocabulary.from_file(path)


def _gstr(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf(path: Path, kvs: list[tuple[str, bytes]]) -> Path:
    """A GGUF v3 file with these key-values (each value: its type id, then the value)."""
    body = b"".join(_gstr(k) + v for k, v in kvs)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body)
    return path


def _gguf_tokenizer(tokens: list[bytes]) -> list[tuple[str, bytes]]:
    items = b"".join(struct.pack("<Q", len(t)) + t for t in tokens)
    return [("tokenizer.ggml.model", struct.pack("<I", 8) + _gstr("gpt2")),
            ("tokenizer.ggml.tokens", struct.pack("<IIQ", 9, 8, len(tokens)) + items),
            ("tokenizer.ggml.eos_token_id", struct.pack("<II", 4, len(tokens) - 1))]


def test_gguf_written_here_loads(tmp_path):
    v = Vocabulary.from_file(_gguf(tmp_path / "ok.gguf", _gguf_tokenizer([b"a", b"b", b"c"])))
    assert v.tokens == [b"a", b"b", b"c"] and v.eos_token_ids == (2,)


def test_deeply_nested_gguf_array(tmp_path):
    """Before: RecursionError at 5,000 arrays of arrays."""
    nested = struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQ", 0, 0)
    path = _gguf(tmp_path / "nested.gguf",
                 [("general.hostile", nested), *_gguf_tokenizer([b"a", b"b"])])
    with pytest.raises(VocabularyError,
                       match=r"nested\.gguf: key 'general\.hostile' at byte 24: arrays nested"):
        Vocabulary.from_file(path)


def test_gguf_token_that_is_not_a_string(tmp_path):
    kvs = _gguf_tokenizer([b"a", b"b"])
    kvs[1] = ("tokenizer.ggml.tokens", struct.pack("<IIQ", 9, 9, 2)  # array of arrays
              + struct.pack("<IQ", 8, 1) + _gstr("a") + struct.pack("<IQ", 4, 1) + b"\0" * 4)
    with pytest.raises(VocabularyError, match="has no token list|tokens\\[1\\] is not a string"):
        Vocabulary.from_file(_gguf(tmp_path / "odd.gguf", kvs))


def test_tiktoken_ranks_are_plain_integers(tmp_path):
    path = tmp_path / "r.tiktoken"
    for rank in ("-1", "1_0", "+3", "0x10"):
        path.write_text(f"YQ== 0\nYg== {rank}\n")
        with pytest.raises(VocabularyError, match="r.tiktoken:2"):
            Vocabulary.from_file(path)
    path.write_text("YQ== 0\nYg== 0\n")
    with pytest.raises(VocabularyError, match=r"r\.tiktoken:2: rank 0 is repeated \(line 1\)"):
        Vocabulary.from_file(path)
