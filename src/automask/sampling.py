"""Constrained sampling: turn logits and a token bitmask into the next token, with diagnostics.

The order is the one the math requires: mask -> temperature -> repetition
penalty -> softmax -> top-k -> top-p -> sample (or greedy). Top-k and top-p
act on the *renormalised legal* distribution, so they can never empty it: at
least one legal token always survives.

Decisions (documented here because callers depend on them):

* **Where the work happens.** Every step runs on the CPU in NumPy ``float64``.
  Torch logits (any dtype, any device) are copied to the host once per step
  (``B * V * 8`` bytes). This makes sampling device-independent: the same seed
  gives the same tokens for NumPy arrays, CPU tensors and GPU tensors.
  :func:`legal_log_probs` (for beam search) stays on the tensor's device.
* **Randomness.** A :class:`Sampler` owns a ``numpy.random.Generator``
  (PCG64) seeded by ``seed``. A non-greedy step draws exactly one uniform per
  row, in row order, whatever the masks are; a greedy step draws nothing. So
  the random stream does not depend on the masks or on which rows are forced.
* **Temperature and repetition penalty commute** for ``T > 0`` (dividing by
  ``T`` keeps the sign that the penalty looks at), so the penalty may be
  thought of as applied before or after temperature; the result is the same.
  The penalty is the HF/CTRL form (``l > 0: l / p``, else ``l * p``) applied
  once per distinct previous token id of the row. It also applies in greedy
  mode, as in Hugging Face.
* **Diagnostics** (:class:`StepStats`) describe the model's own distribution,
  ``softmax`` of the raw logits at temperature 1 with no penalty: the legal
  mass ``Z``, the rejection mass ``1 - Z`` and ``KL(constrained || raw) = -log Z``,
  exact for the renormalised restriction of that distribution to the legal
  tokens (not for the top-k/top-p/temperature distribution actually sampled).
  ``Z`` is computed in log space, so the KL stays finite when ``Z`` underflows
  (``legal_mass`` may then read ``0.0``). Pass the *unmasked* logits: logits
  already set to ``-inf`` by :func:`automask.apply_bitmask` read as ``Z = 1``.
* **Degenerate rows.** An empty legal set raises
  :class:`automask.NoLegalContinuation`. When every legal token has a ``-inf``
  logit the legal distribution is taken as *uniform over the legal tokens*
  (the limit of equal logits): sampling picks uniformly, greedy picks the
  lowest legal id; ``Z`` is then 0 and the KL ``inf``. A row whose logits are
  all ``-inf`` is a uniform model distribution over its ``V`` columns. NaN or
  ``+inf`` logits raise ``ValueError``: there is no meaningful distribution.
  Nothing ever returns NaN.
* **Ties** (greedy, raw argmax, the top-k boundary) go to the lowest token id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from automask.bitmask import unpack_bitmask
from automask.engine.lexer import distinct
from automask.errors import NoLegalContinuation

__all__ = [
    "Sampler",
    "SamplingParams",
    "StepStats",
    "legal_log_probs",
    "legal_mask",
    "step_stats",
]


def _is_real(x: Any) -> bool:
    return isinstance(x, Real) and not isinstance(x, (bool, np.bool_))


@dataclass(frozen=True)
class SamplingParams:
    """How to pick a token from the legal distribution.

    ``temperature == 0`` or ``greedy=True`` is greedy (argmax over legal
    tokens). ``top_k == 0`` and ``top_p == 1`` disable those filters;
    ``repetition_penalty == 1`` disables the penalty.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    greedy: bool = False

    def __post_init__(self) -> None:
        t = self.temperature
        if not _is_real(t) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        k = self.top_k
        if isinstance(k, bool) or not isinstance(k, Integral) or k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 disables it), got {k!r}")
        p = self.top_p
        if not _is_real(p) or not 0 < p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1 disables it), got {p!r}")
        r = self.repetition_penalty
        if not _is_real(r) or not math.isfinite(r) or r <= 0:
            raise ValueError(
                f"repetition_penalty must be a finite number > 0 (1 disables it), got {r!r}")
        if not isinstance(self.greedy, bool):
            raise ValueError(f"greedy must be a bool, got {self.greedy!r}")

    @property
    def is_greedy(self) -> bool:
        return self.greedy or self.temperature == 0


