"""automask: compile a constraint into automata, and automata into token masks.

Validity is guaranteed (every output the masks allow parses); truth and task
success are not: a grammar cannot make a model right.
"""

# automask.schema registers the JSON Schema front end with the grammar IR (and
# automask.grammar, imported with grammar.ir below, the GBNF, Lark and segment ones)
import automask.schema  # noqa: F401
from automask._version import __version__ as __version__
from automask.bitmask import allocate_bitmask, apply_bitmask, unpack_bitmask
from automask.engine.batch import fill_bitmasks
from automask.engine.compiled import CacheStats, CompiledGrammar, Compiler, Limits, compile
from automask.engine.matcher import Matcher
from automask.engine.warm_up import warm_up
from automask.errors import (
    AutomaskError,
    EmptyLanguage,
    GrammarError,
    LimitExceeded,
    NoLegalContinuation,
    UnsupportedFeature,
    VocabularyError,
)
from automask.generation.loop import generate
from automask.grammar.ir import Grammar
from automask.grammar.segments import Tag
from automask.vocab import Vocabulary

__all__ = [
    "AutomaskError",
    "CacheStats",
    "CompiledGrammar",
    "Compiler",
    "EmptyLanguage",
    "Grammar",
    "GrammarError",
    "Limits",
    "LimitExceeded",
    "Matcher",
    "NoLegalContinuation",
    "Tag",
    "UnsupportedFeature",
    "Vocabulary",
    "VocabularyError",
    "allocate_bitmask",
    "apply_bitmask",
    "compile",
    "fill_bitmasks",
    "generate",
    "unpack_bitmask",
    "warm_up",
]
