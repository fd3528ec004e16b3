"""What the grammar expects next, in words, and why a given token is masked.

Why: a mask is a set of tens of thousands of bits; a person wants a sentence.
The explanation is read from the compiled grammar's byte-level automaton (the
:class:`~automask.engine.state.StateTable` the mask itself comes from), so it
cannot disagree with the mask: the bytes that keep the current configuration
alive are grouped into classes a person names ("a digit", "any character
but `\"`"), a lone byte is followed as far as the grammar forces it (so a
key reads as the literal ``"name":`` rather than as ``"``), and a masked
token is walked byte by byte to the first byte the grammar refuses.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from automask.budget import time_budget
from automask.engine.matcher import Matcher, parse_state
from automask.errors import LimitExceeded
from automask.explore.text import byte_name, visible

#: live bytes up to this many are each followed into a literal continuation
MAX_BRANCHES = 8
#: the longest literal continuation followed (bytes)
MAX_LITERAL = 32
#: CPU seconds one explanation may take (it steps the automaton, possibly uncached)
EXPLAIN_SECONDS = 1.0

_PRINTABLE = frozenset(range(0x20, 0x7F))  # space to `~`
_WHITESPACE = (0x20, 0x09, 0x0A, 0x0D)


@dataclass
class Expectation:
    """What may come next: literal continuations, byte classes, and whether it may end."""

    literals: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    accepting: bool = False
    summary: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"literals": self.literals, "classes": self.classes,
                "accepting": self.accepting, "summary": self.summary}


def _live(states: Any, config: Any) -> list[int]:
    """The bytes after which ``config`` is not dead (the lexer's live set, confirmed by a step:
    a lexeme the lexer would continue may still be one the parser cannot take)."""
    mask = states.live_bytes(config)
    return [b for b in range(256) if mask >> b & 1 and not states.step(config, b).dead]


def _literal(states: Any, config: Any, first: int) -> str:
    """The text forced after ``first``: bytes follow while exactly one may come next."""
    data = bytearray([first])
    config = states.step(config, first)
    while len(data) < MAX_LITERAL and not config.accepting:
        nxt = _live(states, config)
        if len(nxt) != 1:
            break
        data.append(nxt[0])
        config = states.step(config, nxt[0])
    text = visible(bytes(data))
    return text + "…" if len(data) >= MAX_LITERAL else text


def _classes(live: list[int]) -> list[str]:
    """Byte classes in words, with what is left named one by one."""
    rest = set(live)
    out: list[str] = []
    printable = rest & _PRINTABLE
    if len(printable) >= 60:  # "any character but ...": string contents and the like
        missing = sorted(_PRINTABLE - printable)
        but = ", ".join(byte_name(b) for b in missing)
        out.append(f"any character but {but}" if missing else "any character")
        rest -= printable | {b for b in rest if b >= 0x7F}  # DEL and non-ASCII: "any"
    for chars, name in ((string.digits, "a digit"), (string.ascii_lowercase,
                                                     "a lowercase letter"),
                        (string.ascii_uppercase, "an uppercase letter")):
        codes = {ord(c) for c in chars}
        if codes <= rest:
            out.append(name)
            rest -= codes
    spaces = [b for b in _WHITESPACE if b in rest]
    if len(spaces) >= 2:
        out.append("whitespace")
        rest -= set(spaces)
    high = {b for b in rest if b >= 0x80}
    if high:
        out.append("a non-ASCII character")
        rest -= high
    control = {b for b in rest if b < 0x20 or b == 0x7F}
    if control:
        out.append("a control character")
        rest -= control
    out.extend(byte_name(b) for b in sorted(rest))
    return out


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


def expectation(matcher: Matcher) -> Expectation:
    """What the grammar lets the output continue with, from ``matcher``'s state."""
    if matcher.is_terminated():
        return Expectation(accepting=True, summary="nothing: the output has ended")
    return expectation_at(matcher.compiled, parse_state(matcher))


def expectation_at(compiled: Any, config: Any) -> Expectation:
    """:func:`expectation` at any configuration of ``compiled``'s automaton."""
    states = compiled.states
    out = Expectation(accepting=bool(config.accepting))
    try:
        with time_budget(compiled.limits.max_mask_seconds and EXPLAIN_SECONDS,
                         "describing what the grammar expects"):
            live = _live(states, config)
            if len(live) <= MAX_BRANCHES:
                out.literals = [_literal(states, config, b) for b in live]
            else:
                out.classes = _classes(live)
    except LimitExceeded:
        out.summary = "(too costly to describe within the time limit)"
        return out
    words = [f"`{lit}`" for lit in out.literals] + out.classes
    if out.accepting:
        words.append("the end of the output (EOS)")
    out.summary = _join(words) if words else "nothing (no byte can follow)"
    return out


def why_masked(matcher: Matcher, token: int) -> str:
    """One sentence on why ``token`` is not allowed in ``matcher``'s state (for a masked token).

    Walks the token's bytes through the grammar's automaton to the first one it
    refuses; EOS and special tokens have reasons of their own.
    """
    compiled = matcher.compiled
    vocab = compiled.vocab
    if matcher.is_terminated():
        return "the output has ended (EOS was accepted)"
    if compiled.is_eos(token):
        return ("EOS ends the output, and the output so far is not a complete string of the "
                "language yet")
    if token >= vocab.size or token in vocab.special_ids:
        return "a special token: it has no text, so it is never part of the output"
    data = vocab.token_bytes(token)
    if not data:
        return "the token has no bytes"
    try:
        at = refused_at(compiled, parse_state(matcher), data)
        if at is None:
            return ("every byte fits the grammar, but the text it would leave cannot be "
                    "completed with this vocabulary (a dead end)")
        config = parse_state(matcher)
        for byte in data[:at]:
            config = compiled.states.step(config, byte)
        expected = expectation_at(compiled, config).summary
    except LimitExceeded:
        return "masked (explaining it would take longer than the time limit)"
    where = "it starts with" if at == 0 else \
        f"after its first {at} byte{'s' if at > 1 else ''} `{visible(data[:at])}` comes"
    return f"{where} {byte_name(data[at])}, but the grammar expects {expected}"


def refused_at(compiled: Any, config: Any, data: bytes) -> int | None:
    """Index of the first byte of ``data`` the grammar refuses after ``config`` (None: all
    fit). Where an output leaves the language, to the byte."""
    states = compiled.states
    with time_budget(compiled.limits.max_mask_seconds and EXPLAIN_SECONDS,
                     "finding where a token leaves the language"):
        for k, byte in enumerate(data):
            config = states.step(config, byte)
            if config.dead:
                return k
    return None
