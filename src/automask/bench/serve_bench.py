"""``automask bench serve``: throughput and latency of ``automask serve``, constrained vs not.

``bench generate`` times one sequence through the in-process decode loop;
this benchmark times what a client of the server sees: many concurrent
streamed requests over loopback HTTP, through the continuous-batching
scheduler, so the cost of masks is measured where it competes with batching
(one mask per running sequence per batched forward pass).

The run:

* **server**: ``python -m automask.cli serve --port 0`` as a subprocess
  (ready when it prints its ready line; stopped with SIGTERM at the end,
  also on errors and Ctrl-C), or ``--url`` for a server already running;
* **schemas**: MaskBench records in a seeded order; each is probed once
  (one constrained request, alone): a 400 (the schema does not compile, or
  the prompt does not fit) is counted and skipped, and so is a schema
  ``jsonschema`` cannot check, until ``--sample`` schemas are kept. The
  probes also fill the server's grammar cache, so the timed levels measure
  decoding, not compiling (compile time is reported from the probes);
* **prompts**: :data:`~automask.bench.generate_bench.PROMPT_TEMPLATE` with
  the schema as compact JSON (cut at :data:`MAX_SCHEMA_CHARS`), the same
  messages in both modes; request ``j`` of a level uses schema ``j mod S``;
* **levels**: at each concurrency ``c``, ``--requests`` per mode (or
  ``--waves`` x ``c`` per block where that is more), sent by
  ``c`` client threads (the real ``openai`` client, ``stream=True``,
  temperature 0). The requests go in ``--rounds`` blocks per mode in ABBA
  order (constrained, unconstrained, unconstrained, constrained, ...), so a
  drift in machine load falls on both modes alike. Modes never share a
  block: a block's wall time is one mode's. A block of ``c`` requests is
  one wave that drains as its answers end (10 to 96 tokens here), so the
  batch is full only at its start; ``--waves`` (default 8) blocks keep it
  full most of the time, which is what throughput at ``c`` means;
* **constrained**: ``response_format`` json_schema (strict); **unconstrained**:
  the same request without it;
* **lengths** ``matched`` (default): the probe generates the whole constrained
  answer, and the unconstrained request of that schema gets its token count
  as ``max_tokens``. A constrained answer stops when its JSON closes (about
  50 tokens here), an unconstrained one runs on to ``max_tokens`` (fenced
  JSON and prose), so with ``free`` lengths the two modes spread the same
  prefill, and the same tail of a block where the batch empties, over very
  different token counts, and tokens/s compares answer lengths rather than
  the cost of masks. ``free`` is there to see exactly that.

Reported per (mode, concurrency): output tokens per second (all output tokens
of the level over the summed wall time of its blocks), time to first token
(request sent to the first content chunk) and time per output token after
the first (``(last chunk - first chunk) / (tokens - 1)``) at p50/p99, finish
reasons, the responses that validate under the schema (``jsonschema``, the
draft's validator with formats checked) and the violations: constrained
responses that finished with ``stop`` and do not validate. From the server's
``/metrics`` (read before and after each block): batched steps, and the
forward, mask and remaining seconds per step, to tell where time goes.

Targets (``--check`` exits 1 when one fails): no violations and every request
answered; constrained/unconstrained throughput >= 0.95 at each concurrency;
throughput at the highest concurrency >= 3x the lowest, per mode.
"""

from __future__ import annotations

import json
import math
import os
import platform
import queue
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import numpy as np

from automask.bench.generate_bench import PROMPT_TEMPLATE
from automask.bench.maskbench import DEFAULT_DATA
from automask.bench.stats import printer, summarize, text_table
from automask.errors import AutomaskError

CONSTRAINED = "constrained"
UNCONSTRAINED = "unconstrained"
MODES = (CONSTRAINED, UNCONSTRAINED)
#: Schemas are cut here in the prompt: a few MaskBench schemas run to 100 KB, which would
#: make prefill, not decoding, the thing measured (and overflow a small context).
MAX_SCHEMA_CHARS = 2000
READY = re.compile(r"ready at (\S+) \(model (.+)\)")
LENGTHS = ("matched", "free")
NOISY_SHARE = 0.10  # other processes' CPU share above which a level's timings are flagged
MIN_THROUGHPUT_RATIO = 0.95  # constrained / unconstrained, at each concurrency
MIN_SCALING = 3.0  # highest / lowest concurrency, per mode


class ServeBenchError(AutomaskError):
    """The bench cannot run: the server did not start, no schema compiled, bad input."""


# ----------------------------------------------------------------------------- the server