@dataclass(frozen=True)
class StepStats:
    """Diagnostics of one row at one decode step (plain data for trace tables and web pages).

    ``token``: the chosen token. ``raw_argmax``: argmax of the raw logits over
    all columns (lowest id on ties); ``raw_argmax_legal``: whether the mask
    allows it, i.e. whether the constraint changed the model's top choice.
    ``legal_count``: number of legal tokens. ``legal_mass`` ``Z``,
    ``rejection_mass`` ``1 - Z`` and ``kl`` ``= -log Z`` are under the model's
    raw distribution (softmax of the raw logits, temperature 1, no penalty).
    ``token_logprob``: log-probability of ``token`` under that same raw
    distribution. ``forced``: one legal token, or the caller said so
    (fast-forwarded tokens). ``kl`` is ``inf`` when ``Z == 0`` exactly.
    """

    token: int
    raw_argmax: int
    raw_argmax_legal: bool
    legal_count: int
    legal_mass: float
    rejection_mass: float
    kl: float
    token_logprob: float
    forced: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- input normalisation


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _logits_2d(logits: Any) -> tuple[np.ndarray, bool]:
    """Host float64 ``(B, V)`` logits (checked: no NaN, no +inf), and whether input was 1-D."""
    if _is_torch(logits):
        import torch

        arr = logits.detach().to(device="cpu", dtype=torch.float64).numpy()
    else:
        arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] == 0:
        raise ValueError(f"logits must have shape (V,) or (B, V) with V > 0, got {arr.shape}")
    one_row = arr.ndim == 1
    arr = arr.reshape(-1, arr.shape[-1])
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError("logits contain NaN or +inf: no distribution can be formed")
    return arr, one_row


def legal_mask(bitmask: Any, width: int) -> np.ndarray:
    """Boolean ``(B, width)`` host array of legal tokens from a bitmask in our layout.

    Accepts NumPy arrays and torch tensors (any device), 1-D (one row) or 2-D.
    Ids at or past the mask's ``32 * words`` bits are illegal, so logits wider
    than the vocabulary (padding columns) can never be chosen.
    """
    if _is_torch(bitmask):
        bitmask = bitmask.detach().cpu().numpy()
    allowed = unpack_bitmask(bitmask, width)
    return allowed.reshape(-1, width)


def _legal_rows(bitmask: Any, batch: int, width: int) -> np.ndarray | None:
    if bitmask is None:
        return None
    allowed = legal_mask(bitmask, width)
    if allowed.shape[0] == batch:
        return allowed
    if allowed.shape[0] == 1:
        return np.broadcast_to(allowed, (batch, width))
    raise ValueError(f"bitmask has {allowed.shape[0]} rows for {batch} rows of logits")


