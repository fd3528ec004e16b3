"""Hugging Face tokenizers: ``tokenizer.json`` files and ``transformers`` tokenizer objects.

Token bytes come from the JSON alone (no dependency): each vocabulary piece is
pushed through the per-token part of the file's decoder, the same steps
``tokenizers`` applies when it decodes, so a token means here exactly what it
means when a server detokenizes model output. The optional ``tokenizers``
package only provides :meth:`Vocabulary.encode`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from automask.errors import VocabularyError
from automask.vocab.vocabulary import (
    Encoder,
    Vocabulary,
    check_id_space,
    finish,
    register_loader,
)

SPIECE_SPACE = "\u2581"  # SentencePiece's visible space, "▁"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_NOT_A_BYTE = 0x10FFFF  # translate target that makes latin-1 encoding fail on purpose

Piece = str | bytes
Step = Callable[[Piece], Piece]


# --------------------------------------------------------------------------- byte rules


@lru_cache(maxsize=1)
def gpt2_byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE.

    Bytes that are visible Latin-1 characters stand for themselves; the other 68
    (controls, space, NBSP, soft hyphen...) are moved, in byte order, to U+0100 on.
    """
    visible = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in visible}
    moved = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + moved)
            moved += 1
    return table


@lru_cache(maxsize=1)
def _byte_level_translation() -> dict[int, int]:
    """``str.translate`` table: mapped characters -> their byte, the rest of Latin-1 -> poison."""
    table = {c: _NOT_A_BYTE for c in range(256)}
    for b, ch in gpt2_byte_to_unicode().items():
        table[ord(ch)] = b
    return table


def byte_level_to_bytes(piece: str) -> bytes:
    """Bytes of a byte-level piece; a piece with any unmapped character is literal UTF-8.

    That whole-piece fallback is what ``tokenizers``' ByteLevel decoder does, and it
    is how added tokens such as DeepSeek's ``<｜fim▁hole｜>`` keep their text.
    """
    try:
        return piece.translate(_byte_level_translation()).encode("latin-1")
    except UnicodeEncodeError:
        return piece.encode("utf-8")


def byte_fallback_piece(piece: str) -> bytes | None:
    """The single byte a ``<0xNN>`` piece stands for, else None."""
    if len(piece) == 6:
        m = _BYTE_PIECE.fullmatch(piece)
        if m:
            return bytes((int(m.group(1), 16),))
    return None


def sentencepiece_to_bytes(piece: str, byte_fallback: bool = True) -> bytes:
    """SentencePiece rule: ``<0xNN>`` is one raw byte, otherwise UTF-8 with ▁ as a space."""
    if byte_fallback:
        b = byte_fallback_piece(piece)
        if b is not None:
            return b
    return piece.replace(SPIECE_SPACE, " ").encode("utf-8")


# --------------------------------------------------------------------------- decoder steps


def _step_byte_level(x: Piece) -> Piece:
    return byte_level_to_bytes(x) if isinstance(x, str) else x


def _step_byte_fallback(x: Piece) -> Piece:
    if isinstance(x, str):
        b = byte_fallback_piece(x)
        if b is not None:
            return b
    return x


def _step_replace(old: str, new: str, regex: bool) -> Step:
    if regex:
        pat = re.compile(old)
        pat_b = re.compile(old.encode("utf-8"))
        new_b = new.encode("utf-8")

        def step(x: Piece) -> Piece:
            return pat.sub(new, x) if isinstance(x, str) else pat_b.sub(new_b, x)

        return step
    if (old, new) == (SPIECE_SPACE, " "):
        return _step_spiece_space
    old_b, new_b = old.encode("utf-8"), new.encode("utf-8")

    def step(x: Piece) -> Piece:  # type: ignore[no-redef]  # (the other branch's returned)
        return x.replace(old, new) if isinstance(x, str) else x.replace(old_b, new_b)

    return step


def _step_spiece_space(x: Piece) -> Piece:
    if isinstance(x, str):
        return x.replace(SPIECE_SPACE, " ")
    return x.replace(SPIECE_SPACE.encode("utf-8"), b" ")


