"""``automask bench serve``: the statistics on hand-made samples (no server), and one tiny
run end to end against a real ``automask serve`` subprocess.

The end-to-end test checks the report's structure and that its counts add up,
never timing values: timing targets belong to the bench (``--check``), which
runs on a quiet machine, not to tests that share one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.models import default_model_missing

from automask.bench import serve_bench as sb
from automask.bench.serve_bench import CONSTRAINED, UNCONSTRAINED, Block, Sample
from automask.cli import build_parser, main

MASKBENCH = Path(sb.DEFAULT_DATA)  # ../shared/data/maskbench-dev.jsonl.gz, the default


def sample(mode: str, c: int, *, tokens: int = 10, finish: str = "stop",
           valid: bool | None = True, status: str = "ok", ttft: float | None = 0.1,
           tpot: float | None = 0.01) -> Sample:
    return Sample(mode, c, 0, "s", status=status, finish_reason=finish if status == "ok"
                  else None, tokens=tokens if status == "ok" else 0, ttft_s=ttft, tpot_s=tpot,
                  valid=valid if status == "ok" else None)


# ----------------------------------------------------------------------------- statistics


def test_summarize_level_counts_throughput_percentiles_and_server_split():
    samples = [sample(CONSTRAINED, 4, tokens=10, ttft=0.1, tpot=0.010),
               sample(CONSTRAINED, 4, tokens=20, ttft=0.3, tpot=0.020, finish="length",
                      valid=False),
               sample(CONSTRAINED, 4, tokens=30, ttft=0.2, tpot=0.030, valid=False),
               sample(CONSTRAINED, 4, status="rejected"),
               sample(CONSTRAINED, 4, tokens=5, valid=None)]  # jsonschema could not check
    blocks = [Block(CONSTRAINED, 4, 0, 3, 2.0, {"forward_seconds_sum": 0.5,
                                                  "forward_seconds_count": 10,
                                                  "mask_seconds_sum": 0.1,
                                                  "mask_seconds_count": 30},
                    cpu={"total": 4.0, "busy": 3.0, "server": 2.0, "bench": 0.5,
                         "others": 0.5}),
              Block(CONSTRAINED, 4, 1, 2, 3.0, {"forward_seconds_sum": 1.5,
                                                  "forward_seconds_count": 10,
                                                  "mask_seconds_sum": 0.3,
                                                  "mask_seconds_count": 20},
                    cpu={"total": 6.0, "busy": 5.5, "server": 5.0, "bench": 0.5,
                         "others": 0.0})]
    s = sb.summarize_level(samples, blocks)
    assert (s["requests"], s["answered"], s["rejected"], s["errors"]) == (5, 4, 1, 0)
    assert s["output_tokens"] == 65 and s["wall_s"] == 5.0
    assert s["tokens_per_s"] == pytest.approx(13.0)
    assert s["finish_reasons"] == {"stop": 3, "length": 1}
    assert (s["checked"], s["valid"], s["valid_share"]) == (3, 1, pytest.approx(1 / 3))
    assert (s["stop"], s["stop_valid"], s["stop_invalid"]) == (3, 1, 1)
    # percentiles interpolate between samples (numpy's default), in milliseconds
    assert s["ttft_ms"]["p50"] == pytest.approx(150.0)  # 100, 100, 200, 300 ms
    assert s["ttft_ms"]["p99"] == pytest.approx(297.0)
    assert s["tpot_ms"]["p50"] == pytest.approx(15.0)
    srv = s["server"]
    assert (srv["steps"], srv["sequence_steps"]) == (20, 50)
    assert srv["forward_ms_per_step"] == pytest.approx(100.0)
    assert srv["mask_ms_per_step"] == pytest.approx(20.0)
    assert srv["other_ms_per_step"] == pytest.approx(1e3 * (5.0 - 2.0 - 0.4) / 20)
    assert srv["mean_batch"] == pytest.approx(2.5)
    assert s["cpu_share"] == {"server": pytest.approx(0.7), "bench": pytest.approx(0.1),
                              "others": pytest.approx(0.05)}
    assert s["mean_output_tokens"] == pytest.approx(65 / 4)


def test_cpu_accounting_splits_the_machine_between_server_bench_and_others():
    d = sb.cpu_delta({"total": 10.0, "busy": 4.0, "bench": 1.0, "server": 2.0},
                     {"total": 30.0, "busy": 20.0, "bench": 2.0, "server": 14.0})
    assert d == {"total": 20.0, "busy": 16.0, "bench": 1.0, "server": 12.0, "others": 3.0}
    assert "others" not in sb.cpu_delta({"total": 1.0, "busy": 1.0, "bench": 0.0},
                                        {"total": 2.0, "busy": 2.0, "bench": 0.5})
    assert sb.cpu_delta(None, {"total": 1.0}) is None
    now = sb.cpu_times(os.getpid())
    if now is not None:  # Linux: this process is the "server" too
        assert now["total"] >= now["busy"] > 0 and now["server"] >= 0 and now["bench"] > 0


def test_summarize_level_without_answers_or_server_counters():
    s = sb.summarize_level([sample(UNCONSTRAINED, 1, status="error")],
                           [Block(UNCONSTRAINED, 1, 0, 1, 0.0)])
    assert s["cpu_share"] == {"server": None, "bench": None, "others": None}
    assert s["answered"] == 0 and s["errors"] == 1 and s["tokens_per_s"] is None
    assert s["ttft_ms"]["p50"] is None and s["valid_share"] is None
    assert s["server"]["steps"] == 0 and s["server"]["forward_ms_per_step"] is None


def level(mode: str, c: int, tps: float | None, *, stop_invalid: int = 0,
          answered: int = 4) -> dict:
    return {"mode": mode, "concurrency": c,
            "summary": {"tokens_per_s": tps, "stop_invalid": stop_invalid,
                        "requests": 4, "answered": answered}}


def test_ratios_and_targets():
    levels = [level(CONSTRAINED, 1, 10.0), level(UNCONSTRAINED, 1, 10.0),
              level(CONSTRAINED, 16, 28.0), level(UNCONSTRAINED, 16, 40.0)]
    r = sb.ratios(levels)
    assert r["constrained_vs_unconstrained"] == {"1": pytest.approx(1.0),
                                                 "16": pytest.approx(0.7)}
    assert r["scaling"] == {"from": 1, "to": 16, CONSTRAINED: pytest.approx(2.8),
                            UNCONSTRAINED: pytest.approx(4.0)}
    assert r["forward_scaling"] == {CONSTRAINED: None, UNCONSTRAINED: None}  # no counters
    got = dict(sb.targets(levels, r))
    assert got["every constrained response that finished with stop validates"] is True
    assert got["every request answered (no errors, no 400s)"] is True
    assert got["c1: constrained/unconstrained throughput >= 0.95"] is True
    assert got["c16: constrained/unconstrained throughput >= 0.95"] is False
    assert got["constrained: throughput c16/c1 >= 3"] is False
    assert got["unconstrained: throughput c16/c1 >= 3"] is True
    result = {"targets": sb.targets(levels, r)}
    assert sb.failed_targets(result) == ["c16: constrained/unconstrained throughput >= 0.95",
                                         "constrained: throughput c16/c1 >= 3"]


def test_forward_scaling_compares_forward_seconds_per_output_token():
    def timed(mode: str, c: int, forward_s: float, tokens: int) -> dict:
        lv = level(mode, c, 10.0)
        lv["summary"]["server"] = {"forward_s": forward_s, "completion_tokens": tokens}
        return lv

    # c1: 12 ms and 10 ms of forward per token; c16: 4 ms and 2.5 ms
    levels = [timed(CONSTRAINED, 1, 1.2, 100), timed(UNCONSTRAINED, 1, 1.0, 100),
              timed(CONSTRAINED, 16, 0.8, 200), timed(UNCONSTRAINED, 16, 1.0, 400)]
    r = sb.ratios(levels)
    assert r["forward_scaling"] == {CONSTRAINED: pytest.approx(3.0),
                                    UNCONSTRAINED: pytest.approx(4.0)}
    (line,) = [x for x in sb.ratio_lines(r) if "forward pass alone" in x]
    assert "c1 over c16): constrained 3.00x, unconstrained 4.00x" in line
    assert not any("forward" in x for x in sb.ratio_lines(sb.ratios(levels[:2] + [
        level(CONSTRAINED, 16, 20.0), level(UNCONSTRAINED, 16, 20.0)])))


def test_a_report_of_no_levels_is_its_header():
    """A run whose every level failed still prints its table (the header alone)."""
    (header,) = sb.format_table([]).splitlines()
    assert header.split()[:3] == ["mode", "conc", "reqs"]


def test_targets_count_violations_and_unanswered_requests():
    levels = [level(CONSTRAINED, 1, 10.0, stop_invalid=1), level(UNCONSTRAINED, 1, None,
                                                                  answered=3)]
    r = sb.ratios(levels)
    assert r["constrained_vs_unconstrained"] == {"1": None} and r["scaling"] == {}
    got = dict(sb.targets(levels, r))
    assert got["every constrained response that finished with stop validates"] is False
    assert got["every request answered (no errors, no 400s)"] is False
    assert got["c1: constrained/unconstrained throughput >= 0.95"] is None
    assert not any("c16" in text or "/c1" in text for text in got)


def test_block_plan_alternates_modes_abba_and_covers_every_request():
    plan = sb.block_plan([1, 4], requests=5, rounds=2)
    assert [(c, r, m) for c, r, m, _ in plan] == [
        (1, 0, CONSTRAINED), (1, 0, UNCONSTRAINED), (1, 1, UNCONSTRAINED), (1, 1, CONSTRAINED),
        (4, 0, CONSTRAINED), (4, 0, UNCONSTRAINED), (4, 1, UNCONSTRAINED), (4, 1, CONSTRAINED)]
    for c in (1, 4):
        for mode in (CONSTRAINED, UNCONSTRAINED):
            sent = [j for cc, _, m, idx in plan if cc == c and m == mode for j in idx]
            assert sent == list(range(5))
    assert len(sb.block_plan([2], requests=1, rounds=3)) == 2  # empty rounds are dropped
    # waves: each block holds at least waves x concurrency requests
    plan = sb.block_plan([1, 4], requests=5, rounds=2, waves=3)
    sizes = {(c, r): len(idx) for c, r, m, idx in plan if m == CONSTRAINED}
    assert sizes == {(1, 0): 3, (1, 1): 3, (4, 0): 12, (4, 1): 12}  # max(5, 3 x c x 2)


def test_select_schemas_is_seeded_and_counts_skips():
    records = [{"id": f"r{i}", "schema": {}} for i in range(20)]
    probe = lambda r: "odd" if int(r["id"][1:]) % 2 else None  # noqa: E731
    kept, skipped = sb.select_schemas(records, 4, seed=3, probe=probe)
    again, _ = sb.select_schemas(records, 4, seed=3, probe=probe)
    assert [r["id"] for r in kept] == [r["id"] for r in again]
    assert len(kept) == 4 and all(int(r["id"][1:]) % 2 == 0 for r in kept)
    assert set(skipped.values()) <= {"odd"}
    few, rest = sb.select_schemas(records, 50, seed=3, probe=probe)
    assert len(few) == 10 and len(rest) == 10  # ran out: every record tried


def test_workload_matches_unconstrained_lengths_to_the_constrained_answers():
    recs = [{"id": "a", "schema": {"type": "integer"}}, {"id": "b", "schema": {"enum": [1]}}]
    msgs = {r["id"]: sb.make_messages(r["schema"]) for r in recs}
    work = sb.Workload(recs, msgs, 128, matched={"a": 7, "b": 0})
    assert work.request(0, CONSTRAINED) == (recs[0], msgs["a"], {"type": "integer"}, 128)
    assert work.request(2, UNCONSTRAINED) == (recs[0], msgs["a"], None, 7)
    assert work.request(3, UNCONSTRAINED)[3] == 1  # an empty answer still asks for a token
    free = sb.Workload(recs, msgs, 128)
    assert free.request(1, UNCONSTRAINED) == (recs[1], msgs["b"], None, 128)


def test_messages_cut_long_schemas_and_counters_diff():
    long = {"enum": ["x" * 100] * 100}
    (msg,) = sb.make_messages(long, max_chars=300)
    assert msg["role"] == "user" and "... (cut)" in msg["content"]
    assert len(msg["content"]) < 300 + len(sb.PROMPT_TEMPLATE) + 20
    (short,) = sb.make_messages({"type": "integer"})
    assert '{"type":"integer"}' in short["content"] and "cut" not in short["content"]
    assert sb.counter_delta({"forward_seconds_sum": 1.0, "queue_depth": 3},
                            {"forward_seconds_sum": 2.5, "queue_depth": 0,
                             "requests_total": 2}) == {"forward_seconds_sum": 1.5,
                                                       "requests_total": 2}


def test_validators_use_the_schemas_draft_and_formats():
    pytest.importorskip("jsonschema")
    v = sb.Validators()
    rec = {"id": "a", "schema": {"$schema": "http://json-schema.org/draft-04/schema#",
                                 "type": "object", "properties": {
                                     "n": {"type": "number", "maximum": 5,
                                           "exclusiveMaximum": True},
                                     "ip": {"type": "string", "format": "ipv4"}}}}
    assert v.usable(rec) is None
    assert v.check(rec, '{"n": 4, "ip": "10.0.0.1"}') == (True, "valid")
    assert v.check(rec, '{"n": 5}')[0] is False  # draft-04's boolean exclusiveMaximum
    assert v.check(rec, '{"ip": "300.0.0.1"}')[0] is False  # format checked
    assert v.check(rec, '{"n": ')[0] is False
    assert v.usable({"id": "b", "schema": {"type": 12}}) is not None


def test_cli_registers_bench_serve():
    args = build_parser().parse_args(["bench", "serve", "--concurrency", "1,2", "--check"])
    assert args.handler.__name__ == "_cmd_bench_serve"
    assert (args.requests, args.rounds, args.max_tokens, args.sample) == (32, 2, 128, 24)
    assert args.waves == 8
    assert sb.parse_levels(args.concurrency) == [1, 2]
    with pytest.raises(sb.ServeBenchError):
        sb.parse_levels("1,0")


# ----------------------------------------------------------------------------- end to end


def _live_skip_reason() -> str | None:
    reason = default_model_missing("openai", "httpx", "jsonschema", "starlette", "uvicorn",
                                   "llama_cpp")
    if reason:
        return reason
    if not MASKBENCH.exists():
        return f"{MASKBENCH} is absent"
    return None


live = pytest.mark.skipif(_live_skip_reason() is not None, reason=str(_live_skip_reason()))


@live
def test_tiny_run_end_to_end_counts_add_up(tmp_path, capsys):
    out = tmp_path / "serve.json"
    # (children from before, such as multiprocessing's resource tracker that an
    # earlier test's worker processes started, are not the bench's)
    before = set(_children())
    code = main(["bench", "serve", "--sample", "2", "--concurrency", "1,2", "--requests", "2",
                 "--waves", "0", "--rounds", "1", "--max-tokens", "16", "--max-schema-chars", "400",
                 "--json", str(out)])
    assert code == 0  # no --check: targets are reported, not enforced
    printed = capsys.readouterr().out
    assert "bench serve: 2 schemas" in printed and "target:" in printed
    r = json.loads(out.read_text())
    assert r["server_started"] is True and len(r["schemas"]) == 2
    assert [(lv["mode"], lv["concurrency"]) for lv in r["levels"]] == [
        (CONSTRAINED, 1), (UNCONSTRAINED, 1), (CONSTRAINED, 2), (UNCONSTRAINED, 2)]
    assert len(r["blocks"]) == 4 and len(r["samples"]) == 8
    for lv in r["levels"]:
        s = lv["summary"]
        mine = [x for x in r["samples"] if x["mode"] == lv["mode"]
                and x["concurrency"] == lv["concurrency"]]
        assert s["requests"] == len(mine) == 2
        assert s["answered"] == s["requests"]  # the probe kept only schemas it compiles
        assert s["rejected"] == s["errors"] == 0
        assert s["output_tokens"] == sum(x["tokens"] for x in mine)
        assert all(0 < x["tokens"] <= 16 for x in mine)
        assert sum(s["finish_reasons"].values()) == s["answered"]
        assert set(s["finish_reasons"]) <= {"stop", "length"}
        assert s["valid"] <= s["checked"] <= s["answered"]
        assert s["stop_valid"] + s["stop_invalid"] <= s["stop"] == s["finish_reasons"].get(
            "stop", 0)
        assert s["valid"] == sum(1 for x in mine if x["valid"])
        # the server counted what the clients received
        assert s["server"]["completion_tokens"] == s["output_tokens"]
        assert s["server"]["steps"] > 0 and s["tokens_per_s"] > 0
        if s["cpu_share"]["server"] is not None:  # Linux: /proc read around every block
            assert 0 < s["cpu_share"]["server"] <= 1 and s["cpu_share"]["others"] >= 0
    # lengths matched: each unconstrained request was capped at its schema's probe answer
    assert r["params"]["lengths"] == "matched" and set(r["probe_tokens"]) == set(r["schemas"])
    for x in r["samples"]:
        if x["mode"] == UNCONSTRAINED:
            assert x["tokens"] <= max(1, r["probe_tokens"][x["schema_id"]])
    assert set(r["ratios"]["constrained_vs_unconstrained"]) == {"1", "2"}
    assert {r["ratios"]["scaling"]["from"], r["ratios"]["scaling"]["to"]} == {1, 2}
    # the server's forward counters reached the forward-only ratio, in both modes
    assert all(x > 0 for x in r["ratios"]["forward_scaling"].values())
    assert all(isinstance(text, str) for text, _ in r["targets"])
    assert not set(_children()) - before, "the server subprocess outlived the bench"


def _children() -> list[str]:
    """Command lines of this process's live children (Linux /proc; [] elsewhere)."""
    me, out = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me and fields[0] != "Z":
                out.append((stat.parent / "cmdline").read_text().replace("\0", " "))
        except (OSError, IndexError):
            continue
    return out


def test_an_interrupt_while_the_server_starts_stops_it(monkeypatch):
    server = sb.ServerProcess([], ready_timeout=60)

    def interrupted(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(server._lines, "get", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with server:
            pass
    assert server.proc is not None and server.proc.poll() is not None


@live
def test_a_server_that_fails_to_start_is_an_error_and_not_left_running(tmp_path):
    missing = tmp_path / "missing.gguf"
    server = sb.ServerProcess(["--model", str(missing)], ready_timeout=120)
    with pytest.raises(sb.ServeBenchError, match="exited with status"):
        with server:
            pass
    assert server.proc is not None and server.proc.poll() is not None
