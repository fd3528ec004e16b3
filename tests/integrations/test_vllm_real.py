"""AutomaskLogitsProcessor in a real vLLM (the CPU build, 0.32.0), with the default model.

Runs in the vLLM virtual environment (``.ci/vllm`` builds it); skips where
vLLM is not importable. Three layers:

* the processor alone, fed vLLM's own ``BatchUpdate`` objects (added,
  removed, swapped and moved rows) and a fake Model Runner V2 context;
* offline ``LLM.chat`` with the default model converted to a Hugging Face
  folder: JSON Schema, regex, choice and GBNF requests in one batch beside an
  unconstrained one, greedy; a bad schema refused at ``validate_params``;
* ``python -m vllm.entrypoints.openai.api_server`` called by the ``openai``
  client with ``extra_body={"vllm_xargs": ...}``; a bad constraint is a 400.

The processor arrives through the ``vllm.logits_processors`` entry point
(automask is installed in that environment), not through ``logits_processors=``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REQUIRED = bool(os.environ.get("AUTOMASK_REQUIRE_VLLM"))  # .ci/vllm: fail, do not skip
if importlib.util.find_spec("vllm") is None and not REQUIRED:
    pytest.skip("vLLM is not installed here; the vLLM tests run in their own environment: "
                ".ci/vllm", allow_module_level=True)

# In-process engine (one process, the model loaded once) and steady on a small CPU machine;
# set only where vLLM is installed (the main suite's torch keeps its threads).
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

try:
    import torch
    import vllm
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
except Exception as e:  # noqa: BLE001 - a broken install skips as clearly as a missing one
    if REQUIRED:
        raise
    pytest.skip(f"vLLM is not importable here ({type(e).__name__}: {e}); the vLLM tests run "
                "in their own environment: .ci/vllm", allow_module_level=True)

from automask import Matcher  # noqa: E402
from automask.generation.models import ModelUnavailable  # noqa: E402
from automask.integrations.vllm.args import grammar_for, spec_from_extra_args  # noqa: E402
from automask.integrations.vllm.model import converted_model_dir  # noqa: E402
from automask.integrations.vllm.processor import AutomaskLogitsProcessor  # noqa: E402

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
EMAIL = r"[a-z]{1,10}@example\.com"
CHOICES = ["yes", "no"]
GBNF = 'root ::= "The answer is " [0-9] [0-9]? "."'
MAX_TOKENS = 48


@pytest.fixture(scope="module")
def model_dir() -> Path:
    try:
        return converted_model_dir()
    except ModelUnavailable as e:
        pytest.skip(f"the default model is unavailable: {e}")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


# ---- the processor alone ------------------------------------------------------------------

def make_processor(tokenizer, width: int | None = None) -> AutomaskLogitsProcessor:
    width = width or len(tokenizer)
    config = SimpleNamespace(model_config=SimpleNamespace(get_vocab_size=lambda: width))
    proc = AutomaskLogitsProcessor(config, torch.device("cpu"), False)
    proc._tokenizer = tokenizer  # what cached_tokenizer_from_config would load
    return proc


def params(**extra) -> SamplingParams:
    return SamplingParams(max_tokens=8, extra_args=extra or None)


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def expected_mask(tokenizer, spec_args: dict, output: list[int], width: int) -> np.ndarray:
    """Allowed ids after ``output`` for a request alone (bool, ``width``)."""
    proc = make_processor(tokenizer, width)
    sp = params(**spec_args)
    seq = proc._new_sequence(sp, list(output))
    matcher = Matcher(proc._cache.get(seq.spec, seq.stops))
    assert matcher.accept_tokens(output) == len(output)
    allowed = np.zeros(width, dtype=bool)
    allowed[matcher.allowed_token_ids()] = True
    return allowed


def test_entry_point_loads_the_processor():
    from vllm.v1.sample.logits_processor import _load_logitsprocs_plugins

    assert AutomaskLogitsProcessor in _load_logitsprocs_plugins()
    assert not AutomaskLogitsProcessor.__abstractmethods__
    assert AutomaskLogitsProcessor(SimpleNamespace(model_config=None), "cpu",
                                   False).is_argmax_invariant() is False


def test_validate_params():
    AutomaskLogitsProcessor.validate_params(params())  # unconstrained: nothing to check
    AutomaskLogitsProcessor.validate_params(params(automask_regex=EMAIL, other_plugin_arg=1))
    bad = [
        ({"automask_json_schema": '{"type": "nope"}'}, "GrammarError: invalid type 'nope'"),
        ({"automask_json_schema": "{"}, "not valid JSON"),
        ({"automask_regex": "a", "automask_choice": '["a"]'}, "both constrain"),
        ({"automask_grammar": "x"}, "unknown automask argument"),
        ({"automask_regex": "a", "automask_options": "{}"}, "applies to automask_json_schema"),
        ({"automask_json_schema": "{}", "automask_options": '{"indent": 2}'}, "unknown"),
        ({"automask_choice": "[]"}, "non-empty"),
        ({"automask_gbnf": "root ::= nothing"}, "GrammarError"),
    ]
    for extra, message in bad:
        with pytest.raises(ValueError, match=re.escape(message)):
            AutomaskLogitsProcessor.validate_params(params(**extra))
    from vllm.sampling_params import StructuredOutputsParams

    both = SamplingParams(structured_outputs=StructuredOutputsParams(regex="a"),
                          extra_args={"automask_regex": "b"})
    with pytest.raises(ValueError, match="structured_outputs"):
        AutomaskLogitsProcessor.validate_params(both)


def test_batch_updates_and_masks(tokenizer):
    """Rows added, swapped, moved and removed as the persistent batch does; each constrained
    row is masked as its request alone would be, the others are untouched."""
    width = len(tokenizer) + 64  # a padded logits row: the ids past the tokenizer never allowed
    proc = make_processor(tokenizer, width)
    specs = {
        "json": {"automask_json_schema": json.dumps(SCHEMA)},
        "regex": {"automask_regex": EMAIL},
        "choice": {"automask_choice": json.dumps(CHOICES)},
    }
    outs = {"json": encode(tokenizer, '{"name": "A'), "regex": encode(tokenizer, "bob"),
            "choice": [], "free": encode(tokenizer, "hello")}
    added = [(0, params(**specs["json"]), [1], outs["json"]),
             (1, params(), [1], outs["free"]),
             (2, params(**specs["regex"]), [1], outs["regex"]),
             (3, params(**specs["choice"]), [1], outs["choice"])]
    proc.update_state(BatchUpdate(batch_size=4, removed=[], added=added, moved=[]))
    layout = {0: "json", 1: "free", 2: "regex", 3: "choice"}

    def check(layout: dict[int, str]) -> None:
        logits = torch.randn(len(layout), width)
        before = logits.clone()
        assert proc.apply(logits) is logits
        for row, name in layout.items():
            if name == "free":
                assert torch.equal(logits[row], before[row])
                continue
            want = expected_mask(tokenizer, specs[name], outs[name], width)
            got = torch.isfinite(logits[row]).numpy()
            np.testing.assert_array_equal(got, want, err_msg=name)
            keep = torch.from_numpy(want)
            assert torch.equal(logits[row][keep], before[row][keep])

    check(layout)
    outs["regex"].extend(encode(tokenizer, "@example"))  # vLLM appends to the live lists
    check(layout)
    swap = BatchUpdate(batch_size=4, removed=[], added=[],
                       moved=[(0, 2, MoveDirectionality.SWAP)])
    proc.update_state(swap)
    layout = {0: "regex", 1: "free", 2: "json", 3: "choice"}
    check(layout)
    # request at row 1 finishes; row 3 is compacted into it
    proc.update_state(BatchUpdate(batch_size=3, removed=[1], added=[],
                                  moved=[(3, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    layout = {0: "regex", 1: "choice", 2: "json"}
    check(layout)
    outs["choice"].extend(encode(tokenizer, "no"))
    check(layout)  # "no" is complete: EOS only (the rows allow exactly the stop tokens)
    eos_row = expected_mask(tokenizer, specs["choice"], outs["choice"], width)
    assert set(np.flatnonzero(eos_row)) <= {tokenizer.eos_token_id, 2}
    # a new unconstrained request takes row 1: its row is no longer masked
    proc.update_state(BatchUpdate(batch_size=3, removed=[1], added=[(1, params(), [1], [])],
                                  moved=[]))
    check({0: "regex", 1: "free", 2: "json"})
    # discarded output tokens (vLLM trims the list): the matcher reads the list again
    del outs["json"][-1]
    check({0: "regex", 1: "free", 2: "json"})
    proc.update_state(BatchUpdate(batch_size=0, removed=[2, 1, 0], added=[], moved=[]))
    assert not proc._seqs


def test_refused_tokens_and_placeholders_end_the_request(tokenizer, caplog):
    proc = make_processor(tokenizer)
    eos = tokenizer.eos_token_id
    refused = encode(tokenizer, "maybe")
    placeholder = [-1]
    rows = [(0, params(automask_choice=json.dumps(CHOICES)), [1], refused),
            (1, params(automask_regex="[0-9]+"), [1], placeholder)]
    proc.update_state(BatchUpdate(batch_size=2, removed=[], added=rows, moved=[]))
    logits = torch.zeros(2, len(tokenizer))
    proc.apply(logits)
    for row in range(2):
        assert torch.isfinite(logits[row]).nonzero().flatten().tolist() == [eos]
    assert "not allowed by the constraint" in caplog.text
    assert "async scheduling" in caplog.text


def test_model_runner_v2_interface(tokenizer):
    """The V2 path: add_request per slot, tokens read from req_states.all_token_ids up to the
    context's sequence lengths, rows reordered every step."""
    width = len(tokenizer)
    max_len = 64
    all_ids = torch.zeros(4, max_len, dtype=torch.int32)
    prompt_len = np.zeros(4, dtype=np.int32)
    states = SimpleNamespace(device=torch.device("cpu"), max_num_reqs=4, vocab_size=width,
                             all_token_ids=SimpleNamespace(gpu=all_ids),
                             prompt_len=SimpleNamespace(np=prompt_len))
    config = SimpleNamespace(model_config=SimpleNamespace(get_vocab_size=lambda: width))
    proc = AutomaskLogitsProcessor(config, states)
    proc._tokenizer = tokenizer
    regex = {"automask_regex": EMAIL}
    assert proc.add_request(2, params(**regex)) is True
    assert proc.add_request(0, params()) is False
    prompt = [1, 2, 3]
    out = encode(tokenizer, "bob@ex")
    all_ids[2, :3] = torch.tensor(prompt)
    all_ids[2, 3:3 + len(out)] = torch.tensor(out)
    prompt_len[2] = 3
    for step_out in (out[:1], out):
        seq_len = 3 + len(step_out)
        ctx = SimpleNamespace(idx_mapping_np=np.array([0, 2]), expanded_idx_mapping=None,
                              seq_lens_upper_bound_np=np.array([5, seq_len]))
        logits = torch.randn(2, width)
        before = logits.clone()
        proc.apply(logits, ctx)
        assert torch.equal(logits[0], before[0])
        want = expected_mask(tokenizer, regex, step_out, width)
        np.testing.assert_array_equal(torch.isfinite(logits[1]).numpy(), want)
    # speculative decoding (more logits rows than requests): the request is ended
    ctx = SimpleNamespace(idx_mapping_np=np.array([2]),
                          expanded_idx_mapping=torch.tensor([2, 2]),
                          seq_lens_upper_bound_np=np.array([3 + len(out)]))
    logits = torch.zeros(2, width)
    proc.apply(logits, ctx)
    for row in range(2):
        assert torch.isfinite(logits[row]).nonzero().flatten().tolist() == \
            [tokenizer.eos_token_id]