def _step_strip(content: str, start: int, stop: int) -> Step:
    def step(x: Piece) -> Piece:
        c: Any = content if isinstance(x, str) else content.encode("utf-8")
        lo, hi = 0, len(x)
        while lo < min(start, hi) and x[lo : lo + len(c)] == c:
            lo += len(c)
        n = 0
        while n < stop and hi - len(c) >= lo and x[hi - len(c) : hi] == c:
            hi -= len(c)
            n += 1
        return x[lo:hi]

    return step


_MAX_SEQUENCE_DEPTH = 32  # Sequence components inside Sequences; real files nest one or two


def _flatten(component: Any, key: str, where: str, depth: int = 0) -> list[dict]:
    """A component and its ``Sequence`` children, in order (``where`` names it in errors)."""
    if not component:
        return []
    if not isinstance(component, dict):
        raise VocabularyError(f"{where} is not an object")
    if component.get("type") == "Sequence":
        if depth >= _MAX_SEQUENCE_DEPTH:
            raise VocabularyError(f"{where}: Sequence nested more than {_MAX_SEQUENCE_DEPTH} deep")
        children = component.get(key) or []
        if not isinstance(children, list):
            raise VocabularyError(f"{where}.{key} is not a list")
        out: list[dict] = []
        for i, child in enumerate(children):
            out.extend(_flatten(child, key, f"{where}.{key}[{i}]", depth + 1))
        return out
    return [component]


def _pattern(spec: Any) -> tuple[str, bool]:
    """(text, is_regex) of a Replace/Split pattern field."""
    if isinstance(spec, dict):
        if "String" in spec:
            return spec["String"], False
        if "Regex" in spec:
            return spec["Regex"], True
    if isinstance(spec, str):
        return spec, False
    raise VocabularyError(f"unrecognised pattern {spec!r} in tokenizer.json")


def decoder_steps(data: dict) -> list[Step]:
    """Per-token decoding steps of a tokenizer.json, in the decoder's order.

    Steps after ``Fuse`` (or ``ByteLevel``, which also joins) act on the whole
    output (llama-2's ``Strip`` removes the dummy-prefix space there) and are left
    out: mid-output, a token's bytes do not depend on its neighbours. When the
    decoder omits a step the model clearly needs (a ByteLevel pre-tokenizer,
    ``byte_fallback`` in the model, a ▁ space marker), it is added, because the
    pieces were built that way regardless.
    """
    steps: list[Step] = []
    kinds: set[str] = set()
    for dec in _flatten(data.get("decoder"), "decoders", "decoder"):
        kind = dec.get("type")
        if kind == "Fuse":
            break
        kinds.add(kind)  # type: ignore[arg-type]  # (a decoder without a type: None)
        if kind == "ByteLevel":
            steps.append(_step_byte_level)
            break  # ByteLevel joins all tokens into one string: later steps are whole-output
        elif kind == "ByteFallback":
            steps.append(_step_byte_fallback)
        elif kind == "Replace":
            old, regex = _pattern(dec.get("pattern"))
            steps.append(_step_replace(old, dec.get("content", ""), regex))
        elif kind == "Metaspace":
            steps.append(_step_replace(dec.get("replacement", SPIECE_SPACE), " ", False))
        elif kind == "Strip":
            start, stop = int(dec.get("start", 0)), int(dec.get("stop", 0))
            steps.append(_step_strip(dec.get("content", " "), start, stop))
        elif kind in ("WordPiece", "BPEDecoder", "CTC"):
            raise VocabularyError(
                f"tokenizer decoder {kind!r} joins tokens with context-dependent text, "
                "so a token has no fixed bytes"
            )
        else:
            raise VocabularyError(f"unsupported tokenizer decoder type {kind!r}")

    pre = {p.get("type"): p
           for p in _flatten(data.get("pre_tokenizer"), "pretokenizers", "pre_tokenizer")}
    model = _model(data)
    if "ByteLevel" not in kinds and "ByteLevel" in pre:
        steps.insert(0, _step_byte_level)
    if "ByteFallback" not in kinds and model.get("byte_fallback"):
        steps.append(_step_byte_fallback)
    if not data.get("decoder"):
        if "Metaspace" in pre:
            marker = pre["Metaspace"].get("replacement", SPIECE_SPACE)
            steps.append(_step_replace(marker, " ", False))
        for norm in _flatten(data.get("normalizer"), "normalizers", "normalizer"):
            if norm.get("type") == "Replace" and _pattern(norm.get("pattern")) == (" ", False):
                steps.append(_step_replace(norm.get("content", ""), " ", False))
    return steps