def _per_row(value: Any, batch: int, name: str) -> list[Any]:
    """A scalar broadcast to every row, or one value per row."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return [bool(value)] * batch
    values = list(value)
    if len(values) != batch:
        raise ValueError(f"{name} has {len(values)} entries for {batch} rows")
    return values


def _previous_rows(previous: Any, batch: int, one_row: bool, width: int) -> list[np.ndarray]:
    """Distinct previous token ids per row; a flat sequence is accepted for 1-D logits."""
    if previous is None:
        return [np.empty(0, dtype=np.int64)] * batch
    if _is_torch(previous):
        previous = previous.detach().cpu().numpy()
    rows = list(previous)
    if one_row and (not rows or isinstance(rows[0], (Integral, np.integer))):
        rows = [rows]
    if len(rows) != batch:
        raise ValueError(f"previous has {len(rows)} rows for {batch} rows of logits")
    out = []
    for row in rows:
        if _is_torch(row):
            row = row.detach().cpu().numpy()
        ids = np.array(distinct(np.asarray(row, dtype=np.int64).ravel()), dtype=np.int64)
        if ids.size and (ids[0] < 0 or ids[-1] >= width):
            raise ValueError(f"previous token ids must be in [0, {width}), got {ids[[0, -1]]}")
        out.append(ids)
    return out


# ---------------------------------------------------------------- per-row math


def _log_sum_exp(x: np.ndarray) -> float:
    """``log(sum(exp(x)))`` with the max subtracted; ``-inf`` for an empty or all ``-inf`` x."""
    if x.size == 0:
        return -math.inf
    m = float(x.max())
    if m == -math.inf:
        return -math.inf
    return m + math.log(float(np.exp(x - m).sum()))


def _row_stats(row: np.ndarray, legal_ids: np.ndarray | None, token: int,
               forced: bool) -> StepStats:
    """Diagnostics of one row under the model's raw distribution (see the module notes)."""
    width = row.shape[0]
    raw = row if row.max() > -math.inf else np.zeros_like(row)  # all -inf: uniform over V
    raw_argmax = int(np.argmax(raw))
    m = float(raw[raw_argmax])
    e = np.exp(raw - m)
    total = float(e.sum())
    lse_all = m + math.log(total)
    if legal_ids is None:
        count = width
        log_z = 0.0
        argmax_legal = True
    else:
        count = int(legal_ids.size)
        if count == width:
            log_z = 0.0
        else:
            legal_sum = float(e[legal_ids].sum())
            # Shifted by the row max the legal sum may underflow: redo it with its own max.
            log_z = (math.log(legal_sum / total) if legal_sum > 1e-200
                     else _log_sum_exp(raw[legal_ids]) - lse_all)
            log_z = min(0.0, log_z)
        pos = int(np.searchsorted(legal_ids, raw_argmax))
        argmax_legal = pos < count and int(legal_ids[pos]) == raw_argmax
    return StepStats(
        token=int(token),
        raw_argmax=raw_argmax,
        raw_argmax_legal=bool(argmax_legal),
        legal_count=count,
        legal_mass=math.exp(log_z),
        rejection_mass=-math.expm1(log_z),
        kl=-log_z if log_z != 0.0 else 0.0,
        token_logprob=float(raw[token]) - lse_all,
        forced=bool(forced or count == 1),
    )


def _penalise(x: np.ndarray, ids: np.ndarray, previous: np.ndarray, penalty: float) -> None:
    """HF/CTRL repetition penalty, in place, on the previous ids present in ``ids``."""
    if penalty == 1.0 or previous.size == 0:
        return
    pos = np.searchsorted(ids, previous)
    pos = pos[pos < ids.size]
    pos = pos[np.isin(ids[pos], previous)]
    v = x[pos]
    x[pos] = np.where(v > 0, v / penalty, v * penalty)


def _legal_probs(x: np.ndarray, temperature: float) -> np.ndarray:
    """Softmax of ``x / T`` (uniform if every entry is ``-inf``); max subtracted before the
    division so a tiny ``T`` cannot overflow."""
    m = float(x.max())
    if m == -math.inf:
        return np.full(x.size, 1.0 / x.size)
    p = np.exp((x - m) / temperature)
    return p / p.sum()


def _top_order(p: np.ndarray, m: int) -> np.ndarray:
    """The first ``m`` positions of ``p`` by descending value, lowest id first on ties: exactly
    a prefix of the full stable sort, in ``O(n + m log m)``."""
    n = p.size
    if m >= n:
        return np.argsort(-p, kind="stable")
    v = np.partition(p, n - m)[n - m]  # the m-th largest value
    above = np.flatnonzero(p > v)
    ties = np.flatnonzero(p == v)[: m - above.size]
    sel = np.sort(np.concatenate([above, ties]))
    return sel[np.argsort(-p[sel], kind="stable")]


