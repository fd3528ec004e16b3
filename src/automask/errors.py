"""The error types every module raises: bad input is typed, never silent."""

from __future__ import annotations


class AutomaskError(Exception):
    """Base class of every error automask raises on purpose."""


class GrammarError(AutomaskError, ValueError):
    """Malformed input: a grammar, regex or schema that cannot be compiled.

    ``location`` says where (``line:col`` for text, a JSON pointer for schemas).
    """

    def __init__(self, message: str, location: str | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{message} (at {location})" if location else message)


class UnsupportedFeature(GrammarError):
    """Well-formed input that uses a feature automask does not implement."""


class EmptyLanguage(GrammarError):
    """The grammar (or schema) accepts no string at all: nothing could ever be generated.

    ``location`` says where the emptiness comes from when one place is to blame (the
    schema position, the rule); ``rule`` names the grammar rule.
    """

    rule: str | None = None


class LimitExceeded(AutomaskError):
    """A compile or mask computation went past one of its bounds (states, items, time).

    ``location`` says where in the input, when one place is to blame (a JSON
    pointer, ``line:col``), as for :class:`GrammarError`.
    """

    def __init__(self, message: str, location: str | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{message} (at {location})" if location else message)


class NoLegalContinuation(AutomaskError):
    """The mask is empty outside an accepting state: no token can continue the output."""


class VocabularyError(AutomaskError, ValueError):
    """A vocabulary that cannot be loaded, or a token id out of range."""
