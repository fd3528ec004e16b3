"""``automask serve`` end to end: a live server on 127.0.0.1 and the real ``openai`` client.

The server runs as a subprocess (``python -m automask.cli serve --port 0``)
with the default model, as a user would start it; every constrained output
is checked with ``jsonschema`` (or the regex / grammar it was asked for).
Skips with a reason where the ``serve`` extra or the default model is absent.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("llama_cpp", reason="the serve extra (llama-cpp-python) is not installed")

from support.models import default_model_missing  # noqa: E402

if _missing := default_model_missing():
    pytest.skip(_missing, allow_module_level=True)

MODEL = "SmolLM2-135M-Instruct"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 16},
                   "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "age"],
}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a timezone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 12}},
                   "required": ["tz"]}, "strict": True}}


class LiveServer:
    """A server subprocess: its URL, and its output read on threads (so pipes never fill)."""

    def __init__(self, *args: str):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "automask.cli", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.stderr: list[str] = []
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stdout, lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append),
                         daemon=True).start()
        deadline = time.monotonic() + 240
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                pytest.fail(f"the server did not get ready: {''.join(self.stderr)[-2000:]}")
            found = re.search(r"ready at (http://\S+/v1)", line)
            if found:
                self.url = found.group(1)
                break

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line)

    def client(self, **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.url + path, timeout=120, **kw)

    def metric(self, name: str) -> float:
        text = httpx.get(self.url.removesuffix("/v1") + "/metrics", timeout=10).text
        found = re.search(rf"^automask_{name} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture(scope="module")
def server():
    live = LiveServer("--max-queue", "256", "--max-sequences", "16")
    yield live
    assert live.stop() == 0
    assert "Traceback" not in "".join(live.stderr)


def person_request(client, **kw):
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
        temperature=0, max_tokens=60, **kw)


def test_models_health_and_metrics(server):
    client = server.client()
    assert [m.id for m in client.models.list().data] == [MODEL]
    base = server.url.removesuffix("/v1")
    assert httpx.get(base + "/health").json() == {"status": "ok"}
    text = httpx.get(base + "/metrics").text
    assert "# TYPE automask_queue_depth gauge" in text


def test_json_schema_response_format(server):
    r = person_request(server.client())
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), PERSON)
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert "automask" not in choice.model_dump()  # only when asked for


def test_parse_with_a_pydantic_model(server):
    from pydantic import BaseModel, Field

    class City(BaseModel):
        name: str = Field(max_length=20)
        country: str = Field(max_length=20)
        population: int

    r = server.client().chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Name a big city."}],
        response_format=City, temperature=0, max_tokens=80)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, City)
    jsonschema.validate(json.loads(r.choices[0].message.content), City.model_json_schema())


def _check_calls(message, tools, names=None):
    assert message.tool_calls, message
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert names is None or call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


def test_tools_required(server):
    tools = [WEATHER, TIME]
    r = server.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=tools, tool_choice="required", temperature=0, max_tokens=120)
    assert r.choices[0].finish_reason == "tool_calls"
    _check_calls(r.choices[0].message, tools)


def test_tools_named_function(server):
    tools = [WEATHER, TIME]
    r = server.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=tools, tool_choice={"type": "function", "function": {"name": "get_time"}},
        temperature=0, max_tokens=120)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    _check_calls(message, tools, names={"get_time"})
    assert len(message.tool_calls) == 1


def test_tools_auto_and_a_tool_result_turn(server):
    tools = [WEATHER]
    messages = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city": "Oslo", "unit": "celsius"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
    ]
    r = server.client().chat.completions.create(
        model=MODEL, messages=messages, tools=tools, tool_choice="auto", temperature=0,
        max_tokens=40)
    choice = r.choices[0]
    if choice.message.tool_calls:
        _check_calls(choice.message, tools)
        assert choice.finish_reason == "tool_calls"
    else:
        assert choice.message.content and "<tool_call>" not in choice.message.content


def test_streaming_reassembles_to_the_same_json_from_the_prefix_cache(server):
    client = server.client()
    whole = person_request(client).choices[0].message.content
    chunks = list(person_request(client, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    jsonschema.validate(json.loads(text), PERSON)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens > 0
    # the same prompt again: all but its last token come from the prefix cache, and the
    # greedy answer is the same as from a full prefill
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1


def test_n_choices_each_valid(server):
    r = person_request(server.client(), n=2, seed=3, extra_body={"temperature": 0.9})
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        if c.finish_reason == "stop":
            jsonschema.validate(json.loads(c.message.content), PERSON)


def test_structured_outputs_kinds_and_completions(server):
    client = server.client()
    cases = [
        ({"regex": r"[A-Z][a-z]{2,8} (is|was) \d{1,3}"},
         lambda t: re.fullmatch(r"[A-Z][a-z]{2,8} (is|was) \d{1,3}", t)),
        ({"choice": ["positive", "negative"]}, lambda t: t in ("positive", "negative")),
        ({"grammar": 'root ::= "yes" | "no" | "maybe"'}, lambda t: t in ("yes", "no", "maybe")),
        ({"grammar": 'start: "x" DIGIT DIGIT?\n%import common.DIGIT'},
         lambda t: re.fullmatch(r"x\d\d?", t)),
        ({"json": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
          "disable_any_whitespace": True},
         lambda t: " " not in t and isinstance(json.loads(t), list)),
    ]
    for so, ok in cases:
        r = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Answer."}], temperature=0,
            max_tokens=30, extra_body={"structured_outputs": so})
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop" and ok(text), (so, text)
    r = client.completions.create(model=MODEL, prompt="The answer is", max_tokens=10,
                                  temperature=0,
                                  extra_body={"structured_outputs": {"regex": r" \d{1,4}"}})
    assert re.fullmatch(r" \d{1,4}", r.choices[0].text) and r.object == "text_completion"


def test_logprobs_stop_and_diagnostics(server):
    client = server.client()
    r = person_request(client, logprobs=True, top_logprobs=2,
                       extra_body={"automask": {"diagnostics": True}})
    choice = r.choices[0]
    entries = choice.logprobs.content
    assert len(entries) == r.usage.completion_tokens
    assert "".join(e.token for e in entries) == choice.message.content
    assert all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in entries)
    d = choice.model_dump()["automask"]
    assert d["complete"] is True and 0 <= d["forced_share"] <= 1 and d["kl_mean"] >= 0
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Count: one, two, three, four"}],
        temperature=0, max_tokens=40, stop=[","])
    assert "," not in r.choices[0].message.content


def _error(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body["error"]) >= {"message", "type", "code", "param"}
    return body["error"]


def test_bad_input_is_answered_and_the_server_keeps_serving(server):
    base = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}

    def schema(s):
        return {**base, "response_format": {"type": "json_schema",
                                            "json_schema": {"name": "x", "schema": s}}}

    r = server.post("/chat/completions", content=b'{"model": "x", "messages": [',
                    headers={"content-type": "application/json"})
    assert r.status_code == 400 and _error(r)["code"] == "invalid_json"
    r = server.post("/chat/completions", json={**base, "model": "gpt-17"})
    assert r.status_code == 404 and _error(r)["code"] == "model_not_found"
    r = server.post("/chat/completions", json=schema({"type": "string", "format": "foo"}))
    e = _error(r)
    assert r.status_code == 400 and e["code"] == "unsupported_feature"
    assert "#/format" in e["message"] and e["type"] == "invalid_request_error"
    r = server.post("/chat/completions", json={**base, "structured_outputs": {"regex": "a(b"}})
    assert r.status_code == 400 and _error(r)["code"] == "grammar_error"
    r = server.post("/chat/completions",
                    json=schema({"type": "integer", "minimum": 5, "maximum": 3}))
    assert r.status_code == 400 and _error(r)["code"] == "empty_language"
    r = server.post("/chat/completions", json={**base, "guided_json": PERSON})
    e = _error(r)
    assert r.status_code == 400 and e["param"] == "guided_json"
    assert "structured_outputs.json" in e["message"]
    r = server.post("/chat/completions", content=b"x" * (20 * 1024 * 1024),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    r = server.post("/chat/completions", json={**base, "max_tokens": -1})
    assert r.status_code == 400 and _error(r)["param"] == "max_tokens"
    r = server.post("/chat/completions",
                    json={**base, "structured_outputs": {"regex": "a", "choice": ["b"]}})
    assert r.status_code == 400
    r = server.post("/chat/completions", json={**base, "tools": [WEATHER],
                                               "tool_choice": {"type": "function",
                                                               "function": {"name": "nope"}}})
    assert r.status_code == 400 and _error(r)["param"] == "tool_choice"
    with pytest.raises(openai.NotFoundError):  # the client raises the typed error
        server.client().chat.completions.create(model="nope", messages=base["messages"])
    test_json_schema_response_format(server)  # and the next request is served normally


def test_client_disconnect_mid_stream_frees_its_sequence(server):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a long story."}],
            "max_tokens": 2000, "stream": True, "temperature": 0}
    with httpx.stream("POST", server.url + "/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content": "' in line and '""' not in line:
                break  # some text has arrived: now go away
    deadline = time.monotonic() + 20
    while server.metric("running_sequences") > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.metric("running_sequences") == 0
    test_json_schema_response_format(server)


def _load_schema(i: int) -> dict:
    """Different small schemas: their own keys, enums and bounds, so a mix-up shows."""
    colors = ["red", "green", "blue", "cyan", "black", "white"]
    return {
        "type": "object",
        "properties": {f"item_{i}": {"enum": [f"{colors[i % 6]}_{i}", f"none_{i}"]},
                       "count": {"type": "integer", "minimum": i, "maximum": i + 9},
                       "label": {"type": "string", "maxLength": 6}},
        "required": [f"item_{i}", "count", "label"], "additionalProperties": False,
    }


def test_load_32_clients_4_requests_each(server):
    client = server.client(timeout=300)

    def one(i: int) -> tuple[int, dict, object]:
        s = _load_schema(i)
        r = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"Give item {i} as JSON."}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": f"s{i}", "schema": s, "strict": True}},
            temperature=0.7, seed=i, max_tokens=48)
        return i, s, r

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(128)))
    assert len(results) == 128
    for i, s, r in results:
        choice = r.choices[0]
        assert choice.finish_reason == "stop", (i, choice)
        value = json.loads(choice.message.content)
        jsonschema.validate(value, s)  # its own schema: nothing mixed up between requests
        assert f"item_{i}" in value
    assert httpx.get(server.url.removesuffix("/v1") + "/health").status_code == 200
    assert server.metric("running_sequences") == 0


def test_sigint_mid_stream_stops_cleanly():
    live = LiveServer("--max-sequences", "2")
    # 1,500 letters before the output may end: still running when the grace period is over
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell a long story."}],
            "max_tokens": 2000, "stream": True,
            "structured_outputs": {"regex": "[a-z ]{1500}"}}
    got: list[str] = []

    def stream() -> None:
        try:
            with httpx.stream("POST", live.url + "/chat/completions", json=body,
                              timeout=60) as r:
                for line in r.iter_lines():
                    got.append(line)
        except httpx.HTTPError:
            pass  # the server went away: that is the point

    t = threading.Thread(target=stream)
    t.start()
    deadline = time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.stop(signal.SIGINT) == 0
    t.join(30)
    assert not t.is_alive() and [x for x in got if x][-1] == "data: [DONE]"  # ended whole
    assert any('"server_error"' in line for line in got)  # the 503 after the grace period
    err = "".join(live.stderr)
    assert "Traceback" not in err and "stopped" in err, err
