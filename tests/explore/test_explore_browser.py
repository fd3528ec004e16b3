"""The Mask Explorer's page in a real browser: headless Chromium driven by Playwright.

The browser is Debian's ``chromium-headless-shell`` (``apt-get install -y
chromium-headless-shell``), launched through ``executable_path``: ``playwright
install`` downloads a browser, which CI cannot. The server is ``automask
explore`` itself, started as a subprocess on a free port with the default model
(SmolLM2-135M on llama.cpp), so these flows cover the command, the API, the
page's files as served and the page's script together.

Every flow ends with a screenshot in ``$AUTOMASK_ARTIFACTS`` (default
``test-artifacts/explorer/`` in the repository, git-ignored), which CI keeps.
Without Playwright, the browser or the model the tests skip with the reason;
with ``AUTOMASK_REQUIRE_BROWSER=1`` (CI) they fail instead.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.models import default_model_missing
from support.paths import REPO_ROOT

ROOT = REPO_ROOT
ARTIFACTS = Path(os.environ.get("AUTOMASK_ARTIFACTS") or ROOT / "test-artifacts" / "explorer")
REQUIRE = os.environ.get("AUTOMASK_REQUIRE_BROWSER") == "1"
BROWSERS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium-headless-shell")
PERSON = json.loads((ROOT / "examples" / "person.schema.json").read_text())
EMAIL = r"[a-z]{2,12}\.[a-z]{2,12}@(mail|web)\.(com|org)"
START_SECONDS = 120
RUN_MS = 180_000  # run to the end: ~80 steps of a 135M model on a busy 2-core machine


def unavailable(reason: str) -> None:
    """Skip, or fail where the browser tests must run (AUTOMASK_REQUIRE_BROWSER=1)."""
    if REQUIRE:
        pytest.fail(f"{reason} (AUTOMASK_REQUIRE_BROWSER=1: the browser tests must run)")
    pytest.skip(reason)


def chromium() -> str | None:
    """The headless Chromium binary: $AUTOMASK_CHROMIUM, else where Debian's package puts it."""
    for path in (os.environ.get("AUTOMASK_CHROMIUM"), *BROWSERS,
                 shutil.which("chromium-headless-shell")):
        if path and os.access(path, os.X_OK):
            return path
    return None


