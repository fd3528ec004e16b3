"""The Starlette application: OpenAI's routes over the scheduler, with limits and streaming.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``,
``GET /v1/models``, ``GET /health``, ``GET /metrics``.

Every answer that is not a completion is OpenAI's error object with a
status that says whose fault it is: 400 bad request (malformed JSON, bad
values, a constraint that does not compile: ``code`` names our error type),
404 unknown model, 413 body over the limit, 429 queue full (with
``Retry-After``), 504 past the request time limit. A streamed answer that
fails after its first chunk ends with an ``error`` event, then ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from automask.engine.compiled import compiler_for
from automask.engine.warm_up import warm_up
from automask.sampling import SamplingParams
from automask.serve.chat import Answer, partial_fields, prompt_ids, read_answer, render_prompt
from automask.serve.config import ServerConfig
from automask.serve.constraints import GrammarCache, spec_for, spec_param, tool_choice_of
from automask.serve.metrics import Metrics
from automask.serve.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    RequestError,
    SamplingFields,
    parse_request,
)
from automask.serve.scheduler import Delta, Finished, Job, JobDone, JobFailed, Scheduler

log = logging.getLogger("automask.serve")


class Server:
    """A model runner, its tokenizer and vocabulary, the scheduler, caches and metrics."""

    def __init__(self, runner: Any, tokenizer: Any, vocab: Any,
                 config: ServerConfig | None = None):
        self.runner = runner
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.config = config or ServerConfig()
        self.metrics = Metrics()
        self.cache = GrammarCache(vocab, capacity=self.config.cache_size,
                                  on_compile=lambda s: self.metrics.observe("compile", s))
        self.scheduler = Scheduler(runner, vocab, metrics=self.metrics,
                                   max_queue=self.config.max_queue)
        self._compiler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="automask-compile")
        self.created = int(time.time())
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/metrics", self._metrics, methods=["GET"]),
            ],
            exception_handlers={HTTPException: self._http_error},
            lifespan=self._lifespan,
        )

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # Before the first request, not in it: what every JSON grammar's first masks need.
        warm_up(compiler_for(self.vocab), whitespace=self.config.whitespace)
        self.scheduler.start()
        try:
            yield
        finally:
            self.scheduler.stop()
            self._compiler.shutdown(wait=False, cancel_futures=True)

    # ---- plain routes
    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": self.config.model_id, "object": "model", "created": self.created,
             "owned_by": "automask", "max_model_len": self.runner.max_context}]})

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def _metrics(self, request: Request) -> Response:
        return PlainTextResponse(self.metrics.render(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return self._error(RequestError(exc.status_code, str(exc.detail),
                                        code="not_found" if exc.status_code == 404 else None))

    def _error(self, e: RequestError) -> Response:
        self.metrics.count("errors_total", e.code or e.type)
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    # ---- completions
    async def _chat(self, request: Request) -> Response:
        return await self._serve(request, ChatCompletionRequest)

    async def _completions(self, request: Request) -> Response:
        return await self._serve(request, CompletionRequest)

    async def _serve(self, request: Request, kind: type[SamplingFields]) -> Response:
        chat = kind is ChatCompletionRequest
        self.metrics.count("requests_total", "chat" if chat else "completions")
        try:
            req = parse_request(kind, await self._json(request))
            if req.model != self.config.model_id:
                raise RequestError(404, f"the model {req.model!r} does not exist here (this "
                                   f"server has {self.config.model_id!r})", param="model",
                                   code="model_not_found")
            tools = tool_choice_of(req)
            if chat:
                assert isinstance(req, ChatCompletionRequest)
                prompt = render_prompt(self.tokenizer, req.messages, tools)
            else:
                assert isinstance(req, CompletionRequest)
                if req.echo or req.suffix:
                    raise RequestError(400, "echo and suffix are not supported",
                                       param="echo" if req.echo else "suffix")
                prompt = prompt_ids(self.tokenizer, req.prompt)
            spec = spec_for(req, whitespace=self.config.whitespace,
                            reasoning=self.config.reasoning if chat else None)
            compiled = None
            if spec is not None:
                loop = asyncio.get_running_loop()
                compiled = await loop.run_in_executor(self._compiler, self.cache.get, spec,
                                                      spec_param(spec, req))
            events: asyncio.Queue = asyncio.Queue()
            job = self._job(req, prompt, compiled, events)
            self.scheduler.submit(job)
        except RequestError as e:
            return self._error(e)
        self.metrics.count("prompt_tokens_total", value=len(prompt) * req.n)
        shape = _Shape(chat, req, self.config, tools.active and chat,
                       f"{'chatcmpl' if chat else 'cmpl'}-{secrets.token_hex(12)}")
        if req.stream:
            return StreamingResponse(self._stream(job, events, shape),
                                     media_type="text/event-stream")
        return await self._whole(request, job, events, shape)

    async def _json(self, request: Request) -> Any:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestError(413, f"the request body is over {limit} bytes",
                               code="body_too_large")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"the request body is over {limit} bytes",
                                   code="body_too_large")
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError) as e:
            raise RequestError(400, f"the request body is not valid JSON: {e}",
                               code="invalid_json") from None

    def _job(self, req: SamplingFields, prompt: list[int], compiled: Any,
             events: asyncio.Queue) -> Job:
        loop = asyncio.get_running_loop()
        limit = req.token_limit  # type: ignore[attr-defined]
        return Job(
            prompt=prompt, compiled=compiled,
            emit=lambda event: loop.call_soon_threadsafe(events.put_nowait, event),
            max_tokens=self.config.max_tokens if limit is None else limit,
            sampling=SamplingParams(temperature=req.temperature, top_p=req.top_p,
                                    top_k=max(req.top_k, 0),
                                    repetition_penalty=req.repetition_penalty),
            seed=req.seed, n=req.n, stops=req.stops,
            top_logprobs=req.top_logprob_count,  # type: ignore[attr-defined]
            diagnostics=req.diagnostics,
            deadline=time.monotonic() + self.config.request_timeout)

    async def _whole(self, request: Request, job: Job, events: asyncio.Queue,
                     shape: _Shape) -> Response:
        watcher = asyncio.create_task(_cancel_on_disconnect(request, job))
        finished: dict[int, Finished] = {}
        logprobs: dict[int, list[dict]] = {i: [] for i in range(job.n)}
        try:
            while True:
                event = await events.get()
                if isinstance(event, Delta):
                    logprobs[event.index].extend(event.logprobs)
                elif isinstance(event, Finished):
                    finished[event.index] = event
                elif isinstance(event, JobFailed):
                    return self._error(event.error)
                elif isinstance(event, JobDone):
                    body = shape.whole([finished[i] for i in range(job.n)], logprobs, event)
                    return JSONResponse(body)
        finally:
            watcher.cancel()
            job.cancel()

    async def _stream(self, job: Job, events: asyncio.Queue,
                      shape: _Shape) -> AsyncIterator[str]:
        try:
            for i in range(job.n):
                yield _sse(shape.chunk(i, role=True))
            sent: dict[int, tuple[int, int]] = {i: (0, 0) for i in range(job.n)}
            texts: dict[int, str] = {i: "" for i in range(job.n)}
            while True:
                event = await events.get()
                if isinstance(event, Delta):
                    texts[event.index] += event.text
                    for chunk in shape.deltas(event.index, texts[event.index], sent,
                                              event.logprobs):
                        yield _sse(chunk)
                elif isinstance(event, Finished):
                    for chunk in shape.final(event, sent):
                        yield _sse(chunk)
                elif isinstance(event, JobFailed):
                    self.metrics.count("errors_total", event.error.code or event.error.type)
                    yield _sse(event.error.body())
                    break
                elif isinstance(event, JobDone):
                    if shape.req.include_usage:
                        yield _sse(shape.usage_chunk(event))
                    break
            yield "data: [DONE]\n\n"
        finally:
            job.cancel()  # a client that went away frees its slots at the next step


async def _cancel_on_disconnect(request: Request, job: Job) -> None:
    while not job.cancelled:
        if await request.is_disconnected():
            job.cancel()
            return
        await asyncio.sleep(0.25)


def _sse(body: dict) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


class _Shape:
    """OpenAI's response objects for one request: whole, or as stream chunks."""

    def __init__(self, chat: bool, req: SamplingFields, config: ServerConfig,
                 tools_active: bool, ident: str):
        self.chat = chat
        self.req = req
        self.reasoning = config.reasoning if chat else None
        self.tools_active = tools_active
        self.id = ident
        self.model = config.model_id
        self.created = int(time.time())

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    @staticmethod
    def _usage(done: JobDone) -> dict[str, Any]:
        return {"prompt_tokens": done.prompt_tokens,
                "completion_tokens": done.completion_tokens,
                "total_tokens": done.prompt_tokens + done.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": done.cached_tokens}}

    def _answer(self, f: Finished) -> Answer:
        return read_answer(f.text, reasoning=self.reasoning, tools_active=self.tools_active)

    @staticmethod
    def _reason(f: Finished, answer: Answer) -> str:
        return "tool_calls" if answer.tool_calls and f.reason == "stop" else f.reason

    def _completion_logprobs(self, entries: list[dict]) -> dict[str, Any]:
        offsets, at = [], 0
        for e in entries:
            offsets.append(at)
            at += len(e["token"])
        return {"tokens": [e["token"] for e in entries],
                "token_logprobs": [e["logprob"] for e in entries],
                "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]}
                                 for e in entries],
                "text_offset": offsets}

    def _logprobs(self, entries: list[dict]) -> dict[str, Any] | None:
        if self.req.top_logprob_count is None:  # type: ignore[attr-defined]
            return None
        return {"content": entries} if self.chat else self._completion_logprobs(entries)

    def whole(self, finished: list[Finished], logprobs: dict[int, list[dict]],
              done: JobDone) -> dict[str, Any]:
        choices = []
        for f in finished:
            if self.chat:
                answer = self._answer(f)
                message: dict[str, Any] = {"role": "assistant", "content": answer.content}
                if answer.reasoning is not None:
                    message["reasoning_content"] = answer.reasoning
                if answer.tool_calls:
                    message["tool_calls"] = answer.tool_calls
                choice = {"index": f.index, "message": message,
                          "finish_reason": self._reason(f, answer)}
            else:
                choice = {"index": f.index, "text": f.text, "finish_reason": f.reason}
            choice["logprobs"] = self._logprobs(logprobs[f.index])
            if f.diagnostics is not None:
                choice["automask"] = {**f.diagnostics, "complete": f.complete}
            choices.append(choice)
        return {**self._head("chat.completion" if self.chat else "text_completion"),
                "choices": choices, "usage": self._usage(done)}

    def chunk(self, index: int, *, role: bool = False, delta: dict | None = None,
              finish: str | None = None, logprobs: list[dict] | None = None,
              extra: dict | None = None) -> dict[str, Any]:
        if self.chat:
            d = {"role": "assistant", "content": ""} if role else (delta or {})
            choice: dict[str, Any] = {"index": index, "delta": d, "finish_reason": finish}
            if logprobs:
                choice["logprobs"] = {"content": logprobs}
        else:
            choice = {"index": index, "text": (delta or {}).get("content", ""),
                      "finish_reason": finish}
            if logprobs:
                choice["logprobs"] = self._completion_logprobs(logprobs)
        choice.update(extra or {})
        return {**self._head("chat.completion.chunk" if self.chat else "text_completion"),
                "choices": [choice]}

    def deltas(self, index: int, text: str, sent: dict[int, tuple[int, int]],
               logprobs: list[dict]) -> list[dict[str, Any]]:
        """Chunks for what is new in the split of ``text`` (reasoning, content) since sent."""
        reasoning, content = partial_fields(text, self.reasoning, self.tools_active) \
            if self.chat else ("", text)
        done_r, done_c = sent[index]
        delta: dict[str, Any] = {}
        if len(reasoning) > done_r:
            delta["reasoning_content"] = reasoning[done_r:]
        if len(content) > done_c:
            delta["content"] = content[done_c:]
        sent[index] = (len(reasoning), len(content))
        if not delta and not logprobs:
            return []
        return [self.chunk(index, delta=delta, logprobs=logprobs)]

    def final(self, f: Finished, sent: dict[int, tuple[int, int]]) -> list[dict[str, Any]]:
        """The last chunks of a choice: held-back text, tool calls, the finish reason."""
        extra = {"automask": {**f.diagnostics, "complete": f.complete}} \
            if f.diagnostics is not None else None
        if not self.chat:
            return [self.chunk(f.index, finish=f.reason, extra=extra)]
        answer = self._answer(f)
        out = []
        done_r, done_c = sent[f.index]
        delta: dict[str, Any] = {}
        if answer.reasoning is not None and len(answer.reasoning) > done_r:
            delta["reasoning_content"] = answer.reasoning[done_r:]
        content = answer.content or ""
        if len(content) > done_c:  # the streamed content is a prefix (see partial_fields)
            delta["content"] = content[done_c:]
        if answer.tool_calls:
            delta["tool_calls"] = [{"index": k, **call}
                                   for k, call in enumerate(answer.tool_calls)]
        if delta:
            out.append(self.chunk(f.index, delta=delta))
        out.append(self.chunk(f.index, finish=self._reason(f, answer), extra=extra))
        return out

    def usage_chunk(self, done: JobDone) -> dict[str, Any]:
        return {**self._head("chat.completion.chunk" if self.chat else "text_completion"),
                "choices": [], "usage": self._usage(done)}

