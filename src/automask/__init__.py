"""automask: compile a constraint into automata, and automata into token masks."""

from automask.errors import (
    AutomaskError,
    GrammarError,
    LimitExceeded,
    NoLegalContinuation,
    UnsupportedFeature,
    VocabularyError,
)
from automask.grammar.ir import Grammar

__all__ = [
    "AutomaskError",
    "Grammar",
    "GrammarError",
    "LimitExceeded",
    "NoLegalContinuation",
    "UnsupportedFeature",
    "VocabularyError",
]
__version__ = "0.1.0"
