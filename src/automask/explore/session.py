"""The explorer's state machine: one output under one constraint, stepped, steered, rolled back.

Why it knows nothing of HTTP: the page is a thin view of the JSON API, and
the API a thin layer over this class, so what the page shows can be tested
(and scripted) without a server or a browser.

The model: an :class:`Explorer` holds a compiled constraint, a prompt, the
output so far as a list of :class:`StepView` (one per token: the model's
distribution at that step, what the mask kept, the token taken and how), a
:class:`~automask.engine.matcher.Matcher` that has accepted every token of
the output that is in the language, and the *pending* step (the distribution
for the next token, measured before anything is chosen).

* **step**: pick the next token (greedy or sampled from the masked
  distribution, or from the raw one when the mask is off), then, with the mask
  on and fast-forward on, the tokens the grammar forces after it, fed in the
  same forward pass and marked ``forced`` (as ``automask generate`` does).
  Steering is a step with the token given (:meth:`Explorer.pick`).
* **mask off**: the token comes from the raw distribution. If the grammar
  refuses it, the output has left the language at that step (``left_at``),
  to the byte; the matcher stays where the output was last in the language,
  and every later step shows every token as masked (no continuation of a
  string outside the language is back inside it).
* **rollback** to step ``k`` keeps steps ``0..k-1`` and makes step ``k``
  pending again; **undo** rolls back the last action (a chosen token and the
  forced tokens after it). Compiling is action 0, whose forced prefix undo
  does not remove.
* **end**: EOS taken, only EOS left (the output is complete and cannot grow:
  no forward pass is spent on it), the token limit, the model's context, or
  no legal continuation.

Numbers (``Z``, ``1 - Z``, ``KL = -log Z``) are under the model's raw
distribution at temperature 1 (see :mod:`automask.explore.measure`); a forced
step is measured the way ``automask generate --trace`` measures it, as a step
whose only legal token is the forced one, so its KL is ``-log p(token)``.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from numbers import Integral, Real
from types import SimpleNamespace
from typing import Any

import numpy as np

from automask.bitmask import allocate_bitmask
from automask.engine.matcher import Matcher, parse_state
from automask.errors import AutomaskError, LimitExceeded, NoLegalContinuation
from automask.explore.constraint import CompileProblem, Constraint, compile_constraint
from automask.explore.cursor import ModelCursor
from automask.explore.expect import expectation, refused_at, why_masked
from automask.explore.measure import Measure, log_softmax, measure, top_ids
from automask.explore.text import visible
from automask.generation.command import DEFAULT_MAX_TOKENS, DEFAULT_REPETITION_PENALTY
from automask.generation.loop import _penalizable
from automask.generation.prepare import prompt_ids
from automask.generation.session import forced_after, only_eos_left
from automask.sampling import Sampler, SamplingParams

#: the most steps one run call takes (the page calls run again until the end)
MAX_RUN_STEPS = 64
#: the most tokens an output may have (a page of chips, and memory per step, stay small)
MAX_TOKENS_LIMIT = 2048
#: the prompt until one is given (a compile without a prompt keeps the last one)
DEFAULT_PROMPT = "Answer in the required format."
NOT_TRUTH = ("Valid is not true: the mask guarantees that the output parses and fits the "
             "constraint, not that what it says is right. A schema-valid person can have the "
             "wrong age, and a well-formed email address can belong to nobody.")

# How a step ended the output (Explorer.finished)
END_EOS = "eos"  # EOS was taken
END_COMPLETE = "complete"  # accepting, and nothing but EOS is legal: the output cannot grow
END_LENGTH = "length"  # the token limit
END_CONTEXT = "context"  # the model's context is full
END_NO_CONTINUATION = "no_continuation"  # not accepting, and no token is legal


class ExploreError(AutomaskError):
    """A request the explorer refuses, with the HTTP status that says whose fault it is:
    400 malformed, 404 no such step, 409 not possible in the current state (a masked
    token with the mask on, nothing to undo, the output has ended)."""

    def __init__(self, status: int, code: str, message: str,
                 details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}


@dataclass(frozen=True)
class Settings:
    """How the next tokens are chosen. The defaults are ``automask generate``'s: greedy,
    with its repetition penalty on content tokens (small models loop without it)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    mask: bool = True
    fast_forward: bool = True
    max_tokens: int = DEFAULT_MAX_TOKENS
    repetition_penalty: float = DEFAULT_REPETITION_PENALTY

    def sampling(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_p=self.top_p,
                              repetition_penalty=self.repetition_penalty)

    def updated(self, changes: Any) -> Settings:
        """These settings with ``changes`` (a JSON object) applied; 400 on anything wrong."""
        if not isinstance(changes, dict):
            raise ExploreError(400, "bad_settings", "settings are a JSON object")
        unknown = sorted(set(changes) - set(asdict(self)))
        if unknown:
            raise ExploreError(400, "bad_settings", f"unknown setting(s) {', '.join(unknown)}; "
                               f"known: {', '.join(asdict(self))}")
        out = replace(self, **changes)
        for name in ("mask", "fast_forward"):
            if not isinstance(getattr(out, name), bool):
                raise ExploreError(400, "bad_settings", f"{name} must be true or false")
        seed, limit = out.seed, out.max_tokens
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral)
                                 or not 0 <= seed < 2**63):
            raise ExploreError(400, "bad_settings", "seed must be a whole number >= 0, or null")
        if isinstance(limit, bool) or not isinstance(limit, Integral) or \
                not 1 <= limit <= MAX_TOKENS_LIMIT:
            raise ExploreError(400, "bad_settings",
                               f"max_tokens must be a whole number from 1 to {MAX_TOKENS_LIMIT}")
        for name in ("temperature", "top_p", "repetition_penalty"):
            value = getattr(out, name)
            if isinstance(value, bool) or not isinstance(value, Real):
                raise ExploreError(400, "bad_settings", f"{name} must be a number")
        try:
            out.sampling()
        except ValueError as e:
            raise ExploreError(400, "bad_settings", str(e)) from None
        return out


