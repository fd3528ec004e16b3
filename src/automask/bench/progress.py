"""Progress lines for long benches, on stderr: one class every bench reports through."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

PROGRESS_ENV = "AUTOMASK_PROGRESS_SECONDS"
PROGRESS_LOG_SECONDS = 10.0


def progress_log_interval() -> float | None:
    """Seconds between progress lines when stderr is not a terminal; None: no lines.

    ``AUTOMASK_PROGRESS_SECONDS`` overrides the default of 10 s: a number of
    seconds (0: a line at every update), or ``off``.
    """
    raw = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if not raw:
        return PROGRESS_LOG_SECONDS
    if raw in ("off", "none", "no", "false"):
        return None
    try:
        value = float(raw)
    except ValueError:
        return PROGRESS_LOG_SECONDS
    return value if value >= 0 else None


class Progress:
    """How far a long bench has got, on stderr; every bench reports through this one class.

    On a terminal: a self-overwriting counter, redrawn at most every 0.2 s and
    erased by :meth:`close`. Anywhere else (a log file, a pipe, CI): one plain
    line every :func:`progress_log_interval` seconds (10 by default) with the
    count, the elapsed time and an estimate of the time left, so a run of
    many minutes shows that it is alive and how far it is; a run shorter than
    the interval prints nothing.
    """

    def __init__(self, label: str, total: int, stream: TextIO | None = None,
                 interval: float | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else progress_log_interval()
        self.enabled = self.tty or self.interval is not None
        self.label = label
        self.total = total
        self.start = time.monotonic()
        self.last = 0.0 if self.tty else self.start
        self.lines = 0  # plain lines written (not on a terminal)

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if now - self.last >= 0.2 or done == self.total:
                self.last = now
                self.stream.write(f"\r{self.label}: {done}/{self.total}")
                self.stream.flush()
            return
        assert self.interval is not None
        if now - self.last >= self.interval:
            self.last = now
            self.lines += 1
            self.stream.write(self.line(done, now - self.start) + "\n")
            self.stream.flush()

    def line(self, done: int, elapsed: float) -> str:
        """``label: done/total (pct), elapsed, time left`` as one log line."""
        text = f"{self.label}: {done}/{self.total}"
        if self.total:
            text += f" ({100 * done / self.total:.0f}%)"
        text += f", {_duration(elapsed)} elapsed"
        if 0 < done < self.total:
            text += f", about {_duration(elapsed / done * (self.total - done))} left"
        return text

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r" + " " * (len(self.label) + 30) + "\r")
            self.stream.flush()


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
