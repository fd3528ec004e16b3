"""One decode step measured: the raw distribution, what the mask keeps, and the top tokens.

Why its own module: the page's "current step" panel and every chip's
details read the same numbers, computed once when the step's logits arrive.
The quantities are the library's diagnostics (see :mod:`automask.sampling`):
under the model's raw distribution ``p = softmax(logits)`` at temperature 1,
the legal mass ``Z = sum of p over legal tokens``, the rejection mass
``1 - Z`` and ``KL(renormalized || raw) = -log Z``; the renormalized
distribution is ``p / Z`` on the legal tokens. They are computed here for any
legal set, including one the sampler did not use (the mask switched off, the
output already outside the language), which :func:`automask.sampling.step_stats`
does not allow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: rows of the token table: the top raw tokens, plus the top legal ones
TOP_RAW = 15
TOP_LEGAL = 10


@dataclass
class Measure:
    """The numbers of one step (plain data, JSON-ready through :meth:`as_dict`)."""

    legal_count: int
    legal_mass: float
    rejection_mass: float
    kl: float
    raw_argmax: int
    raw_argmax_legal: bool
    best_legal: int | None

    @property
    def argmax_verdict(self) -> str:
        """``survives`` (the model's top token is legal), ``replaced`` (by the best legal
        token) or ``none`` (no legal continuation)."""
        if self.raw_argmax_legal:
            return "survives"
        return "replaced" if self.best_legal is not None else "none"

    def as_dict(self) -> dict[str, Any]:
        return {"legal_count": self.legal_count, "legal_mass": _finite(self.legal_mass),
                "rejection_mass": _finite(self.rejection_mass), "kl": _finite(self.kl),
                "raw_argmax": self.raw_argmax, "raw_argmax_legal": self.raw_argmax_legal,
                "best_legal": self.best_legal, "argmax": self.argmax_verdict}


def _finite(x: float) -> float | None:
    """JSON has no infinity: an infinite KL (Z = 0 exactly) travels as null."""
    return float(x) if math.isfinite(x) else None


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Raw log-probabilities in float64 (``-inf`` logits stay ``-inf``)."""
    x = np.asarray(logits, dtype=np.float64)
    top = np.max(x)
    if not math.isfinite(top):  # every logit -inf: uniform, as automask.sampling reads it
        return np.full(x.shape, -math.log(x.size))
    shifted = x - top
    return shifted - math.log(np.sum(np.exp(shifted)))


def measure(logp: np.ndarray, legal: np.ndarray) -> Measure:
    """The step's numbers from raw log-probabilities and a boolean legal array (same width)."""
    count = int(np.count_nonzero(legal))
    raw_argmax = int(np.argmax(logp))  # the lowest id on ties, as automask.sampling does
    if count:
        legal_logp = np.where(legal, logp, -np.inf)
        best = int(np.argmax(legal_logp))
        top = legal_logp[best]
        log_z = top + math.log(np.sum(np.exp(legal_logp - top))) if math.isfinite(top) \
            else -math.inf
    else:
        best, log_z = None, -math.inf
    z = math.exp(log_z)
    return Measure(legal_count=count, legal_mass=z, rejection_mass=1.0 - z, kl=-log_z,
                   raw_argmax=raw_argmax, raw_argmax_legal=bool(legal[raw_argmax]),
                   best_legal=best)


def top_ids(logp: np.ndarray, legal: np.ndarray, extra: tuple[int, ...] = ()) -> list[int]:
    """The token table's ids: the top raw tokens, the top legal ones and ``extra`` (the
    chosen token), by logit, highest first (ties by id)."""
    ids = set(_top(logp, TOP_RAW))
    if legal.any():
        ids.update(_top(np.where(legal, logp, -np.inf), TOP_LEGAL, only=legal))
    ids.update(int(t) for t in extra if 0 <= t < logp.size)
    return sorted(ids, key=lambda t: (-logp[t], t))


def _top(values: np.ndarray, k: int, only: np.ndarray | None = None) -> list[int]:
    n = values.size if only is None else int(np.count_nonzero(only))
    k = min(k, n)
    if k <= 0:
        return []
    part = np.argpartition(-values, k - 1)[:k]
    return [int(t) for t in part if only is None or only[t]]
