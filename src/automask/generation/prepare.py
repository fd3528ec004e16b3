"""Everything a generation needs before the first forward pass, cached where it costs.

Building a :class:`Vocabulary` from a transformers tokenizer indexes every
token (about 0.3 s for a 49k vocabulary), so it is kept per tokenizer object
and logits width; a compiled grammar is kept per (grammar, vocabulary), since
its automata and masks warm up as they are used.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from automask.engine.compiled import CompiledGrammar, compile
from automask.grammar.ir import Grammar
from automask.vocab import Vocabulary

_lock = threading.Lock()
_vocabs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_vocabs_strong: dict[int, tuple[Any, dict]] = {}
_compiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MAX_COMPILED_PER_VOCAB = 16


def vocabulary_for(tokenizer: Any, width: int | None = None,
                   extra_eos: Sequence[int] = ()) -> Vocabulary:
    """The Vocabulary of a tokenizer (an automask Vocabulary is returned as is), cached.

    ``width`` is the model's logits width; it may exceed the tokenizer (padded
    embedding matrices), and the extra ids are then never allowed.
    ``extra_eos`` adds end-of-output ids the tokenizer does not name (a
    model's generation config often lists several, e.g. Llama 3's
    ``<|eot_id|>`` beside ``<|end_of_text|>``).
    """
    if isinstance(tokenizer, Vocabulary):
        return tokenizer
    key = (width, tuple(sorted(set(extra_eos))))
    with _lock:
        try:
            cache = _vocabs.setdefault(tokenizer, {})
        except TypeError:  # not weak-referenceable: keep it alive with its vocabularies
            cache = _vocabs_strong.setdefault(id(tokenizer), (tokenizer, {}))[1]
        vocab = cache.get(key)
        if vocab is None:
            size = width if width is not None and width > len(tokenizer) else None
            vocab = Vocabulary.from_hf(tokenizer, vocab_size=size)
            extra = [t for t in key[1] if 0 <= t < vocab.size and t not in vocab.eos_token_ids]
            if extra:
                vocab = Vocabulary.from_hf(tokenizer, vocab_size=size,
                                           eos_token_ids=[*vocab.eos_token_ids, *extra])
            cache[key] = vocab
        return vocab


def compiled_for(grammar: Grammar | CompiledGrammar, vocab: Vocabulary) -> CompiledGrammar:
    """Compile once per (grammar object, vocabulary); a CompiledGrammar passes through."""
    if isinstance(grammar, CompiledGrammar):
        return grammar
    with _lock:
        cache = _compiled.setdefault(vocab, OrderedDict())
        hit = cache.get(id(grammar))
        if hit is not None and hit[0] is grammar:
            cache.move_to_end(id(grammar))
            return hit[1]
    compiled = compile(grammar, vocab)
    with _lock:
        cache[id(grammar)] = (grammar, compiled)
        while len(cache) > MAX_COMPILED_PER_VOCAB:
            cache.popitem(last=False)
    return compiled


def prompt_ids(tokenizer: Any, prompt: str | Sequence[int], *, chat_template: bool = True,
               system_prompt: str | None = None) -> list[int]:
    """Token ids of the prompt: ids pass through; text goes through the chat template when
    the tokenizer has one (and ``chat_template``), else is encoded as is."""
    if not isinstance(prompt, str):
        return [int(t) for t in prompt]
    if isinstance(tokenizer, Vocabulary):
        return tokenizer.encode(prompt)
    if chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        if system_prompt is not None:
            messages.insert(0, {"role": "system", "content": system_prompt})
        text = tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt)["input_ids"])