class ServerProcess:
    """``automask serve --port 0`` as a child process, for one ``with`` block.

    The child runs in its own session, so a Ctrl-C reaches the bench only and
    the stop is always ours: SIGTERM (uvicorn's graceful shutdown), then
    SIGKILL if it has not exited after ``stop_timeout`` seconds. Its stdout
    is drained by a thread (a full pipe would block it); its stderr goes to a
    temporary file whose tail explains a failed start.
    """

    def __init__(self, serve_args: Sequence[str] = (), *, ready_timeout: float = 300.0,
                 stop_timeout: float = 20.0):
        self.command = [sys.executable, "-m", "automask.cli", "serve", "--port", "0",
                        *serve_args]
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.url: str = ""
        self.model: str = ""
        self.proc: subprocess.Popen[str] | None = None
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self._lines: queue.Queue[str | None] = queue.Queue()

    def __enter__(self) -> ServerProcess:
        try:
            self._start()
        except BaseException:  # KeyboardInterrupt while loading too: never leave it running
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        threading.Thread(target=self._drain, name="serve-stdout", daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise ServeBenchError(f"the server was not ready after {self.ready_timeout:g} s"
                                      f"{self._stderr_tail()}") from None
            if line is None:
                code = self.proc.wait()
                raise ServeBenchError(f"the server exited with status {code} before it was "
                                      f"ready{self._stderr_tail()}")
            m = READY.search(line)
            if m:
                self.url, self.model = m.group(1), m.group(2)
                return

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _stderr_tail(self, chars: int = 2000) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        text = self._stderr.read()[-chars:].strip()
        return f": {' '.join(text.split())}" if text else ""

    def stop(self) -> int | None:
        """SIGTERM, wait, SIGKILL if need be; the exit status (None: never started)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._stderr.close()
        return proc.returncode


# ----------------------------------------------------------------------------- requests


@dataclass
class Sample:
    """One timed request: how it ended, its tokens and timings, and whether it validates."""

    mode: str
    concurrency: int
    round: int
    schema_id: str
    status: str = "ok"  # ok | rejected (HTTP 400) | error
    error: str | None = None
    finish_reason: str | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, found in the server's prefix cache
    ttft_s: float | None = None  # request sent -> first chunk with content
    tpot_s: float | None = None  # (last content chunk - first) / (tokens - 1)
    total_s: float = 0.0
    valid: bool | None = None  # None: not checked (not answered, or jsonschema failed)
    validation: str = ""
    text: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Block:
    """One mode's requests at one concurrency in one round: its wall time and server deltas."""

    mode: str
    concurrency: int
    round: int
    requests: int
    wall_s: float
    server: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] | None = None  # CPU seconds used during the block (cpu_delta)


def cpu_times(server_pid: int | None = None) -> dict[str, float] | None:
    """CPU seconds so far: the whole machine (``total``, ``busy``), this process and the
    server (when its pid is known); None where /proc is absent.

    Both cores are the server's to use: its llama.cpp threads wait on each
    other at every layer, so another process's CPU time slows a step by far
    more than its share (a compile next door made blocks 15 times slower).
    Reading who else ran says which numbers to distrust.
    """
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
        hz = float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None
    mine = os.times()
    out = {"total": sum(ticks) / hz, "busy": (sum(ticks) - ticks[3] - ticks[4]) / hz,
           "bench": mine.user + mine.system}
    if server_pid is not None:
        try:
            with open(f"/proc/{server_pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out["server"] = (int(fields[11]) + int(fields[12])) / hz  # utime, stime
        except (OSError, ValueError, IndexError):
            pass
    return out


def cpu_delta(before: dict[str, float] | None,
              after: dict[str, float] | None) -> dict[str, float] | None:
    """The CPU seconds of a block: machine capacity, server, bench, and everything else."""
    if before is None or after is None:
        return None
    d = {k: after[k] - before[k] for k in after if k in before}
    if "server" in d:
        d["others"] = max(d["busy"] - d["server"] - d["bench"], 0.0)
    return d


def make_messages(schema: Any, max_chars: int = MAX_SCHEMA_CHARS) -> list[dict[str, str]]:
    """The chat messages for one schema, the same in both modes (compact JSON, cut)."""
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    if len(text) > max_chars:
        text = text[:max_chars] + " ... (cut)"
    return [{"role": "user", "content": PROMPT_TEMPLATE.format(schema=text)}]


def response_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema",
            "json_schema": {"name": "maskbench", "schema": schema, "strict": True}}


def client_for(url: str, timeout_s: float) -> Any:
    """An ``openai`` client for the server (no retries: a failure is a result)."""
    import openai

    return openai.OpenAI(base_url=url, api_key="automask-bench", max_retries=0,
                         timeout=timeout_s)