@dataclass
class StepView:
    """One step of the output: its distribution, what the mask kept, and the token taken.

    Built when the step becomes pending (``token`` None) and completed by
    :meth:`take`; the raw log-probabilities are kept only while it is pending.
    """

    index: int
    measure: Measure
    rows: list[dict[str, Any]]
    expects: dict[str, Any]
    inside: bool  # the output was in the language before this step
    forced: bool = False
    token: int | None = None
    chosen_by: str = ""  # greedy | sample | pick | forced
    legal: bool | None = None  # the grammar allowed the token taken
    mask: bool = True  # the mask was on when it was taken
    action: int = 0
    text: str = ""
    shown: str = ""  # the text made visible
    eos: bool = False
    why: str | None = None  # why the grammar refuses the token taken (when it does)
    break_byte: int | None = None  # where in the token the output left the language
    split: tuple[str, str] | None = None  # the token's text before and from that byte
    logp: np.ndarray | None = field(default=None, repr=False)
    legal_ids: np.ndarray | None = field(default=None, repr=False)
    guess: bool | None = None  # the prediction made before the mask was revealed

    def summary(self) -> dict[str, Any]:
        m = self.measure
        return {"index": self.index, "token": self.token, "text": self.text,
                "visible": self.shown, "forced": self.forced, "chosen_by": self.chosen_by,
                "legal": self.legal, "mask": self.mask, "eos": self.eos,
                "action": self.action, "legal_count": m.legal_count,
                "legal_mass": m.as_dict()["legal_mass"], "kl": m.as_dict()["kl"],
                "rejection_mass": m.as_dict()["rejection_mass"],
                "argmax": m.argmax_verdict, "break_byte": self.break_byte,
                "split": list(self.split) if self.split is not None else None}

    def detail(self) -> dict[str, Any]:
        rows = [{**r, "chosen": r["id"] == self.token} for r in self.rows]
        legal_rows = sorted((r for r in rows if r["legal"]), key=lambda r: -r["renorm"])
        return {**self.summary(), "pending": self.token is None, "measure": self.measure.as_dict(),
                "rows": rows, "renormalized": legal_rows[:10], "expects": self.expects,
                "inside": self.inside, "why": self.why, "guess": self.guess}


