"""Request bodies of the OpenAI-compatible endpoints, validated, and the server's error type.

Field names and meanings follow OpenAI's API, plus the vLLM extensions
people already send (``structured_outputs``, ``repetition_penalty``,
``top_k``). Decisions where the APIs leave room:

* Unknown top-level fields are ignored, as OpenAI and vLLM do, except the
  removed vLLM ``guided_*`` fields: they get HTTP 400 naming the field that
  replaces them, never a silently unconstrained answer.
* ``presence_penalty`` / ``frequency_penalty`` are accepted and must be 0:
  any other value is a 400, since ignoring them would change what the
  client asked for without saying so.
* ``max_tokens`` absent means the server's default cap (``--max-tokens``),
  not "until the context is full": a small model can ramble for thousands
  of tokens.
* ``automask`` (an object) is our extension: ``{"diagnostics": true}`` adds
  the per-choice constraint diagnostics to the response;
  ``{"grammar_syntax": "gbnf" | "lark"}`` names the syntax of
  ``structured_outputs.grammar`` where detection should not decide.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: removed vLLM request fields and what replaces each (a 400 names the replacement)
REMOVED_FIELDS = {
    "guided_json": "structured_outputs.json (or response_format json_schema)",
    "guided_regex": "structured_outputs.regex",
    "guided_choice": "structured_outputs.choice",
    "guided_grammar": "structured_outputs.grammar",
    "guided_json_object": "structured_outputs.json_object (or response_format json_object)",
    "guided_decoding_backend": "nothing: automask is the backend",
    "guided_whitespace_pattern": "structured_outputs.disable_any_whitespace",
}


class RequestError(Exception):
    """An answer that is not a completion: HTTP status plus OpenAI's error object fields."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")


class AutomaskOptions(BaseModel):
    """The ``automask`` extension object of a request."""

    model_config = ConfigDict(extra="forbid")
    diagnostics: bool = False
    grammar_syntax: Literal["gbnf", "lark"] | None = None


class StructuredOutputs(BaseModel):
    """vLLM's ``structured_outputs``: exactly one constraint, plus whitespace."""

    model_config = ConfigDict(extra="forbid")
    json_: dict | bool | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False

    def kinds(self) -> list[str]:
        named = {"json": self.json_, "regex": self.regex, "choice": self.choice,
                 "grammar": self.grammar, "json_object": self.json_object or None}
        return [k for k, v in named.items() if v is not None]


class SamplingFields(_Body):
    """What both endpoints share: sampling, limits, constraints, streaming."""

    model: str
    max_tokens: int | None = Field(default=None, ge=0)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=0, ge=-1)
    repetition_penalty: float = Field(default=1.0, gt=0)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1, le=16)
    stream: bool = False
    stream_options: dict | None = None
    user: str | None = None
    response_format: dict | None = None
    structured_outputs: StructuredOutputs | None = None
    automask: AutomaskOptions | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: str | list[str] | None) -> list[str]:
        stops = [v] if isinstance(v, str) else list(v or [])
        if len(stops) > 4 or any(not s for s in stops):
            raise ValueError("stop takes at most 4 non-empty strings")
        return stops

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _penalty(cls, v: float) -> float:
        if v != 0:
            raise ValueError("is not supported (use repetition_penalty)")
        return v

    @property
    def stops(self) -> list[str]:
        return list(self.stop or [])

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    @property
    def diagnostics(self) -> bool:
        return self.automask is not None and self.automask.diagnostics


class ChatCompletionRequest(SamplingFields):
    messages: list[dict] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    parallel_tool_calls: bool = True
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None \
            else self.max_tokens

    @property
    def top_logprob_count(self) -> int | None:
        """None: no logprobs; else how many alternatives per token."""
        return (self.top_logprobs or 0) if self.logprobs else None


class CompletionRequest(SamplingFields):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(default=None, ge=0, le=5)
    echo: bool = False
    suffix: str | None = None

    @property
    def token_limit(self) -> int | None:
        return 16 if self.max_tokens is None else self.max_tokens  # OpenAI's default here

    @property
    def top_logprob_count(self) -> int | None:
        return self.logprobs


def parse_request(kind: type[SamplingFields], body: Any) -> SamplingFields:
    """Validate a decoded JSON body; a :class:`RequestError` (400) says what is wrong, where."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    for name, replacement in REMOVED_FIELDS.items():
        if name in body:
            raise RequestError(400, f"'{name}' was removed (as in vLLM); use {replacement}",
                               param=name, code="removed_field")
    try:
        return kind.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise RequestError(400, f"{where}: {first['msg']}" if where else first["msg"],
                           param=where, code="invalid_value") from None
