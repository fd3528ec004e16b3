"""GGUF files (llama.cpp): the tokenizer metadata stored beside the weights.

Byte rules follow llama.cpp's own detokenizer, since that is what turns the
model's ids into text when a GGUF model runs: per token type, normal pieces are
decoded by the model's scheme, BYTE pieces are one raw byte, USER_DEFINED and
control pieces are literal text. There is no encoder: GGUF stores merges but
not the pre-tokenizer regex in a form we can run faithfully.

The metadata is read here with ``struct`` rather than with the ``gguf``
package: its reader materialises every field and tensor of the file as numpy
views, which takes seconds even for a 49k-token model, while the key-value
header we need is a few megabytes read in one pass.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Iterable
from typing import Any

from automask.errors import VocabularyError
from automask.vocab.hf import byte_fallback_piece, byte_level_to_bytes, sentencepiece_to_bytes
from automask.vocab.vocabulary import Vocabulary, finish, register_loader

# llama.cpp token types (gguf.TokenType), spelled out so the mapping reads without gguf.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPECIAL_TYPES = frozenset({UNKNOWN, CONTROL, UNUSED})

# tokenizer.ggml.model -> how NORMAL pieces become bytes
_NORMAL_RULES: dict[str, Callable[[str], bytes]] = {
    "gpt2": byte_level_to_bytes,
    "llama": lambda p: sentencepiece_to_bytes(p, byte_fallback=False),
    "t5": lambda p: sentencepiece_to_bytes(p, byte_fallback=False),
}
_EOS_KEYS = (
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
)
_WANTED = frozenset(
    {
        "general.name",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        *_EOS_KEYS,
    }
)

# GGUF value types: id -> struct code of a fixed-size scalar
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9
# Arrays of arrays: the format allows them, llama.cpp's metadata never nests, and reading
# them recurses, so a few levels are plenty and 5,000 would overflow the stack.
_MAX_ARRAY_DEPTH = 8


class _Cursor:
    """Sequential reader over the mapped file, in the file's byte order."""

    def __init__(self, buf: Any, order: str):
        self.buf, self.pos, self.order = buf, 0, order

    def scalar(self, code: str) -> Any:
        (value,) = struct.unpack_from(self.order + code, self.buf, self.pos)
        self.pos += struct.calcsize(code)
        return value

    def string(self, keep: bool = True) -> bytes:
        n = self.scalar("Q")
        start, self.pos = self.pos, self.pos + n
        if self.pos > len(self.buf):
            raise VocabularyError("GGUF string runs past the end of the file")
        return bytes(self.buf[start : self.pos]) if keep else b""

    def value(self, vtype: int, keep: bool, depth: int = 0) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string(keep)
        if vtype == _ARRAY:
            if depth >= _MAX_ARRAY_DEPTH:
                raise VocabularyError(
                    f"arrays nested more than {_MAX_ARRAY_DEPTH} deep (byte {self.pos})"
                )
            etype, count = self.scalar("I"), self.scalar("Q")
            if etype in _SCALARS:
                code = _SCALARS[etype]
                size = struct.calcsize(code) * count
                if self.pos + size > len(self.buf):
                    raise VocabularyError("GGUF array runs past the end of the file")
                out = None
                if keep:
                    out = list(struct.unpack_from(f"{self.order}{count}{code}", self.buf, self.pos))
                self.pos += size
                return out
            if keep:
                return [self.value(etype, True, depth + 1) for _ in range(count)]
            for _ in range(count):
                self.value(etype, False, depth + 1)
            return None
        raise VocabularyError(f"unknown GGUF value type {vtype}")


