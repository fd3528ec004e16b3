"""The engine (compile + Matcher) on tiny trained tokenizers: no shared data needed.

Two oracles keep these tests honest:

* :class:`support.oracle.Recognizer`, a slow byte-level Earley recognizer over the
  grammar IR, decides whether a byte string is a *viable prefix* of the language
  (some continuation completes it) and whether it is a sentence. A token is
  allowed exactly when the output plus its bytes is a viable prefix, and EOS
  exactly when the output is a sentence.
* ``Matcher.fork().accept_token(t)``: the mask (computed by vectorized scans and
  cached parser steps) must agree with acceptance (a byte walk) on every id.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from support.oracle import Recognizer, oracle_allowed, ordinary_ids

import automask
from automask import (
    Grammar,
    GrammarError,
    Matcher,
    NoLegalContinuation,
    UnsupportedFeature,
    Vocabulary,
    VocabularyError,
)
from automask.engine.matcher import parse_state

# --------------------------------------------------------------------------- utf-8


def utf8_prefix_ok(data: bytes) -> bool:
    """Whether ``data`` is a prefix of some well-formed UTF-8 (Unicode table 3-7)."""
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif b == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif b == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif 0xE1 <= b <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif b == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= b <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        for k in range(need):
            j = i + 1 + k
            if j >= n:
                return True
            if not (lo <= data[j] <= hi if k == 0 else 0x80 <= data[j] <= 0xBF):
                return False
        i += need + 1
    return True


def utf8_complete(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --------------------------------------------------------------------------- helpers


def bitmask_ids(m: Matcher, size: int) -> set[int]:
    """The allowed ids as written by ``fill_bitmask`` into a fresh (all ones) bitmask."""
    bm = automask.allocate_bitmask(1, size)
    m.fill_bitmask(bm)
    return set(np.flatnonzero(automask.unpack_bitmask(bm, size)[0]).tolist())


def text_ids(m: Matcher) -> list[int]:
    """Allowed ids other than EOS."""
    eos = set(m.compiled.vocab.eos_token_ids)
    return [t for t in m.allowed_token_ids().tolist() if t not in eos]


def random_walk(m: Matcher, rng: random.Random, steps: int) -> list[int]:
    """Accept up to ``steps`` random allowed non-EOS tokens; return them."""
    out = []
    for _ in range(steps):
        choices = text_ids(m)
        if not choices:
            break
        t = rng.choice(choices)
        assert m.accept_token(t)
        out.append(t)
    return out


def padded(vocab: Vocabulary, extra: int = 37) -> Vocabulary:
    """The same tokens with ``extra`` padding ids past the tokenizer (a wider logits row)."""
    return Vocabulary(vocab.tokens, special_ids=vocab.special_ids,
                      eos_token_ids=vocab.eos_token_ids, size=len(vocab.tokens) + extra,
                      encoder=vocab.encode if vocab.can_encode else None, name=vocab.name)


@pytest.fixture(scope="module", params=["bpe", "spm"])
def vocab(request, tiny_bpe_vocab, tiny_spm_vocab) -> Vocabulary:
    """Each tiny tokenizer, widened with padding ids (never allowed)."""
    return padded(tiny_bpe_vocab if request.param == "bpe" else tiny_spm_vocab)


JSONISH = r"""
root    ::= value
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,3}
"""

LARK_LIST = r"""
start: "[" [item ("," item)*] "]"
?item: NUMBER | WORD | start
NUMBER: /[0-9]+/
WORD: /[a-z]+/
%ignore " "
%ignore /\n+/
"""

AMBIGUOUS_GBNF = r"""
root ::= expr
expr ::= expr "+" expr | expr expr | "1" | "(" expr ")" | "1" "1"
"""

LEFT_RECURSIVE_LARK = r"""
start: a "y" b
a: a "x" | a "xx" |
b: c b | c
c: "z"? "w"?
"""

NULLABLE_GBNF = r"""
root ::= a b c a
a ::= "x"?
b ::= a a | "y" b
c ::= b | "z" | c "z"
"""

GRAMMARS = {
    "regex-words": lambda: Grammar.from_regex(r"[a-z]+( [a-z]+){0,4}\."),
    "regex-ip": lambda: Grammar.from_regex(r"\d{1,3}(\.\d{1,3}){3}"),
    "regex-quoted": lambda: Grammar.from_regex(r'"([^"\\]|\\["\\n])*"'),
    "regex-unicode": lambda: Grammar.from_regex(r"(é|🙂|[α-ω]|ab)+x?"),
    # counts past the longest token (scans shared through rx.clamp)
    "regex-counted": lambda: Grammar.from_regex(
        r"([a-z ]{0,60}|[0-9]{30,}),[a-z]{3,45}\.(ab){20,}"),
    # a pattern of wide classes under a length bound: the bound drops (rx.known_text)
    "schema-text-bound": lambda: Grammar.from_json_schema({
        "type": "string", "pattern": "^[A-Za-z\\u00c0-\\u024f\\u0400-\\u04ff]+$",
        "maxLength": 300}),
    "choices": lambda: Grammar.from_choices(["yes", "no", "maybe", "yesterday", "nothing", "n"]),
    "gbnf-json": lambda: Grammar.from_gbnf(JSONISH),
    "lark-ignore": lambda: Grammar.from_lark(LARK_LIST),
    "gbnf-ambiguous": lambda: Grammar.from_gbnf(AMBIGUOUS_GBNF),
    "lark-left-recursive": lambda: Grammar.from_lark(LEFT_RECURSIVE_LARK),
    "gbnf-nullable": lambda: Grammar.from_gbnf(NULLABLE_GBNF),
}


# --------------------------------------------------------------------------- masks


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_mask_agrees_with_acceptance_and_oracle(name, vocab):
    """At random reachable states: mask bit == fork().accept_token(t) for every id, and
    the allowed set equals the oracle's viable-prefix set exactly."""
    grammar = GRAMMARS[name]()
    compiled = automask.compile(grammar, vocab)
    oracle = Recognizer(grammar)
    rng = random.Random(f"{name}-{vocab.name}")
    for walk in range(3):
        m = Matcher(compiled)
        out = b""
        for step in range(8):
            bits = bitmask_ids(m, vocab.size)
            for t in range(vocab.size):
                assert m.is_allowed(t) == (t in bits)
                assert m.fork().accept_token(t) == (t in bits), (
                    f"{name}: id {t} {vocab.token_bytes(t)!r} after {out!r}: "
                    f"mask {t in bits}, accept_token disagrees")
            assert bits == set(m.allowed_token_ids().tolist())
            state = oracle.feed(out)
            assert state is not None, f"{name}: output {out!r} is no viable prefix"
            expected = oracle_allowed(oracle, state, vocab)
            assert bits == expected, (
                f"{name} walk {walk} step {step} after {out!r}: "
                f"extra {sorted(vocab.token_bytes(t) for t in bits - expected)[:8]}, "
                f"missing {sorted(vocab.token_bytes(t) for t in expected - bits)[:8]}")
            assert m.is_accepting() == oracle.accepting(state)
            choices = [t for t in bits if t not in vocab.eos_token_ids]
            if not choices:
                break
            t = rng.choice(sorted(choices))
            assert m.accept_token(t)
            out += vocab.token_bytes(t)