@pytest.fixture(scope="module")
def server():
    """``automask explore`` on a free port with the default model; yields its URL."""
    reason = default_model_missing("llama_cpp", "starlette", "uvicorn")
    if reason:
        unavailable(reason)
    proc = subprocess.Popen(
        [sys.executable, "-m", "automask.cli", "explore", "--port", "0", "--threads", "1",
         "--max-context", "2048"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout], daemon=True).start()
    url = None
    deadline = time.monotonic() + START_SECONDS
    while url is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        m = re.search(r"open (http://127\.0\.0\.1:\d+/)", line)
        url = m.group(1) if m else None
    if url is None:
        proc.kill()
        pytest.fail(f"automask explore did not start: {proc.stderr.read()[-2000:]}")
    yield url
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=20) == 0, "automask explore must exit 0 on SIGINT"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install playwright; the browser: "
                    "apt-get install -y chromium-headless-shell)")
    path = chromium()
    if path is None:
        unavailable("no headless Chromium (apt-get install -y chromium-headless-shell)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A fresh tab on the explorer, its settings back to the defaults; the page's own
    errors (exceptions, console errors) fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    tab.on("console", lambda m: problems.append(f"console: {m.text}")
           if m.type == "error" else None)
    reset = tab.request.post(server + "api/settings", data={
        "mask": True, "fast_forward": True, "temperature": 0, "top_p": 1, "seed": 0,
        "max_tokens": 256, "repetition_penalty": 1.3})
    assert reset.ok, reset.text()
    tab.goto(server)
    yield tab
    context.close()
    # a 409 from the API shows as a failed request in the console: only script errors count
    assert not [p for p in problems if "status of 4" not in p], problems


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def status(page) -> str:
    return page.get_by_test_id("status").text_content() or ""


def wait_status(page, *words: str, timeout: float = 30_000) -> str:
    page.wait_for_function(
        "words => words.some(w => document.querySelector('[data-testid=status]')"
        ".textContent.includes(w))", arg=list(words), timeout=timeout)
    return status(page)


def chips(page):
    return page.locator("[data-testid=output] .chip")


def act(page, testid: str, route: str, how=None) -> dict:
    """Click (or ``how()``) and wait until the page has drawn the API's answer to it."""
    with page.expect_response(f"**/api/{route}") as info:
        (how or page.get_by_test_id(testid).click)()
    response = info.value
    data = response.json()
    if response.ok and "version" in data:
        page.wait_for_function("v => Number(document.body.dataset.version) >= v",
                               arg=data["version"])
    return data


def load_example(page, name: str) -> None:
    """Click an example: it fills the editor and compiles; wait for the first pending step."""
    act(page, f"example-{name}", "compile")
    page.wait_for_selector("[data-testid=token-table] tbody tr")


def step(page) -> dict:
    state = act(page, "step-button", "step")
    assert "error" not in state, state
    return state


def run_to_end(page) -> str:
    page.get_by_test_id("run-button").click()
    page.wait_for_function("document.querySelector('[data-testid=run-button]').dataset"
                           ".running === 'false'", timeout=RUN_MS)
    return status(page)


def output_text(page) -> str:
    return page.evaluate("fetch('/api/state').then(r => r.json()).then(s => s.output.text)")


# ----------------------------------------------------------------------------- flows

def test_the_page_loads_with_the_person_example(page):
    load_example(page, "person")
    assert '"title": "Person"' in page.get_by_test_id("constraint-input").input_value()
    assert "software engineer" in page.get_by_test_id("prompt-input").input_value()
    assert "valid prefix" in status(page)
    rows = page.locator("[data-testid=token-table] tbody tr")
    assert rows.count() >= 10
    assert {rows.nth(i).get_attribute("data-legal") for i in range(rows.count())} <= \
        {"true", "false"}
    assert rows.first.get_attribute("data-token-id").isdigit()
    assert "expects next" in page.get_by_test_id("expects").text_content()
    assert page.get_by_test_id("compile-error").is_hidden()
    shot(page, "01-person-loaded")


def test_five_steps_each_take_a_legal_token(page):
    load_example(page, "person")
    for _ in range(5):
        step(page)
    n = chips(page).count()
    assert n >= 5
    for i in range(n):
        chips(page).nth(i).click()
        page.wait_for_function(
            "i => document.querySelector('[data-testid=step-title]').textContent"
            ".startsWith(`Step ${i} `)", arg=i)
        chosen = page.locator("[data-testid=token-table] tr[data-chosen=true]")
        assert chosen.count() == 1
        assert chosen.get_attribute("data-legal") == "true", f"step {i}"
        assert chosen.get_attribute("data-token-id") == \
            chips(page).nth(i).get_attribute("data-token-id")
    # hovering a point of a plot selects its step
    page.hover("[data-testid=plot-kl] circle[data-step='1']")
    page.wait_for_function("document.querySelector('[data-testid=step-title]').textContent"
                           ".startsWith('Step 1 ')")
    assert page.get_by_test_id("rollback-button").is_visible()
    shot(page, "02-five-steps")


def test_mask_off_leaves_the_language_and_undo_comes_back(page):
    load_example(page, "person")
    step(page)
    step(page)
    act(page, "mask-toggle", "settings", page.get_by_test_id("mask-toggle").uncheck)
    illegal = page.locator("[data-testid=output] .chip[data-legal=false]")
    for _ in range(6):  # the raw model may leave the language by itself
        if illegal.count():
            break
        if step(page)["finished"]:
            break
    if not illegal.count():  # else steer it out: the top masked token, clickable mask off
        act(page, "token-table", "pick",
            page.locator("[data-testid=token-table] tr[data-legal=false]").first.click)
        illegal.first.wait_for()
    text = wait_status(page, "outside the language")
    assert "outside the language" in text
    assert page.get_by_test_id("break").first.is_visible()
    assert "prefix of the language" in page.get_by_test_id("output-text").text_content()
    shot(page, "03-mask-off-outside")
    for _ in range(10):
        act(page, "undo-button", "undo")
        if "outside" not in status(page):
            break
    assert "valid prefix" in status(page)
    assert illegal.count() == 0
    act(page, "mask-toggle", "settings", page.get_by_test_id("mask-toggle").check)
    step(page)
    assert "valid prefix" in status(page) or "accepting" in status(page)
    shot(page, "04-undo-back-inside")


def test_click_an_allowed_token_to_steer(page):
    load_example(page, "person")
    step(page)
    steerable = page.locator("[data-testid=token-table] tr.steer[data-legal=true]")
    assert steerable.count() >= 2
    target = steerable.nth(steerable.count() - 1)  # not the model's choice: the last legal row
    token = target.get_attribute("data-token-id")
    n = chips(page).count()
    act(page, "token-table", "pick", target.click)
    chip = chips(page).nth(n)
    assert chip.get_attribute("data-token-id") == token
    assert "picked" in chip.get_attribute("class")
    assert chip.get_attribute("data-legal") == "true"
    shot(page, "05-steered")


def test_run_to_the_end_and_the_output_validates(page):
    import jsonschema

    load_example(page, "person")
    text = run_to_end(page)
    assert "accepting" in text, text
    verdict = page.get_by_test_id("schema-verdict")
    assert verdict.get_attribute("data-valid") == "true"
    assert verdict.text_content() == "jsonschema: valid"
    assert "Valid is not true" in page.get_by_test_id("verdict-note").text_content()
    jsonschema.validate(json.loads(output_text(page)), PERSON)
    assert page.get_by_test_id("step-button").is_disabled()
    # a step where the mask replaced the model's top token, for the picture (the README's)
    replaced = page.locator("[data-testid=output] .chip[data-argmax=replaced][data-forced=false]")
    assert replaced.count() >= 1
    index = replaced.first.get_attribute("data-step")
    replaced.first.click()
    page.wait_for_function("i => document.querySelector('[data-testid=argmax-verdict]')"
                           ".dataset.verdict === 'replaced' && document.querySelector("
                           "'[data-testid=step-title]').textContent.startsWith(`Step ${i} `)",
                           arg=index)
    assert "is masked: replaced by" in page.get_by_test_id("argmax-verdict").text_content()
    shot(page, "06-run-to-end")


def test_an_unsupported_keyword_shows_inline_with_its_pointer(page):
    load_example(page, "person")
    page.get_by_test_id("kind-select").select_option("schema")
    page.get_by_test_id("constraint-input").fill(json.dumps(
        {"type": "object", "properties": {"a": {"$recursiveRef": "#"}}}, indent=2))
    answer = act(page, "compile-button", "compile")
    assert answer["error"]["compile"]["type"] == "UnsupportedFeature"
    error = page.get_by_test_id("compile-error")
    error.wait_for(state="visible")
    assert page.get_by_test_id("compile-error-type").text_content() == "UnsupportedFeature"
    assert "$recursiveRef" in page.get_by_test_id("compile-error-message").text_content()
    assert page.get_by_test_id("compile-error-location").text_content() == \
        "#/properties/a/$recursiveRef"
    # the page still works: the person output goes on
    step(page)
    assert "valid prefix" in status(page)
    shot(page, "07-compile-error")


def test_a_regex_works(page):
    load_example(page, "email")
    text = run_to_end(page)
    assert "accepting" in text, text
    assert re.fullmatch(EMAIL, output_text(page))
    shot(page, "08-regex")


def test_a_gbnf_grammar_works(page):
    load_example(page, "arithmetic")
    for _ in range(3):
        step(page)
    rows = page.locator("[data-testid=output] .chip")
    assert all(rows.nth(i).get_attribute("data-legal") == "true" for i in range(rows.count()))
    text = run_to_end(page)
    assert "accepting" in text or "valid prefix" in text, text
    out = output_text(page)
    prefix = re.compile(r"[0-9()+\-]+( = [0-9]{1,4})?")
    assert prefix.fullmatch(out) or re.fullmatch(r"[0-9()+\-]+ ?=? ?[0-9]{0,4}", out), out
    if "accepting" in text:
        assert re.fullmatch(r"[0-9()+\-]+ = [0-9]{1,4}", out), out
    shot(page, "09-gbnf")


def test_the_prediction_check_hides_the_mask_until_the_guess(page):
    load_example(page, "person")
    page.get_by_test_id("predict-toggle").check()
    step(page)
    box = page.get_by_test_id("prediction")
    box.wait_for(state="visible")
    assert page.get_by_test_id("argmax-verdict").text_content() == ""
    page.get_by_test_id("predict-survives").click()
    result = page.get_by_test_id("predict-result")
    result.wait_for()
    assert result.text_content() in ("Right", "Wrong")
    assert page.get_by_test_id("argmax-verdict").text_content()
    shot(page, "10-prediction")


def test_the_run_button_stops_a_run(page):
    load_example(page, "person")
    run = page.get_by_test_id("run-button")
    with page.expect_response("**/api/run"):
        run.click()
    assert run.text_content() == "Stop" and run.get_attribute("data-running") == "true"
    with page.expect_response("**/api/stop"):
        run.click()
    page.wait_for_function("document.querySelector('[data-testid=run-button]').dataset"
                           ".running === 'false'")
    assert run.text_content() == "Run to end"
    assert "valid prefix" in status(page), "stopped before the end"
    assert page.get_by_test_id("step-button").is_enabled()
    shot(page, "11-run-stopped")