# ---- offline LLM -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llm(model_dir):
    from vllm import LLM

    engine = LLM(model=str(model_dir), max_model_len=1024, max_num_seqs=8, dtype="float32",
                 enforce_eager=True, seed=0)
    yield engine
    del engine


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def greedy(**extra) -> SamplingParams:
    return SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, extra_args=extra or None)


def test_offline_batch(llm):
    jsonschema = pytest.importorskip("jsonschema")
    free_prompt = chat("Name a city in France.")
    alone = llm.chat([free_prompt], greedy(), use_tqdm=False)[0].outputs[0].text
    prompts = [chat("Describe a person as JSON."), chat("Give me an email address."),
               chat("Is water wet? Answer yes or no."), chat("What is 6 times 7?"), free_prompt]
    sampling = [greedy(automask_json_schema=json.dumps(SCHEMA),
                       automask_options=json.dumps({"whitespace": "compact"})),
                greedy(automask_regex=EMAIL),
                greedy(automask_choice=json.dumps(CHOICES)),
                greedy(automask_gbnf=GBNF),
                greedy()]
    outs = [o.outputs[0] for o in llm.chat(prompts, sampling, use_tqdm=False)]
    person, email, choice, answer, free = outs
    value = json.loads(person.text)
    jsonschema.validate(value, SCHEMA)
    assert " " not in person.text.replace(value["name"], "")  # compact JSON
    assert re.fullmatch(EMAIL, email.text), email.text
    assert choice.text in CHOICES
    assert re.fullmatch(r"The answer is [0-9][0-9]?\.", answer.text), answer.text
    for out in (person, email, choice, answer):
        assert out.finish_reason == "stop", out  # ended by EOS where the grammar accepts
    assert free.text == alone  # the unconstrained row is untouched