def test_never_special_padding_or_empty(tiny_bpe_vocab):
    """Specials, padding ids and empty tokens stay off even when their text is in the language."""
    v = tiny_bpe_vocab
    special_texts = [v.tokens[t].decode() for t in sorted(v.special_ids)]
    grammar = Grammar.from_choices(special_texts + ["<think>"])
    wide = padded(v, 64)
    m = Matcher(automask.compile(grammar, wide))
    allowed = bitmask_ids(m, wide.size)
    assert not allowed & set(v.special_ids)
    assert not allowed & set(range(len(v.tokens), wide.size))
    think = v.tokens.index(b"<think>")
    assert think in allowed  # an added token that is not special is ordinary text
    for t in sorted(v.special_ids) + [wide.size - 1, len(v.tokens)]:
        assert not m.fork().accept_token(t)
    # The same text spelled with ordinary tokens is fine, and the grammar accepts it.
    for text in special_texts:
        f = m.fork()
        for byte in text.encode():
            ids = [t for t in text_ids(f) if v.tokens[t] == bytes([byte])]
            assert ids, f"single-byte token {bytes([byte])!r} should be allowed"
            assert f.accept_token(ids[0])
        assert f.is_accepting()


def test_identical_bytes_identical_bits():
    """Ids with the same bytes always share a mask bit; specials with those bytes never do."""
    tokens = [b"<s>", b"a", b"ab", b"a", b"b", b"ab", b"", b"b", b"ba", b"a", b"abab", b"c"]
    v = Vocabulary(tokens, special_ids=[0, 9], eos_token_ids=[0], size=70)
    groups: dict[bytes, list[int]] = {}
    for t, data in enumerate(tokens):
        if t not in (0, 9) and data:
            groups.setdefault(data, []).append(t)
    for pattern in [r"(ab)*", r"a(b|ba)*", r"b?a{0,3}b*", r"(a|b)*c"]:
        compiled = automask.compile(Grammar.from_regex(pattern), v)
        rng = random.Random(pattern)
        for _ in range(5):
            m = Matcher(compiled)
            for _ in range(6):
                bits = bitmask_ids(m, v.size)
                for ids in groups.values():
                    assert len({t in bits for t in ids}) == 1, (pattern, ids, bits)
                assert 9 not in bits and 6 not in bits
                assert not bits & set(range(len(tokens), v.size))
                assert (0 in bits) == m.is_accepting()
                if not random_walk(m, rng, 1):
                    break


