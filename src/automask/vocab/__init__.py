"""Token vocabularies: the exact bytes of every token id of a real tokenizer."""

# the loaders register themselves with Vocabulary.from_file / from_hf when imported
from automask.vocab import gguf_file, hf, tiktoken_file  # noqa: F401
from automask.vocab.vocabulary import Vocabulary

__all__ = ["Vocabulary"]
