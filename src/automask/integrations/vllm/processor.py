"""``AutomaskLogitsProcessor``: automask as a vLLM custom logits processor (needs vLLM).

vLLM has no plugin hook for structured-output backends, but it loads custom
logits processors by class, by ``module:Class`` name, or through the
``vllm.logits_processors`` entry point, which automask declares (name
``automask``): with automask installed beside vLLM every engine loads the
processor, and a request opts in with one ``automask_*`` key in
``SamplingParams.extra_args`` (``vllm_xargs`` over HTTP; see
:mod:`automask.integrations.vllm.args`). Requests without one are not touched.

Per request: :meth:`validate_params` parses the arguments and builds the
grammar in the frontend, so a bad constraint is the request's HTTP 400 with
our error's message. In the engine the grammar is compiled for the model's
vocabulary (a bounded cache shared by requests with the same constraint and
stop tokens), one :class:`~automask.Matcher` per request follows the tokens
vLLM appends to the request's output list, and each step fills the bitmask
rows of the constrained requests in one :func:`~automask.fill_bitmasks` call
and applies them in place; other rows are left as they are.

End of output: the request's stop tokens (``SamplingParams.all_stop_token_ids``:
EOS, the generation config's EOS ids, ``stop_token_ids``) count as EOS for
the grammar: allowed only where the output so far is complete, and once the
grammar has accepted one, only they are allowed.

Both of vLLM 0.32's logits-processor interfaces are implemented by the one
class: the V1 model runner's (``update_state`` with the persistent batch's
``BatchUpdate``; the CPU backend uses it) and Model Runner V2's
(``add_request`` and ``apply(logits, ctx)``, the default on GPUs, which
refuses entry-point processors that lack it). A processor must not raise in
the engine loop: a request whose constraint cannot go on (a token it refuses,
a compile error the frontend could not see, speculative decoding under V2)
is logged and allowed only its stop tokens, so it ends at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import LogitsProcessor as _V1LogitsProcessor

from automask.bitmask import apply_bitmask, bitmask_words
from automask.engine.batch import fill_bitmasks
from automask.engine.compiled import CompiledGrammar
from automask.engine.matcher import Matcher
from automask.errors import AutomaskError
from automask.generation.prepare import vocabulary_for
from automask.integrations.vllm.args import (
    CompiledCache,
    ConstraintError,
    error_message,
    grammar_for,
    spec_from_extra_args,
)
from automask.serve.constraints import ConstraintSpec

try:  # Model Runner V2's interface (vLLM >= 0.32)
    from vllm.v1.worker.gpu.sample.logits_processor.interface import (
        LogitsProcessor as _V2LogitsProcessor,
    )
except ImportError:  # pragma: no cover - older vLLM: the V1 interface only
    _V2LogitsProcessor = None

log = logging.getLogger("automask.vllm")

_BASES: tuple[type, ...] = (_V1LogitsProcessor,) if _V2LogitsProcessor is None else (
    _V1LogitsProcessor, _V2LogitsProcessor)


class _Sequence:
    """One constrained request: its spec, stop tokens, matcher and how far it has read."""

    __slots__ = ("spec", "stops", "output", "matcher", "compiled", "consumed", "failed")

    def __init__(self, spec: ConstraintSpec | None, stops: Sequence[int],
                 output: list[int] | None):
        self.spec = spec
        self.stops = tuple(sorted({int(t) for t in stops}))
        self.output = output  # V1: vLLM's live list of the request's output ids
        self.matcher: Matcher | None = None
        self.compiled: CompiledGrammar | None = None
        self.consumed = 0
        self.failed: str | None = None


class AutomaskLogitsProcessor(*_BASES):  # type: ignore[misc]  # vLLM's V1 base, and V2's if present
    """Masks the rows of requests that carry an ``automask_*`` constraint (module docstring)."""

    #: compiled grammars kept per processor (LRU by count)
    cache_capacity = 64

    def __init__(self, vllm_config: Any, *args: Any, **kwargs: Any):
        # V1: (vllm_config, device, is_pin_memory); V2: (vllm_config, req_states)
        self.vllm_config = vllm_config
        if len(args) + len(kwargs) == 1:
            self._req_states = args[0] if args else kwargs["req_states"]
            self.device = getattr(self._req_states, "device", None)
        else:
            self._req_states = None
            self.device = args[0] if args else kwargs.get("device")
        model_config = getattr(vllm_config, "model_config", None)
        self._width = model_config.get_vocab_size() if model_config is not None else None
        self._tokenizer: Any = None
        self._cache = CompiledCache(self._vocab_for, self.cache_capacity)
        self._seqs: dict[int, _Sequence] = {}
        self._bitmask: np.ndarray | None = None

    # ---- vLLM hooks shared by both interfaces
    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Parse the ``automask_*`` arguments and build the grammar; ``ValueError`` (HTTP 400)
        with our error's message when either fails."""
        spec = spec_from_extra_args(getattr(sampling_params, "extra_args", None))
        if spec is None:
            return
        if getattr(sampling_params, "structured_outputs", None) is not None:
            raise ValueError("automask_* arguments and structured_outputs both constrain the "
                             "output: send one")
        grammar_for(spec)  # ConstraintError is a ValueError

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes the argmax: greedy requests need it too

    # ---- V1 interface: the persistent batch
    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if not batch_update:
            return
        seqs = self._seqs
        for index in batch_update.removed:
            seqs.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            seq = self._new_sequence(params, output)
            if seq is None:
                seqs.pop(index, None)
            else:
                seqs[index] = seq
        for a, b, direction in batch_update.moved:
            seq_a = seqs.pop(a, None)
            seq_b = seqs.pop(b, None)
            if seq_a is not None:
                seqs[b] = seq_a
            if seq_b is not None and direction == MoveDirectionality.SWAP:
                seqs[a] = seq_b

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        if not self._seqs:
            return logits
        if ctx is not None:
            return self._apply_v2(logits, ctx)
        batch = logits.shape[0]
        rows = sorted(i for i in self._seqs if i < batch)
        seqs = [self._seqs[i] for i in rows]
        for seq in seqs:
            if seq.failed is None and seq.output is not None:
                self._advance(seq, seq.output, len(seq.output))
        self._mask_rows(logits, rows, seqs)
        return logits

    # ---- V2 interface (Model Runner V2): slots, and token history on the device
    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        seq = self._new_sequence(sampling_params, None)
        if seq is None:
            self._seqs.pop(req_idx, None)
            return False
        self._seqs[req_idx] = seq
        return True

    def apply_staged_writes(self) -> None:
        return None

    def _apply_v2(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        slots = [int(s) for s in np.asarray(ctx.idx_mapping_np).tolist()]
        mine = [(i, s) for i, s in enumerate(slots) if s in self._seqs]
        if not mine:
            return logits
        if logits.shape[0] != len(slots):  # speculative decoding: rows per draft token
            expanded = ctx.expanded_idx_mapping.tolist()
            rows, seqs = [], []
            for row, slot in enumerate(expanded):
                seq = self._seqs.get(int(slot))
                if seq is not None:
                    self._fail(seq, "speculative decoding is not supported by the automask "
                               "logits processor")
                    rows.append(row)
                    seqs.append(seq)
            self._mask_rows(logits, rows, seqs)
            return logits
        states = self._req_states
        prompt_len = states.prompt_len.np
        seq_lens = ctx.seq_lens_upper_bound_np
        rows, seqs = [], []
        for row, slot in mine:
            seq = self._seqs[slot]
            rows.append(row)
            seqs.append(seq)
            if seq.failed is not None:
                continue
            start = int(prompt_len[slot])
            total = int(seq_lens[row]) - start  # output tokens visible to this step's token
            if total < seq.consumed and seq.matcher is not None:
                seq.matcher.reset()
                seq.consumed = 0
            if total > seq.consumed:
                new = states.all_token_ids.gpu[slot, start + seq.consumed:start + total]
                self._advance(seq, new.tolist(), total, offset=seq.consumed)
        self._mask_rows(logits, rows, seqs)
        return logits

    # ---- internals
    def _new_sequence(self, params: Any, output: list[int] | None) -> _Sequence | None:
        try:
            spec = spec_from_extra_args(getattr(params, "extra_args", None))
        except ValueError as e:  # validate_params refused it already; be safe anyway
            seq = _Sequence(None, getattr(params, "all_stop_token_ids", ()) or (), output)
            self._fail(seq, str(e))
            return seq
        if spec is None:
            return None
        return _Sequence(spec, getattr(params, "all_stop_token_ids", ()) or (), output)

    def _vocab_for(self, stops: Sequence[int]):
        if self._tokenizer is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            self._tokenizer = cached_tokenizer_from_config(self.vllm_config.model_config)
            if self._tokenizer is None:
                raise ConstraintError("automask needs the model's tokenizer "
                                      "(skip_tokenizer_init is set)")
        return vocabulary_for(self._tokenizer, self._width, stops)

    def _matcher(self, seq: _Sequence) -> Matcher | None:
        if seq.matcher is None and seq.failed is None:
            try:
                # a sequence without a spec is created failed (_new_sequence): not here
                seq.compiled = self._cache.get(seq.spec, seq.stops)  # type: ignore[arg-type]
                seq.matcher = Matcher(seq.compiled)
            except ConstraintError as e:
                self._fail(seq, str(e))
            except Exception as e:  # noqa: BLE001 - never raise in the engine loop
                self._fail(seq, f"compiling the constraint failed ({error_message(e)})")
        return seq.matcher

    def _advance(self, seq: _Sequence, tokens: Sequence[int], total: int,
                 offset: int = 0) -> None:
        """Accept ``tokens[consumed - offset:]`` (the request has ``total`` output tokens)."""
        matcher = self._matcher(seq)
        if matcher is None:
            return
        if total < seq.consumed:  # vLLM discarded output tokens: read them all again
            matcher.reset()
            seq.consumed = 0
        for i in range(seq.consumed - offset, total - offset):
            token = int(tokens[i])
            if token < 0:
                self._fail(seq, "the sampled token ids did not reach the logits processor "
                           "(async scheduling): list automask.integrations.vllm:"
                           "AutomaskLogitsProcessor in logits_processors, or disable async "
                           "scheduling")
                return
            if not matcher.is_terminated():
                try:
                    ok = matcher.accept_token(token)
                except AutomaskError as e:
                    self._fail(seq, error_message(e))
                    return
                if not ok:
                    self._fail(seq, f"token {token} is not allowed by the constraint (another "
                               "logits processor or sampling setting chose it)")
                    return
            seq.consumed += 1

    def _fail(self, seq: _Sequence, why: str) -> None:
        if seq.failed is None:
            seq.failed = why
            kind = seq.spec.kind if seq.spec is not None else "constraint"
            log.error("automask: ending a %s request: %s", kind, why)

    def _mask_rows(self, logits: torch.Tensor, rows: list[int], seqs: list[_Sequence]) -> None:
        """One bitmask fill for ``rows`` (buffer rows 0..k-1), then one in-place apply."""
        if not rows:
            return
        k = len(rows)
        words = bitmask_words(logits.shape[1])
        buf = self._bitmask
        if buf is None or buf.shape[0] < k or buf.shape[1] != words:
            buf = self._bitmask = np.empty((max(k, 8), words), dtype=np.int32)
        matchers = [self._matcher(s) if s.failed is None else None for s in seqs]
        try:
            fill_bitmasks(matchers, buf, range(k))
        except Exception:  # noqa: BLE001 - find the row that failed; the others fill
            for i, (m, s) in enumerate(zip(matchers, seqs, strict=True)):
                if m is None:
                    continue
                try:
                    m.write_row(buf[i])
                except Exception as e:  # noqa: BLE001
                    self._fail(s, error_message(e))
                    matchers[i] = None
        keep = np.ones(k, dtype=bool)
        for i, (m, s) in enumerate(zip(matchers, seqs, strict=True)):
            if m is None:
                keep[i] = self._end_row(s, buf[i])
        if not keep.all():  # a failed request with no stop token to end it: leave it be
            rows = [r for r, kept in zip(rows, keep, strict=True) if kept]
            buf = buf[:k][keep]
            k = len(rows)
            if not k:
                return
        if rows == list(range(k)):
            apply_bitmask(logits[:k], buf[:k])  # a view: masked in place
        else:
            index = torch.tensor(rows, dtype=torch.long, device=logits.device)
            sub = logits.index_select(0, index)
            apply_bitmask(sub, buf[:k])
            logits.index_copy_(0, index, sub)

    def _end_row(self, seq: _Sequence, row: np.ndarray) -> bool:
        """Write the stop-tokens-only row of a failed request; False when it has none."""
        ends = set(seq.stops)
        if seq.compiled is not None:
            ends.update(seq.compiled.eos_token_ids)
        elif self._tokenizer is not None:
            eos = getattr(self._tokenizer, "eos_token_id", None)
            if isinstance(eos, int):
                ends.add(eos)
        bits = row.view(np.uint32)
        bits[:] = 0
        for t in ends:
            if 0 <= t < 32 * bits.shape[0]:
                bits[t >> 5] |= np.uint32(1 << (t & 31))
        if not ends:
            log.error("automask: a failed request has no stop token; it continues unconstrained")
        return bool(ends)
