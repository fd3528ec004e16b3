"""Wall-clock budgets: compiles and masks raise LimitExceeded past their time limit."""

import time
from dataclasses import replace

import numpy as np
import pytest

from automask import Grammar, LimitExceeded, Limits, Matcher, compile
from automask.budget import check_time, time_budget

SCHEMA = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "maxLength": 120},
        "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,9}$"}},
    },
    "required": ["email"],
}


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _checks(n: int = 64) -> None:
    for _ in range(n):  # the clock is read on every 32nd check, the first one included
        check_time()


def test_budget_counts_cpu_time_and_nests_tighter():
    with time_budget(0.05, "the test"):
        time.sleep(0.1)  # waiting is not work: the budget is CPU time
        _checks()
        _burn(0.06)
        with pytest.raises(LimitExceeded, match="the test took longer than 0.05 s"):
            _checks()
        with time_budget(10.0, "a looser inner budget"):  # the outer deadline still holds
            with pytest.raises(LimitExceeded, match="the test"):
                _checks()
    _checks()  # no budget outside
    with time_budget(None, "unbounded"):
        _checks()


def test_schema_compile_past_its_limit_raises():
    with pytest.raises(LimitExceeded, match="compiling the JSON Schema"):
        Grammar.from_json_schema({**SCHEMA, "title": "fresh-1"}, max_seconds=0.0)
    Grammar.from_json_schema(SCHEMA, max_seconds=None)  # and works without one


def test_mask_past_its_limit_raises_and_leaves_the_grammar_usable(tiny_bpe_vocab):
    grammar = Grammar.from_json_schema(SCHEMA)
    strict = compile(grammar, tiny_bpe_vocab, limits=replace(Limits(), max_mask_seconds=0.0))
    matcher = Matcher(strict)
    with pytest.raises(LimitExceeded, match="token mask"):
        matcher.mask_words()
    # The interrupted work left nothing half-built: the same grammar, given
    # time, computes the same mask as a fresh compile.
    strict.limits = replace(strict.limits, max_mask_seconds=None)
    fresh = compile(grammar, tiny_bpe_vocab)
    assert np.array_equal(Matcher(strict).mask_words(), Matcher(fresh).mask_words())
    text = b'{"email": "a@b.co"}'
    for m in (Matcher(strict), Matcher(fresh)):
        assert m.accept_bytes(text) and m.is_accepting()


def test_budget_holds_while_other_threads_check_too():
    """The clock-read countdown is shared by all threads: a thread with no budget
    checking all the time must not keep a budgeted thread from ever reading its clock."""
    import threading

    stop = threading.Event()

    def other():  # checks with no budget of its own, as fast as it can
        while not stop.is_set():
            check_time()

    helper = threading.Thread(target=other)
    helper.start()
    try:
        with time_budget(0.02, "the busy thread"), pytest.raises(LimitExceeded):
            end = time.thread_time() + 5.0
            while time.thread_time() < end:
                check_time()
    finally:
        stop.set()
        helper.join()


def test_a_long_budget_reads_no_clock_for_a_little_work(monkeypatch):
    """Uncached masks and tokens each enter a budget of seconds: a clock read (a system
    call) at each one's first check was 3% of mask time. A short budget still reads it
    at once, so a 0-second one fails at the first check."""
    import automask.budget as budget

    reads = []
    real = time.thread_time
    monkeypatch.setattr(budget.time, "thread_time", lambda: reads.append(1) or real())
    monkeypatch.setattr(budget, "_countdown", budget._CHECK_EVERY)
    with time_budget(5.0, "a mask"):
        for _ in range(3):
            check_time()
    assert not reads
    with time_budget(0.0, "nothing"), pytest.raises(LimitExceeded):
        check_time()


def test_check_time_now_reads_the_clock_at_once():
    """A compile's coarse steps (a rule each) may be far apart: ``check_time_now`` raises
    on the first step past the limit, where ``check_time`` may count 31 more first."""
    from automask.budget import check_time_now

    with time_budget(0.2, "a coarse loop"):
        check_time_now()  # starts the clock
        _burn(0.25)
        check_time()  # only counts: the clock is not read
        with pytest.raises(LimitExceeded, match="a coarse loop"):
            check_time_now()
