"""A GGUF model's prompt side without transformers: its chat template and its own tokenizer.

transformers can read a GGUF tokenizer only with torch installed, which a
server running the model on llama.cpp does not otherwise need. Everything a
chat prompt needs is in the file already: the Jinja chat template and the
special tokens in its metadata, and llama.cpp's tokenizer, which is the one
the model was converted with. :class:`GGUFTokenizer` offers the two calls the
server makes of a transformers tokenizer (``apply_chat_template`` and
``__call__``), so either can stand behind it.

Templates render the way transformers renders them: a sandboxed Jinja
environment with ``trim_blocks`` and ``lstrip_blocks``, ``raise_exception``
and ``strftime_now`` available, ``bos_token`` / ``eos_token`` defined, and
``tojson`` keeping non-ASCII text as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from automask.vocab.gguf_file import read_gguf_metadata

_KEYS = frozenset({"tokenizer.chat_template", "tokenizer.ggml.bos_token_id",
                   "tokenizer.ggml.eos_token_id"})


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class TemplateError(ValueError):
    """A chat template refused the messages (its ``raise_exception``) or failed to render."""


class GGUFTokenizer:
    """Chat template and tokenizer of a GGUF file; ``tokenize(text) -> ids`` is llama.cpp's,
    parsing special tokens written in the text (as a rendered template writes them)."""

    def __init__(self, path: str, tokenize: Callable[[str], list[int]],
                 token_text: Callable[[int], str]):
        meta = read_gguf_metadata(str(path), _KEYS)
        template = meta.get("tokenizer.chat_template")
        self.chat_template: str | None = _text(template) if template is not None else None
        self._tokenize = tokenize
        bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
        self.bos_token = token_text(int(bos)) if bos is not None else ""
        self.eos_token = token_text(int(eos)) if eos is not None else ""
        self._compiled: Any = None

    def _template(self) -> Any:
        if self._compiled is None:
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            def raise_exception(message: str) -> None:
                raise TemplateError(message)

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
            env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(
                x, ensure_ascii=False, indent=indent)
            env.globals["raise_exception"] = raise_exception
            env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            self._compiled = env.from_string(self.chat_template or "")
        return self._compiled

    def apply_chat_template(self, messages: Sequence[dict], *, tokenize: bool = False,
                            add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, **extra: Any) -> Any:
        """The rendered prompt (or its ids with ``tokenize=True``)."""
        if not self.chat_template:
            raise TemplateError("this model has no chat template")
        try:
            text = self._template().render(
                messages=list(messages), add_generation_prompt=add_generation_prompt,
                tools=tools, bos_token=self.bos_token, eos_token=self.eos_token, **extra)
        except TemplateError:
            raise
        except Exception as e:  # noqa: BLE001 - a template is user-supplied code
            raise TemplateError(f"the chat template failed: {e}") from e
        return self._tokenize(text) if tokenize else text

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        """``{"input_ids": ids}``; a BOS is never added here: templates write their own."""
        return {"input_ids": self._tokenize(text)}


def llama_tokenizer(lib: Any, vocab: Any) -> Callable[[str], list[int]]:
    """llama.cpp's tokenizer for a loaded model's ``llama_vocab``: no BOS added, special
    tokens written in the text parsed as such (a rendered chat template writes them)."""

    def tokenize(text: str) -> list[int]:
        data = text.encode("utf-8")
        room = len(data) + 8  # a token covers at least one byte, plus specials
        buf = (lib.llama_token * room)()
        n = lib.llama_tokenize(vocab, data, len(data), buf, room, False, True)
        if n < 0:  # -n is the room needed
            room = -n
            buf = (lib.llama_token * room)()
            n = lib.llama_tokenize(vocab, data, len(data), buf, room, False, True)
        if n < 0:
            raise ValueError(f"llama.cpp could not tokenize the text (code {n})")
        return list(buf[:n])

    return tokenize
