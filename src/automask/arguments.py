"""Argument types shared by the command-line parsers.

:mod:`automask.cli` and the subcommands that define their own arguments
(``add_arguments`` in :mod:`automask.generation.command`) check numbers the
same way, with argparse's messages: ``argparse.ArgumentTypeError`` on bad text.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def _parsed(text: str, kind: type[int] | type[float]) -> float:
    """``text`` read as ``kind``, or argparse's error naming what it is not."""
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _refuse(value: float, condition: str) -> None:
    raise argparse.ArgumentTypeError(f"must be {condition}: {value}")


def non_negative_float(text: str) -> float:
    value = _parsed(text, float)
    if not value >= 0 or value == float("inf"):
        _refuse(value, "a finite number >= 0")
    return value


def probability(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        _refuse(value, "in (0, 1]")
    return value


def non_negative_int(text: str) -> int:
    value = int(_parsed(text, int))
    if value < 0:
        _refuse(value, "at least 0")
    return value


def positive_float(text: str) -> float:
    value = _parsed(text, float)
    if not value > 0:
        _refuse(value, "positive")
    return value


def comma_list(values: Sequence[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def positive_int(text: str) -> int:
    value = int(_parsed(text, int))
    if value < 1:
        _refuse(value, "at least 1")
    return value