def test_utf8_identity(vocab):
    """``[\\s\\S]*`` allows exactly the tokens that keep the output well-formed UTF-8."""
    m = Matcher(automask.compile(Grammar.from_regex(r"[\s\S]*"), vocab))
    ordinary = ordinary_ids(vocab)
    rng = random.Random(vocab.name)
    out = b""
    seen_partial = False
    for _ in range(40):
        bits = bitmask_ids(m, vocab.size)
        expected = {t for t in ordinary if utf8_prefix_ok(out + vocab.tokens[t])}
        if utf8_complete(out):
            expected |= set(vocab.eos_token_ids)
        assert bits == expected, (
            f"after {out!r}: extra {[vocab.token_bytes(t) for t in bits - expected][:8]}, "
            f"missing {[vocab.token_bytes(t) for t in expected - bits][:8]}")
        assert m.is_accepting() == utf8_complete(out)
        # Prefer partial code points (single non-ASCII bytes) to reach mid-character states.
        partial = [t for t in bits if len(vocab.tokens[t]) == 1 and vocab.tokens[t][0] >= 0xC0]
        text = sorted(bits - set(vocab.eos_token_ids))
        pool = partial if partial and rng.random() < 0.3 else text
        t = rng.choice(sorted(pool))
        assert m.accept_token(t)
        out += vocab.tokens[t]
        seen_partial = seen_partial or not utf8_complete(out)
    assert seen_partial
    # At the very start, every ASCII token and every complete-UTF-8 token is allowed.
    fresh = Matcher(m.compiled)
    allowed = set(fresh.allowed_token_ids().tolist())
    for t in ordinary:
        if utf8_complete(vocab.tokens[t]):
            assert t in allowed


# --------------------------------------------------------------------------- EOS, forcing


def _accepts_after(m: Matcher, t: int) -> bool:
    f = m.fork()
    return f.accept_token(t) and f.is_accepting()


@pytest.mark.parametrize("name", ["regex-words", "regex-ip", "choices", "gbnf-json",
                                  "lark-ignore", "gbnf-nullable"])
def test_eos_exactly_when_accepting(name, vocab):
    compiled = automask.compile(GRAMMARS[name](), vocab)
    rec = Recognizer(compiled.grammar)
    rng = random.Random(name)
    eos = list(vocab.eos_token_ids)
    terminated = 0
    for _ in range(12):
        m = Matcher(compiled)
        out = b""
        for _ in range(30):
            bits = bitmask_ids(m, vocab.size)
            accepting = m.is_accepting()
            assert all((e in bits) == accepting for e in eos)
            assert accepting == rec.accepts(out), out
            if accepting and rng.random() < 0.35:
                assert m.accept_token(eos[-1])
                assert m.is_terminated()
                terminated += 1
                break
            if not accepting:
                assert not m.fork().accept_token(eos[0])
            choices = sorted(bits - set(eos))
            if not choices:
                assert accepting  # else fill_bitmask must have raised
                assert m.accept_token(eos[0])
                assert m.is_terminated()
                terminated += 1
                break
            if rng.random() < 0.3:  # head for an accepting state now and then
                closing = [t for t in choices if _accepts_after(m, t)]
                choices = closing or choices
            t = rng.choice(choices)
            assert m.accept_token(t)
            out += vocab.tokens[t]
        if m.is_terminated():
            # Nothing is accepted after EOS, and the mask holds nothing but EOS.
            for t in range(vocab.size):
                assert not m.accept_token(t)
            assert bitmask_ids(m, vocab.size) <= set(eos)
            assert not m.accept_bytes(b"a")
            assert m.num_accepted == len(m._history) - 1
    assert terminated >= 3


def test_forced_bytes():
    v = Vocabulary([b"<e>", b"a", b"b", b"c", b"d", b"e", b"abc"], special_ids=[0],
                   eos_token_ids=[0])
    m = Matcher(automask.compile(Grammar.from_regex("abc(d|e)"), v))
    assert m.forced_bytes() == b"abc"
    assert m.accept_token(1)
    assert m.forced_bytes() == b"bc"
    assert m.accept_bytes(b"bc")
    assert m.forced_bytes() == b""  # a choice
    assert m.accept_token(5)
    assert m.forced_bytes() == b""  # accepting
    m = Matcher(automask.compile(Grammar.from_regex("(abc|abd)e?"), v))
    assert m.forced_bytes() == b"ab"
    m = Matcher(automask.compile(Grammar.from_regex("ab(c)?d"), v))
    assert m.forced_bytes() == b"ab"
    m = Matcher(automask.compile(Grammar.from_gbnf('root ::= "a" x "d"\nx ::= "bc"'), v))
    assert m.forced_bytes() == b"abcd"


def test_forced_tokens_without_encoder():
    """Without an encoder, a mask with a single legal token forces that token."""
    v = Vocabulary([b"<e>", b"x", b"y", b"xy", b"z"], special_ids=[0], eos_token_ids=[0])
    m = Matcher(automask.compile(Grammar.from_regex("xz(y|z)"), v))
    assert m.forced_tokens() == [1, 4]
    assert m.num_accepted == 0  # not accepted
    m = Matcher(automask.compile(Grammar.from_regex("x(y|z)"), v))
    assert m.forced_bytes() == b"x"
    assert m.forced_tokens() == []  # "x" and "xy" are both legal
    m = Matcher(automask.compile(Grammar.from_regex("xzy"), v))
    assert m.forced_tokens() == [1, 4, 2]
    assert m.forced_tokens(max_tokens=2) == [1, 4]