def send(client: Any, model: str, messages: list[dict], schema: Any | None,
         max_tokens: int, sample: Sample) -> None:
    """One streamed chat completion into ``sample`` (timings, text, finish, usage)."""
    import openai

    extra: dict[str, Any] = {} if schema is None else {"response_format": response_format(schema)}
    parts: list[str] = []
    first: float | None = None
    last: float | None = None
    t0 = time.perf_counter()
    try:
        stream = client.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, temperature=0, seed=0,
            stream=True, stream_options={"include_usage": True}, **extra)
        for chunk in stream:
            if chunk.usage is not None:
                sample.tokens = chunk.usage.completion_tokens
                sample.prompt_tokens = chunk.usage.prompt_tokens
                details = chunk.usage.prompt_tokens_details
                sample.cached_tokens = (details.cached_tokens or 0) if details else 0
            for choice in chunk.choices:
                if choice.delta.content:
                    last = time.perf_counter()
                    if first is None:
                        first = last
                    parts.append(choice.delta.content)
                if choice.finish_reason:
                    sample.finish_reason = choice.finish_reason
    except openai.BadRequestError as e:
        sample.status, sample.error = "rejected", _one_line(e)
    except (openai.APIError, OSError) as e:  # APIConnectionError, a streamed error event, ...
        sample.status, sample.error = "error", _one_line(e)
    sample.total_s = time.perf_counter() - t0
    sample.text = "".join(parts)
    if first is not None:
        sample.ttft_s = first - t0
        if sample.tokens > 1 and last is not None:
            sample.tpot_s = (last - first) / (sample.tokens - 1)


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


