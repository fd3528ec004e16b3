"""automask as an SGLang grammar backend, driven the way SGLang 0.5.23 drives one.

SGLang needs CUDA, so this is a harness, not SGLang: a stand-in for the parts of
``sglang`` the backend touches is put in ``sys.modules`` (copied from SGLang
0.5.23, Apache-2.0; file and line references below are to that release's
wheel), ``automask.integrations.sglang`` is imported on top of it (so its
classes subclass the stand-in bases, as they subclass the real ones), and the
scheduler's calls are replayed:

* ``register()`` then ``create_grammar_backend(server_args, tokenizer,
  vocab_size, eos_token_ids)``, which calls the registered ``init_func`` with
  those four arguments (base_grammar_backend.py lines 367-384);
* the grammar manager: ``get_cached_or_future_value`` (a cache hit is a
  ``copy()``), the compile future's ``result()``, ``set_cache(key,
  grammar.copy())``, and ``isinstance(value, InvalidGrammarObject)`` with its
  ``error_message`` for the abort (grammar_manager.py lines 148-209, 296-317);
* a decode step: ``allocate_vocab_mask(vocab_size=, batch_size=, device=)``
  once for the batch, ``fill_vocab_mask_batched`` over the rows that are not
  finished or terminated, ``move_vocab_mask``, ``GrammarMask.apply`` ->
  ``apply_vocab_mask(logits=, vocab_mask=)`` (sampling_batch_info.py lines
  382-407, base_grammar_backend.py lines 148-158); greedy sampling; then
  ``accept_token`` with ``ValueError`` aborting the request and ``finished``
  set from the request (batch_result_processor.py lines 848-880, 1086-1090);
* speculative decoding's tree walk: ``accept_token`` / ``fill_vocab_mask`` /
  ``rollback(1)`` per draft node (spec_utils.py lines 584-699).

Tokenizers are the real ones in ``../shared/data/tokenizers`` (Qwen3's,
byte-level BPE, with the model's padded logits width 151,936; Llama 2's,
SentencePiece-style), skipped when that folder is absent.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import runpy
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest

import automask
from automask import Matcher
from automask.errors import LimitExceeded

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

MODULE = "automask.integrations.sglang"
QWEN_VOCAB = 151_936  # Qwen3's config.vocab_size: the logits are wider than the tokenizer
QWEN_EOS = {151_643, 151_645}  # what SGLang passes: model_config.hf_eos_token_id, a set

# --------------------------------------------------------------------------------------
# The stand-in for sglang 0.5.23 (the parts the backend and the scheduler touch)
# --------------------------------------------------------------------------------------


@dataclass
class GrammarStats:  # base_grammar_backend.py lines 39-48
    compilation_time: float | None = None
    schema_count: int | None = None
    ebnf_size: int | None = None
    is_cache_hit: bool = False
    is_grammar_aborted: bool = False
    tree_traversal_time: list = field(default_factory=list)
    dispatch_type: str | None = None
    num_timeout: int = 0


class GrammarRow(NamedTuple):  # lines 51-55
    row: int
    grammar: object


class BaseGrammarObject:  # lines 58-145
    def __init__(self):
        self._finished = False
        self.grammar_stats = None
        self.current_token = None

    def maybe_init_reasoning(self, reasoning: bool):
        pass

    def accept_token(self, token: int) -> None:
        raise NotImplementedError()

    def rollback(self, k: int):
        raise NotImplementedError()

    def is_terminated(self):
        return False

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device):
        raise NotImplementedError()

    def fill_vocab_mask(self, vocab_mask, idx: int) -> None:
        raise NotImplementedError()

    @staticmethod
    def fill_vocab_mask_batched(entries, vocab_mask) -> None:
        for entry in entries:
            entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask) -> None:
        raise NotImplementedError()

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        raise NotImplementedError()

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask) -> None:
        raise NotImplementedError()

    def copy(self):
        return self

    @property
    def finished(self):
        return self._finished

    @finished.setter
    def finished(self, finished):
        self._finished = finished

    def try_jump_forward(self, tokenizer):
        raise NotImplementedError()

    def jump_forward_str_state(self, helper):
        raise NotImplementedError()

    def jump_and_retokenize(self, old_output_ids, new_output_ids, next_state):
        raise NotImplementedError()


class GrammarMask(NamedTuple):  # lines 148-158
    grammar: BaseGrammarObject
    vocab_mask: object

    def apply(self, logits) -> None:
        self.grammar.apply_vocab_mask(logits=logits, vocab_mask=self.vocab_mask)


def _grammar_key_contains_nul(key_type: str, key_string: str) -> bool:  # lines 161-187
    if "\x00" in key_string:
        return True
    if key_type not in ("json", "structural_tag"):
        return False
    try:
        decoded = json.loads(key_string)
    except ValueError:
        return False
    stack = [decoded]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class InvalidGrammarObject(BaseGrammarObject):  # lines 190-198
    def __init__(self, error_message: str = "Unknown grammar error"):
        super().__init__()
        self.error_message = error_message


class BaseGrammarBackend:  # lines 201-319 (the parts a backend inherits)
    _enable_strict_thinking = False

    def __init__(self):
        self.executor = ThreadPoolExecutor()
        self.cache = {}

    def _not_supported(self, key_type, key_string):
        return InvalidGrammarObject()

    @property
    def enable_strict_thinking(self):
        return self._enable_strict_thinking

    def get_request_grammar_key(self, key, *, input_ids, thinking_budget):
        return key

    def reserve_framing_tokens(self, token_ids) -> None:
        pass

    def compile_framed_grammar(self, grammar, frame):
        return None

    @property
    def is_support_token_filter(self):
        return False

    def set_token_filter(self, vocab_mask, token_ids, batch_idx, is_allowed=True,
                         reset_vocab_mask=True):
        pass

    def init_strict_reasoning_grammar(self, reasoning: bool):
        return None

    def dispatch_fallback(self, key_type, key_string):
        raise ValueError(f"Invalid key_type: {key_type}={key_string}")

    def dispatch_json(self, key_string):
        return self._not_supported("json", key_string)

    def dispatch_regex(self, key_string):
        return self._not_supported("regex", key_string)

    def dispatch_ebnf(self, key_string):
        return self._not_supported("ebnf", key_string)

    def dispatch_structural_tag(self, key_string):
        return self._not_supported("structural_tag", key_string)

    def _init_value_dispatch(self, key, require_reasoning):
        s = time.perf_counter()
        key_type, key_string = key
        if _grammar_key_contains_nul(key_type, key_string):
            return InvalidGrammarObject(f"Invalid {key_type}: NUL bytes (\\u0000) are not allowed")
        if key_type == "json":
            grammar = self.dispatch_json(key_string)
        elif key_type == "regex":
            grammar = self.dispatch_regex(key_string)
        elif key_type in ("ebnf", "full_assistant_ebnf"):
            grammar = self.dispatch_ebnf(key_string)
        elif key_type == "structural_tag":
            grammar = self.dispatch_structural_tag(key_string)
        else:
            grammar = self.dispatch_fallback(key_type, key_string)
        if grammar is not None and grammar.grammar_stats is not None:
            grammar.grammar_stats.compilation_time = time.perf_counter() - s
        return grammar

    def get_cached_or_future_value(self, key, require_reasoning):
        value = self.cache.get(key)
        if value:
            copied_value = value.copy()
            copied_value.maybe_init_reasoning(require_reasoning)
            return copied_value, True
        value = self.executor.submit(self._init_value_dispatch, key, require_reasoning)
        return value, False

    def set_cache(self, key, value):
        self.cache[key] = value

    def reset(self):
        self.cache.clear()


class FakeSGLang:
    """The stand-in modules and the state the fakes share (registry, CLI choices, config)."""

    def __init__(self):
        self.registry: dict = {}
        self.choices = ["xgrammar", "outlines", "llguidance", "none"]  # choices.py line 131
        self.serving = SimpleNamespace(
            constrained_json_whitespace_pattern=None,
            constrained_json_disable_any_whitespace=False,
            constrained_json_max_whitespace_cnt=None,
            reasoning_parser=None, enable_strict_thinking=False)
        self.exec = SimpleNamespace(kernel=SimpleNamespace(grammar_backend="automask"))
        self.reasoner_calls: list = []
        self.think_end_ids = [151_668]
        self.launched: list = []
        self.modules = self._modules()

    def register_grammar_backend(self, name, init_func):  # lines 367-368
        self.registry[name] = init_func

    def create_grammar_backend(self, server_args, tokenizer, vocab_size, eos_token_ids=None,
                               think_end_ids=None):  # lines 371-384: a registered name
        name = self.exec.kernel.grammar_backend
        if name in self.registry:
            return self.registry[name](server_args, tokenizer, vocab_size, eos_token_ids)
        raise ValueError(f"Invalid grammar backend: {name}")

    def _modules(self) -> dict[str, ModuleType]:
        fake = self
        mods = {n: ModuleType(n) for n in (
            "sglang", "sglang.srt", "sglang.srt.constrained", "sglang.srt.arg_groups",
            "sglang.srt.parser", "sglang.srt.plugins", "sglang.srt.utils",
            "sglang.srt.server_args", "sglang.launch_server")}
        for pkg in ("sglang", "sglang.srt", "sglang.srt.constrained", "sglang.srt.arg_groups",
                    "sglang.srt.parser"):
            mods[pkg].__path__ = []
        base = ModuleType("sglang.srt.constrained.base_grammar_backend")
        for obj in (GrammarStats, GrammarRow, BaseGrammarObject, GrammarMask,
                    InvalidGrammarObject, BaseGrammarBackend):
            setattr(base, obj.__name__, obj)
        base.GRAMMAR_BACKEND_REGISTRY = self.registry
        base.register_grammar_backend = self.register_grammar_backend
        base.create_grammar_backend = self.create_grammar_backend
        mods[base.__name__] = base

        choices = ModuleType("sglang.srt.arg_groups.choices")
        choices.GRAMMAR_BACKEND_CHOICES = self.choices
        choices.add_grammar_backend_choices = self.choices.extend  # choices.py line 260
        mods[choices.__name__] = choices

        runtime = ModuleType("sglang.srt.runtime_context")
        runtime.get_serving = lambda: fake.serving
        runtime.get_exec = lambda: fake.exec
        mods[runtime.__name__] = runtime

        class ReasoningParser:  # only the call shape create_grammar_backend uses
            def __init__(self, model_type, stream_reasoning, tokenizer):
                self.model_type = model_type
                self.detector = SimpleNamespace(
                    get_think_end_token_ids=lambda tok: list(fake.think_end_ids))

        class ReasonerGrammarBackend(BaseGrammarBackend):
            def __init__(self, grammar_backend, reasoning_parser, tokenizer,
                         enable_strict_thinking=False):
                super().__init__()
                self.grammar_backend = grammar_backend
                fake.reasoner_calls.append(
                    (grammar_backend, reasoning_parser, tokenizer, enable_strict_thinking))

        parser = ModuleType("sglang.srt.parser.reasoning_parser")
        parser.ReasoningParser = ReasoningParser
        mods[parser.__name__] = parser
        reasoner = ModuleType("sglang.srt.constrained.reasoner_grammar_backend")
        reasoner.ReasonerGrammarBackend = ReasonerGrammarBackend
        mods[reasoner.__name__] = reasoner

        mods["sglang.srt.plugins"].load_plugins = lambda: fake.launched.append("plugins")
        mods["sglang.srt.server_args"].prepare_server_args = lambda argv: ("args", list(argv))
        mods["sglang.launch_server"].run_server = lambda args: fake.launched.append(args)
        mods["sglang.srt.utils"].kill_process_tree = lambda pid, include_parent: None
        return mods


def _fresh_module():
    sys.modules.pop(MODULE, None)
    return importlib.import_module(MODULE)


@pytest.fixture
def fake_sglang(monkeypatch):
    """Our module imported over the SGLang stand-in; afterwards, both are gone again."""
    fake = FakeSGLang()
    for name, mod in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    previous = sys.modules.get(MODULE)
    module = _fresh_module()
    assert module.SGLANG_BASES and module.BaseGrammarObject is BaseGrammarObject
    fake.module = module
    yield fake
    sys.modules.pop(MODULE, None)
    if previous is not None:
        sys.modules[MODULE] = previous


@pytest.fixture(scope="module")
def qwen(shared_data):
    return transformers.AutoTokenizer.from_pretrained(str(shared_data / "tokenizers" / "qwen3"))


@pytest.fixture(scope="module")
def llama2(shared_data):
    return transformers.AutoTokenizer.from_pretrained(
        str(shared_data / "tokenizers" / "llama-2"))


@pytest.fixture
def backend(fake_sglang, qwen):
    """What the scheduler's GrammarManager gets: create_grammar_backend(server_args,
    tokenizer, model_config.vocab_size, model_config.hf_eos_token_id)."""
    fake_sglang.module.register()
    server_args = SimpleNamespace(grammar_backend="automask")
    return fake_sglang.create_grammar_backend(server_args, qwen, QWEN_VOCAB, set(QWEN_EOS),
                                              think_end_ids=None)


# --------------------------------------------------------------------------------------
# The scheduler's side (copied call for call)
# --------------------------------------------------------------------------------------


def resolve(backend, key, require_reasoning=False):
    """A request through the grammar manager: (grammar, None) or (None, abort message)."""
    value, cache_hit = backend.get_cached_or_future_value(key, require_reasoning)
    if not cache_hit:
        assert isinstance(value, Future)
        try:
            value = value.result(timeout=120)
        except Exception as e:
            value = InvalidGrammarObject(f"Grammar compilation failed: {e}")
        backend.set_cache(key, value.copy())
    if isinstance(value, InvalidGrammarObject):
        return None, f"Failed to compile {key[0]} grammar: {value.error_message}"
    return value, None


def update_regex_vocab_mask(grammars, vocab_size, batch_size, device="cpu"):
    """SamplingBatchInfo.update_regex_vocab_mask (sampling_batch_info.py lines 382-407)."""
    if not any(grammars):
        return None
    first_grammar = next(grammar for grammar in grammars if grammar)
    vocab_mask = first_grammar.allocate_vocab_mask(
        vocab_size=vocab_size, batch_size=batch_size, device=device)
    entries = [GrammarRow(row=row, grammar=grammar) for row, grammar in enumerate(grammars)
               if grammar and not grammar.finished and not grammar.is_terminated()]
    first_grammar.fill_vocab_mask_batched(entries, vocab_mask)
    vocab_mask = first_grammar.move_vocab_mask(vocab_mask, device)
    return GrammarMask(first_grammar, vocab_mask)


def accept_grammar_tokens(grammar, tokens):
    """batch_result_processor.py lines 848-880: the retained tokens, or an abort message."""
    if isinstance(tokens, int):
        tokens = [tokens]
    retained = []
    try:
        for token_id in tokens:
            grammar.accept_token(token_id)
            retained.append(token_id)
            if grammar.is_terminated():
                break
    except ValueError as e:
        return retained, f"Grammar accept_token failed: {e}"
    return retained, None


def traverse_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens, grammar,
                  allocate_token_bitmask, vocab_size=None):
    """spec_utils.py lines 584-648."""

    def dfs(curr, parent_pos):
        if curr == 0:
            is_accepted = True
        else:
            parent_bitmask = allocate_token_bitmask[parent_pos]
            current_token = draft_tokens[curr]
            if vocab_size and current_token >= vocab_size:
                is_accepted = False
            else:
                is_accepted = (parent_bitmask[current_token // 32]
                               & (1 << (current_token % 32))) != 0
        if is_accepted:
            if curr != 0:
                grammar.accept_token(int(draft_tokens[curr]))
            if not grammar.is_terminated():
                grammar.fill_vocab_mask(allocate_token_bitmask, curr)
                if retrieve_next_token[curr] != -1:
                    dfs(int(retrieve_next_token[curr]), curr)
            if curr != 0:
                grammar.rollback(1)
        if retrieve_next_sibling[curr] != -1:
            dfs(int(retrieve_next_sibling[curr]), parent_pos)

    dfs(0, -1)


def generate_token_bitmask(grammars, next_token, next_sibling, draft_tokens, vocab_size):
    """spec_utils.py lines 652-699 (requests reduced to their grammars)."""
    num_draft_tokens = draft_tokens.shape[-1]
    allocate_token_bitmask = None
    for i, grammar in enumerate(grammars):
        if grammar is not None:
            if allocate_token_bitmask is None:
                allocate_token_bitmask = grammar.allocate_vocab_mask(
                    vocab_size=vocab_size, batch_size=draft_tokens.numel(), device="cpu")
            traverse_tree(next_token[i], next_sibling[i], draft_tokens[i], grammar,
                          allocate_token_bitmask[i * num_draft_tokens:(i + 1) * num_draft_tokens],
                          vocab_size=vocab_size)
    return allocate_token_bitmask


def decode_batch(backend, keys, *, max_new_tokens=160, seed=0, eos_ids=QWEN_EOS,
                 vocab_size=QWEN_VOCAB):
    """Requests (None: no constraint) decoded together, greedy over random logits, as the
    scheduler runs a batch. Returns each request's token ids (EOS included) and abort."""
    grammars, aborts = [], []
    for key in keys:
        grammar, abort = resolve(backend, key) if key is not None else (None, None)
        assert abort is None, abort
        grammars.append(grammar)
        aborts.append(None)
    outputs: list[list[int]] = [[] for _ in keys]
    done = [False] * len(keys)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(max_new_tokens):
        if all(done):
            break
        # finished rows stay in the batch here: update_regex_vocab_mask skips them by
        # grammar.finished (SGLang drops finished requests from the next batch anyway)
        mask = update_regex_vocab_mask(grammars, vocab_size, len(keys))
        logits = torch.randn(len(keys), vocab_size, generator=gen)
        raw = logits.clone()
        if mask is not None:
            mask.apply(logits)
        for row, key in enumerate(keys):
            if key is None:  # a request without a grammar: its row is left unconstrained
                assert torch.equal(logits[row], raw[row])
        next_ids = logits.argmax(dim=-1).tolist()
        for row, token in enumerate(next_ids):
            if done[row]:
                continue
            outputs[row].append(token)
            grammar = grammars[row]
            if grammar is not None:
                _, aborts[row] = accept_grammar_tokens(grammar, token)
            finished = (token in eos_ids or aborts[row] is not None
                        or (grammar is not None and grammar.is_terminated())
                        or len(outputs[row]) >= max_new_tokens)
            if grammar is not None:
                grammar.finished = finished
            done[row] = finished
    return grammars, outputs, aborts