@pytest.mark.parametrize("pattern", [
    r'\{"name": "[a-z]+", "age": \d+\}',
    r"The answer is (yes|no)\.",
    r"hello world",
    r"<think>\n(a|b)+\n</think>",
    r"Les élèves (é|è)+ 🙂!",
])
def test_forced_tokens_with_encoder(pattern, vocab):
    compiled = automask.compile(Grammar.from_regex(pattern), vocab)
    m = Matcher(compiled)
    forced = m.forced_bytes()
    assert forced
    tokens = m.forced_tokens()
    assert tokens, "some token must be forced"
    data = b"".join(vocab.tokens[t] for t in tokens)
    assert forced.startswith(data), (forced, data)
    text = forced.decode("utf-8", errors="ignore")
    assert tokens == vocab.encode(text)[: len(tokens)], "forced tokens are canonical"
    if not m.compiled.states.advance(parse_state(m), forced).threads:
        assert tokens == vocab.encode(text)  # the grammar ends here: nothing held back
    f = m.fork()
    assert f.accept_tokens(tokens) == len(tokens)
    assert m.num_accepted == 0
    # After the forced tokens the remaining forced bytes are what is left of ``forced``.
    assert data + f.forced_bytes() == forced or not f.forced_bytes()


@pytest.mark.parametrize("pattern", [
    r'\{"end_time":[0-9]\}',
    r'\{"name": "[a-z]+", "age": \d+\}',
    r"The answer is (yes|no)\.",
    r"<think>\n(a|b)+\n</think>",
])
def test_forced_last_token_kept_exactly_when_nothing_longer_is_legal(pattern, vocab):
    """The last token of the forced bytes is forced too iff, after the tokens before
    it, no legal token is a longer string starting with its bytes (brute force)."""
    m = Matcher(automask.compile(Grammar.from_regex(pattern), vocab))
    forced = m.forced_bytes()
    text = forced.decode("utf-8", errors="ignore")
    encoded = vocab.encode(text)
    if not text or not m.compiled.states.advance(parse_state(m), text.encode()).threads:
        return  # the grammar ends there: nothing is held back anyway
    head = m.fork()
    assert head.accept_tokens(encoded[:-1]) == len(encoded) - 1
    last = vocab.tokens[encoded[-1]]
    longer_legal = any(
        len(tok) > len(last) and tok.startswith(last) and head.is_allowed(t)
        for t, tok in enumerate(vocab.tokens) if tok and t not in vocab.special_ids)
    tokens = m.forced_tokens()
    assert tokens[: len(encoded) - 1] == encoded[:-1]
    assert (tokens[len(encoded) - 1: len(encoded)] == [encoded[-1]]) == (not longer_legal)


def test_forced_tokens_at_a_choice_and_at_the_end(tiny_bpe_vocab):
    v = tiny_bpe_vocab
    m = Matcher(automask.compile(Grammar.from_choices(["alpha", "beta"]), v))
    assert m.forced_bytes() == b""
    assert m.forced_tokens() == []
    m = Matcher(automask.compile(Grammar.from_regex("ab"), v))
    assert m.accept_tokens(v.encode("ab")) == len(v.encode("ab"))
    assert m.forced_tokens() == []
    assert m.is_accepting()


@pytest.mark.parametrize("name", ["gbnf-json", "regex-unicode"])
def test_single_allowed_token_agrees_with_the_id_list(name, vocab):
    compiled = automask.compile(GRAMMARS[name](), vocab)
    rng = random.Random(name)
    def check(m: Matcher) -> np.ndarray:
        allowed = m.allowed_token_ids()
        assert m.single_allowed_token() == (int(allowed[0]) if len(allowed) == 1 else None)
        return allowed

    for _ in range(6):
        m = Matcher(compiled)
        for _ in range(12):
            allowed = check(m)
            if m.is_terminated() or not len(allowed):
                break
            assert m.accept_token(int(rng.choice(allowed)))
    # the bit arithmetic on masks of every shape: empty, one bit, two in a word, two words
    class Fixed(Matcher):
        words = np.zeros(0, dtype=np.uint32)

        def mask_words(self) -> np.ndarray:
            return self.words

    m = Fixed(compiled)
    for words, want in (({}, None), ({3: 1 << 5}, 3 * 32 + 5), ({0: 1}, 0),
                        ({7: 1 << 31}, 7 * 32 + 31), ({3: 0b101}, None), ({1: 1, 2: 1}, None)):
        mask = np.zeros(8, dtype=np.uint32)
        for i, w in words.items():
            mask[i] = w
        m.words = mask
        assert m.single_allowed_token() == want, words


# --------------------------------------------------------------------------- rollback, fork


