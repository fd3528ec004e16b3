"""Requests to constraints and outputs to answers, without a model or a socket.

What the server reads from a request (which constraint, compiled how, or
which 400) and what it reads back from the output (content, reasoning, tool
calls; the streaming split) are pure functions, checked here directly.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from automask import Matcher, compile
from automask.serve.chat import partial_fields, read_answer, split_reasoning
from automask.serve.constraints import (
    TOOL_BEGIN,
    TOOL_END,
    ConstraintSpec,
    GrammarCache,
    build_grammar,
    grammar_syntax,
    spec_for,
)
from automask.serve.metrics import Metrics
from automask.serve.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    RequestError,
    parse_request,
)

pytest.importorskip("pydantic")

BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
    "required": ["city"]}}}
CLOCK = {"type": "function", "function": {"name": "clock", "parameters": {
    "type": "object", "properties": {}}}}
THINK = ("<think>", "</think>")


def chat(**fields) -> ChatCompletionRequest:
    return parse_request(ChatCompletionRequest, {**BASE, **fields})  # type: ignore[return-value]


def accepts(compiled, text: str) -> bool:
    m = Matcher(compiled)
    return m.accept_bytes(text.encode()) and m.is_accepting()


def test_removed_and_bad_fields_are_400_naming_them():
    with pytest.raises(RequestError) as e:
        chat(guided_regex="a+")
    assert e.value.status == 400 and e.value.param == "guided_regex"
    assert "structured_outputs.regex" in e.value.message
    for fields, param in [({"max_tokens": -3}, "max_tokens"), ({"temperature": 3}, "temperature"),
                          ({"n": 0}, "n"), ({"presence_penalty": 0.5}, "presence_penalty"),
                          ({"stop": ["a"] * 5}, "stop"), ({"messages": []}, "messages"),
                          ({"structured_outputs": {"jsn": {}}}, "structured_outputs.jsn")]:
        with pytest.raises(RequestError) as e:
            chat(**fields)
        assert e.value.status == 400 and e.value.param == param, fields
    with pytest.raises(RequestError):
        parse_request(ChatCompletionRequest, ["not", "an", "object"])
    assert chat(user="u", logit_bias=None).model == "m"  # unknown fields are ignored
    assert parse_request(CompletionRequest, {"model": "m", "prompt": "x"}).token_limit == 16


def test_spec_key_is_canonical_and_options_count():
    a = spec_for(chat(response_format={"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "required": ["a"], "properties": {"a": {}}}}}))
    b = spec_for(chat(response_format={"type": "json_schema", "json_schema": {
        "name": "y", "schema": {"properties": {"a": {}}, "required": ["a"], "type": "object"}}}))
    strict = spec_for(chat(response_format={"type": "json_schema", "json_schema": {
        "name": "x", "strict": True, "schema": {"type": "object"}}}))
    assert a is not None and b is not None and a.key == b.key
    assert strict is not None and strict.key != spec_for(chat(response_format={
        "type": "json_schema", "json_schema": {"schema": {"type": "object"}}})).key
    so = spec_for(chat(structured_outputs={"json": '{"type": "object"}',
                                            "disable_any_whitespace": True}),
                  whitespace="flexible")
    assert so == ConstraintSpec("json_schema", {"type": "object"}, {"whitespace": "compact"})
    assert spec_for(chat()) is None and spec_for(chat(response_format={"type": "text"})) is None


def test_conflicting_constraints_are_400():
    for fields in [
        {"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
        {"tools": [WEATHER], "response_format": {"type": "json_object"}},
        {"structured_outputs": {"regex": "a", "choice": ["b"]}},
        {"tool_choice": "required"},  # no tools
        {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
        {"response_format": {"type": "xml"}},
        {"tools": [{"type": "function", "function": {}}]},
    ]:
        with pytest.raises(RequestError) as e:
            spec_for(chat(**fields))
        assert e.value.status == 400, fields
    assert spec_for(chat(tools=[WEATHER], tool_choice="none")) is None


@pytest.mark.parametrize("text, syntax", [
    ('root ::= "a" | "b"', "gbnf"),
    ('# comment\nroot   ::= item+\nitem ::= [a-z]', "gbnf"),
    ('start: "a" | "b"', "lark"),
    ('start: WORD\n%import common.WORD  // no ::= here', "lark"),
])
def test_grammar_syntax_detection(text, syntax):
    assert grammar_syntax(text) == syntax


def test_tool_grammars(tiny_bpe_vocab):
    def call(name, args):
        return f"{TOOL_BEGIN}{json.dumps({'name': name, 'arguments': args})}{TOOL_END}"

    good, other = call("weather", {"city": "Oslo"}), call("clock", {})
    required = compile(build_grammar(spec_for(chat(tools=[WEATHER, CLOCK],
                                                   tool_choice="required"))), tiny_bpe_vocab)
    assert accepts(required, good) and accepts(required, good + "\n" + other)
    assert not accepts(required, "") and not accepts(required, "Sure! " + good)
    assert not accepts(required, call("weather", {"town": "Oslo"}))
    assert not accepts(required, call("nope", {}))
    named = compile(build_grammar(spec_for(chat(
        tools=[WEATHER, CLOCK], tool_choice={"type": "function", "function": {"name": "clock"}}))),
        tiny_bpe_vocab)
    assert accepts(named, other) and not accepts(named, good)
    assert not accepts(named, other + other)  # exactly one call
    single = compile(build_grammar(spec_for(chat(tools=[WEATHER], tool_choice="required",
                                                 parallel_tool_calls=False))), tiny_bpe_vocab)
    assert accepts(single, good) and not accepts(single, good + good)
    auto = compile(build_grammar(spec_for(chat(tools=[WEATHER]))), tiny_bpe_vocab)
    assert accepts(auto, "Let me check. " + good + " Done.") and accepts(auto, "no tools")
    assert not accepts(auto, "x <tool_call>\n{}")


def test_reasoning_comes_first_then_the_constraint(tiny_bpe_vocab):
    spec = spec_for(chat(structured_outputs={"choice": ["yes", "no"]}), reasoning=THINK)
    compiled = compile(build_grammar(spec), tiny_bpe_vocab)
    assert accepts(compiled, "<think>maybe yes? no.</think>\nno")
    assert accepts(compiled, "hmm</think>yes")  # a template that opened the block itself
    assert not accepts(compiled, "yes") and not accepts(compiled, "<think>x</think>maybe")


def test_read_answer_splits_calls_reasoning_and_content():
    out = f"<think>plan</think> Checking.\n{TOOL_BEGIN}" \
          f'{{"name": "weather", "arguments": {{"city": "Oslo"}}}}{TOOL_END}'
    a = read_answer(out, reasoning=THINK, tools_active=True)
    assert a.reasoning == "plan" and a.content == "Checking.\n"
    (call,) = a.tool_calls
    assert call["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    only = read_answer(TOOL_BEGIN + '{"name": "c", "arguments": {}}' + TOOL_END,
                       reasoning=None, tools_active=True)
    assert only.content is None and len(only.tool_calls) == 1
    cut = read_answer("x " + TOOL_BEGIN + '{"name": "c", "argu', reasoning=None,
                      tools_active=True)
    assert not cut.tool_calls and cut.content.startswith("x <tool_call>")
    assert split_reasoning("<think>unfinished", THINK) == ("unfinished", "")
    assert read_answer("plain", reasoning=None, tools_active=False).content == "plain"


# Pieces of the markers as a tokenizer may cut them, and text around them.
PIECES = ["<think>", "</think>", "<", "</", "<th", "ink>", "think", TOOL_BEGIN, TOOL_END, "<tool",
          "_call>", "\n", " ", "a", "b", '{"name": "c", "arguments": {}}']


@settings(max_examples=300)
@example(["a <tool", "_call>", "\n{}"], False, True)  # a trigger split across deltas
@example(["<th", "ink>a</", "think", ">b"], True, False)  # markers split across deltas
@example(["a", "</", "b"], True, False)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14), st.booleans(), st.booleans())
def test_streamed_fields_only_grow_and_end_as_the_answer(parts, think, tools):
    """What streaming sends (partial_fields of each prefix) must be a prefix of what it sends
    later and of the final answer's fields: a client's concatenated deltas equal the answer."""
    reasoning = THINK if think else None
    text = ""
    last = ("", "")
    for part in parts:
        text += part
        now = partial_fields(text, reasoning, tools)
        assert now[0].startswith(last[0]) and now[1].startswith(last[1])
        last = now
    final = read_answer(text, reasoning=reasoning, tools_active=tools)
    assert (final.reasoning or "").startswith(last[0])
    assert (final.content or "").startswith(last[1])


def test_grammar_cache_counts_evicts_and_keeps_errors(tiny_bpe_vocab):
    compiles: list[float] = []
    cache = GrammarCache(tiny_bpe_vocab, capacity=2, on_compile=compiles.append)
    specs = [ConstraintSpec("regex", p) for p in ("a+", "b+", "c+")]
    first = cache.get(specs[0], "p")
    assert cache.get(specs[0], "p") is first and (cache.hits, cache.misses) == (1, 1)
    cache.get(specs[1], "p")
    cache.get(specs[2], "p")
    assert len(cache) == 2 and cache.get(specs[0], "p") is not first  # evicted, recompiled
    bad = ConstraintSpec("json_schema", {"type": "string", "format": "nope"})
    for _ in range(2):
        with pytest.raises(RequestError) as e:
            cache.get(bad, "response_format")
        assert e.value.code == "unsupported_feature" and "#/format" in e.value.message
    assert len(compiles) == cache.misses == 5  # the error was compiled once


def test_metrics_text_format():
    m = Metrics()
    m.count("requests_total", "chat")
    m.count("requests_total", 'we"ird')
    m.observe("mask", 0.5)
    m.gauge("queue_depth", lambda: 3)
    text = m.render()
    assert 'automask_requests_total{kind="chat"} 1' in text
    assert 'automask_requests_total{kind="we\\"ird"} 1' in text
    assert "automask_mask_seconds_sum 0.5" in text and "automask_mask_seconds_count 1" in text
    assert "# TYPE automask_queue_depth gauge\nautomask_queue_depth 3" in text
    assert text.count("# TYPE automask_requests_total counter") == 1
