"""The mask engine: configurations, the Earley parser, the lexer, token walks and masks.

``COMPILED`` says whether its per-token modules run as mypyc-compiled extensions
(``AUTOMASK_COMPILE=1 pip install .``, see setup.py) or as the Python they are built
from; both compute the same masks.
"""

from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import find_spec

# Where the module would load from, without loading it (no import order to keep here).
_masks_spec = find_spec("automask.engine.masks")
COMPILED: bool = bool(_masks_spec and _masks_spec.origin
                      and _masks_spec.origin.endswith(tuple(EXTENSION_SUFFIXES)))