def text_of(backend, ids, eos_ids=QWEN_EOS) -> str:
    assert ids and ids[-1] in eos_ids, "the output did not end with EOS"
    return backend.vocab.decode_bytes(ids[:-1]).decode("utf-8")


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}
EMAIL = r"[a-z]{3,8}@example\.(com|org)"
LIST_GBNF = (
    'root ::= "[" item ("," item){0,3} "]"\n'
    'item ::= [0-9]{1,3} | "\\"" [a-z]{1,6} "\\""\n'
)
LIST_RE = r'\[(?:[0-9]{1,3}|"[a-z]{1,6}")(?:,(?:[0-9]{1,3}|"[a-z]{1,6}")){0,3}\]'

# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------


def test_register_adds_the_backend_and_the_cli_choice(fake_sglang, qwen):
    # SGLang's parser holds the choices list itself (arg_utils.py lines 402-405), built
    # before register() may run: extending the list is what lets the flag through.
    parser = argparse.ArgumentParser()
    parser.add_argument("--grammar-backend", choices=fake_sglang.choices)
    with pytest.raises(SystemExit):
        parser.parse_args(["--grammar-backend", "automask"])
    fake_sglang.module.register()
    fake_sglang.module.register()  # twice is harmless
    assert parser.parse_args(["--grammar-backend", "automask"]).grammar_backend == "automask"
    assert fake_sglang.choices.count("automask") == 1
    backend = fake_sglang.create_grammar_backend(SimpleNamespace(), qwen, QWEN_VOCAB,
                                                 set(QWEN_EOS))
    assert isinstance(backend, fake_sglang.module.AutomaskGrammarBackend)
    assert isinstance(backend, BaseGrammarBackend)
    assert set(backend.vocab.eos_token_ids) == QWEN_EOS
    assert backend.vocab_size == QWEN_VOCAB