def test_offline_bad_schema_is_refused(llm):
    from vllm.exceptions import VLLMValidationError  # what our ValueError becomes

    with pytest.raises(VLLMValidationError, match=re.escape("GrammarError: invalid type 'nope'")):
        llm.chat([chat("hi")], greedy(automask_json_schema='{"type": "nope"}'), use_tqdm=False)
    # the engine is still fine afterwards
    out = llm.chat([chat("hi")], greedy(automask_choice='["ok"]'), use_tqdm=False)
    assert out[0].outputs[0].text == "ok"


# ---- the OpenAI-compatible server -------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(model_dir):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    log = tempfile.NamedTemporaryFile("w+", prefix="vllm-server-", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", "smollm", "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "1024", "--max-num-seqs", "4", "--dtype", "float32",
           "--enforce-eager"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"vLLM server exited with {proc.returncode}:\n{log.read()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"vLLM server did not come up:\n{log.read()[-4000:]}")
            time.sleep(1)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        os.unlink(log.name)


def test_server_with_vllm_xargs(server):
    openai = pytest.importorskip("openai")
    jsonschema = pytest.importorskip("jsonschema")
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused")
    r = client.chat.completions.create(
        model="smollm", messages=chat("Describe a person as JSON."), max_tokens=MAX_TOKENS,
        temperature=0, extra_body={"vllm_xargs": {"automask_json_schema": json.dumps(SCHEMA)}})
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop" and text, r  # empty: the engine ended it
    jsonschema.validate(json.loads(text), SCHEMA)
    r = client.completions.create(model="smollm", prompt="My favourite colour is",
                                  max_tokens=8, temperature=0,
                                  extra_body={"vllm_xargs": {"automask_choice": '["red", "blue"]'}})
    assert r.choices[0].text in ("red", "blue")
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(
            model="smollm", messages=chat("hi"), max_tokens=8,
            extra_body={"vllm_xargs": {"automask_json_schema": '{"type": "nope"}'}})
    assert bad.value.status_code == 400
    assert "GrammarError: invalid type 'nope'" in str(bad.value)
    with pytest.raises(openai.BadRequestError, match="both constrain"):
        client.chat.completions.create(
            model="smollm", messages=chat("hi"), max_tokens=8,
            extra_body={"vllm_xargs": {"automask_regex": "a", "automask_choice": '["b"]'}})


def test_spec_helpers_agree_with_validate_params():
    spec = spec_from_extra_args({"automask_json_schema": json.dumps(SCHEMA)})
    assert grammar_for(spec) is grammar_for(spec)  # built once per process
    assert vllm.__version__