def _filter(p: np.ndarray, top_k: int, top_p: float) -> np.ndarray:
    """Top-k then top-p on a normalised distribution: positions kept (ascending), never none.

    Top-p keeps the shortest prefix (by descending probability, lowest id first
    on ties) whose mass reaches ``top_p``, measured on the distribution
    renormalised after top-k, as Hugging Face does. Only as much of the order
    as needed is sorted (peaked distributions have short nuclei).
    """
    n = p.size
    use_k = 0 < top_k < n
    if not use_k and top_p >= 1.0:
        return np.arange(n)
    if use_k:
        order = _top_order(p, top_k)
        total = float(p[order].sum())
    else:
        total = float(p.sum())
    if top_p < 1.0:
        threshold = top_p * total
        m = min(n, 256)
        while True:
            if not use_k:
                order = _top_order(p, m)
            cum = np.cumsum(p[order])
            # Positions past the sorted prefix have at least cum[-1] ahead of them.
            if use_k or m >= n or cum[-1] >= threshold:
                break
            m = min(n, m * 16)
        before = cum - p[order]  # mass strictly ahead of each token
        order = order[before < threshold]  # the top token has 0 ahead: never empty
    return np.sort(order)


def _draw(p: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from unnormalised ``p`` (index order); never a zero-probability slot.

    The first ``j`` with ``cdf[j] > u * cdf[-1]`` has ``p[j] > 0``; only rounding
    (``u * cdf[-1]`` reaching ``cdf[-1]``) can push ``j`` past the end, and then the
    last positive slot is taken.
    """
    cdf = np.cumsum(p)
    j = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    return j if j < p.size else int(np.flatnonzero(p)[-1])


# ---------------------------------------------------------------- public API


class Sampler:
    """Picks the next token of every row from logits and a bitmask, reproducibly.

    One sampler per generation (or per batch); ``seed`` fixes the whole stream
    of tokens for given inputs (``None`` seeds from the OS). See the module
    docstring for the decisions behind the math.
    """

    def __init__(self, params: SamplingParams | None = None, seed: int | None = None):
        self.params = params if params is not None else SamplingParams()
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def step(self, logits: Any, bitmask: Any = None, previous: Any = None,
             forced: bool | Sequence[bool] | None = None, *,
             with_stats: bool = True) -> tuple[list[int], list[StepStats]]:
        """One decode step: a token and a :class:`StepStats` per row.

        ``logits``: ``(B, V)`` or ``(V,)``, NumPy or torch, unmasked (the raw
        model output; the diagnostics need it). ``bitmask``: int32
        ``(B, ceil(V/32))`` (or one row, used for every row; it may be narrower
        than ``V``), or ``None`` for no constraint. ``previous``: per row, the
        token ids the repetition penalty applies to (a flat list for 1-D
        logits). ``forced``: a flag (or one per row) marking the step as forced
        in the stats. ``with_stats=False`` skips the diagnostics (a full pass
        over each row; a server asks for them only when a client does) and
        returns no stats. Raises :class:`NoLegalContinuation` before consuming
        any randomness if a row has no legal token.
        """
        x, one_row = _logits_2d(logits)
        batch, width = x.shape
        allowed = _legal_rows(bitmask, batch, width)
        legal = [None] * batch if allowed is None else [np.flatnonzero(r) for r in allowed]
        for b, ids in enumerate(legal):
            if ids is not None and ids.size == 0:
                raise NoLegalContinuation(f"row {b}: the mask allows no token (of {width})")
        prev = _previous_rows(previous, batch, one_row, width)
        flags = _per_row(forced, batch, "forced")
        params = self.params
        greedy = params.is_greedy
        uniforms = None if greedy else self.rng.random(batch)
        tokens: list[int] = []
        stats: list[StepStats] = []
        for b in range(batch):
            ids = legal[b]
            if ids is None:
                ids = np.arange(width)
            if ids.size == width and (params.repetition_penalty == 1.0 or not prev[b].size):
                sub = x[b]  # every token legal, nothing to penalise: no copy needed
            else:
                sub = x[b, ids]  # a copy: the penalty must not touch the raw row
                _penalise(sub, ids, prev[b], params.repetition_penalty)
            if greedy:
                choice = int(np.argmax(sub))
            else:
                p = _legal_probs(sub, params.temperature)
                kept = _filter(p, params.top_k, params.top_p)
                choice = int(kept[_draw(p[kept], float(uniforms[b]))])  # type: ignore[index]  # drawn: not greedy
            token = int(ids[choice])
            tokens.append(token)
            if with_stats:
                stats.append(_row_stats(x[b], legal[b], token, bool(flags[b])))
        return tokens, stats


def step_stats(logits: Any, bitmask: Any, tokens: Sequence[int],
               forced: bool | Sequence[bool] | None = True) -> list[StepStats]:
    """Diagnostics for tokens chosen elsewhere (fast-forwarded, or from another sampler).

    Same fields as :meth:`Sampler.step` returns; ``forced`` defaults to True
    because the usual caller records grammar-forced tokens. A token the mask
    does not allow raises ``ValueError``.
    """
    x, _ = _logits_2d(logits)
    batch, width = x.shape
    tokens = [int(t) for t in tokens]
    if len(tokens) != batch:
        raise ValueError(f"{len(tokens)} tokens for {batch} rows of logits")
    allowed = _legal_rows(bitmask, batch, width)
    flags = _per_row(forced, batch, "forced")
    out = []
    for b, token in enumerate(tokens):
        if not 0 <= token < width or (allowed is not None and not allowed[b, token]):
            raise ValueError(f"row {b}: token {token} is not legal here")
        ids = None if allowed is None else np.flatnonzero(allowed[b])
        out.append(_row_stats(x[b], ids, token, bool(flags[b])))
    return out


def legal_log_probs(logits: Any, bitmask: Any = None, temperature: float = 1.0) -> Any:
    """Log-probabilities of the legal distribution, renormalised: ``-inf`` for illegal tokens.

    For beam search: ``log softmax(l / T)`` restricted to the legal tokens and
    renormalised over them (no penalty, no top-k/top-p). Same shape as
    ``logits``. NumPy in, ``float64`` NumPy out; torch in, torch out on the
    same device (``float32``, or ``float64`` for ``float64`` input). Rows whose
    legal logits are all ``-inf`` get the uniform ``-log(count)``; an empty
    legal set raises :class:`NoLegalContinuation`. ``temperature`` must be > 0.
    """
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0 for log-probabilities, "
                         f"got {temperature!r}")
    if _is_torch(logits):
        return _legal_log_probs_torch(logits, bitmask, temperature)
    x, one_row = _logits_2d(logits)
    batch, width = x.shape
    allowed = _legal_rows(bitmask, batch, width)
    if allowed is None:
        allowed = np.ones((batch, width), dtype=bool)
    empty = ~allowed.any(axis=1)
    if empty.any():
        raise NoLegalContinuation(
            f"row {int(np.flatnonzero(empty)[0])}: the mask allows no token (of {width})")
    masked = np.where(allowed, x, -np.inf)
    m = masked.max(axis=1, keepdims=True)
    dead = np.isneginf(m[:, 0])  # every legal logit -inf: uniform over legal tokens
    masked[dead] = np.where(allowed[dead], 0.0, -np.inf)
    m[dead] = 0.0
    with np.errstate(invalid="ignore"):
        z = (masked - m) / temperature
    z[~allowed] = -np.inf
    out = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return out[0] if one_row else out


def _legal_log_probs_torch(logits: Any, bitmask: Any, temperature: float) -> Any:
    import torch

    from automask.bitmask import apply_bitmask

    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise ValueError("logits contain NaN or +inf: no distribution can be formed")
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits.detach().to(dtype)
    one_row = x.dim() == 1
    x = x.reshape(-1, x.shape[-1])
    if bitmask is None:
        allowed = torch.ones_like(x, dtype=torch.bool)
    else:
        probe = torch.zeros_like(x)
        apply_bitmask(probe, bitmask)  # on the logits' device; 1-row masks broadcast
        allowed = probe == 0
    empty = ~allowed.any(dim=1)
    if empty.any():
        row = int(torch.nonzero(empty)[0, 0])
        raise NoLegalContinuation(f"row {row}: the mask allows no token (of {x.shape[1]})")
    neg = torch.tensor(float("-inf"), dtype=dtype, device=x.device)
    masked = torch.where(allowed, x, neg)
    m = masked.max(dim=1, keepdim=True).values
    dead = torch.isneginf(m)
    masked = torch.where(dead & allowed, torch.zeros_like(masked), masked)
    m = torch.where(dead, torch.zeros_like(m), m)
    z = torch.where(allowed, (masked - m) / temperature, neg)
    out = torch.log_softmax(z, dim=1)
    return out[0] if one_row else out
