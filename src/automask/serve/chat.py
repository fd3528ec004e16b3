"""Prompts from chat messages, and answers (content, reasoning, tool calls) from output text.

Chat templates that know tools (they mention ``tools``) get them through
``apply_chat_template(tools=...)``. Others, such as the default SmolLM2's,
get the documented default: a system-message section listing the functions
and the ``<tool_call>`` markup of :mod:`automask.serve.constraints`;
earlier assistant tool calls are written in that markup and ``tool``
messages as ``<tool_response>`` user turns, so the conversation reads the
way the model is asked to write.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from automask.serve.constraints import TOOL_BEGIN, TOOL_END, TOOL_TRIGGER, ToolChoice
from automask.serve.protocol import RequestError

ROLES = ("system", "developer", "user", "assistant", "tool")

TOOLS_PREAMBLE = (
    "You can call functions to help answer. The functions, one JSON object a line:\n"
    "<tools>\n{tools}\n</tools>\n"
    "To call one, write its name and arguments as a JSON object between tags:\n"
    '<tool_call>\n{{"name": "function_name", "arguments": {{"arg": "value"}}}}\n</tool_call>'
)


def content_text(content: Any, where: str) -> str:
    """A message's text: a string, or OpenAI's list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" \
                    or not isinstance(part.get("text"), str):
                raise RequestError(400, "only text content parts are supported",
                                   param=f"{where}.content.{i}")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(400, "content must be a string or a list of text parts",
                       param=f"{where}.content")


def _call_markup(calls: Any, where: str) -> str:
    out = []
    for j, call in enumerate(calls or []):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise RequestError(400, "a tool call needs function.name",
                               param=f"{where}.tool_calls.{j}")
        args = fn.get("arguments", "{}")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            parsed = args
        body = json.dumps({"name": fn["name"], "arguments": parsed}, ensure_ascii=False)
        out.append(f"{TOOL_BEGIN}{body}{TOOL_END}")
    return "\n".join(out)


def normalize_messages(messages: list[dict], tools: ToolChoice,
                       native_tools: bool) -> list[dict[str, Any]]:
    """Messages as ``{"role", "content": str}`` the template can render (see module doc)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(400, f"role must be one of {', '.join(ROLES)}",
                               param=f"{where}.role")
        role = "system" if m["role"] == "developer" else m["role"]
        text = content_text(m.get("content"), where)
        if native_tools:
            out.append({**m, "role": role, "content": text})
            continue
        if role == "assistant" and m.get("tool_calls"):
            markup = _call_markup(m["tool_calls"], where)
            text = f"{text}\n{markup}" if text else markup
        elif role == "tool":
            role, text = "user", f"<tool_response>\n{text}\n</tool_response>"
        out.append({"role": role, "content": text})
    if tools.active and not native_tools:
        listing = "\n".join(json.dumps({"name": f["name"], "description": f["description"],
                                        "parameters": f["parameters"]}, ensure_ascii=False)
                            for f in tools.tools)
        preamble = TOOLS_PREAMBLE.format(tools=listing)
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{preamble}"}
        else:
            out.insert(0, {"role": "system", "content": preamble})
    return out


def render_prompt(tokenizer: Any, messages: list[dict], tools: ToolChoice) -> list[int]:
    """Token ids of the chat prompt, ending where the assistant's answer starts."""
    template = getattr(tokenizer, "chat_template", None) or ""
    native = "tools" in template
    normalized = normalize_messages(messages, tools, native)
    kwargs: dict[str, Any] = {}
    if native and tools.active:
        kwargs["tools"] = [{"type": "function", "function": {k: v for k, v in f.items()
                                                             if k != "strict"}}
                           for f in tools.tools]
    if template:
        try:
            text = tokenizer.apply_chat_template(normalized, tokenize=False,
                                                 add_generation_prompt=True, **kwargs)
        except Exception as e:  # noqa: BLE001 - a template error is about these messages
            raise RequestError(400, f"the chat template cannot render these messages: {e}",
                               param="messages") from None
    else:
        text = "".join(f"{m['role']}: {m['content']}\n" for m in normalized) + "assistant: "
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_ids(tokenizer: Any, prompt: Any) -> list[int]:
    """Token ids of a completions ``prompt``: text, or ids passed through."""
    if isinstance(prompt, str):
        return list(tokenizer(prompt)["input_ids"])
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return list(prompt)
    raise RequestError(400, "prompt must be one string or one list of token ids (batches of "
                       "prompts: send one request each)", param="prompt")


