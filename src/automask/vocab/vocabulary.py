"""The token vocabulary as the engine sees it: the exact bytes behind every logit.

A mask is a statement about bytes ("this token keeps the output inside the
grammar"), so every tokenizer format is reduced to one table: id -> bytes.
Loaders for the concrete formats live beside this module and are reached
through :meth:`Vocabulary.from_file` / :meth:`Vocabulary.from_hf`. They build
on this module, so it imports none of them: each registers its entry function
(:func:`register_loader`) when imported, and :mod:`automask.vocab` imports
them all, which always runs before this module can be used.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from automask.errors import VocabularyError

Encoder = Callable[[str], list[int]]

# Names that usually end a turn or a document; used only when a file names no EOS.
KNOWN_EOS_NAMES = (
    "<|eot_id|>",
    "<|im_end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<|end|>",
    "<｜end▁of▁sentence｜>",
)


# How wide an id space a tokenizer file may declare. Loaders pad the holes between ids with
# b"", so the largest id, not the file's size, decides what loading costs: a 3 KB tiktoken
# file whose last rank is 500,000,000 would take 5.9 GB. Real vocabularies have at most a
# few hundred thousand ids (Gemma-3: 262,144) and few holes (GPT-4o: 19 in 200,019), so a
# file's largest id must stay below 4 x its number of distinct tokens + 2^20 (holes cost at
# most ~8 MB plus a small multiple of the file itself) and below 2^24 (16,777,216 ids, 64x
# the largest real vocabulary), which also bounds ``vocab_size`` and callers' special ids.
MAX_TOKEN_IDS = 1 << 24
HOLE_ALLOWANCE = 1 << 20


def id_space_limit(count: int) -> int:
    """The first id a file with ``count`` distinct token ids may not use (see ``MAX_TOKEN_IDS``)."""
    return min(MAX_TOKEN_IDS, 4 * count + HOLE_ALLOWANCE)


def check_id_space(top: int, count: int, where: str) -> None:
    """Raise :class:`VocabularyError` at ``where`` when id ``top`` is too large for ``count``."""
    limit = id_space_limit(count)
    if top >= limit:
        raise VocabularyError(
            f"{where}: token id {top:,} is too large for a vocabulary of {count:,} tokens "
            f"(ids must stay below {limit:,}: 4 x the tokens + 2^20, and at most 2^24; "
            "the loader would pad every missing id)"
        )


#: entry function of each loader by what it reads: "gguf", "json" (tokenizer.json),
#: "tiktoken" (rank files) and "transformers" (a loaded tokenizer object)
_LOADERS: dict[str, Callable[..., Vocabulary]] = {}


def register_loader(kind: str, load: Callable[..., Vocabulary]) -> None:
    """Make ``load`` the loader of ``kind`` for :meth:`Vocabulary.from_file` / ``from_hf``."""
    _LOADERS[kind] = load


def guess_eos_ids(named_ids: dict[str, int]) -> list[int]:
    """EOS ids by well-known name, for files that do not say which token ends output."""
    return [named_ids[name] for name in KNOWN_EOS_NAMES if name in named_ids]


class Vocabulary:
    """Exact byte string of every token id, plus which ids are special or end output.

    ``tokens[i]`` is what id ``i`` appends to the output, byte for byte (``b""`` for
    ids with no bytes, such as holes in the id space). ``size`` is the logits
    width; ids in ``[len(tokens), size)`` are padding with no bytes. An engine
    must never allow an id whose bytes are empty, nor a special id unless a
    grammar names it.
    """

    def __init__(
        self,
        tokens: Sequence[bytes | None],
        *,
        special_ids: Iterable[int] = (),
        eos_token_ids: Iterable[int] = (),
        size: int | None = None,
        encoder: Encoder | None = None,
        name: str = "",
    ):
        self.tokens: list[bytes] = [t if type(t) is bytes else _token_bytes(i, t)
                                    for i, t in enumerate(tokens)]
        n = len(self.tokens)
        if size is None:
            size = n
        size = operator.index(size)
        if size > MAX_TOKEN_IDS:
            raise VocabularyError(
                f"vocab_size {size:,} is above the {MAX_TOKEN_IDS:,} ids (2^24) a vocabulary "
                "may have"
            )
        if size < n:
            raise VocabularyError(
                f"vocab_size {size} is smaller than the tokenizer's {n} token ids"
            )
        self.size: int = size
        self.special_ids: frozenset[int] = frozenset(self._check_ids(special_ids, "special"))
        self.eos_token_ids: tuple[int, ...] = tuple(
            dict.fromkeys(self._check_ids(eos_token_ids, "eos"))
        )
        self.name: str = name
        self._encoder = encoder

    def _check_ids(self, ids: Iterable[int], what: str) -> list[int]:
        out = []
        for i in ids:
            i = operator.index(i)
            if not 0 <= i < self.size:
                raise VocabularyError(f"{what} token id {i} is outside [0, {self.size})")
            out.append(i)
        return out

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (
            f"Vocabulary(name={self.name!r}, size={self.size}, tokens={len(self.tokens)}, "
            f"special={len(self.special_ids)}, eos={list(self.eos_token_ids)})"
        )

    def token_bytes(self, token_id: int) -> bytes:
        """Bytes of one id; padding ids give ``b""``, ids outside ``[0, size)`` raise."""
        i = operator.index(token_id)
        if 0 <= i < len(self.tokens):
            return self.tokens[i]
        if 0 <= i < self.size:
            return b""
        raise VocabularyError(f"token id {token_id} is outside [0, {self.size})")

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of a token sequence (no cleanup, no special-token skipping)."""
        return b"".join(self.token_bytes(i) for i in ids)

    @property
    def can_encode(self) -> bool:
        """Whether :meth:`encode` works (it needs the tokenizer's own library)."""
        return self._encoder is not None

    def encode(self, text: str) -> list[int]:
        """Token ids the model would emit for ``text`` in the middle of its output.

        No BOS or other special tokens are added, no dummy-prefix space is inserted,
        and special-token names inside ``text`` are encoded as plain text.
        """
        if self._encoder is None:
            raise VocabularyError(
                f"vocabulary {self.name!r} has no encoder (install the tokenizer's library, "
                "or give the loader what it needs to build one)"
            )
        return list(self._encoder(text))

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        special_tokens: dict[str, int] | None = None,
        eos_token_ids: Iterable[int] | None = None,
        vocab_size: int | None = None,
        pattern: str | None = None,
    ) -> Vocabulary:
        """Load a tokenizer.json (or a folder holding one), a ``.gguf`` or a tiktoken file.

        ``special_tokens`` adds (or marks) named special ids, ``eos_token_ids``
        replaces the file's EOS defaults, ``vocab_size`` sets the logits width and
        ``pattern`` is the pre-tokenizer regex a tiktoken encoder needs.
        """
        p = os.fspath(path)
        if os.path.isdir(p):
            candidate = os.path.join(p, "tokenizer.json")
            if not os.path.isfile(candidate):
                raise VocabularyError(f"{p} is a directory without tokenizer.json")
            p = candidate
        if not os.path.isfile(p):
            raise VocabularyError(f"no tokenizer file at {p}")
        kind = _sniff(p)
        kwargs: dict[str, Any] = {
            "special_tokens": special_tokens,
            "eos_token_ids": eos_token_ids,
            "vocab_size": vocab_size,
        }
        if kind == "tiktoken":
            kwargs["pattern"] = pattern
        return _LOADERS[kind](p, **kwargs)

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        *,
        eos_token_ids: Iterable[int] | None = None,
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """Build from a loaded ``transformers`` tokenizer (fast ones exactly, slow best effort)."""
        return _LOADERS["transformers"](
            tokenizer, eos_token_ids=eos_token_ids, vocab_size=vocab_size
        )