def piece_decoder(steps: list[Step]) -> Callable[[str], bytes]:
    """One function piece -> bytes for a list of steps, with fast paths for the common two."""
    if len(steps) == 1 and steps[0] is _step_byte_level:
        return byte_level_to_bytes
    kinds = set(steps)
    if len(steps) == len(kinds) and kinds == {_step_spiece_space, _step_byte_fallback}:
        return sentencepiece_to_bytes  # the two steps commute: <0xNN> holds no ▁

    def run(piece: str) -> bytes:
        x: Piece = piece
        for step in steps:
            x = step(x)
        return x if isinstance(x, bytes) else x.encode("utf-8")

    return run


# --------------------------------------------------------------------------- tokenizer.json


def _model(data: dict) -> dict:
    model = data.get("model") or {}
    if not isinstance(model, dict):
        raise VocabularyError("'model' is not an object")
    return model


def _token_id(value: Any, where: str) -> int:
    """A token id from the file: a JSON integer >= 0 (not a string, float or boolean)."""
    if type(value) is not int:
        raise VocabularyError(f"{where}: token id {value!r} is not an integer")
    if value < 0:
        raise VocabularyError(f"{where}: negative token id {value}")
    return value


def _model_pieces(model: dict) -> list[tuple[str, int, str]]:
    """(piece, id, where) of the model's own vocabulary; ``where`` locates the entry.

    Ids are checked here: integers, non-negative, and each held by one piece (two
    pieces on one id would leave one of them without a logit).
    """
    kind = model.get("type")
    vocab = model.get("vocab")
    if kind is None:
        if "merges" in model:
            kind = "BPE"
        elif isinstance(vocab, list):
            kind = "Unigram"
        elif "continuing_subword_prefix" in model or "max_input_chars_per_word" in model:
            kind = "WordPiece"
    if kind in ("BPE", "WordLevel") and isinstance(vocab, dict):
        out: list[tuple[str, int, str]] = []
        owner: dict[int, str] = {}
        for piece, value in vocab.items():
            where = f"model.vocab[{piece!r}]"
            i = _token_id(value, where)
            if i in owner:
                raise VocabularyError(
                    f"{where}: id {i} is also the id of {owner[i]!r} (each id needs one token)"
                )
            owner[i] = piece
            out.append((piece, i, where))
        return out
    if kind == "Unigram" and isinstance(vocab, list):
        out = []
        for i, entry in enumerate(vocab):
            if not (isinstance(entry, (list, tuple)) and entry and isinstance(entry[0], str)):
                raise VocabularyError(f"model.vocab[{i}] is not a [piece, score] pair")
            out.append((entry[0], i, f"model.vocab[{i}]"))
        return out
    if kind == "WordPiece":
        raise VocabularyError(
            "WordPiece tokenizers are not supported: '##' continuations and the spaces "
            "the decoder inserts between words make a token's bytes depend on context"
        )
    raise VocabularyError(f"unsupported tokenizer model type {kind!r}")


def _added_tokens(data: dict) -> list[tuple[str, int, bool, str]]:
    """(content, id, special, where) of ``added_tokens``, checked like the model's ids.

    An added token may take the id of a model piece (that is how files mark a piece
    special); two added tokens with different texts on one id are an error.
    """
    added = data.get("added_tokens") or []
    if not isinstance(added, list):
        raise VocabularyError("'added_tokens' is not a list")
    out: list[tuple[str, int, bool, str]] = []
    owner: dict[int, str] = {}
    for k, tok in enumerate(added):
        where = f"added_tokens[{k}]"
        if not isinstance(tok, dict):
            raise VocabularyError(f"{where} is not an object")
        content = tok.get("content")
        if not isinstance(content, str):
            raise VocabularyError(f"{where}: 'content' {content!r} is not a string")
        where = f"{where} ({content!r})"
        i = _token_id(tok.get("id"), where)
        if owner.get(i, content) != content:
            raise VocabularyError(f"{where}: id {i} is also the id of added token {owner[i]!r}")
        owner[i] = content
        out.append((content, i, bool(tok.get("special")), where))
    return out