def test_json_regex_gbnf_batch_with_an_unconstrained_row(backend, qwen):
    keys = [("json", json.dumps(PERSON)), ("regex", EMAIL), ("ebnf", LIST_GBNF), None]
    grammars, outputs, aborts = decode_batch(backend, keys, seed=1)
    assert aborts == [None] * 4
    person = json.loads(text_of(backend, outputs[0]))
    jsonschema.validate(person, PERSON)
    assert re.fullmatch(EMAIL, text_of(backend, outputs[1]))
    assert re.fullmatch(LIST_RE, text_of(backend, outputs[2]))
    for grammar in grammars[:3]:
        assert grammar.is_terminated() and grammar.finished
    # SGLang's tokenizer reads the same text back
    assert qwen.decode(outputs[1][:-1]) == text_of(backend, outputs[1])


def test_many_json_requests_share_the_cached_grammar(backend):
    key = ("json", json.dumps(PERSON))
    for seed in range(3):
        _, outputs, aborts = decode_batch(backend, [key, key], seed=10 + seed)
        assert aborts == [None, None]
        for ids in outputs:
            jsonschema.validate(json.loads(text_of(backend, ids)), PERSON)
    assert list(backend.cache) == [key]
    cached = backend.cache[key]
    assert cached.matcher.num_accepted == 0 and not cached.is_terminated()
    copy, hit = backend.get_cached_or_future_value(key, False)
    assert hit and copy is not cached and copy.grammar_stats.is_cache_hit