class Explorer:
    """One explored output: a constraint, a prompt, the steps so far and the pending one.

    ``runner`` is a :class:`~automask.generation.runners.BatchRunner` (one
    slot is used), ``tokenizer`` what renders and encodes the prompt (a
    transformers tokenizer, a :class:`~automask.generation.gguf_chat.GGUFTokenizer`
    or an automask Vocabulary) and ``vocab`` the automask Vocabulary of the
    model. Every public method holds the explorer's lock, so an HTTP server may
    call it from worker threads; :meth:`stop` does not, so it can interrupt
    :meth:`run`.
    """

    def __init__(self, runner: Any, tokenizer: Any, vocab: Any, *, model_name: str = ""):
        self.cursor = ModelCursor(runner)
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.model_name = model_name or str(getattr(runner, "name", "model"))
        self.eos = frozenset(int(t) for t in vocab.eos_token_ids) | \
            frozenset(int(t) for t in getattr(runner, "eos_token_ids", ()))
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self.running = False
        self.settings = Settings()
        self.constraint: Constraint | None = None
        self.compiled: Any = None
        self.schema: Any = None
        self.prompt = DEFAULT_PROMPT
        self.prompt_ids: list[int] = []
        self.matcher: Matcher | None = None
        self.steps: list[StepView] = []
        self.left_at: int | None = None
        self.finished: str | None = None
        self.problem: str | None = None
        self._pending: StepView | None = None
        self._actions = 0
        self.predictions = {"asked": 0, "correct": 0}
        #: counts changes, so a view can tell an answer from an older one
        self.version = 0

    # ------------------------------------------------------------------ actions
    def compile(self, kind: Any, text: Any, prompt: Any = None,
                whitespace: Any = "compact") -> dict[str, Any]:
        """Compile a constraint and start a new output (the old one stays if it fails)."""
        for name, value in (("kind", kind), ("text", text), ("whitespace", whitespace)):
            if not isinstance(value, str):
                raise ExploreError(400, "bad_request", f"{name} must be a string")
        if prompt is not None and not isinstance(prompt, str):
            raise ExploreError(400, "bad_request", "prompt must be a string")
        constraint = Constraint(kind, text, whitespace)
        with self.lock:
            prompt = self.prompt if prompt is None else prompt
            ids = self._prompt_ids(prompt)
            try:
                compiled, schema = compile_constraint(constraint, self.vocab)
            except CompileProblem as e:
                raise ExploreError(400, "compile_error", str(e),
                                   {"compile": e.as_dict()}) from None
            self.constraint, self.compiled, self.schema = constraint, compiled, schema
            self.prompt, self.prompt_ids = prompt, ids
            self.matcher = Matcher(compiled)
            self._restart()
            self.version += 1
            return self.state()

    def step(self, token: Any = None) -> dict[str, Any]:
        """Take one step (``token``: steer to it; None: let the settings choose)."""
        with self.lock:
            self._step(token)
            self.version += 1
            return self.state()

    def pick(self, token: Any) -> dict[str, Any]:
        """Steer: take ``token`` as the next step (it must be legal while the mask is on)."""
        if token is None:
            raise ExploreError(400, "bad_request", "give the token_id to pick")
        return self.step(token)

    def run(self, max_steps: Any = 16, seconds: float = 10.0) -> dict[str, Any]:
        """Take up to ``max_steps`` steps (at most :data:`MAX_RUN_STEPS`), until the output
        ends, :meth:`stop` is called or ``seconds`` pass; the page calls it again until
        the end, re-drawing in between."""
        if isinstance(max_steps, bool) or not isinstance(max_steps, Integral) or \
                not 1 <= max_steps <= MAX_RUN_STEPS:  # type: ignore[operator]  # Integral declares no comparisons
            raise ExploreError(400, "bad_request",
                               f"max_steps must be a whole number from 1 to {MAX_RUN_STEPS}")
        self._stop.clear()
        with self.lock:
            self._require_output()
            deadline = time.monotonic() + seconds
            self.running = True
            taken = 0
            try:
                while (self.finished is None
                       and taken < max_steps  # type: ignore[operator]  # (as above)
                       and not self._stop.is_set() and time.monotonic() < deadline):
                    self._step(None)
                    taken += 1
            finally:
                self.running = False
                self.version += 1
            state = self.state()
            state["run"] = {"taken": taken, "stopped": self._stop.is_set()}
            return state

    def stop(self) -> None:
        """Ask a running :meth:`run` to stop after its current step (no lock needed)."""
        self._stop.set()

    def rollback(self, step: Any) -> dict[str, Any]:
        """Keep steps ``0..step-1``: step ``step`` is pending again."""
        with self.lock:
            self._require_output()
            self._rollback(self._step_index(step, allow_pending=True))
            self.version += 1
            return self.state()

    def undo(self) -> dict[str, Any]:
        """Roll back the last action: a chosen token and the forced tokens after it."""
        with self.lock:
            self._require_output()
            if not self.steps or self.steps[-1].action == 0:
                raise ExploreError(409, "nothing_to_undo",
                                   "nothing to undo: no token has been chosen yet"
                                   + (" (the forced prefix is where the grammar starts)"
                                      if self.steps else ""))
            last = self.steps[-1].action
            self._rollback(min(s.index for s in self.steps if s.action == last))
            self.version += 1
            return self.state()

    def update_settings(self, changes: Any) -> dict[str, Any]:
        with self.lock:
            self.settings = self.settings.updated(changes)
            if self.finished in (END_LENGTH, END_CONTEXT):
                self.finished = None  # a larger limit lets it go on; _check_end decides
            self._check_end()
            self.version += 1
            return self.state()

    def predict(self, survives: Any) -> dict[str, Any]:
        """The prediction check: does the raw top token survive the mask? Scored against
        the pending step (the page hides the mask until the guess is in)."""
        if not isinstance(survives, bool):
            raise ExploreError(400, "bad_request", "survives must be true or false")
        with self.lock:
            view = self._current()
            if view is None:
                raise ExploreError(409, "finished", "the output has ended: nothing to predict")
            actual = view.measure.raw_argmax_legal
            if view.guess is None:
                self.predictions["asked"] += 1
                self.predictions["correct"] += int(survives == actual)
            view.guess = survives
            return {"correct": survives == actual, "survives": actual,
                    "argmax": view.measure.argmax_verdict, "tally": dict(self.predictions)}

    def step_detail(self, step: Any) -> dict[str, Any]:
        """Everything about one step (a taken one, or the pending one at index len(steps))."""
        with self.lock:
            self._require_output()
            index = self._step_index(step, allow_pending=True)
            if index < len(self.steps):
                return self.steps[index].detail()
            view = self._current()
            if view is None:
                raise ExploreError(404, "unknown_step", f"the output has ended after "
                                   f"{len(self.steps)} steps: there is no step {index}")
            return view.detail()

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """Everything the page draws, as JSON-ready data."""
        with self.lock:
            current = self._current() if self.constraint is not None else None
            data = b"".join(self.vocab.token_bytes(s.token) for s in self.steps
                            if s.token is not None and not s.eos)
            return {
                "version": self.version,
                "model": {"name": self.model_name, "width": self.cursor.width,
                          "max_context": self.cursor.max_context},
                "constraint": self.constraint.as_dict() if self.constraint else None,
                "prompt": self.prompt, "prompt_tokens": len(self.prompt_ids),
                "settings": asdict(self.settings),
                "steps": [s.summary() for s in self.steps],
                "output": {"text": data.decode("utf-8", errors="replace"),
                           "visible": visible(data), "bytes": len(data),
                           "valid_bytes": self._valid_bytes()},
                "current": current.detail() if current is not None else None,
                "finished": self.finished, "left_at": self.left_at, "problem": self.problem,
                "status": self._status(), "verdict": self._verdict(),
                "predictions": dict(self.predictions), "running": self.running,
            }

    # ------------------------------------------------------------------ internals
    def _prompt_ids(self, prompt: str) -> list[int]:
        try:
            ids = prompt_ids(self.tokenizer, prompt)
        except (AutomaskError, ValueError) as e:
            raise ExploreError(400, "bad_prompt", f"the prompt cannot be encoded: {e}") from None
        if not ids:
            raise ExploreError(400, "bad_prompt", "the prompt is empty: write one")
        room = self.cursor.max_context - 1
        if len(ids) > room:
            raise ExploreError(400, "bad_prompt", f"the prompt is {len(ids)} tokens; the model "
                               f"takes at most {room} here")
        return ids

    def _require_output(self) -> None:
        if self.constraint is None:
            raise ExploreError(409, "no_constraint", "compile a constraint first")

    def _restart(self) -> None:
        """A fresh output: no steps; the grammar's forced prefix taken as action 0."""
        self.steps, self.left_at, self.finished, self.problem = [], None, None, None
        self._pending, self._actions = None, 0
        if self.settings.mask and self.settings.fast_forward:
            forced = forced_after(self.matcher, self._budget())
            if forced:
                first = self.cursor.logits(self.prompt_ids)  # the row before forced[0]
                rows = self.cursor.extend(self.prompt_ids, forced)
                self._add_forced(forced, [first, *rows[:-1]])
        self._check_end()

    def _budget(self) -> int:
        """Tokens the output may still take: the token limit and the model's context."""
        room = self.cursor.max_context - len(self.prompt_ids) - len(self._tokens()) - 1
        return max(0, min(self.settings.max_tokens - len(self._tokens()), room))

    def _tokens(self) -> list[int]:
        """The output's token ids (EOS, which ends it, is not fed to the model)."""
        return [s.token for s in self.steps if s.token is not None and not s.eos]

    def _step_index(self, step: Any, *, allow_pending: bool) -> int:
        if isinstance(step, bool) or not isinstance(step, Integral):
            raise ExploreError(400, "bad_request", "step must be a whole number")
        last = len(self.steps) if allow_pending else len(self.steps) - 1
        if not 0 <= step <= last:  # type: ignore[operator]  # Integral declares no comparisons
            raise ExploreError(404, "unknown_step", f"no step {step}: the output has steps "
                               f"0 to {last}" if last >= 0 else f"no step {step}: the output "
                               "has no steps yet")
        return int(step)

    def _current(self) -> StepView | None:
        """The pending step, measured (None once the output has ended, except where no
        legal continuation exists: the page still shows that step's distribution)."""
        if self.constraint is None or (self.finished is not None
                                       and self.finished != END_NO_CONTINUATION):
            return None
        if self._pending is None:
            self._pending = self._measure_pending()
        return self._pending

    def _measure_pending(self) -> StepView:
        logits = self.cursor.logits(self.prompt_ids + self._tokens())
        logp = log_softmax(logits)
        width = logp.size
        inside = self.left_at is None
        expects: dict[str, Any]
        legal = np.zeros(width, dtype=bool)
        assert self.matcher is not None
        if inside:
            try:
                words = self.matcher.mask_words()
                bits = np.unpackbits(words.view(np.uint8), bitorder="little")
                n = min(width, bits.size, self.vocab.size)
                legal[:n] = bits[:n].astype(bool)
            except NoLegalContinuation as e:
                self.finished, self.problem = END_NO_CONTINUATION, str(e)
            expects = expectation(self.matcher).as_dict()
        else:
            expects = {"literals": [], "classes": [], "accepting": False,
                       "summary": f"nothing: the output left the language at step "
                                  f"{self.left_at}, and no continuation brings it back"}
        m = measure(logp, legal)
        rows = self._rows(logp, legal, m, inside=inside)
        return StepView(index=len(self.steps), measure=m, rows=rows, expects=expects,
                        inside=inside, logp=logp, legal_ids=legal)

    def _rows(self, logp: np.ndarray, legal: np.ndarray, m: Measure, *, inside: bool,
              extra: tuple[int, ...] = (), why_all: str | None = None) -> list[dict[str, Any]]:
        """The token table: top raw tokens and top legal ones, each allowed or masked (and
        why), with raw and renormalized probabilities."""
        rows = []
        z = m.legal_mass
        for t in top_ids(logp, legal, extra):
            data = self.vocab.token_bytes(t) if t < self.vocab.size else b""
            ok = bool(legal[t])
            p = math.exp(logp[t]) if math.isfinite(logp[t]) else 0.0
            why = None
            if not ok:
                if why_all is not None:
                    why = why_all
                elif not inside:
                    why = f"the output left the language at step {self.left_at}"
                elif self.matcher is not None:
                    why = why_masked(self.matcher, t) if t < self.vocab.size else \
                        "outside the tokenizer's vocabulary (padding of the model's logits)"
            rows.append({"id": t, "text": data.decode("utf-8", errors="replace"),
                         "visible": visible(data) if data or t not in self.eos else "⟨eos⟩",
                         "eos": t in self.eos,
                         "logit": float(logp[t] - logp[m.raw_argmax]), "logprob":
                         float(logp[t]) if math.isfinite(logp[t]) else None, "prob": p,
                         "legal": ok, "renorm": (p / z) if ok and z > 0 else 0.0, "why": why})
        return rows

    def _step(self, token: Any) -> None:
        self._require_output()
        view = self._current()
        if self.finished is not None or view is None:
            raise ExploreError(409, "finished", f"the output has ended ({self._status()['text']}):"
                               " undo or roll back to go on")
        mask_on = self.settings.mask
        if mask_on and not view.inside:
            raise ExploreError(409, "outside", f"the output left the language at step "
                               f"{self.left_at}: with the mask on nothing is legal; turn the "
                               "mask off to go on outside it, or undo")
        assert view.logp is not None and view.legal_ids is not None and self.matcher is not None
        width = view.logp.size
        if token is not None:
            if isinstance(token, bool) or not isinstance(token, Integral) or \
                    not 0 <= token < width:  # type: ignore[operator]  # Integral declares no comparisons
                raise ExploreError(400, "bad_token", f"token_id must be a whole number from 0 "
                                   f"to {width - 1}")
            token = int(token)
            if mask_on and not view.legal_ids[token]:
                raise ExploreError(409, "masked_token", f"token {token} "
                                   f"({self._shown(token)}) is masked here: "
                                   f"{why_masked(self.matcher, token)}",
                                   {"token_id": token})
            chosen_by = "pick"
        else:
            token, chosen_by = self._choose(view, mask_on), \
                "greedy" if self.settings.sampling().is_greedy else "sample"
        self._take(view, token, chosen_by, mask_on)

    def _choose(self, view: StepView, mask_on: bool) -> int:
        """The settings' choice: greedy or sampled, from the masked or the raw distribution."""
        assert view.logp is not None and self.matcher is not None
        bitmask = None
        if mask_on:
            bitmask = allocate_bitmask(1, view.logp.size)
            self.matcher.fill_bitmask(bitmask)
        seed = self.settings.seed
        if seed is not None:  # the same seed gives the same token at the same position
            seed = (seed * 1_000_003 + view.index) % 2**63
        penalized = [s.token for s in self.steps if s.token is not None and not s.forced
                     and not s.eos and _penalizable(self.vocab.token_bytes(s.token))]
        (token,), _ = Sampler(self.settings.sampling(), seed=seed).step(
            view.logp[None], bitmask, [penalized], with_stats=False)
        return int(token)

    def _take(self, view: StepView, token: int, chosen_by: str, mask_on: bool) -> None:
        """Append the chosen token, then (mask and fast-forward on) the forced ones."""
        assert view.logp is not None and view.legal_ids is not None and self.matcher is not None
        self._actions += 1
        legal = bool(view.legal_ids[token]) if view.inside else False
        if all(r["id"] != token for r in view.rows):  # a token far down the distribution
            view.rows = self._rows(view.logp, view.legal_ids, view.measure, inside=view.inside,
                                   extra=(token,))
        data = self.vocab.token_bytes(token) if token < self.vocab.size else b""
        view.token, view.chosen_by, view.legal, view.mask = token, chosen_by, legal, mask_on
        view.action, view.eos = self._actions, token in self.eos
        view.text = data.decode("utf-8", errors="replace")
        view.shown = self._shown(token)
        view.logp = view.legal_ids = None
        if view.inside and not legal:
            view.why = why_masked(self.matcher, token)
            self.left_at = view.index
            try:  # every byte fitting (a dead end): it leaves after the whole token
                refused = refused_at(self.compiled, parse_state(self.matcher), data)
            except LimitExceeded:
                refused = 0
            k = view.break_byte = 0 if view.eos else len(data) if refused is None else refused
            view.split = (visible(data[:k]), visible(data[k:]) if data[k:] else view.shown
                          if view.eos else "")
        elif legal:
            self.matcher.accept_token(token)
        base = self.prompt_ids + self._tokens()
        self.steps.append(view)
        self._pending = None
        if view.eos:
            self.finished = END_EOS
            return
        forced: list[int] = []
        if self.left_at is None and mask_on and self.settings.fast_forward:
            forced = forced_after(self.matcher, self._budget())
        if forced:
            rows = self.cursor.extend(base, [token, *forced])
            self._add_forced(forced, list(rows[:-1]))
        self._check_end()

    def _add_forced(self, forced: list[int], before: list[np.ndarray]) -> None:
        """Steps for fast-forwarded tokens; ``before[i]``: the logits before ``forced[i]``."""
        for i, (token, logits) in enumerate(zip(forced, before, strict=True)):
            logp = log_softmax(logits)
            legal = np.zeros(logp.size, dtype=bool)
            legal[token] = True
            m = measure(logp, legal)
            rest = b"".join(self.vocab.token_bytes(t) for t in forced[i:])
            text = f"forced: the grammar fixes the text here (`{visible(rest)}`)"
            rows = self._rows(logp, legal, m, inside=True, extra=(token,),
                              why_all="not the forced token: the grammar fixes the text here, "
                                      "and fast-forward feeds the tokenizer's own encoding of it")
            data = self.vocab.token_bytes(token)
            self.steps.append(StepView(
                index=len(self.steps), measure=m, rows=rows, inside=True, forced=True,
                expects={"literals": [visible(rest)], "classes": [], "accepting": False,
                         "summary": text},
                token=token, chosen_by="forced", legal=True, mask=True, action=self._actions,
                text=data.decode("utf-8", errors="replace"), shown=visible(data)))

    def _check_end(self) -> None:
        """Set ``finished`` when the output cannot or may not grow."""
        if self.finished is not None or self.constraint is None:
            return
        n = len(self._tokens())
        if self.left_at is None and self.matcher is not None and \
                only_eos_left(self.matcher, self.eos):
            self.finished = END_COMPLETE
        elif n >= self.settings.max_tokens:
            self.finished = END_LENGTH
        elif len(self.prompt_ids) + n >= self.cursor.max_context:
            self.finished = END_CONTEXT

    def _rollback(self, k: int) -> None:
        if k >= len(self.steps):
            return
        assert self.matcher is not None
        keep = k if self.left_at is None else min(k, self.left_at)
        self.matcher.rollback(self.matcher.num_accepted - keep)
        if self.left_at is not None and self.left_at >= k:
            self.left_at = None
        del self.steps[k:]
        self.finished, self.problem, self._pending = None, None, None
        self._check_end()

    def _shown(self, token: int) -> str:
        if token in self.eos:
            return "⟨eos⟩"
        data = self.vocab.token_bytes(token) if token < self.vocab.size else b""
        return visible(data) if data else f"⟨{token}⟩"

    def _valid_bytes(self) -> int:
        """Bytes of the output that are a prefix of the language (all, while inside)."""
        total = 0
        for s in self.steps:
            if s.eos or s.token is None:
                continue
            n = len(self.vocab.token_bytes(s.token))
            if self.left_at is not None and s.index >= self.left_at:
                return total + (s.break_byte or 0) if s.index == self.left_at else total
            total += n
        return total

    def _accepting(self) -> bool:
        return self.left_at is None and self.matcher is not None and \
            self.matcher.is_accepting()

    def _status(self) -> dict[str, str]:
        """The status line: its ``code`` and the words the page shows."""
        if self.constraint is None:
            return {"code": "idle", "text": "no constraint compiled yet"}
        n = len(self._tokens())
        if self.left_at is not None:
            s = self.steps[self.left_at]
            ended = ", and the model then ended it" if self.finished == END_EOS and \
                not s.eos else ""
            return {"code": "outside", "text": f"outside the language: step {self.left_at} "
                    f"({s.shown}) left it{ended}; the valid prefix is "
                    f"{self._valid_bytes()} bytes"}
        if self.finished == END_NO_CONTINUATION:
            return {"code": "no_continuation", "text": f"no legal continuation at step "
                    f"{len(self.steps)}: {self.problem or 'the mask is empty'}"}
        if self.finished in (END_EOS, END_COMPLETE):
            how = "EOS taken" if self.finished == END_EOS else "nothing but EOS could follow"
            return {"code": "accepting", "text": f"accepting: the output is complete ({how}, "
                    f"{n} tokens)"}
        if self.finished in (END_LENGTH, END_CONTEXT):
            limit = "token limit" if self.finished == END_LENGTH else "model's context"
            if self._accepting():
                return {"code": "accepting", "text": f"accepting: complete where the {limit} "
                        f"stopped it ({n} tokens)"}
            return {"code": "prefix", "text": f"valid prefix, cut by the {limit} at {n} "
                    "tokens: not complete"}
        if self._accepting():
            return {"code": "accepting", "text": f"accepting so far ({n} tokens): complete "
                    "here, and it may go on"}
        return {"code": "prefix", "text": f"valid prefix ({n} tokens): not complete yet"}

    def _verdict(self) -> dict[str, Any] | None:
        """At the end: complete or a cut prefix, the jsonschema verdict, and what validity
        does not mean."""
        if self.finished is None or self.constraint is None:
            return None
        complete = self._accepting() and self.finished in (END_EOS, END_COMPLETE, END_LENGTH,
                                                          END_CONTEXT)
        out: dict[str, Any] = {"complete": complete, "inside": self.left_at is None,
                               "finish": self.finished, "schema": None, "note": NOT_TRUTH}
        if self.schema is not None:
            from automask.generation.command import check_schema

            text = b"".join(self.vocab.token_bytes(t) for t in self._tokens())
            ended = self.finished in (END_EOS, END_COMPLETE) or complete
            result = SimpleNamespace(complete=ended, text=text.decode("utf-8", "replace"),
                                     finish_reason=self.finished)
            try:
                valid, message = check_schema(self.schema, result)
            except Exception as e:  # noqa: BLE001 - jsonschema on a schema we compiled
                valid, message = None, f"not checked (jsonschema failed: {e})"
            out["schema"] = {"valid": valid, "message": f"jsonschema: {message}"}
        return out