def _token_bytes(i: int, token: Any) -> bytes:
    """A token that is not ``bytes``: None is no bytes, a bytes-like object is copied, and
    anything else (an int would make ``bytes(n)`` allocate n zero bytes) is an error."""
    if token is None:
        return b""
    if isinstance(token, (bytes, bytearray, memoryview)):
        return bytes(token)
    raise VocabularyError(f"token {i} is a {type(token).__name__}, not bytes")


def _sniff(path: str) -> str:
    """File kind from magic bytes first, since names of tokenizer files vary."""
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith(b"GGUF"):
        return "gguf"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return "json"
    if path.endswith(".gguf"):
        raise VocabularyError(f"{path} has a .gguf name but no GGUF magic bytes")
    return "tiktoken"


def finish(
    tokens: list[bytes],
    special_ids: set[int],
    named: dict[str, int],
    *,
    default_eos: Iterable[int],
    special_tokens: dict[str, int] | None,
    eos_token_ids: Iterable[int] | None,
    vocab_size: int | None,
    encoder: Encoder | None,
    name: str,
) -> Vocabulary:
    """Shared tail of every loader: apply the caller's specials, EOS and width overrides.

    ``named`` maps special-token text to id, so callers' specials and the EOS guess
    can find tokens by name.
    """
    for text, tid in (special_tokens or {}).items():
        tid = operator.index(tid)
        if tid < 0:
            raise VocabularyError(f"special token {text!r} has negative id {tid}")
        if tid >= MAX_TOKEN_IDS:
            raise VocabularyError(
                f"special token {text!r} has id {tid:,}, above the {MAX_TOKEN_IDS:,} ids (2^24) "
                "a vocabulary may have"
            )
        if tid >= len(tokens):
            tokens.extend([b""] * (tid + 1 - len(tokens)))
        if not tokens[tid]:
            tokens[tid] = text.encode("utf-8")
        special_ids.add(tid)
        named[text] = tid
    eos = list(default_eos) if eos_token_ids is None else list(eos_token_ids)
    if eos_token_ids is None and not eos:
        eos = guess_eos_ids(named)
    return Vocabulary(
        tokens,
        special_ids=special_ids,
        eos_token_ids=eos,
        size=vocab_size,
        encoder=encoder,
        name=name,
    )
