"""The Mask Explorer's JSON API (``automask explore``), over a fake model and the default one.

The fake model's logits are a function of the sequence's own ids (as in
test_serve_scheduler), so every step is reproducible and a rollback must give
back exactly the distribution it showed before. Bad input must always be a
JSON error with a 4xx status, and the explorer must keep working after it.
"""

from __future__ import annotations

import json
import re
import threading

import numpy as np
import pytest
from support.models import default_model_missing
from support.paths import REPO_ROOT

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from automask.explore.app import create_app, static_dir  # noqa: E402
from automask.explore.examples import all_examples  # noqa: E402
from automask.explore.session import Explorer  # noqa: E402

ROOT = REPO_ROOT
PERSON = (ROOT / "examples" / "person.schema.json").read_text()
EMAIL = r"[a-z]{2,8}@(mail|web)\.(com|org)"


class FakeRunner:
    """The BatchRunner protocol over a function of a slot's ids: one slot, no KV cache."""

    def __init__(self, width: int, *, max_context: int = 512, seed: int = 0):
        self.name = "fake"
        self.width = width
        self.eos_token_ids: list[int] = []
        self.max_sequences = 1
        self.max_context = max_context
        self.seed = seed
        self.slots: dict[int, list[int]] = {}
        self.feeds = 0

    def open(self, prompt=()) -> int:
        if self.slots:
            raise RuntimeError("the explorer uses one slot")
        self.slots[0] = []
        return 0

    def length(self, slot: int) -> int:
        return len(self.slots[slot])

    def close(self, slot: int) -> None:
        self.slots.pop(slot, None)

    def logits(self, ids: list[int]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, len(ids), *ids[-6:]])
        return rng.normal(0.0, 3.0, self.width).astype(np.float32)

    def feed(self, feeds):
        self.feeds += 1
        out = []
        for slot, ids, keep in feeds:
            seq = self.slots[slot]
            seq.extend(int(t) for t in ids)
            assert len(seq) <= self.max_context
            out.append(np.stack([self.logits(seq[:len(seq) - keep + i + 1])
                                 for i in range(keep)]))
        return out


@pytest.fixture
def explorer(tiny_bpe_vocab) -> Explorer:
    return Explorer(FakeRunner(tiny_bpe_vocab.size), tiny_bpe_vocab, tiny_bpe_vocab,
                    model_name="fake")


@pytest.fixture
def client(explorer) -> TestClient:
    with TestClient(create_app(explorer)) as c:
        yield c