def tokens_from_tokenizer_json(
    data: dict,
) -> tuple[list[bytes], set[int], dict[str, int], Mapping[str, int]]:
    """Bytes of every id, the special ids, special name -> id, and any name -> id.

    Special added tokens keep their literal text. Non-special added tokens go
    through the decoder like model pieces: that turns gemma-3's ``▁▁`` added
    tokens into real spaces, as its decoder does, and leaves text like
    ``<think>`` or ``\\n\\n`` unchanged. Ids must be integers, one token each, and
    the largest must fit the number of tokens
    (:func:`~automask.vocab.vocabulary.check_id_space`): holes are padded.
    """
    model = _model(data)
    decode = piece_decoder(decoder_steps(data))
    pieces = _model_pieces(model)
    added = _added_tokens(data)
    top, top_where = -1, ""
    for _, i, where in pieces:
        if i > top:
            top, top_where = i, where
    for _, i, _, where in added:
        if i > top:
            top, top_where = i, where
    count = len({i for _, i, _ in pieces} | {i for _, i, _, _ in added})
    check_id_space(top, count, top_where)
    tokens: list[bytes] = [b""] * (top + 1)
    for piece, i, _ in pieces:
        tokens[i] = decode(piece)
    special_ids: set[int] = set()
    special_names: dict[str, int] = {}
    added_names: dict[str, int] = {}
    for content, i, special, _ in added:
        added_names[content] = i
        if special:
            tokens[i] = content.encode("utf-8")
            special_ids.add(i)
            special_names[content] = i
        else:
            tokens[i] = decode(content)
    vocab = model.get("vocab")
    names: Mapping[str, int] = (
        ChainMap(added_names, vocab) if isinstance(vocab, dict) else added_names
    )
    return tokens, special_ids, special_names, names


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):  # a config we cannot read names no EOS
        return {}
    return data if isinstance(data, dict) else {}


def eos_from_configs(folder: str, names: Mapping[str, int]) -> list[int]:
    """EOS ids named by ``tokenizer_config.json`` and ``generation_config.json`` in ``folder``."""
    ids: list[int] = []
    eos = _read_json(os.path.join(folder, "tokenizer_config.json")).get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    if isinstance(eos, str) and eos in names:
        ids.append(names[eos])
    gen = _read_json(os.path.join(folder, "generation_config.json")).get("eos_token_id")
    ids.extend(_int_list(gen))
    return list(dict.fromkeys(ids))