def server_counters(url: str, timeout_s: float = 10.0) -> dict[str, float]:
    """The unlabelled counters of ``/metrics`` (``automask_`` prefix dropped); {} if absent."""
    import httpx

    base = url.rstrip("/").removesuffix("/v1")
    try:
        text = httpx.get(f"{base}/metrics", timeout=timeout_s).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"automask_(\w+) (\S+)", line.strip())
        if m:
            try:
                out[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return out


def counter_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each counter grew by (gauges are left out: a difference of them means nothing)."""
    return {k: after[k] - before.get(k, 0.0) for k in after
            if k.endswith(("_sum", "_count", "_total"))}


# ----------------------------------------------------------------------------- validation


class Validators:
    """One ``jsonschema`` validator per schema (the draft's own class, formats checked)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Any] = {}

    def usable(self, record: dict) -> str | None:
        """None when jsonschema can check outputs of this schema, else why not."""
        try:
            import jsonschema
        except ImportError:
            return "jsonschema is not installed"
        schema = record["schema"]
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            self._by_id[record["id"]] = cls(schema, format_checker=cls.FORMAT_CHECKER)
        except Exception as e:  # SchemaError, an unknown $schema, ...
            return f"jsonschema cannot check it ({type(e).__name__})"
        return None

    def check(self, record: dict, text: str) -> tuple[bool | None, str]:
        """(valid?, one-line verdict); None when jsonschema fails on the schema itself."""
        import jsonschema

        try:
            value = json.loads(text)
        except ValueError as e:
            return False, f"not JSON: {e}"
        validator = self._by_id.get(record["id"])
        if validator is None and self.usable(record) is not None:
            return None, "not checked"
        validator = self._by_id[record["id"]]
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except Exception as e:  # an unresolvable $ref, a pattern Python's re rejects, ...
            return None, f"not checked ({_one_line(e)})"
        if error is None:
            return True, "valid"
        where = "/".join(str(p) for p in error.absolute_path)
        return False, f"invalid at /{where}: {' '.join(error.message.split())[:200]}"


# ----------------------------------------------------------------------------- schemas


def select_schemas(records: Sequence[dict], count: int, seed: int,
                   probe: Callable[[dict], str | None]) -> tuple[list[dict], dict[str, str]]:
    """The first ``count`` records, in a seeded order, that ``probe`` accepts (returns None
    for); the others tried, with the reason ``probe`` gave."""
    order = list(records)
    random.Random(seed).shuffle(order)
    kept: list[dict] = []
    skipped: dict[str, str] = {}
    for record in order:
        if len(kept) >= count:
            break
        reason = probe(record)
        if reason is None:
            kept.append(record)
        else:
            skipped[record["id"]] = reason
    return kept, skipped


def server_probe(client: Any, model: str, validators: Validators, max_chars: int,
                 max_tokens: int, lengths: dict[str, int]) -> Callable[[dict], str | None]:
    """A probe for :func:`select_schemas`: jsonschema can check the schema, and the server
    takes it (one constrained request of ``max_tokens``, whose output tokens go into
    ``lengths``; a 400 is a skip, any other failure ends the run)."""

    def probe(record: dict) -> str | None:
        reason = validators.usable(record)
        if reason is not None:
            return reason
        sample = Sample(CONSTRAINED, 1, -1, record["id"])
        send(client, model, make_messages(record["schema"], max_chars), record["schema"],
             max_tokens, sample)
        if sample.status == "rejected":
            return f"rejected by the server: {sample.error}"
        if sample.status == "error":
            raise ServeBenchError(f"probe of {record['id']} failed: {sample.error}")
        lengths[record["id"]] = sample.tokens
        return None

    return probe


@dataclass
class Workload:
    """The chosen schemas, their messages, and each request's ``max_tokens``.

    ``matched`` (schema id -> tokens of its constrained probe): an unconstrained
    request gets the length its constrained answer had, so both modes decode
    the same number of tokens after the same prompts. Without it, constrained
    answers (which stop when the JSON closes) are much shorter than
    unconstrained ones (which run to ``max_tokens``), and output tokens/s then
    mostly measures how a fixed prefill cost and the end of a block's batch
    are spread over fewer tokens, not what masks cost.
    """

    records: list[dict]
    messages: dict[str, list[dict[str, str]]]
    max_tokens: int
    matched: dict[str, int] | None = None

    def request(self, j: int, mode: str) -> tuple[dict, list[dict[str, str]], Any, int]:
        """(record, messages, schema or None, max_tokens) of request ``j`` in ``mode``."""
        record = self.records[j % len(self.records)]
        budget = self.max_tokens
        if mode == UNCONSTRAINED and self.matched is not None:
            budget = max(1, self.matched.get(record["id"], budget))
        schema = record["schema"] if mode == CONSTRAINED else None
        return record, self.messages[record["id"]], schema, budget


# ----------------------------------------------------------------------------- the levels


def level_requests(concurrency: int, requests: int, rounds: int, waves: int) -> int:
    """Requests per mode at one concurrency: ``requests``, or more so that each block
    holds ``waves`` times ``concurrency`` requests."""
    return max(requests, waves * concurrency * rounds)


def block_plan(levels: Sequence[int], requests: int, rounds: int,
               waves: int = 0) -> list[tuple[int, int, str, range]]:
    """(concurrency, round, mode, request indices) in run order: per level, the requests
    (:func:`level_requests`) split into ``rounds`` blocks per mode, in ABBA order (C U,
    U C, C U, ...)."""
    plan = []
    for c in levels:
        total = level_requests(c, requests, rounds, waves)
        per = math.ceil(total / rounds)
        for r in range(rounds):
            idx = range(r * per, min((r + 1) * per, total))
            if not idx:
                continue
            for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                plan.append((c, r, mode, idx))
    return plan


def run_block(clients: Sequence[Any], model: str, work: Workload, mode: str,
              concurrency: int, rnd: int, indices: Sequence[int], url: str | None = None,
              server_pid: int | None = None) -> tuple[Block, list[Sample]]:
    """``indices`` requests by ``concurrency`` threads; wall time from the first send to
    the last answer (``url``: read the server's counters around it)."""
    jobs: queue.Queue[int] = queue.Queue()
    for j in indices:
        jobs.put(j)
    samples: dict[int, Sample] = {}

    def worker(client: Any) -> None:
        while True:
            try:
                j = jobs.get_nowait()
            except queue.Empty:
                return
            record, messages, schema, budget = work.request(j, mode)
            sample = Sample(mode, concurrency, rnd, record["id"])
            send(client, model, messages, schema, budget, sample)
            samples[j] = sample

    before = server_counters(url) if url else {}
    cpu_before = cpu_times(server_pid)
    threads = [threading.Thread(target=worker, args=(clients[k],), daemon=True)
               for k in range(min(concurrency, len(indices)))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_delta(cpu_before, cpu_times(server_pid))
    after = server_counters(url) if url else {}
    block = Block(mode, concurrency, rnd, len(indices), wall, counter_delta(before, after), cpu)
    return block, [samples[j] for j in indices]


# ----------------------------------------------------------------------------- statistics


def _ms(values_s: Sequence[float]) -> dict[str, float | None]:
    s = summarize(np.asarray(values_s, dtype=np.float64) * 1e9, unit_ns=1e6)
    return {"p50": s.p50, "p99": s.p99, "mean": s.mean}


def summarize_level(samples: Sequence[Sample], blocks: Sequence[Block]) -> dict[str, Any]:
    """One (mode, concurrency): counts, throughput, latency percentiles, validity, and the
    server's time split per batched step (from the blocks' counter deltas)."""
    answered = [s for s in samples if s.status == "ok"]
    tokens = sum(s.tokens for s in answered)
    wall = sum(b.wall_s for b in blocks)
    checked = [s for s in answered if s.valid is not None]
    stops = [s for s in answered if s.finish_reason == "stop"]
    server = Counter[str]()
    for b in blocks:
        server.update(b.server)
    cpu = Counter[str]()
    for b in blocks:
        cpu.update(b.cpu or {})
    capacity = cpu.get("total", 0.0)

    def share(key: str) -> float | None:
        # At most the whole machine: a process's ticks and the machine's are counted apart
        # (and summed over blocks in floats), so a server that had every core reads a hair
        # over 1.
        return min(cpu[key] / capacity, 1.0) if capacity and key in cpu else None

    steps = server.get("forward_seconds_count", 0.0)
    forward, mask = server.get("forward_seconds_sum", 0.0), server.get("mask_seconds_sum", 0.0)
    return {
        "requests": len(samples),
        "answered": len(answered),
        "rejected": sum(1 for s in samples if s.status == "rejected"),
        "errors": sum(1 for s in samples if s.status == "error"),
        "output_tokens": tokens,
        "mean_output_tokens": tokens / len(answered) if answered else None,
        "prompt_tokens": sum(s.prompt_tokens for s in answered),
        "cached_tokens": sum(s.cached_tokens for s in answered),
        "wall_s": wall,
        "tokens_per_s": tokens / wall if wall > 0 else None,
        "ttft_ms": _ms([s.ttft_s for s in answered if s.ttft_s is not None]),
        "tpot_ms": _ms([s.tpot_s for s in answered if s.tpot_s is not None]),
        "finish_reasons": dict(Counter(s.finish_reason or "none" for s in answered)
                               .most_common()),
        "checked": len(checked),
        "valid": sum(1 for s in checked if s.valid),
        "valid_share": (sum(1 for s in checked if s.valid) / len(checked)) if checked
        else None,
        "stop": len(stops),
        "stop_valid": sum(1 for s in stops if s.valid),
        "stop_invalid": sum(1 for s in stops if s.valid is False),
        "server": {
            "steps": int(steps),
            "sequence_steps": int(server.get("mask_seconds_count", 0.0)),
            "forward_s": forward,
            "mask_s": mask,
            "other_s": max(wall - forward - mask, 0.0) if steps else None,
            "forward_ms_per_step": 1e3 * forward / steps if steps else None,
            "mask_ms_per_step": 1e3 * mask / steps if steps else None,
            "other_ms_per_step": 1e3 * max(wall - forward - mask, 0.0) / steps
            if steps else None,
            "mean_batch": server.get("mask_seconds_count", 0.0) / steps if steps else None,
            "completion_tokens": int(server.get("completion_tokens_total", 0.0)),
        },
        "cpu_share": {"server": share("server"), "bench": share("bench"),
                      "others": share("others")},
    }


def ratios(levels: Sequence[dict]) -> dict[str, Any]:
    """Constrained/unconstrained throughput per concurrency, and per mode the throughput at
    the highest concurrency over the lowest (``levels``: dicts with mode, concurrency,
    summary).

    Beside the throughput ratio, the same ratio of the server's forward seconds per output
    token (``forward_scaling``): what the model's batched forward pass alone gains at the
    batch the level reached. Throughput cannot scale much beyond it, however the server
    schedules, so it tells a scaling target the hardware cannot reach from one the
    server misses."""
    tps = {(lv["mode"], lv["concurrency"]): lv["summary"]["tokens_per_s"] for lv in levels}
    forward = {(lv["mode"], lv["concurrency"]): _forward_per_token(lv["summary"])
               for lv in levels}
    concurrencies = sorted({c for _, c in tps})

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or not b else a / b

    out: dict[str, Any] = {
        "constrained_vs_unconstrained": {
            str(c): ratio(tps.get((CONSTRAINED, c)), tps.get((UNCONSTRAINED, c)))
            for c in concurrencies},
        "scaling": {},
    }
    if len(concurrencies) > 1:
        lo, hi = concurrencies[0], concurrencies[-1]
        out["scaling"] = {"from": lo, "to": hi, **{
            mode: ratio(tps.get((mode, hi)), tps.get((mode, lo))) for mode in MODES}}
        out["forward_scaling"] = {
            mode: ratio(forward.get((mode, lo)), forward.get((mode, hi))) for mode in MODES}
    return out


def _forward_per_token(summary: dict[str, Any]) -> float | None:
    """The server's forward seconds per output token in one level (None without counters)."""
    server = summary.get("server") or {}
    tokens = server.get("completion_tokens")
    return server["forward_s"] / tokens if tokens and server.get("forward_s") else None


def targets(levels: Sequence[dict], r: dict[str, Any]) -> list[tuple[str, bool | None]]:
    """(description, met?) for each target; None when there is nothing to judge."""
    out: list[tuple[str, bool | None]] = []
    con = [lv["summary"] for lv in levels if lv["mode"] == CONSTRAINED]
    out.append(("every constrained response that finished with stop validates",
                None if not con else sum(s["stop_invalid"] for s in con) == 0))
    out.append(("every request answered (no errors, no 400s)",
                None if not levels else all(lv["summary"]["answered"] ==
                                            lv["summary"]["requests"] for lv in levels)))
    for c, x in r["constrained_vs_unconstrained"].items():
        out.append((f"c{c}: constrained/unconstrained throughput >= {MIN_THROUGHPUT_RATIO:g}",
                    None if x is None else x >= MIN_THROUGHPUT_RATIO))
    scaling = r["scaling"]
    for mode in MODES if scaling else ():
        x = scaling[mode]
        out.append((f"{mode}: throughput c{scaling['to']}/c{scaling['from']} >= {MIN_SCALING:g}",
                    None if x is None else x >= MIN_SCALING))
    return out


# ----------------------------------------------------------------------------- report


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def format_table(levels: Sequence[dict]) -> str:
    """One line per (mode, concurrency): requests, throughput, latency, validity, steps."""
    cols = ["mode", "conc", "reqs", "ok", "out tok", "tok/req", "cached", "wall s", "tok/s",
            "TTFT p50", "p99",
            "TPOT p50", "p99", "stop", "length", "valid", "stop!valid", "steps", "batch",
            "fwd/step", "mask/step", "other/step", "others cpu"]
    rows = []
    for lv in levels:
        s, srv = lv["summary"], lv["summary"]["server"]
        fin = s["finish_reasons"]
        rows.append([
            lv["mode"], lv["concurrency"], s["requests"], s["answered"], s["output_tokens"],
            _num(s["mean_output_tokens"]),
            _pct(s["cached_tokens"] / s["prompt_tokens"] if s["prompt_tokens"] else None),
            _num(s["wall_s"]), _num(s["tokens_per_s"]),
            _num(s["ttft_ms"]["p50"], 0), _num(s["ttft_ms"]["p99"], 0),
            _num(s["tpot_ms"]["p50"]), _num(s["tpot_ms"]["p99"]),
            fin.get("stop", 0), fin.get("length", 0),
            f"{s['valid']}/{s['checked']}", s["stop_invalid"] if lv["mode"] == CONSTRAINED
            else "-", srv["steps"], _num(srv["mean_batch"]),
            _num(srv["forward_ms_per_step"]), _num(srv["mask_ms_per_step"], 2),
            _num(srv["other_ms_per_step"]), _pct(s.get("cpu_share", {}).get("others")),
        ])
    return text_table(cols, rows, left=1)


def ratio_lines(r: dict[str, Any]) -> list[str]:
    """The report's lines for :func:`ratios`' result."""
    lines = [f"  c{c}: constrained/unconstrained throughput {_num(x, 3)}"
             for c, x in r["constrained_vs_unconstrained"].items()]
    if r["scaling"]:
        s = r["scaling"]
        lines.append(f"  throughput c{s['to']}/c{s['from']}: constrained "
                     f"{_num(s[CONSTRAINED], 2)}x, unconstrained {_num(s[UNCONSTRAINED], 2)}x")
        f = r.get("forward_scaling", {})
        if any(f.get(mode) is not None for mode in MODES):
            lines.append(f"  forward pass alone (its seconds per output token, c{s['from']} "
                         f"over c{s['to']}): constrained {_num(f.get(CONSTRAINED), 2)}x, "
                         f"unconstrained {_num(f.get(UNCONSTRAINED), 2)}x: the model's "
                         "own gain at the batch reached, which bounds the throughput's")
    return lines


def format_report(result: dict[str, Any]) -> str:
    """The printed report: header, the level table, ratios, targets, notes."""
    p = result["params"]
    lines = [f"bench serve: {len(result['schemas'])} schemas ({len(result['skipped'])} "
             f"skipped), model {result['model']}, max {p['max_tokens']} tokens, greedy, "
             f"{p['requests']} requests per mode and concurrency (at least {p.get('waves', 0)} "
             f"x concurrency per block) in {p['rounds']} ABBA rounds, "
             f"lengths {p['lengths']}" + (" (unconstrained max_tokens = the constrained "
                                         "answer's tokens)" if p["lengths"] == "matched"
                                         else ""),
             format_table(result["levels"]),
             "(cached: the share of prompt tokens the server's prefix cache held; "
             "TTFT, TPOT and */step in ms; valid: validates under the schema / checked; "
             "stop!valid: finished with stop and does not validate; batch: sequences per "
             "batched step; fwd/mask/other per step: the server's forward and mask seconds, "
             "and the rest of the wall time (sampling, matchers, HTTP, idle), over its steps; "
             "others cpu: the share of the machine's CPU time other processes used meanwhile)"]
    noisy = [f"{lv['mode']} c{lv['concurrency']}" for lv in result["levels"]
             if (lv["summary"].get("cpu_share", {}).get("others") or 0) > NOISY_SHARE]
    if noisy:
        lines.append(f"  warning: other processes used over {NOISY_SHARE:.0%} of the CPUs "
                     f"during {', '.join(noisy)}: those timings are not clean")
    lines += ratio_lines(result["ratios"])
    for text, ok in result["targets"]:
        mark = "n/a" if ok is None else ("met" if ok else "NOT met")
        lines.append(f"  target: {text}: {mark}")
    load = result.get("loadavg")
    lines.append(f"wall {result['wall_s']:.1f} s (timed levels {result['levels_wall_s']:.1f} s); "
                 f"load average {_num(load['start'][0], 2)} at start, "
                 f"{_num(load['end'][0], 2)} at end" if load else
                 f"wall {result['wall_s']:.1f} s")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the run


def run_serve_bench(url: str, model: str, records: Sequence[dict], *, sample: int,
                    seed: int = 0, levels: Sequence[int] = (1, 4, 16), requests: int = 32,
                    rounds: int = 2, waves: int = 0, max_tokens: int = 128,
                    lengths: str = "matched",
                    max_schema_chars: int = MAX_SCHEMA_CHARS, timeout_s: float = 600.0,
                    server_pid: int | None = None, stream: TextIO | None = None,
                    progress: TextIO | None = None) -> dict[str, Any]:
    """Probe and pick the schemas, run every block, summarize; prints the report on
    ``stream`` (stdout) and one line per block on ``progress`` (stderr).

    ``lengths``: ``matched`` (the probes generate whole constrained answers, and
    each unconstrained request is given its schema's answer length as
    ``max_tokens``; see :class:`Workload`) or ``free`` (both modes get
    ``max_tokens``; the probes generate one token).
    """
    if lengths not in LENGTHS:
        raise ServeBenchError(f"lengths is one of {', '.join(LENGTHS)}, not {lengths!r}")
    say = printer(stream if stream is not None else sys.stdout)
    note = printer(progress if progress is not None else sys.stderr)
    t_all = time.perf_counter()
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    levels = sorted(dict.fromkeys(levels))
    clients = [client_for(url, timeout_s) for _ in range(max(levels))]
    validators = Validators()

    compile_before = server_counters(url)
    probed: dict[str, int] = {}
    chosen, skipped = select_schemas(records, sample, seed, server_probe(
        clients[0], model, validators, max_schema_chars,
        max_tokens if lengths == "matched" else 1, probed))
    compile_delta = counter_delta(compile_before, server_counters(url))
    if not chosen:
        raise ServeBenchError(f"no schema was usable among {len(skipped)} tried")
    work = Workload(chosen, {r["id"]: make_messages(r["schema"], max_schema_chars)
                             for r in chosen}, max_tokens,
                    probed if lengths == "matched" else None)
    note(f"bench serve: {len(chosen)} schemas kept, {len(skipped)} skipped")
    for c in levels:
        per = math.ceil(level_requests(c, requests, rounds, waves) / rounds)
        if per < c:
            note(f"bench serve: note: blocks of {per} requests hold at most {per} in flight "
                 f"at concurrency {c} (--requests >= {c * rounds} fills it)")

    blocks: list[Block] = []
    samples: list[Sample] = []
    t_levels = time.perf_counter()
    for c, rnd, mode, idx in block_plan(levels, requests, rounds, waves):
        block, got = run_block(clients, model, work, mode, c, rnd, idx, url, server_pid)
        blocks.append(block)
        samples.extend(got)
        note(f"bench serve: c{c} round {rnd + 1} {mode}: {len(got)} requests, "
             f"{sum(s.tokens for s in got)} tokens in {block.wall_s:.1f} s")
    levels_wall = time.perf_counter() - t_levels

    by_id = {r["id"]: r for r in chosen}
    for s in samples:  # after the timed blocks: the checks never compete with the server
        if s.status == "ok":
            s.valid, s.validation = validators.check(by_id[s.schema_id], s.text)

    level_rows = []
    for c in levels:
        for mode in MODES:
            mine = [s for s in samples if s.mode == mode and s.concurrency == c]
            bl = [b for b in blocks if b.mode == mode and b.concurrency == c]
            level_rows.append({"mode": mode, "concurrency": c,
                               "summary": summarize_level(mine, bl)})
    r = ratios(level_rows)
    result: dict[str, Any] = {
        "command": "bench serve",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "url": url,
        "model": model,
        "params": {"sample": sample, "seed": seed, "levels": levels, "requests": requests,
                   "rounds": rounds, "waves": waves, "max_tokens": max_tokens, "lengths": lengths,
                   "temperature": 0, "max_schema_chars": max_schema_chars,
                   "prompt_template": PROMPT_TEMPLATE},
        "probe_tokens": probed if lengths == "matched" else None,
        "schemas": [r["id"] for r in chosen],
        "skipped": skipped,
        "compile": {"count": int(compile_delta.get("compile_seconds_count", 0)),
                    "seconds": compile_delta.get("compile_seconds_sum", 0.0)},
        "levels": level_rows,
        "ratios": r,
        "targets": targets(level_rows, r),
        "blocks": [asdict(b) for b in blocks],
        "samples": [s.as_dict() for s in samples],
        "levels_wall_s": levels_wall,
        "wall_s": time.perf_counter() - t_all,
        "loadavg": {"start": load_start, "end": os.getloadavg()} if load_start else None,
    }
    say(format_report(result))
    return result


def parse_levels(text: str) -> list[int]:
    """``1,4,16`` -> [1, 4, 16]; each at least 1."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ServeBenchError(f"--concurrency takes integers like 1,4,16: {text!r}") from None
    if not levels or min(levels) < 1:
        raise ServeBenchError(f"--concurrency takes integers >= 1: {text!r}")
    return levels


@contextmanager
def server_at(url: str | None, serve_args: Sequence[str],
              ready_timeout: float) -> Iterator[tuple[str, str, int | None]]:
    """(url, model id, the server's pid if we started it): ``url`` as given (its model
    read from /v1/models), else a :class:`ServerProcess` for the ``with`` block."""
    if url:
        client = client_for(url, 30.0)
        try:
            models = [m.id for m in client.models.list()]
        except Exception as e:  # openai.APIError, a refused connection
            raise ServeBenchError(f"no server at {url}: {_one_line(e)}") from e
        if not models:
            raise ServeBenchError(f"{url}/models lists no model")
        yield url, models[0], None
        return
    with ServerProcess(serve_args, ready_timeout=ready_timeout) as proc:
        assert proc.proc is not None
        yield proc.url, proc.model, proc.proc.pid


def run_command(*, url: str | None, data: str | None, sample: int, seed: int,
                levels: Sequence[int], requests: int, rounds: int, max_tokens: int,
                waves: int = 0,
                lengths: str = "matched", max_schema_chars: int = MAX_SCHEMA_CHARS,
                model: str | None, max_sequences: int | None, prefix_cache: bool = True,
                ready_timeout: float = 300.0,
                timeout_s: float = 600.0, stream: TextIO | None = None,
                progress: TextIO | None = None) -> dict[str, Any]:
    """``automask bench serve`` after argparse: records, server (ours or ``url``), run."""
    from automask.bench.maskbench import load_records

    data = data or DEFAULT_DATA
    records = load_records(data)
    if not records:
        raise ServeBenchError(f"{data}: no records")
    serve_args: list[str] = []
    if model:
        serve_args += ["--model", model]
    slots = max_sequences if max_sequences is not None else max(16, max(levels))
    serve_args += ["--max-sequences", str(slots)]
    if not prefix_cache:
        serve_args.append("--no-prefix-cache")
    note = printer(progress if progress is not None else sys.stderr)
    if not url:
        note("bench serve: starting automask serve ...")
    with server_at(url, serve_args, ready_timeout) as (where, model_id, pid):
        note(f"bench serve: server at {where} (model {model_id})")
        result = run_serve_bench(where, model_id, records, sample=sample, seed=seed,
                                 levels=levels, requests=requests, rounds=rounds,
                                 waves=waves,
                                 max_tokens=max_tokens, lengths=lengths,
                                 max_schema_chars=max_schema_chars, timeout_s=timeout_s,
                                 server_pid=pid, stream=stream,
                                 progress=progress)
    result.update({"data": data, "server_started": pid is not None,
                   "serve_args": serve_args if pid is not None else None})
    return result


def failed_targets(result: dict[str, Any]) -> list[str]:
    """The targets not met (for ``--check``)."""
    return [text for text, ok in result["targets"] if ok is False]
