"""Summary statistics and memory accounting for the benchmarks.

Timings are collected as integer nanoseconds (``time.perf_counter_ns``) and
summarized once at the end, so the timed loops do nothing but append.
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Mean and percentiles of one series, in the unit the caller chose."""

    count: int
    mean: float | None
    p50: float | None
    p99: float | None
    max: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def summarize(values_ns: Sequence[int] | np.ndarray, unit_ns: float = 1e3) -> Summary:
    """Summarize nanosecond samples in units of ``unit_ns`` (1e3: µs, 1e6: ms).

    Percentiles interpolate linearly between samples (NumPy's default), so a
    p99 over five compiles sits between the two slowest.
    """
    arr = np.asarray(values_ns, dtype=np.float64)
    if arr.size == 0:
        return Summary(0, None, None, None, None)
    arr = arr / unit_ns
    p50, p99 = np.percentile(arr, [50, 99])
    return Summary(int(arr.size), float(arr.mean()), float(p50), float(p99), float(arr.max()))


def median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None


# Objects that belong to the program, not to a data structure: never followed.
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, types.FrameType)


def reachable(roots: Iterable[object], exclude: set[int] | None = None) -> dict[int, object]:
    """Every object reachable from ``roots`` (by id), skipping ``exclude`` ids and code.

    NumPy views do not report their base to the garbage collector, so bases
    are followed by hand: a view's memory is counted once, at its owner.
    """
    skip = exclude or set()
    seen: dict[int, object] = {}
    todo = [r for r in roots if id(r) not in skip]
    while todo:
        obj = todo.pop()
        oid = id(obj)
        if oid in seen or oid in skip or isinstance(obj, _OPAQUE):
            continue
        seen[oid] = obj
        if isinstance(obj, np.ndarray):
            if obj.base is not None:
                todo.append(obj.base)
            if obj.dtype.hasobject:
                todo.extend(obj.ravel().tolist())
            continue
        todo.extend(gc.get_referents(obj))
    return seen


def total_bytes(objects: dict[int, object]) -> int:
    """Sum of ``sys.getsizeof`` (which includes an owning ndarray's data buffer)."""
    return sum(sys.getsizeof(o) for o in objects.values())


def text_table(cols: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """Columns padded to their widest cell: the first ``left`` ones left-aligned (labels),
    the rest right-aligned (numbers)."""
    widths = [max([len(str(c)), *(len(str(r[i])) for r in rows)]) for i, c in enumerate(cols)]

    def line(r: Sequence[Any]) -> str:
        return "  ".join(str(v).ljust(w) if i < left else str(v).rjust(w)
                         for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()

    return "\n".join([line(cols), *(line(r) for r in rows)])


def printer(out: TextIO) -> Callable[[str], None]:
    """``print`` of one line to ``out``, flushed (a long bench shows its progress)."""
    def say(line: str) -> None:
        print(line, file=out, flush=True)

    return say
