"""tiktoken rank files: one ``base64(token bytes) rank`` a line, the rank being the id.

The file holds bytes directly, so no decoding rules apply. Special tokens are
not in the file and must be given; the pre-tokenizer regex is not either, so an
encoder exists only when the caller passes ``pattern=`` and tiktoken is installed.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import os
import threading
from collections.abc import Iterable
from typing import Any

from automask.errors import VocabularyError
from automask.vocab.vocabulary import Vocabulary, check_id_space, finish, register_loader


def read_ranks(path: str) -> dict[bytes, int]:
    """token bytes -> rank; every malformed line is an error, not a skipped line.

    A rank is ASCII digits. The largest rank must fit the tokens the file holds
    (:func:`~automask.vocab.vocabulary.check_id_space`), since the loader pads
    every missing rank: the error names the line that holds it.
    """
    ranks: dict[bytes, int] = {}
    seen: dict[int, int] = {}  # rank -> line
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise VocabularyError(f"cannot read tiktoken file {path}: {e}") from e
    top, top_line = -1, 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError("expected two fields")
            token = base64.b64decode(parts[0], validate=True)
            if not parts[1].isdigit():  # bytes.isdigit: ASCII digits only, no sign, no '_'
                raise ValueError(f"rank {parts[1][:40].decode('ascii', 'replace')!r} is not "
                                 "a non-negative integer")
            rank = int(parts[1])
        except (ValueError, binascii.Error) as e:
            raise VocabularyError(
                f"{path}:{lineno}: not a tiktoken 'base64 rank' line ({e})"
            ) from e
        if rank in seen:
            raise VocabularyError(f"{path}:{lineno}: rank {rank} is repeated (line {seen[rank]})")
        if token in ranks:
            raise VocabularyError(f"{path}:{lineno}: token {token!r} is repeated")
        seen[rank] = lineno
        ranks[token] = rank
        if rank > top:
            top, top_line = rank, lineno
    if not ranks:
        raise VocabularyError(f"{path} holds no tokens")
    check_id_space(top, len(ranks), f"{path}:{top_line}")
    return ranks


class _TiktokenEncoder:
    """tiktoken ``Encoding`` built on first use; ``encode_ordinary`` never emits specials."""

    def __init__(self, name: str, pattern: str, ranks: dict[bytes, int], specials: dict[str, int]):
        self._args = (name, pattern, ranks, specials)
        self._enc: Any = None
        self._lock = threading.Lock()

    def __call__(self, text: str) -> list[int]:
        if self._enc is None:
            with self._lock:
                if self._enc is None:
                    import tiktoken

                    name, pattern, ranks, specials = self._args
                    try:
                        self._enc = tiktoken.Encoding(
                            name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials
                        )
                    except Exception as e:  # tiktoken raises ValueError / pyo3 errors
                        raise VocabularyError(f"cannot build a tiktoken encoder: {e}") from e
        return self._enc.encode_ordinary(text)


def load_tiktoken(
    path: str,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Vocabulary of a tiktoken rank file; EOS defaults to well-known names among the specials."""
    ranks = read_ranks(path)
    tokens: list[bytes] = [b""] * (max(ranks.values()) + 1)
    for token, rank in ranks.items():
        tokens[rank] = token
    name = os.path.basename(path)
    encoder = None
    if pattern is not None and importlib.util.find_spec("tiktoken") is not None:
        encoder = _TiktokenEncoder(name, pattern, ranks, dict(special_tokens or {}))
    return finish(
        tokens,
        set(),
        {},
        default_eos=(),
        special_tokens=special_tokens,
        eos_token_ids=eos_token_ids,
        vocab_size=vocab_size,
        encoder=encoder,
        name=name,
    )


register_loader("tiktoken", load_tiktoken)