def read_gguf_metadata(path: str, wanted: frozenset[str] = _WANTED) -> dict[str, Any]:
    """The ``wanted`` key-value pairs of a GGUF file (strings as bytes); tensors are not read."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _parse_metadata(memoryview(mm), wanted)
    except (OSError, ValueError, BufferError, struct.error) as e:
        raise VocabularyError(f"cannot read GGUF file {path}: {e}") from e


def _parse_metadata(buf: memoryview, wanted: frozenset[str]) -> dict[str, Any]:
    try:
        if bytes(buf[:4]) != b"GGUF":
            raise VocabularyError("no GGUF magic bytes")
        (version,) = struct.unpack_from("<I", buf, 4)
        order = "<"
        if version & 0xFFFF == 0:  # a big-endian file reads as a huge little-endian number
            order = ">"
            (version,) = struct.unpack_from(">I", buf, 4)
        if version < 2:
            raise VocabularyError(f"GGUF version {version} is too old (2 or later needed)")
        cur = _Cursor(buf, order)
        cur.pos = 8
        cur.scalar("Q")  # tensor count
        n_kv = cur.scalar("Q")
        out: dict[str, Any] = {}
        for _ in range(n_kv):
            start = cur.pos
            key = cur.string().decode("utf-8", errors="replace")
            vtype = cur.scalar("I")
            keep = key in wanted
            try:
                value = cur.value(vtype, keep)
            except VocabularyError as e:
                raise VocabularyError(f"key {key!r} at byte {start}: {e}") from None
            if keep:
                out[key] = value
            if len(out) == len(wanted):
                break
        return out
    finally:
        buf.release()


def _piece_bytes(model: str, text: bytes, kind: int) -> bytes:
    """Bytes of one GGUF token, by llama.cpp's token-type rules."""
    if kind in SPECIAL_TYPES or kind == USER_DEFINED:
        return text
    try:
        piece = text.decode("utf-8")
    except UnicodeDecodeError:
        return text  # not text at all: the stored bytes are the best statement of the token
    if kind == BYTE:
        b = byte_fallback_piece(piece)
        if b is not None:
            return b
    return _NORMAL_RULES[model](piece)


def load_gguf(
    path: str,
    *,
    special_tokens: dict[str, int] | None = None,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Vocabulary of a ``.gguf`` file; EOS defaults are its eos, eot and eom ids."""
    meta = read_gguf_metadata(path)
    model = meta.get("tokenizer.ggml.model")
    if not isinstance(model, bytes):
        raise VocabularyError(f"{path} has no tokenizer metadata (tokenizer.ggml.model)")
    model_name = model.decode("utf-8", errors="replace")
    if model_name not in _NORMAL_RULES:
        raise VocabularyError(
            f"GGUF tokenizer model {model_name!r} is not supported "
            f"(supported: {', '.join(sorted(_NORMAL_RULES))})"
        )
    texts = meta.get("tokenizer.ggml.tokens")
    if not isinstance(texts, list) or not texts or not isinstance(texts[0], bytes):
        raise VocabularyError(f"{path} has no token list (tokenizer.ggml.tokens)")
    odd = next((i for i, t in enumerate(texts) if not isinstance(t, bytes)), None)
    if odd is not None:
        raise VocabularyError(f"{path}: tokenizer.ggml.tokens[{odd}] is not a string")
    types = meta.get("tokenizer.ggml.token_type")
    if types is None:  # no types stored: treat <0xNN> as bytes, everything else as normal
        types = [BYTE if t.startswith(b"<0x") else NORMAL for t in texts]
    if not isinstance(types, list) or len(types) != len(texts):
        raise VocabularyError(f"{path}: token types do not match the {len(texts)} tokens")

    tokens: list[bytes] = []
    special_ids: set[int] = set()
    named: dict[str, int] = {}
    for i, (text, kind) in enumerate(zip(texts, types, strict=True)):
        tokens.append(_piece_bytes(model_name, text, kind))
        if kind in SPECIAL_TYPES:
            special_ids.add(i)
            named[text.decode("utf-8", errors="replace")] = i
    default_eos: list[Any] = [meta.get(k) for k in _EOS_KEYS]
    default_eos = [
        v
        for v in default_eos
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(tokens)
    ]
    name = meta.get("general.name")
    return finish(
        tokens,
        special_ids,
        named,
        default_eos=list(dict.fromkeys(default_eos)),
        special_tokens=special_tokens,
        eos_token_ids=eos_token_ids,
        vocab_size=vocab_size,
        encoder=None,
        name=name.decode("utf-8", errors="replace")
        if isinstance(name, bytes)
        else os.path.basename(path),
    )


register_loader("gguf", load_gguf)