def test_eos_only_when_accepting_and_only_eos_after(backend, qwen):
    grammar, _ = resolve(backend, ("regex", "ab|abc"))
    mask = grammar.allocate_vocab_mask(vocab_size=QWEN_VOCAB, batch_size=1, device="cpu")
    allowed = lambda: set(np.flatnonzero(  # noqa: E731
        automask.unpack_bitmask(mask.numpy(), QWEN_VOCAB)[0]).tolist())
    grammar.fill_vocab_mask(mask, 0)
    assert not allowed() & QWEN_EOS
    grammar.accept_token(qwen.convert_tokens_to_ids("ab"))
    grammar.fill_vocab_mask(mask, 0)
    assert QWEN_EOS <= allowed() and qwen.convert_tokens_to_ids("c") in allowed()
    grammar.accept_token(151_645)
    assert grammar.is_terminated()
    grammar.fill_vocab_mask(mask, 0)
    assert allowed() == QWEN_EOS
    grammar.accept_token(42)  # after termination: a no-op, as in SGLang's xgrammar backend
    grammar.rollback(1)  # the EOS
    assert not grammar.is_terminated()
    grammar.fill_vocab_mask(mask, 0)
    assert QWEN_EOS <= allowed()


def test_refused_token_aborts_the_request(backend, qwen):
    grammar, _ = resolve(backend, ("regex", EMAIL))
    retained, abort = accept_grammar_tokens(grammar, [qwen.convert_tokens_to_ids("abc"),
                                                      qwen.convert_tokens_to_ids("@"), 15])
    assert retained == [qwen.convert_tokens_to_ids("abc"), qwen.convert_tokens_to_ids("@")]
    assert abort.startswith("Grammar accept_token failed: automask: token 15 is not allowed")
    _, abort = accept_grammar_tokens(grammar, [QWEN_VOCAB + 5])  # past the logits
    assert abort and "out of range" in abort