@pytest.mark.parametrize("name", ["gbnf-json", "lark-ignore", "regex-unicode"])
def test_rollback_fork_reset(name, vocab):
    compiled = automask.compile(GRAMMARS[name](), vocab)
    rng = random.Random(name)
    for _ in range(4):
        m = Matcher(compiled)
        tokens = random_walk(m, rng, 15)
        n = len(tokens)
        assert m.num_accepted == n
        snapshot = bitmask_ids(m, vocab.size)
        for k in sorted({0, 1, n // 2, n}):
            f = m.fork()
            f.rollback(k)
            assert f.num_accepted == n - k
            replay = Matcher(compiled)
            assert replay.accept_tokens(tokens[: n - k]) == n - k
            assert bitmask_ids(f, vocab.size) == bitmask_ids(replay, vocab.size)
            assert f.is_accepting() == replay.is_accepting()
            # Rolled back, the same tokens are accepted again to the same state.
            assert f.accept_tokens(tokens[n - k:]) == k
            assert bitmask_ids(f, vocab.size) == snapshot
        # Forks are independent both ways.
        f = m.fork()
        random_walk(f, rng, 5)
        assert m.num_accepted == n
        assert bitmask_ids(m, vocab.size) == snapshot
        g = m.fork()
        if n:
            m.rollback(1)
            assert bitmask_ids(g, vocab.size) == snapshot
        with pytest.raises(ValueError):
            m.rollback(m.num_accepted + 1)
        with pytest.raises(ValueError):
            m.rollback(-1)
        m.reset()
        assert m.num_accepted == 0
        assert bitmask_ids(m, vocab.size) == bitmask_ids(Matcher(compiled), vocab.size)


def test_rollback_after_eos_and_accept_bytes(tiny_bpe_vocab):
    v = tiny_bpe_vocab
    m = Matcher(automask.compile(Grammar.from_regex("ab?"), v))
    assert m.accept_bytes(b"a")
    assert m.is_accepting()
    eos = v.eos_token_ids[0]
    assert m.accept_token(eos)
    assert m.is_terminated()
    m.rollback(1)
    assert not m.is_terminated()
    assert m.accept_bytes(b"b")
    assert not m.accept_bytes(b"b")
    m.rollback(2)
    assert m.num_accepted == 0
    assert not m.accept_bytes(b"ba")
    assert m.num_accepted == 0


# --------------------------------------------------------------------------- hard grammars


def all_strings(alphabet: bytes, max_len: int):
    frontier = [b""]
    yield b""
    for _ in range(max_len):
        frontier = [s + bytes([c]) for s in frontier for c in alphabet]
        yield from frontier


@pytest.mark.parametrize("name, alphabet, exhaustive", [
    ("gbnf-ambiguous", b"1+()", 6),
    ("lark-left-recursive", b"xyzw", 6),
    ("gbnf-nullable", b"xyz", 7),
    ("lark-ignore", b"[],1a \n", 5),
])
def test_hard_grammars_byte_by_byte(name, alphabet, exhaustive):
    """Ambiguity, left recursion and nullable rules: byte-by-byte acceptance and liveness
    agree with the reference recognizer and the prefix oracle on many strings."""
    grammar = GRAMMARS[name]()
    rec = Recognizer(grammar)
    oracle = Recognizer(grammar)
    # Bytes only: a one-token-per-byte vocabulary exercises the scans byte by byte too.
    v = Vocabulary([b"<e>"] + [bytes([c]) for c in alphabet], special_ids=[0],
                   eos_token_ids=[0])
    compiled = automask.compile(grammar, v)
    rng = random.Random(name)
    strings = list(all_strings(alphabet, exhaustive))
    strings += [bytes(rng.choice(alphabet) for _ in range(rng.randint(7, 14)))
                for _ in range(300)]
    accepted = 0
    for s in strings:
        m = Matcher(compiled)
        state = oracle.initial
        alive = True
        for i, byte in enumerate(s):
            state = oracle.step(state, byte)
            ok = m.accept_bytes(bytes([byte]))
            assert ok == (state is not None), f"{name}: {s[: i + 1]!r} liveness"
            if not ok:
                alive = False
                break
        if alive:
            assert m.is_accepting() == rec.accepts(s), f"{name}: {s!r}"
            accepted += rec.accepts(s)
            # The same string token by token (ids 1.. are the single bytes).
            t = Matcher(compiled)
            assert t.accept_tokens([alphabet.index(c) + 1 for c in s]) == len(s)
            assert t.is_accepting() == m.is_accepting()
    assert accepted >= 10


# runs of whitespace longer than a token, bounded: every split of a run is a lexeme end
WHITESPACE_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "a": {"type": "integer"}, "1": {"type": "object", "additionalProperties": False}}}

CSV_GBNF = r"""
root ::= row ("\n" row)*
row  ::= cell | row "," cell
cell ::= [ab]+ | "\"" [ab,]* "\""
"""


@pytest.mark.parametrize("name, alphabet", [
    ("gbnf-ambiguous", b"1+()"),
    ("lark-left-recursive", b"xyzw"),
    ("gbnf-nullable", b"xyz"),
    ("lark-ignore", b"[],1a \n"),
    ("gbnf-csv", b'ab,"\n'),
    ("schema-whitespace", b'{}":, \na1'),
])
def test_masks_with_every_short_token(name, alphabet):
    """A vocabulary of every string of 1 to 3 bytes over the grammar's alphabet: tokens
    that end a lexeme, cross one or several lexeme boundaries, or end inside one; the
    mask must be exactly the oracle's at random states."""
    grammar = (Grammar.from_gbnf(CSV_GBNF) if name == "gbnf-csv" else
               Grammar.from_json_schema(WHITESPACE_SCHEMA, max_whitespace=4)
               if name == "schema-whitespace" else GRAMMARS[name]())
    tokens = [b"<e>"] + [s for s in all_strings(alphabet, 3) if s]
    v = Vocabulary(tokens, special_ids=[0], eos_token_ids=[0])
    compiled = automask.compile(grammar, v)
    oracle = Recognizer(grammar)
    rng = random.Random(name)
    crossing = 0
    for _ in range(6):
        m = Matcher(compiled)
        out = b""
        for _ in range(10):
            bits = bitmask_ids(m, v.size)
            state = oracle.feed(out)
            expected = oracle_allowed(oracle, state, v)
            assert bits == expected, (
                f"{name} after {out!r}: extra {sorted(v.tokens[t] for t in bits - expected)[:8]}"
                f", missing {sorted(v.tokens[t] for t in expected - bits)[:8]}")
            assert m.is_accepting() == oracle.accepting(state)
            crossing += sum(len(v.tokens[t]) > 1 for t in bits)
            choices = sorted(bits - {0})
            if not choices:
                break
            t = rng.choice(choices)
            assert m.accept_token(t)
            out += v.tokens[t]
    assert crossing > 20