def _held(text: str, marker: str) -> int:
    """How many final characters of ``text`` could be the start of ``marker``."""
    return max((k for k in range(1, len(marker)) if text.endswith(marker[:k])), default=0)


def split_reasoning(text: str, markers: tuple[str, str] | None,
                    partial: bool = False) -> tuple[str | None, str]:
    """(reasoning, rest) of an output under the model's reasoning markers.

    With markers, the output is a reasoning block first, as the grammar
    (``Grammar.after_reasoning``) makes it: everything up to the first end
    marker, less an opening begin marker (templates that open the block in
    the prompt leave it out). Unclosed, it is all reasoning. Both parts are
    left-stripped only, so the split of a longer output extends the split of
    a shorter one (what streaming needs); ``partial`` also holds back a tail
    that may still become a marker.
    """
    if markers is None:
        return None, text
    begin, end = markers
    body = text.lstrip()
    if body.startswith(begin):
        body = body[len(begin):]
    elif partial and begin.startswith(body):
        return "", ""
    k = body.find(end)
    if k < 0:
        return (body[:len(body) - _held(body, end)] if partial else body).lstrip(), ""
    return body[:k].lstrip(), body[k + len(end):].lstrip()


def partial_fields(text: str, reasoning: tuple[str, str] | None,
                   tools_active: bool) -> tuple[str, str]:
    """(reasoning, content) of an unfinished output, safe to stream: each part only grows.

    Content stops before a tool call (its markup is never streamed as text;
    the call goes out whole when the choice finishes).
    """
    thought, rest = split_reasoning(text, reasoning, partial=True)
    if tools_active:
        k = rest.find(TOOL_TRIGGER)
        rest = rest[:k] if k >= 0 else rest[:len(rest) - _held(rest, TOOL_TRIGGER)]
    return thought or "", rest


@dataclass
class Answer:
    """An assistant turn read from the output text."""

    content: str | None
    reasoning: str | None = None
    tool_calls: list[dict] = field(default_factory=list)


def read_answer(text: str, *, reasoning: tuple[str, str] | None, tools_active: bool) -> Answer:
    """Content, reasoning and tool calls of a finished output.

    A tool call is a complete ``<tool_call>…</tool_call>`` segment whose body
    is a JSON object with a string ``name``; the constraint guarantees the
    shape, so an incomplete one (the output ran out of tokens) stays in the
    content as text, as it was written. Content that is only whitespace
    around tool calls is None, as in OpenAI's answers.
    """
    thought, rest = split_reasoning(text, reasoning)
    if not tools_active or TOOL_TRIGGER not in rest:
        return Answer(rest if rest or thought is None else None, thought)
    calls: list[dict] = []
    kept: list[str] = []
    pos = 0
    while True:
        start = rest.find(TOOL_BEGIN, pos)
        stop = rest.find(TOOL_END, start + len(TOOL_BEGIN)) if start >= 0 else -1
        if start < 0 or stop < 0:
            kept.append(rest[pos:])
            break
        try:
            call = json.loads(rest[start + len(TOOL_BEGIN):stop])
            name, args = call["name"], call["arguments"]
        except (ValueError, KeyError, TypeError):
            kept.append(rest[pos:])
            break
        kept.append(rest[pos:start])
        calls.append({"id": f"call_{secrets.token_hex(12)}", "type": "function",
                      "function": {"name": name,
                                   "arguments": json.dumps(args, ensure_ascii=False)}})
        pos = stop + len(TOOL_END)
    content = "".join(kept)
    return Answer(content if content.strip() else None, thought, calls)