def test_speculative_tree_walk_and_rollback(backend, qwen):
    """A verify tree: the committed token, a draft chain ending in EOS, and a sibling the
    grammar refuses; each accepted node's row is the mask after its prefix, refused nodes
    keep the all-allowed row, and the walk leaves the grammar where it was."""
    key = ("regex", EMAIL)
    grammar, _ = resolve(backend, key)
    text_ids = qwen.encode("bob@example.org", add_special_tokens=False)
    committed, chain = text_ids[0], text_ids[1:]
    grammar.accept_token(committed)
    draft = [committed, *chain, 151_645, qwen.convert_tokens_to_ids("@@")]
    n = len(draft)
    next_token = [i + 1 for i in range(n - 2)] + [-1, -1]
    next_sibling = [-1] * n
    next_sibling[1] = n - 1  # "@@" is a sibling of the first draft token: refused
    draft_t = torch.tensor([draft])
    mask = generate_token_bitmask([grammar], torch.tensor([next_token]),
                                  torch.tensor([next_sibling]), draft_t, QWEN_VOCAB)
    assert grammar.matcher.num_accepted == 1 and not grammar.is_terminated()
    words = mask.numpy()
    reference = Matcher(grammar.compiled)
    for i, token in enumerate(draft[: n - 2]):  # committed + chain: filled after the prefix
        assert reference.accept_token(token)
        expected = np.full(words.shape[1], -1, dtype=np.int32)
        reference.fill_bitmask(expected)
        assert np.array_equal(words[i], expected), i
    assert (words[n - 2] == -1).all()  # after EOS: terminated, not filled
    assert (words[n - 1] == -1).all()  # the refused sibling: not filled
    # the verify step accepts the chain and EOS; the grammar stops at termination
    retained, abort = accept_grammar_tokens(grammar, [*chain, 151_645, 13])
    assert abort is None and retained == [*chain, 151_645] and grammar.is_terminated()