def test_ambiguous_grammar_many_parses():
    """A highly ambiguous grammar stays cheap: the state count does not follow the parse count."""
    v = Vocabulary([b"<e>", b"1", b"+", b"1+", b"11", b"(", b")"], special_ids=[0],
                   eos_token_ids=[0])
    m = Matcher(automask.compile(Grammar.from_gbnf(AMBIGUOUS_GBNF), v))
    for _ in range(60):
        assert m.accept_token(3)  # "1+"
        assert m.is_allowed(1) and m.is_allowed(4) and not m.is_allowed(2)
    assert not m.is_accepting()
    assert m.accept_token(4)
    assert m.is_accepting() and m.is_allowed(0)


# --------------------------------------------------------------------------- bad input


def test_token_ids_out_of_range(tiny_bpe_vocab):
    v = padded(tiny_bpe_vocab, 10)
    m = Matcher(automask.compile(Grammar.from_regex("[a-z]+"), v))
    for t in (-1, v.size, v.size + 1, 10**9):
        with pytest.raises(VocabularyError):
            m.accept_token(t)
        with pytest.raises(VocabularyError):
            m.accept_tokens([t])
    assert m.num_accepted == 0
    for t in range(len(v.tokens), v.size):  # padding: in range, never allowed
        assert not m.accept_token(t)
        assert not m.is_allowed(t)


