"""Token vocabularies: the exact bytes of every token id of a real tokenizer."""

from automask.vocab.vocabulary import Vocabulary

__all__ = ["Vocabulary"]
