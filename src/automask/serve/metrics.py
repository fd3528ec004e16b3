"""Server counters in the Prometheus text format (``GET /metrics``), without a client library.

Counters only grow; gauges are read when scraped. Durations are exported as
``_seconds_sum`` / ``_seconds_count`` pairs (a Prometheus summary without
quantiles), which is what ``rate(sum) / rate(count)`` needs for a mean.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable


class Metrics:
    """Thread-safe counters and duration sums, labelled by one string where it matters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], float] = defaultdict(float)
        self._gauges: dict[str, Callable[[], float]] = {}

    def count(self, name: str, label: str = "", value: float = 1.0) -> None:
        with self._lock:
            self._counts[(name, label)] += value

    def observe(self, name: str, seconds: float) -> None:
        """One duration of ``name`` (adds to ``name_seconds_sum`` and ``_count``)."""
        with self._lock:
            self._counts[(f"{name}_seconds_sum", "")] += seconds
            self._counts[(f"{name}_seconds_count", "")] += 1

    def gauge(self, name: str, read: Callable[[], float]) -> None:
        self._gauges[name] = read

    def value(self, name: str, label: str = "") -> float:
        with self._lock:
            return self._counts.get((name, label), 0.0)

    def render(self) -> str:
        """The exposition text: one ``# TYPE`` line per family, then its samples."""
        with self._lock:
            counts = sorted(self._counts.items())
        lines: list[str] = []
        typed: set[str] = set()
        for (name, label), value in counts:
            family = f"automask_{name}"
            if family not in typed:
                kind = "counter" if name.endswith(("_total", "_count", "_sum")) else "gauge"
                lines.append(f"# TYPE {family} {kind}")
                typed.add(family)
            labels = f'{{kind="{_escape(label)}"}}' if label else ""
            lines.append(f"{family}{labels} {value:g}")
        for name, read in sorted(self._gauges.items()):
            lines.append(f"# TYPE automask_{name} gauge")
            lines.append(f"automask_{name} {read():g}")
        return "\n".join(lines) + "\n"


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