def test_is_allowed_out_of_range():
    # 32 ids: the last one, allowed, sits in bit 31 of the last word, which is what
    # is_allowed(-1) reads.
    tokens = [b"<e>"] + [bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyzABCDE"]
    v = Vocabulary(tokens, special_ids=[0], eos_token_ids=[0])
    assert v.size == 32
    m = Matcher(automask.compile(Grammar.from_regex("E"), v))
    assert m.is_allowed(31)
    for t in (-1, 32, 64, 10**6):
        with pytest.raises(VocabularyError):
            m.is_allowed(t)


@pytest.mark.parametrize("pattern", ["a(b", "a{3,2}", "[z-a]", "*a", "a)", "[abc", "x\\"])
def test_malformed_regex(pattern):
    with pytest.raises(GrammarError) as err:
        Grammar.from_regex(pattern)
    assert err.value.location and "col" in err.value.location
    assert not isinstance(err.value, UnsupportedFeature)


@pytest.mark.parametrize("pattern", ["(?=a)b", "a(?!b)", "(?<=a)b", r"\bx", r"(a)\1"])
def test_unsupported_regex(pattern):
    with pytest.raises(UnsupportedFeature) as err:
        Grammar.from_regex(pattern)
    assert err.value.location


@pytest.mark.parametrize("text", ['root ::= "a', "root ::= foo", 'root ::= "a" (',
                                  'root = "a"', 'root ::= [a-'])
def test_malformed_gbnf(text):
    with pytest.raises(GrammarError) as err:
        Grammar.from_gbnf(text)
    assert err.value.location and "line" in err.value.location


def test_malformed_lark():
    with pytest.raises(GrammarError) as err:
        Grammar.from_lark('start: "a" (')
    assert err.value.location


def test_unspellable_grammar_fails_at_compile():
    v = Vocabulary([b"<e>", b"a", b"b", b"{", b"}", b"ab"], special_ids=[0], eos_token_ids=[0])
    for grammar in [Grammar.from_regex('"a"'), Grammar.from_regex('a+"?b'),
                    Grammar.from_gbnf('root ::= "{" x "}"\nx ::= "a" | "\\"" x')]:
        try:
            compiled = automask.compile(grammar, v)
        except GrammarError as err:
            assert "spell" in str(err)
            continue
        # Where only an optional part needs the byte, the rest is still usable.
        m = Matcher(compiled)
        assert m.allowed_token_ids().size
    with pytest.raises(GrammarError):
        automask.compile(Grammar.from_regex('"a"'), v)
    with pytest.raises(GrammarError):
        # the special token's text does not count as spelling
        automask.compile(Grammar.from_regex("<e>"), v)


def test_empty_mask_outside_accepting_raises():
    """Bytes present but no token sequence spells the grammar: NoLegalContinuation."""
    v = Vocabulary([b"<e>", b"ab", b"c", b"x"], special_ids=[0], eos_token_ids=[0])
    m = Matcher(automask.compile(Grammar.from_regex("ac"), v))
    with pytest.raises(NoLegalContinuation):
        m.fill_bitmask(automask.allocate_bitmask(1, v.size))
    with pytest.raises(NoLegalContinuation):
        m.allowed_token_ids()
    assert not any(m.fork().accept_token(t) for t in range(v.size))
    # Accepting with nothing more to say is fine: only EOS.
    m = Matcher(automask.compile(Grammar.from_regex("ab"), v))
    assert m.accept_token(1)
    assert m.allowed_token_ids().tolist() == [0]


def test_compile_rejects_non_grammar(tiny_bpe_vocab):
    with pytest.raises(TypeError):
        automask.compile("a+", tiny_bpe_vocab)


# --------------------------------------------------------------------------- bitmask helpers


def test_allocate_and_fill_bitmask(tiny_spm_vocab):
    v = padded(tiny_spm_vocab, 40)
    bm = automask.allocate_bitmask(3, v.size)
    assert bm.dtype == np.int32 and bm.shape == (3, (v.size + 31) // 32)
    assert (bm == -1).all()
    m = Matcher(automask.compile(Grammar.from_regex("[0-9]+"), v))
    m.fill_bitmask(bm, 1)
    assert (bm[0] == -1).all() and (bm[2] == -1).all()
    unpacked = automask.unpack_bitmask(bm, v.size)
    assert unpacked.shape == (3, v.size) and unpacked.dtype == bool
    allowed = m.allowed_token_ids()
    assert np.array_equal(np.flatnonzero(unpacked[1]), allowed)
    # Layout: token t is bit t % 32 of word t // 32, LSB first.
    for t in range(v.size):
        assert bool((int(bm[1, t // 32]) >> (t % 32)) & 1) == (t in set(allowed.tolist()))
    # 1-D rows and rows longer than needed (the extra words are cleared).
    row = np.full(bm.shape[1] + 2, -1, dtype=np.int32)
    m.fill_bitmask(row)
    assert (row[bm.shape[1]:] == 0).all() and np.array_equal(row[: bm.shape[1]], bm[1])
    with pytest.raises(ValueError):
        m.fill_bitmask(np.zeros((1, bm.shape[1] - 1), dtype=np.int32))


def test_apply_bitmask_numpy(tiny_bpe_vocab):
    v = tiny_bpe_vocab
    m = Matcher(automask.compile(Grammar.from_regex("(true|false)"), v))
    bm = automask.allocate_bitmask(2, v.size)
    m.fill_bitmask(bm, 0)
    allowed = m.allowed_token_ids()
    assert 0 < allowed.size < 50
    rng = np.random.default_rng(0)
    # 1-D logits with a 1-D mask row, logits wider than the mask (padding: disallowed).
    width = bm.shape[1] * 32 + 45
    logits = rng.normal(size=width).astype(np.float32)
    orig = logits.copy()
    out = automask.apply_bitmask(logits, bm[0])
    assert out is logits
    finite = np.flatnonzero(np.isfinite(logits))
    assert np.array_equal(finite, allowed)
    assert np.array_equal(logits[finite], orig[finite])
    assert np.all(logits[np.setdiff1d(np.arange(width), allowed)] == -np.inf)
    # 2-D logits, one row per mask row (row 1 still allows everything).
    logits2 = rng.normal(size=(2, v.size)).astype(np.float64)
    automask.apply_bitmask(logits2, bm)
    assert np.array_equal(np.flatnonzero(np.isfinite(logits2[0])), allowed)
    assert np.isfinite(logits2[1]).all()


def test_apply_bitmask_torch(tiny_bpe_vocab):
    torch = pytest.importorskip("torch")
    v = tiny_bpe_vocab
    m = Matcher(automask.compile(Grammar.from_regex("[0-9]{2}"), v))
    bm = automask.allocate_bitmask(2, v.size)
    m.fill_bitmask(bm, 0)
    m.fill_bitmask(bm, 1)
    allowed = torch.as_tensor(m.allowed_token_ids())
    logits = torch.randn(2, v.size + 70)
    automask.apply_bitmask(logits, torch.as_tensor(bm))
    for row in logits:
        assert torch.equal(torch.nonzero(torch.isfinite(row)).flatten(), allowed)
    one = torch.randn(v.size)
    automask.apply_bitmask(one, bm[0])
    assert torch.equal(torch.nonzero(torch.isfinite(one)).flatten(), allowed)
    # fill_bitmask writes straight into a CPU torch tensor.
    tb = torch.full((1, bm.shape[1]), -1, dtype=torch.int32)
    m.fill_bitmask(tb)
    assert np.array_equal(tb.numpy()[0], bm[0])


# --------------------------------------------------------------------------- threads


def _trace(compiled, vocab, texts: list[str]) -> list:
    """Per text: the mask bytes at every step, and whether it ended accepting."""
    out = []
    for text in texts:
        m = Matcher(compiled)
        steps = []
        for t in vocab.encode(text):
            steps.append(m.mask_words().tobytes())
            if not m.accept_token(t):
                steps.append(("refused", t))
                break
        steps.append(m.mask_words().tobytes())
        out.append((steps, m.is_accepting()))
    return out


def test_threads_share_a_compiled_grammar(tiny_bpe_vocab):
    v = tiny_bpe_vocab
    docs = [
        '{"name": "Ada", "age": 36, "languages": ["en", "fr"], "active": true}',
        '[{"x": 1.5, "y": -2}, {"x": 0, "y": 1e10}, {"text": "line one\\nline two"}]',
        '{"id": 17, "tags": [], "nested": {"a": [1, 2, 3], "b": {"c": "d"}}, "ok": false}',
        '["\\u00e9t\\u00e9", "Les élèves", 3.14159, null, [[[]]], {}]',
        '{"a": {"b": {"c": {"d": [1, {"e": "🙂"}]}}}}',
        '{"bad": [1, 2,]}',
        '  {"lead": "space"}',
        '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -0.5e-3]',
    ]
    expected = _trace(automask.compile(Grammar.from_gbnf(JSONISH), v), v, docs)
    assert [acc for _, acc in expected].count(True) == 6
    shared = automask.compile(Grammar.from_gbnf(JSONISH), v)  # cold caches, raced on
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        try:
            order = docs[i:] + docs[:i]
            barrier.wait()
            got = _trace(shared, v, order)
            results[i] = got[len(docs) - i:] + got[: len(docs) - i]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        assert results[i] == expected, f"thread {i} disagrees with the single-threaded run"


def test_walk_to_end_on_node_derivatives_matches_the_table_walk():
    """A committed token's bytes are walked on regex derivatives where the lexer has no
    transition yet (no state per byte); where it stops must be the state, and the byte,
    that stepping the lexer's own table reaches."""
    from automask.engine.lexer import LexerDFA
    from automask.regex.parser import parse_regex

    patterns = [r'"name"[ \t\n]{0,4}:[ \t\n]{0,4}', r'"([^"\\]|\\["\\/bfnrtu])*"',
                r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", r"[a-c]{2,5}x|ab", r"true|false"]
    lexemes = tuple(parse_regex(p) for p in patterns)
    rng = random.Random(3)
    alphabet = b'"name: \t\n-0123456789.abcxtruefls\\/'
    for _ in range(300):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        for lex in range(len(lexemes)):
            lazy, eager = LexerDFA(lexemes), LexerDFA(lexemes)
            start_lazy, start_eager = lazy.start((lex,)), eager.start((lex,))
            got, i = lazy.walk_to_end(start_lazy, data)
            sid, j = start_eager, 0
            while j < len(data):  # the table, one step at a time
                sid = eager.transition(sid, data[j])
                j += 1
                if sid == 0 or eager.accepts[sid]:
                    break
            assert i == j, (patterns[lex], data)
            assert list(lazy.members(got)) == list(eager.members(sid)), (patterns[lex], data)


@pytest.mark.python_engine
def test_follow_sets_settle_in_dependency_order(monkeypatch):
    """FIRST/FOLLOW fixpoints read a rule after the rules it reads: an object of 3,000
    optional properties (a chain of 3,000 rules, each reading the next) takes about one
    step per production, not one pass per link (4.5 million steps, minutes at 10,000)."""
    from automask.engine import earley

    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(3000)}}
    grammar = automask.Grammar.from_json_schema(schema)
    steps = []
    real = earley._settle

    def counting(parts, reads, by_lhs, step):
        count = [0]

        def counted(k):
            count[0] += 1
            return step(k)

        real(parts, reads, by_lhs, counted)
        steps.append(count[0])

    monkeypatch.setattr(earley, "_settle", counting)
    earley.follow_lexemes(grammar)
    assert len(steps) == 2 and max(steps) < 2 * len(grammar.productions)

    def rounds(parts, reads, by_lhs, step):  # every rule, again and again, until stable
        rules = [k for part in parts for nt in part for k in by_lhs[nt]]
        changed = True
        while changed:
            changed = False
            for k in reversed(rules):
                changed = bool(step(k)) or changed

    for schema in [
        {"type": "object", "properties": {
            "a": {"type": "array", "items": {"$ref": "#"}}, "b": {"anyOf": [
                {"type": "integer"}, {"type": "object", "properties": {"c": {"type": "string"}},
                                      "required": ["c"]}]}}, "required": ["b"]},
        {"$defs": {"node": {"type": "object", "properties": {
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            "next": {"$ref": "#/$defs/node"}, "v": {"type": "number"}}}},
         "anyOf": [{"$ref": "#/$defs/node"}, {"type": "array", "minItems": 2}]},
    ]:
        small = automask.Grammar.from_json_schema(schema)
        ordered = earley.follow_lexemes(small)
        with monkeypatch.context() as m:
            m.setattr(earley, "_settle", rounds)
            assert earley.follow_lexemes(small) == ordered


def test_strong_components_come_after_what_they_read():
    from automask.engine.earley import _strong_components

    a, b, c, d, e = range(5)
    reads = [[b], [c], [b, d, b], [], [a, d]]  # (a repeat, as rules with a symbol twice give)
    parts = _strong_components(reads)
    place = {v: i for i, part in enumerate(parts) for v in part}
    assert sorted(map(sorted, parts)) == [[a], [b, c], [d], [e]]  # one cycle, one part
    assert place[d] < place[b] < place[a] < place[e]