def _int_list(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def encoding_overrides(data: dict) -> tuple[Any, Any]:
    """(normalizer, pre_tokenizer) JSON without dummy-prefix behaviour.

    Drops ``Prepend`` normalizers, sets Metaspace ``prepend_scheme`` to ``never``
    and turns off ByteLevel ``add_prefix_space``: text in the middle of an output
    gets no invented leading space.
    """

    def fix_normalizer(n: Any, depth: int = 0) -> Any:
        if not isinstance(n, dict):
            return n
        if n.get("type") == "Prepend":
            return None
        if n.get("type") == "Sequence":
            if depth >= _MAX_SEQUENCE_DEPTH:
                raise VocabularyError(
                    f"normalizer: Sequence nested more than {_MAX_SEQUENCE_DEPTH} deep")
            kids = [fix_normalizer(c, depth + 1) for c in n.get("normalizers") or []]
            return {**n, "normalizers": [k for k in kids if k is not None]}
        return n

    def fix_pre(p: Any, depth: int = 0) -> Any:
        if not isinstance(p, dict):
            return p
        kind = p.get("type")
        if kind == "Sequence":
            if depth >= _MAX_SEQUENCE_DEPTH:
                raise VocabularyError(
                    f"pre_tokenizer: Sequence nested more than {_MAX_SEQUENCE_DEPTH} deep")
            kids = [fix_pre(c, depth + 1) for c in p.get("pretokenizers") or []]
            return {**p, "pretokenizers": kids}
        if kind == "Metaspace":
            q = {**p, "prepend_scheme": "never"}
            if "add_prefix_space" in q:
                q["add_prefix_space"] = False
            return q
        if kind == "ByteLevel":
            return {**p, "add_prefix_space": False}
        return p

    return fix_normalizer(data.get("normalizer")), fix_pre(data.get("pre_tokenizer"))


class HFEncoder:
    """Lazily built ``tokenizers`` encoder with dummy prefix, BOS and special matching off.

    Built on first use so loading a vocabulary stays cheap when nobody encodes.
    """

    def __init__(self, load: Callable[[], Any], data: dict):
        self._load = load
        self._normalizer, self._pre_tokenizer = encoding_overrides(data)
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _build(self) -> Any:
        from tokenizers import Tokenizer

        try:
            tok = self._load()
            patch = {
                "version": "1.0",
                "truncation": None,
                "padding": None,
                "added_tokens": [],
                "normalizer": self._normalizer,
                "pre_tokenizer": self._pre_tokenizer,
                "post_processor": None,
                "decoder": None,
                "model": {"type": "WordLevel", "vocab": {}, "unk_token": "[UNK]"},
            }
            parts = Tokenizer.from_str(json.dumps(patch))
            tok.normalizer = parts.normalizer
            tok.pre_tokenizer = parts.pre_tokenizer
            tok.post_processor = None
            tok.no_truncation()
            tok.no_padding()
        except Exception as e:  # the tokenizers library raises plain Exceptions
            raise VocabularyError(f"cannot build a tokenizers encoder: {e}") from e
        if hasattr(tok, "encode_special_tokens"):
            tok.encode_special_tokens = True
        return tok

    def __call__(self, text: str) -> list[int]:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = self._build()
        return self._tokenizer.encode(text, add_special_tokens=False).ids


def _tokenizers_available() -> bool:
    return importlib.util.find_spec("tokenizers") is not None


def vocabulary_from_json(
    data: dict,
    *,
    folder: str | None,
    load_encoder: Callable[[], Any] | None,
    extra_special_ids: Iterable[int] = (),
    extra_eos: Iterable[int] = (),
    special_tokens: dict[str, int] | None = None,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
    name: str = "",
) -> Vocabulary:
    """Shared body of the tokenizer.json and transformers loaders."""
    tokens, special_ids, special_names, names = tokens_from_tokenizer_json(data)
    special_ids.update(i for i in extra_special_ids if 0 <= i < len(tokens))
    default_eos = list(extra_eos)
    if folder is not None:
        default_eos = eos_from_configs(folder, names) + default_eos
    encoder: Encoder | None = None
    if load_encoder is not None and _tokenizers_available():
        encoder = HFEncoder(load_encoder, data)
    return finish(
        tokens,
        special_ids,
        special_names,
        default_eos=list(dict.fromkeys(default_eos)),
        special_tokens=special_tokens,
        eos_token_ids=eos_token_ids,
        vocab_size=vocab_size,
        encoder=encoder,
        name=name,
    )


def load_tokenizer_json(
    path: str,
    *,
    special_tokens: dict[str, int] | None = None,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Vocabulary of a ``tokenizer.json``; EOS defaults come from the config files beside it.

    Default EOS: ``eos_token`` of ``tokenizer_config.json`` plus ``eos_token_id`` of
    ``generation_config.json``; when neither names one, special tokens with a
    well-known end-of-text name.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = json.loads(text)
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError included
        raise VocabularyError(f"cannot read tokenizer.json {path}: {e}") from e
    except RecursionError:
        depth, line, col = json_nesting(text)
        raise VocabularyError(
            f"{path}: JSON nested {depth:,} levels deep (deepest at line {line}, column {col}); "
            "too deep to read"
        ) from None
    if not isinstance(data, dict) or "model" not in data:
        raise VocabularyError(f"{path} is not a Hugging Face tokenizer.json (no 'model')")

    def load() -> Any:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(path)

    folder = os.path.dirname(os.path.abspath(path))
    try:
        return vocabulary_from_json(
            data,
            folder=folder,
            load_encoder=load,
            special_tokens=special_tokens,
            eos_token_ids=eos_token_ids,
            vocab_size=vocab_size,
            name=os.path.basename(folder) or os.path.basename(path),
        )
    except VocabularyError as e:
        raise VocabularyError(f"{path}: {e}") from e
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError) as e:
        # a field of an unexpected shape somewhere the checks above do not reach
        raise VocabularyError(
            f"{path}: malformed tokenizer.json ({type(e).__name__}: {e})"
        ) from e


_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def json_nesting(text: str) -> tuple[int, int, int]:
    """(depth, line, column) of the deepest point of JSON text, strings skipped.

    Python's JSON reader recurses once per array or object, so text nested about
    1,000 deep raises ``RecursionError``; this says how deep it went, and where.
    """
    depth = deepest = at = 0
    for m in _JSON_NESTING.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
        elif c in "]}":
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


# --------------------------------------------------------------------------- transformers


def _hf_eos(tokenizer: Any) -> list[int]:
    """EOS ids a transformers tokenizer knows about, plus a generation config if one is findable."""
    ids = _int_list(getattr(tokenizer, "eos_token_id", None))
    for attr in ("generation_config", "_generation_config"):
        cfg = getattr(tokenizer, attr, None)
        if cfg is not None:
            ids.extend(_int_list(getattr(cfg, "eos_token_id", None)))
    where = getattr(tokenizer, "name_or_path", None)
    if isinstance(where, str) and where and os.path.isdir(where):
        gen = _read_json(os.path.join(where, "generation_config.json")).get("eos_token_id")
        ids.extend(_int_list(gen))
    return list(dict.fromkeys(ids))


def _hf_special_ids(tokenizer: Any) -> set[int]:
    ids = set(_int_list(list(getattr(tokenizer, "all_special_ids", []) or [])))
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    for i, tok in decoder.items():
        if getattr(tok, "special", False):
            ids.add(int(i))
    return ids


def load_transformers_tokenizer(
    tokenizer: Any,
    *,
    eos_token_ids: Iterable[int] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Vocabulary of a ``transformers`` tokenizer object.

    Fast tokenizers go through their serialized tokenizer.json, so they get the
    same bytes as :func:`load_tokenizer_json`. Slow ones are best effort: byte
    rules are picked from the tokenizer's shape, and the encoder is kept only if
    it round-trips a probe string.
    """
    name = str(getattr(tokenizer, "name_or_path", "") or "")
    backend = getattr(tokenizer, "backend_tokenizer", None)
    special = _hf_special_ids(tokenizer)
    eos = _hf_eos(tokenizer)
    if backend is not None:
        text = backend.to_str()
        data = json.loads(text)

        def load() -> Any:
            from tokenizers import Tokenizer

            return Tokenizer.from_str(text)

        return vocabulary_from_json(
            data,
            folder=None,
            load_encoder=load,
            extra_special_ids=special,
            extra_eos=eos,
            eos_token_ids=eos_token_ids,
            vocab_size=vocab_size,
            name=name,
        )
    return _from_slow_tokenizer(tokenizer, special, eos, eos_token_ids, vocab_size, name)


_PROBE = 'Hello world, 12 tabs\tand  spaces:\n{"k": [1, 2]} déjà vu 東京 🙂'


def _from_slow_tokenizer(
    tokenizer: Any,
    special: set[int],
    eos: list[int],
    eos_token_ids: Iterable[int] | None,
    vocab_size: int | None,
    name: str,
) -> Vocabulary:
    try:
        n = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
    except Exception as e:  # arbitrary third-party tokenizer classes
        raise VocabularyError(f"cannot list the tokens of {type(tokenizer).__name__}: {e}") from e
    if hasattr(tokenizer, "byte_encoder") or hasattr(tokenizer, "byte_decoder"):
        decode: Callable[[str], bytes] = byte_level_to_bytes
    elif hasattr(tokenizer, "sp_model") or any(
        isinstance(p, str) and SPIECE_SPACE in p for p in pieces[:5000]
    ):
        decode = sentencepiece_to_bytes
    else:
        decode = lambda p: p.encode("utf-8")  # noqa: E731
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    tokens: list[bytes] = []
    named: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        if not isinstance(piece, str):
            tokens.append(b"")
        elif i in special:
            tokens.append(piece.encode("utf-8"))
            named[piece] = i
        elif i in added:
            tokens.append(str(getattr(added[i], "content", piece)).encode("utf-8"))
        else:
            tokens.append(decode(piece))

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    vocab = finish(
        tokens,
        special,
        named,
        default_eos=eos,
        special_tokens=None,
        eos_token_ids=eos_token_ids,
        vocab_size=vocab_size,
        encoder=encode,
        name=name,
    )
    try:
        ok = vocab.decode_bytes(vocab.encode(_PROBE)) == _PROBE.encode("utf-8")
    except Exception:  # a broken encoder only costs can_encode
        ok = False
    if not ok:
        vocab._encoder = None
    return vocab


register_loader("json", load_tokenizer_json)
register_loader("transformers", load_transformers_tokenizer)