def ok(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def refused(response, status: int, code: str) -> dict:
    """A JSON error with this status and code (never a 500, never HTML)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"]
    return error


def compile_person(client: TestClient, prompt: str = "Describe a person.") -> dict:
    return ok(client.post("/api/compile", json={"kind": "schema", "text": PERSON,
                                                "prompt": prompt}))


def top_masked(state: dict) -> dict:
    return next(r for r in state["current"]["rows"] if not r["legal"])


# ----------------------------------------------------------------------------- the page

def test_page_and_its_files_come_from_this_server(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    html = page.text
    for testid in ("constraint-input", "prompt-input", "compile-button", "compile-error",
                   "step-button", "run-button", "undo-button", "mask-toggle", "token-table",
                   "output", "status"):
        assert f'data-testid="{testid}"' in html, testid
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets and not [a for a in assets if "//" in a], "everything must load from here"
    for asset in assets:
        if asset.startswith("/static/"):
            r = client.get(asset)
            assert r.status_code == 200 and r.text, asset
    assert {p.name for p in static_dir().iterdir()} >= {"index.html", "app.js", "style.css"}


def test_examples_include_the_repository_schemas_and_every_kind(client):
    listed = ok(client.get("/api/examples"))["examples"]
    names = {e["name"]: e for e in listed}
    assert names["person"]["text"] == PERSON and names["person"]["kind"] == "schema"
    assert {e["kind"] for e in listed} == {"schema", "regex", "gbnf", "lark", "choices"}


def test_every_example_compiles(client):
    for example in all_examples():
        state = ok(client.post("/api/compile", json=example.as_dict()))
        assert state["constraint"]["kind"] == example.kind
        assert state["current"]["rows"], example.name


# ----------------------------------------------------------------------------- stepping

def test_compile_shows_the_pending_step(client):
    state = compile_person(client)
    assert state["status"]["code"] == "prefix" and "valid prefix" in state["status"]["text"]
    assert state["prompt_tokens"] > 0
    # the grammar forces '{"name":"' first: fast-forwarded as action 0
    assert state["steps"] and all(s["forced"] and s["action"] == 0 for s in state["steps"])
    assert state["output"]["text"] == '{"name":"'[:len(state["output"]["text"])]
    current = state["current"]
    assert current["pending"] and current["index"] == len(state["steps"])
    m = current["measure"]
    assert 0 < m["legal_count"] <= 500 and 0 <= m["legal_mass"] <= 1
    assert m["rejection_mass"] == pytest.approx(1 - m["legal_mass"])
    assert m["kl"] == pytest.approx(-np.log(m["legal_mass"]))
    legal = [r for r in current["rows"] if r["legal"]]
    assert sum(r["renorm"] for r in legal) <= 1 + 1e-9
    assert all(r["why"] for r in current["rows"] if not r["legal"])
    assert current["expects"]["summary"]


def test_steps_take_legal_tokens_and_their_details_stay(client):
    state = compile_person(client)
    first = len(state["steps"])
    for _ in range(5):
        state = ok(client.post("/api/step"))
    taken = state["steps"][first:]
    assert len(taken) >= 5
    assert all(s["legal"] and s["mask"] for s in taken)
    for s in taken:
        detail = ok(client.get(f"/api/steps/{s['index']}"))
        chosen = [r for r in detail["rows"] if r["chosen"]]
        assert len(chosen) == 1 and chosen[0]["id"] == s["token"] and chosen[0]["legal"]
        assert not detail["pending"]


def test_greedy_takes_the_best_legal_token(client):
    state = compile_person(client)
    ok(client.post("/api/settings", json={"temperature": 0, "repetition_penalty": 1.0}))
    best = state["current"]["measure"]["best_legal"]
    state = ok(client.post("/api/step"))
    chosen = next(s for s in state["steps"] if s["chosen_by"] == "greedy")
    assert chosen["token"] == best


def test_seeded_sampling_is_reproducible_across_undo(client):
    compile_person(client)
    ok(client.post("/api/settings", json={"temperature": 1.5, "top_p": 0.95, "seed": 7}))
    once = ok(client.post("/api/step"))
    undone = ok(client.post("/api/undo"))
    assert len(undone["steps"]) < len(once["steps"])
    twice = ok(client.post("/api/step"))
    assert [s["token"] for s in twice["steps"]] == [s["token"] for s in once["steps"]]


def test_run_to_the_end_of_a_regex(client):
    state = ok(client.post("/api/compile", json={"kind": "regex", "text": EMAIL,
                                                 "prompt": "An email address:"}))
    for _ in range(20):
        state = ok(client.post("/api/run", json={"max_steps": 8}))
        assert state["run"]["taken"] <= 8
        if state["finished"]:
            break
    assert state["finished"] in ("eos", "complete")
    assert state["status"]["code"] == "accepting" and "accepting" in state["status"]["text"]
    assert re.fullmatch(EMAIL, state["output"]["text"])
    verdict = state["verdict"]
    assert verdict["complete"] and verdict["inside"] and verdict["schema"] is None
    assert "Valid is not true" in verdict["note"]
    refused(client.post("/api/step"), 409, "finished")


def test_the_token_limit_cuts_a_valid_prefix(client):
    compile_person(client)
    ok(client.post("/api/settings", json={"max_tokens": 12}))
    state = ok(client.post("/api/run", json={"max_steps": 64}))
    assert state["finished"] == "length"
    assert state["status"]["code"] == "prefix" and "valid prefix" in state["status"]["text"]
    assert not state["verdict"]["complete"]
    assert state["verdict"]["schema"]["valid"] is None  # not checked: incomplete
    # a larger limit lets it go on
    state = ok(client.post("/api/settings", json={"max_tokens": 40}))
    assert state["finished"] is None and state["current"] is not None


def test_schema_output_gets_a_jsonschema_verdict(client):
    state = ok(client.post("/api/compile", json={
        "kind": "schema", "prompt": "ok?",
        "text": json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}},
                            "required": ["ok"], "additionalProperties": False})}))
    state = ok(client.post("/api/run", json={"max_steps": 32}))
    assert state["finished"] in ("eos", "complete")
    assert state["verdict"]["schema"] == {"valid": True, "message": "jsonschema: valid"}
    assert json.loads(state["output"]["text"]) in ({"ok": True}, {"ok": False})


def test_steering_picks_an_allowed_token(client):
    state = compile_person(client)
    legal = [r for r in state["current"]["rows"] if r["legal"]]
    target = legal[-1]["id"]
    state = ok(client.post("/api/pick", json={"token_id": target}))
    picked = next(s for s in state["steps"] if s["chosen_by"] == "pick")
    assert picked["token"] == target and picked["legal"]


def test_mask_off_leaves_the_language_to_the_byte_and_undo_comes_back(client):
    state = compile_person(client)
    before = len(state["steps"])
    masked = top_masked(state)
    ok(client.post("/api/settings", json={"mask": False}))
    state = ok(client.post("/api/pick", json={"token_id": masked["id"]}))
    assert state["left_at"] == before
    assert state["status"]["code"] == "outside"
    assert "outside the language" in state["status"]["text"]
    step = state["steps"][before]
    assert step["legal"] is False and not step["mask"] and step["split"] is not None
    assert state["output"]["valid_bytes"] < state["output"]["bytes"]
    assert ok(client.get(f"/api/steps/{before}"))["why"] == masked["why"]
    # everything after is masked: nothing brings the output back
    state = ok(client.post("/api/step"))
    assert state["current"]["measure"]["legal_count"] == 0
    assert all(not r["legal"] for r in state["current"]["rows"])
    assert state["steps"][-1]["legal"] is False
    # the mask back on: nothing is legal, a clear 409
    ok(client.post("/api/settings", json={"mask": True}))
    refused(client.post("/api/step"), 409, "outside")
    # undo twice: back inside, and the pending step is the one shown before
    ok(client.post("/api/undo"))
    state = ok(client.post("/api/undo"))
    assert state["left_at"] is None and state["status"]["code"] == "prefix"
    assert len(state["steps"]) == before
    assert [r["id"] for r in state["current"]["rows"]][:3] == \
        [r["id"] for r in compile_person(client)["current"]["rows"]][:3]


def test_rollback_to_a_step_replays_its_distribution(client):
    compile_person(client)
    for _ in range(4):
        state = ok(client.post("/api/step"))
    k = max(s["index"] for s in state["steps"] if not s["forced"])
    shown = ok(client.get(f"/api/steps/{k}"))
    state = ok(client.post("/api/rollback", json={"step": k}))
    assert len(state["steps"]) == k
    pending = state["current"]
    assert pending["index"] == k and pending["pending"]
    assert pending["measure"] == shown["measure"]
    ids, was = {r["id"] for r in pending["rows"]}, {r["id"] for r in shown["rows"]}
    assert ids <= was and was - ids <= {shown["token"]}
    # the same token again: the same step as before
    state = ok(client.post("/api/pick", json={"token_id": shown["token"]}))
    assert state["steps"][k]["token"] == shown["token"]
    assert state["steps"][k]["kl"] == shown["kl"]


def test_prediction_check(client):
    state = compile_person(client)
    actual = state["current"]["measure"]["raw_argmax_legal"]
    answer = ok(client.post("/api/predict", json={"survives": not actual}))
    assert answer == {"correct": False, "survives": actual,
                      "argmax": state["current"]["measure"]["argmax"],
                      "tally": {"asked": 1, "correct": 0}}
    again = ok(client.post("/api/predict", json={"survives": actual}))
    assert again["correct"] and again["tally"] == {"asked": 1, "correct": 0}  # asked once


def test_stop_interrupts_a_run(explorer, client):
    compile_person(client)
    explorer.stop()
    assert ok(client.post("/api/stop")) == {"stopping": True}
    # a run clears an earlier stop, then honours one set while it runs
    calls = {"n": 0}
    step = explorer._step

    def counting(token):
        calls["n"] += 1
        if calls["n"] == 2:
            threading.Thread(target=explorer.stop).start()
            threading.Event().wait(0.05)
        return step(token)

    explorer._step = counting
    state = ok(client.post("/api/run", json={"max_steps": 50}))
    assert state["run"]["stopped"] and 2 <= state["run"]["taken"] < 50


# ----------------------------------------------------------------------------- bad input

def test_bad_input_is_a_json_4xx_and_the_session_keeps_working(client):
    refused(client.post("/api/step"), 409, "no_constraint")
    state = compile_person(client)
    n = len(state["steps"])
    bad = [
        (client.get("/api/steps/999"), 404, "unknown_step"),
        (client.get("/api/steps/-1"), 404, "unknown_step"),
        (client.get("/api/steps/abc"), 404, "unknown_step"),
        (client.post("/api/rollback", json={"step": -1}), 404, "unknown_step"),
        (client.post("/api/rollback", json={"step": n + 5}), 404, "unknown_step"),
        (client.post("/api/rollback", json={"step": "2"}), 400, "bad_request"),
        (client.post("/api/rollback", json={}), 400, "bad_request"),
        (client.post("/api/pick", json={"token_id": 10**9}), 400, "bad_token"),
        (client.post("/api/pick", json={"token_id": True}), 400, "bad_token"),
        (client.post("/api/pick", json={}), 400, "bad_request"),
        (client.post("/api/pick", json={"token_id": top_masked(state)["id"]}), 409,
         "masked_token"),
        (client.post("/api/step", content=b"{not json"), 400, "invalid_json"),
        (client.post("/api/compile", content=b"[1, 2]"), 400, "invalid_json"),
        (client.post("/api/compile", json={"kind": "schema"}), 400, "bad_request"),
        (client.post("/api/compile", json={"kind": "python", "text": "x"}), 400,
         "compile_error"),
        (client.post("/api/compile", json={"kind": 3, "text": "x"}), 400, "bad_request"),
        (client.post("/api/compile", json={"kind": "regex", "text": "a", "prompt": ""}),
         400, "bad_prompt"),
        (client.post("/api/settings", json={"temperature": -1}), 400, "bad_settings"),
        (client.post("/api/settings", json={"top_p": 0}), 400, "bad_settings"),
        (client.post("/api/settings", json={"seed": "x"}), 400, "bad_settings"),
        (client.post("/api/settings", json={"max_tokens": 0}), 400, "bad_settings"),
        (client.post("/api/settings", json={"mask": "no"}), 400, "bad_settings"),
        (client.post("/api/settings", json={"colour": "red"}), 400, "bad_settings"),
        (client.post("/api/run", json={"max_steps": 10**6}), 400, "bad_request"),
        (client.post("/api/predict", json={"survives": "yes"}), 400, "bad_request"),
        (client.get("/api/nothing-here"), 404, "not_found"),
        (client.get("/api/step"), 405, "method_not_allowed"),
    ]
    for response, status, code in bad:
        refused(response, status, code)
    error = refused(client.post("/api/pick", json={"token_id": top_masked(state)["id"]}),
                    409, "masked_token")
    assert "masked here" in error["message"] and error["token_id"] == top_masked(state)["id"]
    refused(client.post("/api/undo"), 409, "nothing_to_undo")
    # nothing changed, and everything still works
    after = ok(client.get("/api/state"))
    assert len(after["steps"]) == n and after["constraint"]["text"] == PERSON
    assert len(ok(client.post("/api/step"))["steps"]) > n


def test_compile_errors_say_type_message_and_where(client):
    compile_person(client)
    error = refused(client.post("/api/compile", json={
        "kind": "schema", "text": '{"type": "object", "$recursiveRef": "#"}'}),
        400, "compile_error")
    assert error["compile"] == {"type": "UnsupportedFeature",
                                "message": "$recursiveRef is not supported",
                                "location": "#/$recursiveRef"}
    error = refused(client.post("/api/compile", json={"kind": "gbnf",
                                                      "text": "root ::= item\n"}),
                    400, "compile_error")
    assert error["compile"]["type"] == "GrammarError"
    assert error["compile"]["location"].startswith("line 1")
    error = refused(client.post("/api/compile", json={"kind": "schema", "text": "{\n  'a': 1}"}),
                    400, "compile_error")
    assert error["compile"]["location"] == "line 2, col 3"
    # the previous output is still there
    assert ok(client.get("/api/state"))["constraint"]["text"] == PERSON


def test_huge_constraints_are_refused_quickly(explorer):
    with TestClient(create_app(explorer, max_body_bytes=1 << 16)) as small:
        refused(small.post("/api/compile", json={"kind": "regex", "text": "a" * 100_000}),
                413, "body_too_large")
    with TestClient(create_app(explorer)) as c:
        error = refused(c.post("/api/compile", json={"kind": "regex",
                                                     "text": "a" * (1 << 20) + "b"}),
                        400, "compile_error")
        assert error["compile"]["type"] == "LimitExceeded"
        error = refused(c.post("/api/compile", json={"kind": "choices",
                                                     "text": "x" * (1 << 20) + "\ny"}),
                        400, "compile_error")
        assert error["compile"]["type"] == "LimitExceeded"
        nested = '{"items": ' * 2000 + "{}" + "}" * 2000
        error = refused(c.post("/api/compile", json={"kind": "schema", "text": nested}),
                        400, "compile_error")
        assert error["compile"]["type"] in ("GrammarError", "LimitExceeded")
        compile_person(c)


# ----------------------------------------------------------------------------- the real model

@pytest.fixture(scope="module")
def real_explorer():
    reason = default_model_missing("llama_cpp")
    if reason:
        pytest.skip(reason)
    from automask.explore.command import build_explorer

    return build_explorer(None, max_context=1024, threads=1)


def test_the_default_model_writes_a_valid_person(real_explorer):
    with TestClient(create_app(real_explorer)) as c:
        state = ok(c.post("/api/compile", json={
            "kind": "schema", "text": PERSON,
            "prompt": "Describe a fictional software engineer."}))
        assert state["model"]["name"] == "SmolLM2-135M-Instruct"
        assert state["model"]["width"] == 49152
        assert state["current"]["expects"]["summary"]
        while state["finished"] is None:
            state = ok(c.post("/api/run", json={"max_steps": 32}))
        assert state["status"]["code"] == "accepting"
        assert state["verdict"]["schema"] == {"valid": True, "message": "jsonschema: valid"}
        person = json.loads(state["output"]["text"])
        assert set(person) >= {"name", "age", "email", "languages", "employed"}
        # roll back to a narrow step, switch the mask off, steer to the top masked token
        k = next(s["index"] for s in state["steps"] if not s["forced"]
                 and s["legal_count"] < 100)
        ok(c.post("/api/rollback", json={"step": k}))
        ok(c.post("/api/settings", json={"mask": False}))
        state = ok(c.get("/api/state"))
        masked = top_masked(state)
        state = ok(c.post("/api/pick", json={"token_id": masked["id"]}))
        assert state["status"]["code"] == "outside" and state["left_at"] == k
        ok(c.post("/api/settings", json={"mask": True}))
        state = ok(c.post("/api/undo"))
        assert state["left_at"] is None and state["status"]["code"] == "prefix"


# ----------------------------------------------------------------------------- the command

def test_the_command_line_names_one_constraint(tmp_path, explorer):
    from automask.cli import build_parser, main
    from automask.errors import GrammarError
    from automask.explore.command import initial_constraint, start

    parse = build_parser().parse_args
    args = parse(["explore", "--choices", "yes,no", "--prompt", "Agree?"])
    assert (args.port, args.model) == (0, None)
    assert initial_constraint(args) == ("choices", "yes\nno", "Agree?")
    start(explorer, args)
    assert explorer.constraint.kind == "choices" and explorer.prompt == "Agree?"
    schema = tmp_path / "s.json"
    schema.write_text(PERSON)
    assert initial_constraint(parse(["explore", "--schema", str(schema)])) == \
        ("schema", PERSON, None)
    assert initial_constraint(parse(["explore"])) is None
    with pytest.raises(SystemExit):
        parse(["explore", "--regex", "a", "--choices", "a,b"])
    # a constraint that does not compile is an error before anything is served
    schema.write_text('{"$recursiveRef": "#"}')
    with pytest.raises(GrammarError, match=r"UnsupportedFeature.*#/\$recursiveRef"):
        start(explorer, parse(["explore", "--schema", str(schema)]))
    # an unreadable file fails before the model loads: one line, exit 2
    assert main(["explore", "--schema", str(tmp_path / "missing.json")]) == 2
