"""The explorer's HTTP side: the page, its static files, and the JSON API it is a view of.

Routes (every answer under ``/api`` is JSON; see ``docs/explorer.md``):

=======  ==========================  ===============================================
GET      ``/``                       the page (``static/index.html``)
GET      ``/static/{file}``          its script and style sheet
GET      ``/api/state``              everything the page draws
GET      ``/api/examples``           the examples one click away
POST     ``/api/compile``            ``{kind, text, prompt?, whitespace?}``: a new output
POST     ``/api/step``               ``{token_id?}``: one step (steered when given)
POST     ``/api/pick``               ``{token_id}``: steer to a token
POST     ``/api/run``                ``{max_steps?}``: up to 64 steps, to the end
POST     ``/api/stop``               stop a run after its current step
POST     ``/api/undo``               roll back the last action
POST     ``/api/rollback``           ``{step}``: keep steps ``0..step-1``
GET      ``/api/steps/{step}``       one step's details (the pending one included)
POST     ``/api/settings``           ``{temperature, top_p, seed, mask, fast_forward,
                                     max_tokens, repetition_penalty}`` (any of them)
POST     ``/api/predict``            ``{survives}``: the prediction check
=======  ==========================  ===============================================

Why errors look the way they do: the page must never break, so every refusal
is ``{"error": {"code", "message", ...}}`` with a 4xx status that says
whose fault it is (400 malformed, 404 no such step or route, 405 wrong method,
409 not possible now, 413 body too large) and leaves the explorer as it was.
The explorer's work (model steps, compiles) runs in worker threads, one at a
time under its lock; ``/api/stop`` takes no lock, so it reaches a running run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from automask.errors import AutomaskError, LimitExceeded
from automask.explore.examples import Example, all_examples
from automask.explore.session import ExploreError, Explorer

log = logging.getLogger("automask.explore")

#: the largest request body: a constraint of MAX_GRAMMAR_CHARS (1 Mi characters) fits
MAX_BODY_BYTES = 4 << 20
#: the page must load fresh after an upgrade: no caching of the page or its files
NO_CACHE = {"Cache-Control": "no-store"}


def static_dir() -> Path:
    """The folder of the page's files, shipped inside the package (package data)."""
    return Path(str(resources.files("automask.explore") / "static"))


def create_app(explorer: Explorer, *, examples: list[Example] | None = None,
               max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """The Starlette application serving the page and the API over ``explorer``."""
    shown = examples if examples is not None else all_examples()
    files = static_dir()

    async def page(request: Request) -> Response:
        return FileResponse(files / "index.html", headers=NO_CACHE)

    async def body(request: Request, *, required: bool = True) -> dict[str, Any]:
        """The request's JSON object (an empty body is ``{}`` where nothing is required)."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            raise ExploreError(413, "body_too_large",
                               f"the request body is over {max_body_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise ExploreError(413, "body_too_large",
                                   f"the request body is over {max_body_bytes} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip() and not required:
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise ExploreError(400, "invalid_json",
                               f"the request body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ExploreError(400, "invalid_json", "the request body must be a JSON object")
        return data

    def field(data: dict[str, Any], name: str, default: Any = ...) -> Any:
        if name not in data:
            if default is ...:
                raise ExploreError(400, "bad_request", f"the request needs {name!r}")
            return default
        return data[name]

    def action(work: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """A route: its work in a worker thread; refusals as JSON errors, never a 500
        for bad input."""

        async def route(request: Request) -> Response:
            try:
                result = await work(request)
            except ExploreError as e:
                return JSONResponse(e.as_dict(), status_code=e.status)
            except LimitExceeded as e:
                return JSONResponse({"error": {"code": "limit_exceeded", "message": str(e)}},
                                    status_code=400)
            except AutomaskError as e:
                return JSONResponse({"error": {"code": type(e).__name__, "message": str(e)}},
                                    status_code=400)
            except Exception as e:  # noqa: BLE001 - a bug: say so in JSON, keep serving
                log.exception("explorer request %s failed", request.url.path)
                return JSONResponse({"error": {"code": "internal_error",
                                               "message": f"{type(e).__name__}: {e}"}},
                                    status_code=500)
            return JSONResponse(result, headers=NO_CACHE)

        return route

    async def state(request: Request) -> Any:
        return await run_in_threadpool(explorer.state)

    async def list_examples(request: Request) -> Any:
        return {"examples": [e.as_dict() for e in shown]}

    async def compile_(request: Request) -> Any:
        data = await body(request)
        return await run_in_threadpool(
            explorer.compile, field(data, "kind"), field(data, "text"),
            field(data, "prompt", None), field(data, "whitespace", "compact"))

    async def step(request: Request) -> Any:
        data = await body(request, required=False)
        return await run_in_threadpool(explorer.step, field(data, "token_id", None))

    async def pick(request: Request) -> Any:
        data = await body(request)
        return await run_in_threadpool(explorer.pick, field(data, "token_id"))

    async def run(request: Request) -> Any:
        data = await body(request, required=False)
        return await run_in_threadpool(explorer.run, field(data, "max_steps", 16))

    async def stop(request: Request) -> Any:
        explorer.stop()
        return {"stopping": True}

    async def undo(request: Request) -> Any:
        await body(request, required=False)
        return await run_in_threadpool(explorer.undo)

    async def rollback(request: Request) -> Any:
        data = await body(request)
        return await run_in_threadpool(explorer.rollback, field(data, "step"))

    async def step_detail(request: Request) -> Any:
        raw = request.path_params["step"]
        try:
            index = int(raw)
        except ValueError:
            raise ExploreError(404, "unknown_step", f"no step {raw!r}: steps are numbered "
                               "from 0") from None
        return await run_in_threadpool(explorer.step_detail, index)

    async def settings(request: Request) -> Any:
        data = await body(request)
        return await run_in_threadpool(explorer.update_settings, data)

    async def predict(request: Request) -> Any:
        data = await body(request)
        return await run_in_threadpool(explorer.predict, field(data, "survives"))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse({"error": {"code": code, "message": str(exc.detail)}},
                            status_code=exc.status_code)

    get, post = ["GET"], ["POST"]
    return Starlette(
        routes=[
            Route("/", page, methods=get),
            Route("/api/state", action(state), methods=get),
            Route("/api/examples", action(list_examples), methods=get),
            Route("/api/compile", action(compile_), methods=post),
            Route("/api/step", action(step), methods=post),
            Route("/api/pick", action(pick), methods=post),
            Route("/api/run", action(run), methods=post),
            Route("/api/stop", action(stop), methods=post),
            Route("/api/undo", action(undo), methods=post),
            Route("/api/rollback", action(rollback), methods=post),
            Route("/api/steps/{step}", action(step_detail), methods=get),
            Route("/api/settings", action(settings), methods=post),
            Route("/api/predict", action(predict), methods=post),
            Mount("/static", StaticFiles(directory=str(files)), name="static"),
        ],
        exception_handlers={HTTPException: http_error},
    )