def test_invalid_constraints_return_the_invalid_object(backend):
    cases = [
        (("json", '{"type": "object", "properties": '), "JSON schema"),
        (("json", json.dumps({"type": "integer", "minimum": 5, "maximum": 1})), "JSON schema"),
        (("regex", "([a-z]"), "regex"),
        (("ebnf", "root ::= undefined-rule"), "EBNF"),
        (("structural_tag", json.dumps({"type": "structural_tag", "format": {}})), "legacy"),
    ]
    for key, word in cases:
        grammar, abort = resolve(backend, key)
        assert grammar is None
        assert abort.startswith(f"Failed to compile {key[0]} grammar: automask could not "
                                f"compile "), abort
        assert word in abort
        assert isinstance(backend.cache[key], InvalidGrammarObject)
        again, abort2 = resolve(backend, key)  # a cached failure aborts the same way
        assert again is None and abort2 == abort
    _, abort = resolve(backend, ("regex", "a\x00b"))  # SGLang's own check, before ours
    assert abort == "Failed to compile regex grammar: Invalid regex: NUL bytes (\\u0000) are " \
                    "not allowed"


def _walk(grammar, tokenizer, text):
    """Teacher-force ``text``: each token must be in the mask SGLang would apply."""
    mask = grammar.allocate_vocab_mask(vocab_size=QWEN_VOCAB, batch_size=1, device="cpu")
    for token in tokenizer.encode(text, add_special_tokens=False):
        grammar.fill_vocab_mask(mask, 0)
        if not mask[0, token // 32] >> (token % 32) & 1:
            return False
        grammar.accept_token(token)
    return True


def test_legacy_structural_tag_for_tool_calls(backend, qwen):
    """What SGLang's get_legacy_structural_tag builds for tools (function_call_parser.py
    lines 260-309): at_least_one (tool_choice required) is calls only, no free text."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"]}
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'

    def tag(at_least_one):
        return ("structural_tag", json.dumps({
            "type": "structural_tag", "at_least_one": at_least_one, "triggers": ["<tool_call>"],
            "structures": [{"begin": '<tool_call>\n{"name": "get_weather", "arguments": ',
                            "schema": schema, "end": "}\n</tool_call>"}]}))

    auto, _ = resolve(backend, tag(False))  # free text, then a call, then free text
    assert _walk(auto, qwen, "Let me check. " + call + " Done.")
    assert accept_grammar_tokens(auto, [151_645]) == ([151_645], None)
    auto, _ = resolve(backend, tag(False))
    assert _walk(auto, qwen, "No call needed.")
    assert accept_grammar_tokens(auto, [151_645])[1] is None and auto.is_terminated()

    required, _ = resolve(backend, tag(True))
    assert _walk(required, qwen, call)
    assert accept_grammar_tokens(required, [151_645])[1] is None and required.is_terminated()
    required, _ = resolve(backend, tag(True))
    assert not _walk(required, qwen, "Let me check. " + call)  # no free text
    required, _ = resolve(backend, tag(True))
    assert accept_grammar_tokens(required, [151_645])[1] is not None  # no call: no EOS


def test_second_tokenizer_family(fake_sglang, llama2):
    """Llama 2's SentencePiece-style tokenizer (byte fallback), its vocab_size as is."""
    fake_sglang.module.register()
    backend = fake_sglang.create_grammar_backend(SimpleNamespace(), llama2, 32_000, {2})
    keys = [("regex", EMAIL), ("json", json.dumps(PERSON))]
    _, outputs, aborts = decode_batch(backend, keys, seed=3, eos_ids={2}, vocab_size=32_000)
    assert aborts == [None, None]
    assert re.fullmatch(EMAIL, text_of(backend, outputs[0], {2}))
    jsonschema.validate(json.loads(text_of(backend, outputs[1], {2})), PERSON)


def test_serving_options_and_bounded_cache(fake_sglang, qwen):
    fake_sglang.module.register(cache_size=2)
    fake_sglang.serving.constrained_json_disable_any_whitespace = True
    backend = fake_sglang.create_grammar_backend(SimpleNamespace(), qwen, QWEN_VOCAB,
                                                 set(QWEN_EOS))
    assert backend.json_options["whitespace"] == "compact"
    schema = json.dumps({"type": "object", "properties": {"name": {"type": "string"}},
                         "required": ["name"], "additionalProperties": False})
    grammar, _ = resolve(backend, ("json", schema))
    helper = grammar.try_jump_forward(qwen)
    assert helper == ([], '{"name":"')  # compact: the whole opening is forced
    jump, state = grammar.jump_forward_str_state(helper)
    grammar.jump_and_retokenize([], qwen.encode(jump, add_special_tokens=False), state)
    assert grammar.try_jump_forward(qwen) is None  # inside the string: free
    keys = [("regex", "a"), ("regex", "b"), ("regex", "c")]
    for key in keys:
        resolve(backend, key)
    resolve(backend, keys[1])  # a hit refreshes it
    resolve(backend, ("regex", "d"))
    assert list(backend.cache) == [keys[1], ("regex", "d")]


def test_reasoning_parser_wraps_like_the_built_in_backends(fake_sglang, qwen):
    fake_sglang.module.register()
    fake_sglang.serving.reasoning_parser = "qwen3"
    server_args = SimpleNamespace()
    wrapped = fake_sglang.create_grammar_backend(server_args, qwen, QWEN_VOCAB, set(QWEN_EOS))
    (inner, parser, tokenizer, strict), = fake_sglang.reasoner_calls
    assert wrapped.grammar_backend is inner and tokenizer is qwen and strict is False
    assert parser.model_type == "qwen3"
    assert isinstance(wrapped.cache, type(inner.cache)) and wrapped.cache.maxsize == 64
    fake_sglang.think_end_ids = []  # not encodable: the scheduler turns the gate off
    plain = fake_sglang.create_grammar_backend(server_args, qwen, QWEN_VOCAB, set(QWEN_EOS))
    assert isinstance(plain, fake_sglang.module.AutomaskGrammarBackend)


def set_token_filter_torch(vocab_mask, token_ids, batch_idx, is_allowed=True,
                           reset_vocab_mask=True):
    """SGLang's torch_ops/token_filter_torch_ops.py lines 27-62 (the reference)."""
    import ctypes

    if reset_vocab_mask:
        vocab_mask[batch_idx].fill_(-1 if (not is_allowed) else 0)
    if not token_ids:
        return
    aggregated: dict[int, int] = {}
    for token_id in token_ids:
        aggregated[token_id // 32] = aggregated.get(token_id // 32, 0) | (1 << (token_id % 32))
    row = vocab_mask[batch_idx]
    element_indices = torch.tensor(list(aggregated.keys()), dtype=torch.long)
    bitmasks = torch.tensor([ctypes.c_int32(m if is_allowed else ~m).value
                             for m in aggregated.values()], dtype=row.dtype)
    if is_allowed:
        row[element_indices] = torch.bitwise_or(row[element_indices], bitmasks)
    else:
        row[element_indices] = torch.bitwise_and(row[element_indices], bitmasks)


def test_token_filter_matches_sglangs(backend):
    assert backend.is_support_token_filter
    rng = np.random.default_rng(5)
    for _ in range(40):
        start = torch.from_numpy(rng.integers(-2**31, 2**31, size=(2, 10)).astype(np.int32))
        ids = rng.integers(0, 320, size=int(rng.integers(0, 6))).tolist()
        args = (ids, int(rng.integers(0, 2)), bool(rng.integers(0, 2)), bool(rng.integers(0, 2)))
        expected, got = start.clone(), start.clone()
        set_token_filter_torch(expected, *args)
        backend.set_token_filter(got, *args)
        assert torch.equal(got, expected), args


def test_a_mask_that_fails_ends_only_its_request(backend, fake_sglang):
    grammar, _ = resolve(backend, ("regex", EMAIL))

    class Failing(Matcher):
        def write_row(self, row):
            raise LimitExceeded("computing a token mask took too long")

    grammar.matcher = Failing(grammar.compiled)
    other, _ = resolve(backend, ("regex", EMAIL))
    mask = update_regex_vocab_mask([grammar, other], QWEN_VOCAB, 2)
    words = mask.vocab_mask.numpy()
    ids = np.flatnonzero(automask.unpack_bitmask(words[0], QWEN_VOCAB))
    assert set(ids.tolist()) == QWEN_EOS  # only EOS for the failed row
    assert not set(np.flatnonzero(automask.unpack_bitmask(words[1], QWEN_VOCAB))) & QWEN_EOS
    _, abort = accept_grammar_tokens(grammar, [151_645])
    assert abort and "LimitExceeded" in abort


def test_device_apply_matches_apply_bitmask(fake_sglang):
    apply_on_device = fake_sglang.module.apply_vocab_mask
    rng = np.random.default_rng(0)
    for width, words in [(100, 4), (100, 3), (64, 2), (1000, 40)]:
        mask = torch.from_numpy(rng.integers(-2**31, 2**31, size=(3, words), dtype=np.int64)
                                .astype(np.int32))
        logits = torch.randn(3, width)
        expected = automask.apply_bitmask(logits.clone(), mask)
        got = logits.clone()
        apply_on_device(got, mask)
        assert torch.equal(got, expected)
        single = logits[0].clone()
        apply_on_device(single, mask[:1])
        assert torch.equal(single, expected[0])


def test_launcher_and_spawned_processes_register(fake_sglang):
    module = fake_sglang.module
    module.main(["--model-path", "Qwen/Qwen3-8B"])
    assert fake_sglang.launched == [
        "plugins", ("args", ["--model-path", "Qwen/Qwen3-8B", "--grammar-backend", "automask"])]
    assert "automask" in fake_sglang.registry
    fake_sglang.registry.clear()
    # a process SGLang spawns from `python -m automask.integrations.sglang` runs the module
    # as __mp_main__ first (multiprocessing's spawn): that registers the backend again
    sys.modules.pop(MODULE)  # as in a fresh process
    runpy.run_module(MODULE, run_name="__mp_main__")
    assert "automask" in fake_sglang.registry


def test_without_sglang_the_module_imports_and_register_says_how(monkeypatch, qwen):
    monkeypatch.setitem(sys.modules, "sglang", None)  # `import sglang` raises ImportError
    previous = sys.modules.get(MODULE)
    try:
        module = _fresh_module()
        assert not module.SGLANG_BASES
        with pytest.raises(ImportError, match=r"pip install 'sglang==0\.5\.23'"):
            module.register()
        backend = module.AutomaskGrammarBackend(qwen, QWEN_VOCAB, QWEN_EOS)
        future, hit = backend.get_cached_or_future_value(("regex", EMAIL), False)
        grammar = future.result(timeout=60)
        assert not hit and isinstance(grammar, module.AutomaskGrammar)
        bad = backend.dispatch_regex("(")
        assert isinstance(bad, module.InvalidGrammarObject)
        assert bad.error_message.startswith("automask could not compile the regex")
    finally:
        sys.modules.pop(MODULE, None)
        if previous is not None:
            sys.modules[MODULE] = previous


def test_grammar_stats_are_kept_per_copy(backend):
    grammar, _ = resolve(backend, ("regex", "x+"))
    assert dataclasses.is_dataclass(grammar.grammar_stats)
    assert grammar.grammar_stats.dispatch_type == "regex"
    assert grammar.grammar_stats.compilation_time is not None
    assert not grammar.grammar_stats.is_cache_hit
