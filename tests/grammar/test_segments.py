"""Tagged segments (``Grammar.from_tags``) and reasoning blocks (``Grammar.after_reasoning``).

The reference is a plain segment parser written here from the documented
semantics, not from the construction: scan the free text for the first
trigger to end, check the tag that begins there, its content (with
:mod:`support.oracle` over the content grammar alone) up to an occurrence
of its end, and go on after it. Against it:

* texts built from the markers' own pieces are accepted by the built grammar
  (the reference recognizer over the flat IR, and the engine byte by byte)
  exactly when the parser accepts them;
* masked random walks on real tokenizers, driven by fake models that try to
  break out of segments, never close them, or write the markers across
  token boundaries: at every step the engine accepts exactly when the parser
  does, so EOS is allowed exactly on complete texts;
* masks at chosen states on llama-3.1 with tokens that straddle a trigger
  (``<tool`` then ``_call``, ``>{`` after ``<tool_call``) are exactly the
  tokens that keep the text a prefix of the language.
"""

from __future__ import annotations

import codecs
import functools
import random
from pathlib import Path

import numpy as np
import pytest
from support.oracle import Recognizer

from automask import (
    Grammar,
    GrammarError,
    LimitExceeded,
    Matcher,
    Tag,
    Vocabulary,
    compile,
)
from automask.grammar.segments import MAX_COUNTED_SEGMENTS, MAX_WHITESPACE

WS = b" \t\n\r"

# --------------------------------------------------------------------------- the reference


def utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def utf8_prefix(data: bytes) -> bool:
    """Whether ``data`` is well-formed UTF-8 so far (it may stop inside a character)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


@functools.lru_cache(maxsize=64)
def recognizer(grammar: Grammar) -> Recognizer:
    return Recognizer(grammar)


def whitespace_splits(data: bytes, i: int) -> range:
    """The positions after ``i`` that at most MAX_WHITESPACE whitespace bytes reach."""
    j = i
    while j < len(data) and data[j] in WS and j - i < MAX_WHITESPACE:
        j += 1
    return range(i, j + 1)


def tags_accept(data: bytes | str, tags: list[Tag], triggers: list[str] | None = None,
                free_text: bool = True, lo: int = 0, hi: int | None = None) -> bool:
    """Whether ``data`` is in the language of ``Grammar.from_tags(tags, ...)``."""
    if isinstance(data, str):
        data = data.encode()
    words = [w.encode() for w in (triggers or [t.begin for t in tags])]

    def segment(tag: Tag, s: int, count: int) -> bool:
        """The tag begins at ``s``: its begin, content, end, then the rest of the text."""
        begin, end = tag.begin.encode(), tag.end.encode()
        if not data.startswith(begin, s):
            return False
        at = s + len(begin)
        return any(data.startswith(end, j) and recognizer(tag.content).accepts(data[at:j])
                   and rest(j + len(end), count + 1) for j in range(at, len(data) + 1))

    @functools.cache
    def rest(i: int, count: int) -> bool:
        if free_text:
            found = [(data.find(w, i), w) for w in words]
            ends = [f + len(w) for f, w in found if f >= 0]
            if not ends:  # free text to the end
                return utf8(data[i:]) and count >= lo
            first = min(ends)  # the first trigger to end fires, there
            fired = [w for w in words if first - len(w) >= i and data[first - len(w):first] == w]
            if hi is not None and count == hi:
                return False
            return any(utf8(data[i:first - len(w)]) and segment(tag, first - len(w), count)
                       for w in fired for tag in tags if tag.begin.encode().startswith(w))
        for j in whitespace_splits(data, i):
            if j == len(data) and count >= lo:
                return True
            if (hi is None or count < hi) and any(segment(tag, j, count) for tag in tags):
                return True
        return False

    return rest(0, 0)


def reasoning_accepts(data: bytes | str, inner: Grammar, begin: str = "<think>",
                      end: str = "</think>", required: bool = False) -> bool:
    """Whether ``data`` is in the language of ``Grammar.after_reasoning(inner, ...)``."""
    if isinstance(data, str):
        data = data.encode()
    b, e = begin.encode(), end.encode()
    starts = [len(b)] if data.startswith(b) else []
    if not required:
        starts.append(0)
    for i in starts:
        k = data.find(e, i)  # the first end marker closes the block
        if k >= 0 and utf8(data[i:k]) and any(
                recognizer(inner).accepts(data[j:])
                for j in whitespace_splits(data, k + len(e))):
            return True
    return False


# --------------------------------------------------------------------------- the grammars

DIGITS = Grammar.from_regex("[0-9]{1,3}")
ONE_OR_TWO = Grammar.from_choices(["1", "22"])
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 6}},
           "required": ["city"], "additionalProperties": False}
LARK_WORDS = """
start: WORD ("," WORD)*
WORD: /[a-z]+/
%ignore " "
"""

# name -> (tags, from_tags options, pieces texts are made of)
SPECS = {
    "one-tag": ([Tag("<t>", ONE_OR_TWO, "</t>")], {}, ["<t>", "</t>", "<", "t>", "1", "22"]),
    "shared-trigger": (
        [Tag("<f=a>", ONE_OR_TWO, "</f>"), Tag("<f=b>", Grammar.from_regex("[xy]*"), "</f>")],
        {"triggers": ["<f="]}, ["<f=", "a>", "b>", "</f>", "<f", "=", "1", "22", "x", "y"]),
    "bounded": ([Tag("<t>", ONE_OR_TWO, "</t>")], {"min_segments": 1, "max_segments": 2},
                ["<t>", "</t>", "<", "t>", "1", "22"]),
    "no-free-text": (
        [Tag("<a>", ONE_OR_TWO, "</a>"), Tag("<bb>", DIGITS, "")],
        {"free_text": False, "min_segments": 1, "max_segments": 3},
        ["<a>", "</a>", "<bb>", "1", "22", "7", " ", "\n", "  \t"]),
    # overlapping triggers: the first to *end* fires ("xabc": "ab", not "bc")
    "overlapping-triggers": (
        [Tag("ab!", ONE_OR_TWO, "."), Tag("bc?", DIGITS, "."), Tag("aa", ONE_OR_TWO, ";")],
        {"triggers": ["ab", "bc", "aa"]}, ["a", "b", "c", "!", "?", ".", ";", "1", "22"]),
    "lark-ignore": ([Tag("<w>", Grammar.from_lark(LARK_WORDS), "</w>")], {},
                    ["<w>", "</w>", "ab", "c", ",", " ", "<"]),
    "empty-end": ([Tag("<n>", DIGITS, "")], {}, ["<n>", "<", "n>", "1", "22", "x"]),
}
BODIES = ["1", "22", "7", "42", "xy", "ab, c", " de ", ""]
NOISE = ["x", " ", "é", "\n", b"\xc3", b"\xff"]  # a character, and broken UTF-8


def member(rng: random.Random, tags: list[Tag], options: dict) -> bytes:
    """A text built the way the language is described (most are members, not all: the
    filler may complete a trigger, a body may not fit its content)."""
    free = options.get("free_text", True)
    lo, hi = options.get("min_segments", 0), options.get("max_segments")
    filler = ["", "x", "hello ", "é", "<", "a", "b"] if free else ["", " ", "\n"]
    out = []
    for _ in range(rng.randint(lo, lo + 2 if hi is None else hi)):
        tag = rng.choice(tags)
        bodies = [b for b in BODIES if recognizer(tag.content).accepts(b)]
        out += [rng.choice(filler), tag.begin, rng.choice(bodies), tag.end]
    out.append(rng.choice(filler))
    return "".join(out).encode()


def soup(rng: random.Random, pieces: list) -> bytes:
    """Up to 8 random pieces (markers cut up, contents, noise)."""
    parts = pieces + NOISE
    return b"".join(p if isinstance(p, bytes) else p.encode()
                    for p in rng.choices(parts, k=rng.randint(0, 8)))


# --------------------------------------------------------------------------- the language


@pytest.mark.parametrize("name", sorted(SPECS))
def test_language_agrees_with_segment_parser(name, tiny_bpe_vocab):
    tags, options, pieces = SPECS[name]
    grammar = Grammar.from_tags(tags, **options)
    assert grammar.source == "tags"
    rec = Recognizer(grammar)
    matcher = Matcher(compile(grammar, tiny_bpe_vocab))
    rng = random.Random(name)
    texts = [member(rng, tags, options) for _ in range(60)] + [soup(rng, pieces)
                                                                for _ in range(240)]
    ref = {"triggers": options.get("triggers"), "free_text": options.get("free_text", True),
           "lo": options.get("min_segments", 0), "hi": options.get("max_segments")}
    accepted = 0
    for data in texts:
        expected = tags_accept(data, tags, **ref)
        assert rec.accepts(data) == expected, (name, data)
        matcher.reset()
        assert (matcher.accept_bytes(data) and matcher.is_accepting()) == expected, (name, data)
        accepted += expected
    assert 30 <= accepted <= len(texts) - 30, (name, accepted)  # both sides are exercised


@pytest.mark.parametrize("required", [False, True])
def test_reasoning_language_agrees_with_parser(required, tiny_bpe_vocab):
    inner = Grammar.from_regex("[0-9]{1,3}|yes")
    grammar = Grammar.after_reasoning(inner, required=required)
    assert grammar.source == "reasoning"
    rec = Recognizer(grammar)
    matcher = Matcher(compile(grammar, tiny_bpe_vocab))
    rng = random.Random(f"reasoning-{required}")
    pieces = ["<think>", "</think>", "</", "think>", "<think", "hm", "1", "42", "yes", "\n\n",
              " " * 20]
    texts = [b"<think>hm</think>42", b"hm</think>\n\nyes", b"</think>1", b"<think></think>",
             b"<think>a</think>b</think>1", b"<think>" + b" " * 30 + b"</think>" + b" " * 25 + b"1"]
    thoughts = ["<think", "hm", "think>", "/", "é", " "]
    texts += ["".join([rng.choice(["", "<think>"]), *rng.choices(thoughts, k=rng.randint(0, 4)),
                       "</think>", rng.choice(["", "\n\n", " " * 20]),
                       rng.choice(["1", "42", "yes", "x", ""])]).encode() for _ in range(100)]
    texts += [soup(rng, pieces) for _ in range(200)]
    accepted = 0
    for data in texts:
        expected = reasoning_accepts(data, inner, required=required)
        assert rec.accepts(data) == expected, data
        matcher.reset()
        assert (matcher.accept_bytes(data) and matcher.is_accepting()) == expected, data
        accepted += expected
    assert 30 <= accepted <= len(texts) - 30
    assert reasoning_accepts("hm</think>42", inner, required=required) == (not required)


def test_ignored_text_stays_inside_its_segment():
    """A Lark content's %ignore is made explicit within the content, not the whole output:
    ignored spaces may stand around the words inside ``<w>...</w>``; outside, a space is
    free text like any other, and the grammar ignores nothing itself."""
    grammar = Grammar.from_tags([Tag("<w>", Grammar.from_lark(LARK_WORDS), "</w>")],
                                free_text=False)
    assert grammar.ignore == ()
    rec = Recognizer(grammar)
    assert rec.accepts("<w> ab , c </w>") and rec.accepts(" <w>ab</w>")
    assert not rec.accepts("< w>ab</w>") and not rec.accepts("<w>ab</ w>")


def test_json_schema_and_regex_contents(tiny_spm_vocab):
    tags = [Tag("<function=get_weather>", Grammar.from_json_schema(WEATHER), "</function>"),
            Tag("<function=roll>", Grammar.from_regex("[1-6]d(4|6|8|20)"), "</function>")]
    grammar = Grammar.from_tags(tags, triggers=["<function="])
    rec = Recognizer(grammar)
    good = ['<function=get_weather>{"city": "Paris"}</function>',
            'I will check. <function=roll>2d20</function> and '
            '<function=get_weather>{ "city":"Oslo" }</function>', "no call at all"]
    bad = ['<function=get_weather>{"city": "Barcelona"}</function>',  # maxLength 6
           "<function=roll>7d6</function>", "<function=search>x</function>",
           "<function=roll>2d6", '<function=get_weather>{"town": "Oslo"}</function>']
    for text in good:
        assert rec.accepts(text) and tags_accept(text, tags, ["<function="]), text
    for text in bad:
        assert not rec.accepts(text) and not tags_accept(text, tags, ["<function="]), text
    matcher = Matcher(compile(grammar, tiny_spm_vocab))
    for text in good:
        matcher.reset()
        assert matcher.accept_bytes(text.encode()) and matcher.is_accepting()


# --------------------------------------------------------------------------- walks


class FakeModel:
    """Scores for every token id given the text so far (higher is preferred); no weights.

    Every model writes the markers it knows: the tokens that begin one are
    preferred, and where the text ends with the start of one (``<tool``), the
    tokens that go on with it even more. Beyond that:

    * ``breakout`` knows the end markers too, and likes the bytes markup is made of
      (``<``, ``/``, ``>``, ``=``): from inside a segment, the ways out of it;
    * ``never-close`` knows only the begin markers and never writes a ``/`` (every
      end marker here has one, no begin has): it opens segments and closes none;
    * ``straddle`` likes tokens that cross a marker's edge: ``" <"`` before one,
      ``_call>{"``-like tokens that finish one and go on past it.
    """

    KINDS = ("breakout", "never-close", "straddle")

    def __init__(self, vocab: Vocabulary, kind: str, markers: list[str]):
        self.kind = kind
        marks = [m.encode() for m in markers]
        self.marks = [m for m in marks if b"/" not in m] if kind == "never-close" else marks
        self.facts = facts = _facts(vocab)
        if kind == "breakout":
            self.base = facts.markup.copy()
        elif kind == "never-close":
            self.base = np.where(facts.slash, -100.0, 0.0)
        else:
            self.base = np.zeros(vocab.size)
            heads = {m[:k] for m in self.marks for k in range(1, len(m))}
            for i, tok in facts.angled:  # every marker starts with "<"
                cut = tok.rfind(b"<")
                self.base[i] = 3 * (cut > 0 and tok[cut:] in heads)
        self._follow: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def scores(self, out: bytes) -> np.ndarray:
        score = self.base.copy()
        # k = 0: a marker may start anywhere (a model that writes markup wants to)
        rests = {(m[k:], k) for m in self.marks for k in range(len(m)) if out.endswith(m[:k])}
        for rest, written in rests:  # the further into a marker, the stronger the pull
            ids, bonus = self.follow(rest)
            score[ids] = np.maximum(score[ids], bonus + written)
        return np.where(self.base < -50, self.base, score)  # what a model avoids, it avoids

    def follow(self, rest: bytes) -> tuple[np.ndarray, np.ndarray]:
        """The tokens that go on with a marker's ``rest``, and how much they are liked."""
        if rest not in self._follow:
            starting = self.facts.by_first.get(rest[0], ())
            pairs = [(i, 5 + 3 * (self.kind == "straddle" and len(t) > len(rest)))
                     for i, t in starting if t[:len(rest)] == rest[:len(t)]]
            self._follow[rest] = (np.array([i for i, _ in pairs], dtype=np.int64),
                                  np.array([b for _, b in pairs], dtype=float))
        return self._follow[rest]


class _VocabFacts:
    """What the fake models read off a vocabulary, once per vocabulary."""

    def __init__(self, vocab: Vocabulary):
        self.by_first: dict[int, list[tuple[int, bytes]]] = {}  # tokens by first byte
        self.angled: list[tuple[int, bytes]] = []  # tokens with a "<"
        self.markup = np.zeros(vocab.size)  # how many of "<", "/", ">", "=" each has
        self.slash = np.zeros(vocab.size, dtype=bool)
        for i, tok in enumerate(vocab.tokens):
            if not tok or i in vocab.special_ids:
                continue
            self.by_first.setdefault(tok[0], []).append((i, tok))
            if b"<" in tok:
                self.angled.append((i, tok))
            self.markup[i] = len(set(tok).intersection(b"</>="))
            self.slash[i] = b"/" in tok


_FACTS: dict[int, _VocabFacts] = {}


def _facts(vocab: Vocabulary) -> _VocabFacts:
    if id(vocab) not in _FACTS:
        _FACTS[id(vocab)] = _VocabFacts(vocab)
    return _FACTS[id(vocab)]


def walk(matcher: Matcher, vocab: Vocabulary, model: FakeModel, accepts, seed: str,
         steps: int, closers: list[str]) -> tuple[bytes, bool]:
    """Pick the best-scored allowed token (ties broken at random) for ``steps`` tokens; then,
    when ``closers`` are given, finish: EOS where allowed, else the tokens of a closer
    (``"}</tool_call>``) after which the text is complete, else the shortest allowed token.
    At every step the engine accepts exactly when the reference does, and allows EOS
    exactly then. Returns the text and whether it ended with EOS."""
    rng = np.random.default_rng(list(seed.encode()))
    eos = np.array(vocab.eos_token_ids)
    lengths = np.array([len(t) for t in vocab.tokens] + [0] * (vocab.size - len(vocab.tokens)))
    encoded = [vocab.encode(c) for c in closers]
    plan: list[int] = []
    out = b""
    for step in range(steps + (40 if closers else 0)):
        allowed = matcher.allowed_token_ids()
        accepting = accepts(out)
        assert matcher.is_accepting() == accepting, out
        assert np.isin(eos, allowed).any() == accepting, out
        ids = allowed[~np.isin(allowed, eos)]
        if (step >= steps or not len(ids)) and accepting:
            token = int(eos[0])
        elif step < steps:
            noisy = model.scores(out)[ids] + rng.random(len(ids))
            if noisy.max() < -50:  # never-close: nothing left but closing
                return out, False
            token = int(ids[np.argmax(noisy)])
        else:
            if not plan:  # a closer to follow to its end, else one short step
                plan = next((list(c) for c in encoded if c and closes(matcher, c)),
                            [int(ids[np.argmin(lengths[ids] + rng.random(len(ids)))])])
            token = plan.pop(0)
        assert matcher.accept_token(token)
        if matcher.is_terminated():
            return out, True
        out += vocab.tokens[token]
    return out, False


def closes(matcher: Matcher, tokens: list[int]) -> bool:
    probe = matcher.fork()
    return probe.accept_tokens(tokens) == len(tokens) and probe.is_accepting()


WALK_TAGS = {
    "tool-call": [Tag("<tool_call>", Grammar.from_json_schema(WEATHER, whitespace="compact"),
                      "</tool_call>")],
    "functions": [Tag("<function=get_weather>", Grammar.from_json_schema(
        WEATHER, whitespace="compact"), "</function>"),
        Tag("<function=roll>", Grammar.from_regex("[1-6]d(4|6|20)"), "</function>")],
}
FUNCTIONS = ["<function=get_weather>", "<function=roll>", "</function>"]


def tag_closers(end: str) -> list[str]:
    return [tail + end for tail in ("", '"}', "}", 'a"}', '"city":"a"}', '{"city":"a"}',
                                    "6", "d6", "1d6")]


# name -> (grammar, reference, the markers the fake models write, closers)
WALKS = {
    "tool-call": (
        lambda: Grammar.from_tags(WALK_TAGS["tool-call"]),
        lambda out: tags_accept(out, WALK_TAGS["tool-call"]),
        ["<tool_call>", "</tool_call>"], tag_closers("</tool_call>")),
    "functions": (
        lambda: Grammar.from_tags(WALK_TAGS["functions"], triggers=["<function="],
                                  max_segments=2),
        lambda out: tags_accept(out, WALK_TAGS["functions"], ["<function="], hi=2),
        FUNCTIONS, tag_closers("</function>")),
    "required-call": (
        lambda: Grammar.from_tags(WALK_TAGS["functions"], triggers=["<function="],
                                  free_text=False, min_segments=1),
        lambda out: tags_accept(out, WALK_TAGS["functions"], ["<function="], free_text=False,
                                lo=1),
        FUNCTIONS, tag_closers("</function>")),
    "reasoning": (
        lambda: Grammar.after_reasoning(DIGITS),
        lambda out: reasoning_accepts(out, DIGITS),
        ["<think>", "</think>"], ["</think>1", "1"]),
    "reasoning-required": (
        lambda: Grammar.after_reasoning(DIGITS, required=True),
        lambda out: reasoning_accepts(out, DIGITS, required=True),
        ["<think>", "</think>"], ["</think>1", "1"]),
}

_REAL: dict[str, Vocabulary] = {}


@pytest.fixture(scope="module", params=[
    "tiny-bpe", "tiny-spm", pytest.param("llama-3.1", marks=pytest.mark.data),
    pytest.param("qwen3", marks=pytest.mark.data)])
def vocab(request, tiny_bpe_vocab, tiny_spm_vocab) -> Vocabulary:
    if request.param == "tiny-bpe":
        return tiny_bpe_vocab
    if request.param == "tiny-spm":
        return tiny_spm_vocab
    shared: Path = request.getfixturevalue("shared_data")
    if request.param not in _REAL:
        _REAL[request.param] = Vocabulary.from_file(
            shared / "tokenizers" / request.param / "tokenizer.json")
    return _REAL[request.param]


@pytest.mark.parametrize("name", sorted(WALKS))
def test_masked_walks_stay_in_the_language(name, vocab):
    make, accepts, markers, closers = WALKS[name]
    compiled = compile(make(), vocab)
    finished = opened = 0
    for kind in FakeModel.KINDS:
        model = FakeModel(vocab, kind, markers)
        for seed in range(2):
            out, done = walk(Matcher(compiled), vocab, model, accepts, f"{name}-{kind}-{seed}",
                             24, [] if kind == "never-close" else closers)
            finished += done
            opened += any(m.encode() in out for m in markers if "/" not in m)
    assert finished >= 1 and opened >= 1, name  # a walk reached EOS, one opened a segment


# --------------------------------------------------------------------------- straddling


def allowed_after(compiled, prefix: bytes) -> set[int]:
    m = Matcher(compiled)
    assert m.accept_bytes(prefix), prefix
    return set(m.allowed_token_ids().tolist())


@pytest.mark.data
def test_straddling_tokens_exact_masks(llama):
    """After free text ending in part of the trigger, the mask is exactly the tokens that
    keep the text a prefix of the language: every llama-3.1 token checked by reference."""
    tags = [Tag("<tool_call>", ONE_OR_TWO, "</tool_call>")]
    compiled = compile(Grammar.from_tags(tags, max_segments=1), llama)
    tokens = [(i, t) for i, t in enumerate(llama.tokens) if t and i not in llama.special_ids]
    ids = {t: i for i, t in tokens}
    trigger = b"<tool_call>"
    calls = [trigger + c + b"</tool_call>" for c in (b"1", b"22")]
    fixes = [b"", b"\x80", b"\x80\x80", b"\x80\x80\x80", b"\xa0\x80", b"\x90\x80\x80"]

    def viable(done: bytes, text: bytes) -> bool:
        """Whether ``done + text`` is a prefix of the language; ``done`` is complete.

        Free text so far (no trigger): a prefix iff UTF-8 so far. Else the text is
        complete, once a character cut short is finished, or it stops inside a segment
        ``S`` (content is finite here), after ``S[:k]``, and the rest of ``S`` completes it.
        """
        if not utf8_prefix(text):
            return False
        if trigger not in text:
            return True
        whole = done + text + next(f for f in fixes if utf8(text + f))
        rests = [b""] + [s[k:] for s in calls for k in range(1, len(s)) if text.endswith(s[:k])]
        return any(tags_accept(whole + r, tags, hi=1) for r in rests)

    for done, free in [(b"", b"abc<tool"), (b"", b"abc<tool_call"), (b"", b"abc<"),
                       (b"x<tool_call>1</tool_call>", b" y<tool_call")]:
        assert tags_accept(done, tags, hi=1)
        mask = allowed_after(compiled, done + free)
        expected = {i for i, t in tokens if viable(done, free + t)}
        if tags_accept(done + free, tags, hi=1):
            expected |= set(llama.eos_token_ids)
        assert mask == expected, (free, sorted(llama.tokens[i] for i in mask ^ expected)[:10])

    after_tool = allowed_after(compiled, b"abc<tool")
    assert {ids[b"_call"], ids[b"_calls"], ids[b"_callback"]} <= after_tool
    after_call = allowed_after(compiled, b"abc<tool_call")
    assert ids[b">"] in after_call  # the trigger, then "1" or "22" may follow
    assert not {ids[b">{"], ids[b">\n"], ids[b"></"], ids[b"><"]} & after_call
    assert ids[b"s"] in after_call  # "<tool_calls" is free text
    spent = allowed_after(compiled, b"x<tool_call>1</tool_call> y<tool_call")
    assert ids[b">"] not in spent and ids[b"s"] in spent  # max_segments=1 is used up


@pytest.mark.data
def test_straddling_into_json_content(llama):
    """``>{"`` completes the trigger and opens the JSON object in one token; ``}}</`` closes
    the object and starts the end marker."""
    grammar = Grammar.from_tags([Tag("<tool_call>", Grammar.from_json_schema(WEATHER),
                                     "</tool_call>")])
    compiled = compile(grammar, llama)
    ids = {t: i for i, t in enumerate(llama.tokens) if t}
    after_call = allowed_after(compiled, b"Sure. <tool_call")
    assert {ids[b">{"], ids[b'>{"'], ids[b">{\n"], ids[b">\n"]} <= after_call
    assert not {ids[b"><"], ids[b">>"], ids[b">("], ids[b"></"]} & after_call
    inside = allowed_after(compiled, b'<tool_call>{"city": "Oslo"')
    assert ids[b"}</"] in inside and ids[b"}"] in inside and ids[b"</"] not in inside
    m = Matcher(compiled)
    assert m.accept_bytes(b'<tool_call>{"city": "Oslo"}</tool_call> Done.') and m.is_accepting()


@pytest.mark.data
def test_reasoning_marker_across_tokens(llama):
    """``</think>`` written as ``</`` + ``think`` + ``>\\n\\n``: the block closes mid-token
    and the whitespace after it is the token's tail; the answer follows."""
    compiled = compile(Grammar.after_reasoning(DIGITS), llama)
    ids = {t: i for i, t in enumerate(llama.tokens) if t}
    m = Matcher(compiled)
    assert m.accept_tokens([ids[b"<"], ids[b"think"], ids[b">"], ids[b" hmm"], ids[b"</"],
                            ids[b"think"]]) == 6
    allowed = set(m.allowed_token_ids().tolist())
    assert {ids[b">"], ids[b">\n\n"], ids[b">\n"]} <= allowed
    assert ids[b">("] not in allowed and ids[b">>"] not in allowed
    assert m.accept_token(ids[b">\n\n"]) and not m.is_accepting()
    assert ids[b"42"] in set(m.allowed_token_ids().tolist())
    assert m.accept_token(ids[b"42"]) and m.is_accepting()


# --------------------------------------------------------------------------- limits and errors


def test_segment_counts():
    tag = Tag("<t>", ONE_OR_TWO, "</t>")
    required = Recognizer(Grammar.from_tags([tag], free_text=False, min_segments=1))
    assert required.accepts("<t>1</t>") and required.accepts(" <t>1</t>\n<t>22</t> ")
    assert not required.accepts("") and not required.accepts("   ")
    assert not required.accepts("hi <t>1</t>")
    none = Recognizer(Grammar.from_tags([tag], max_segments=0))
    assert none.accepts("plain text, <t or t>") and not none.accepts("<t>1</t>")
    two = Recognizer(Grammar.from_tags([tag], min_segments=2, max_segments=2))
    assert two.accepts("a<t>1</t>b<t>22</t>c") and not two.accepts("a<t>1</t>")
    assert not two.accepts("<t>1</t><t>1</t><t>1</t>")
    ws = Recognizer(Grammar.from_tags([tag], free_text=False))
    assert ws.accepts(" " * MAX_WHITESPACE + "<t>1</t>")
    assert not ws.accepts(" " * (MAX_WHITESPACE + 1) + "<t>1</t>")


def test_same_content_embedded_once():
    content = Grammar.from_json_schema(WEATHER)
    one = Grammar.from_tags([Tag("<a>", content, "</a>")])
    two = Grammar.from_tags([Tag("<a>", content, "</a>"), Tag("<b>", content, "</b>")])
    assert len(two.productions) == len(one.productions) + 1  # one more segment alternative


@pytest.mark.parametrize("call, message", [
    (lambda: Grammar.from_tags([]), "at least one tag"),
    (lambda: Grammar.from_tags([Tag("", DIGITS, "</t>")]), "begin string is empty"),
    (lambda: Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], triggers=[""]), "empty"),
    (lambda: Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], triggers=["<x"]),
     "starts with none of the triggers"),
    (lambda: Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], triggers=["<t", "<q"]),
     "opens no tag"),
    # "<t" would fire before "<t>" ends: the longer trigger could never fire
    (lambda: Grammar.from_tags([Tag("<t>", DIGITS, "</t>"), Tag("<t", DIGITS, "")]),
     "would always fire first"),
    (lambda: Grammar.from_tags([Tag("x<y>", DIGITS, "")], triggers=["x<y>", "<y"]),
     "would always fire first"),
    (lambda: Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], min_segments=-1), "min_segments"),
    (lambda: Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], min_segments=2, max_segments=1),
     "max_segments"),
    (lambda: Grammar.after_reasoning(DIGITS, end=""), "non-empty"),
    (lambda: Grammar.after_reasoning(DIGITS, begin=""), "non-empty"),
    (lambda: Grammar.after_reasoning(DIGITS, begin="<a></a>", end="</a>"), "contains the end"),
])
def test_bad_inputs(call, message):
    with pytest.raises(GrammarError, match=message):
        call()


def test_bad_types_and_limits():
    with pytest.raises(TypeError):
        Grammar.from_tags([Tag("<t>", "[0-9]+", "</t>")])
    with pytest.raises(TypeError):
        Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], triggers="<t>")
    with pytest.raises(TypeError):
        Grammar.after_reasoning("[0-9]+")
    with pytest.raises(LimitExceeded):
        Grammar.from_tags([Tag("<t>", DIGITS, "</t>")], max_segments=MAX_COUNTED_SEGMENTS + 1)


def test_trigger_in_an_end_opens_nothing():
    """Detection starts afresh after a segment: a trigger inside an end string (or inside
    content) is no trigger; the same trigger in the free text after it is."""
    tags = [Tag("<x>", Grammar.from_regex("[a-z<>]*"), "<x>!")]
    rec = Recognizer(Grammar.from_tags(tags))
    for text in ["<x>ab<x>!", "<x><x><x>!", "<x>ab<x>!tail", "<x>ab<x>!<x>c<x>!"]:
        assert rec.accepts(text) and tags_accept(text, tags), text
    assert not rec.accepts("<x>ab<x>!<x>") and not tags_accept("<x>ab<x>!<x>", tags)
