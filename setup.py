"""The optional compiled engine (everything else is in pyproject.toml).

``AUTOMASK_COMPILE=1 pip install .`` compiles the mask engine's per-token modules with
mypyc, from the same sources: the configurations, the Earley parser, the lexer, the token
walks, the mask computation and its shortcuts, and the JSON Schema front end with the
grammar IR it lowers to; and it builds ``automask._untrack``, a C function for gc_pause.
Without it, and in editable installs, the package is pure Python; both behave the same
(``automask.engine.COMPILED`` says which one runs). See docs/architecture.md, "The
compiled engine".
"""

from __future__ import annotations

import os

from setuptools import setup

#: the modules compiled, in src/: the per-token path and what it calls on every step, and
#: what a schema's compile runs before its first mask
COMPILED_MODULES = [
    "automask/budget.py",
    "automask/gc_pause.py",
    "automask/engine/counted.py",
    "automask/engine/earley.py",
    "automask/engine/gaps.py",
    "automask/engine/lexer.py",
    "automask/engine/masks.py",
    "automask/engine/state.py",
    "automask/engine/tokens.py",
    "automask/engine/shortcuts/__init__.py",
    "automask/engine/shortcuts/base.py",
    "automask/engine/shortcuts/bounded.py",
    "automask/engine/shortcuts/excluded_keys.py",
    "automask/engine/shortcuts/finite.py",
    "automask/engine/shortcuts/gap.py",
    "automask/engine/shortcuts/literal.py",
    "automask/engine/shortcuts/prefixed.py",
    "automask/engine/shortcuts/reuse.py",
    "automask/engine/shortcuts/unpruned.py",
    # the JSON Schema front end and the grammar IR it lowers to: a schema per request
    # (tool calls) pays their time before its first mask
    "automask/grammar/ir.py",
    # the regex algebra every lexeme is built from: its constructors and derivatives run
    # in every compile and every cold mask
    "automask/regex/nodes.py",
    "automask/schema/__init__.py",
    "automask/schema/annotations.py",
    "automask/schema/arrays.py",
    "automask/schema/compiler.py",
    "automask/schema/complement.py",
    "automask/schema/concrete.py",
    "automask/schema/conditionals.py",
    "automask/schema/conjunctions.py",
    "automask/schema/document.py",
    "automask/schema/formats.py",
    "automask/schema/json_text.py",
    "automask/schema/keywords.py",
    "automask/schema/lowering.py",
    "automask/schema/normalize.py",
    "automask/schema/number_keywords.py",
    "automask/schema/number_multiples.py",
    "automask/schema/numbers.py",
    "automask/schema/objects.py",
    "automask/schema/one_of.py",
    "automask/schema/one_of_objects.py",
    "automask/schema/refs.py",
    "automask/schema/same_content.py",
    "automask/schema/shapes.py",
    "automask/schema/strings.py",
    "automask/schema/subschema.py",
    "automask/schema/values.py",
]


#: the C function gc_pause.untrack calls where it is built
UNTRACK_SOURCE = "src/automask/_untrack.c"


def compiled_extensions() -> list:
    if (os.environ.get("AUTOMASK_COMPILE", "") != "1"
            or os.environ.get("AUTOMASK_NO_EXTENSIONS") == "1"):  # (build_backend/)
        return []
    from mypyc.build import mypycify  # a build requirement only then (build_backend/)
    from setuptools import Extension

    # -O1 by default: the whole build takes about seven minutes on one core (a single-file
    # -O3 build of four engine modules was still in gcc after 13); AUTOMASK_COMPILE_OPT
    # picks another.
    return mypycify([os.path.join("src", m) for m in COMPILED_MODULES],
                    opt_level=os.environ.get("AUTOMASK_COMPILE_OPT", "1"), debug_level="0",
                    multi_file=True) + [
        # gc_pause.untrack without ctypes' cost per call (see the file)
        Extension("automask._untrack", [UNTRACK_SOURCE]),
    ]


setup(ext_modules=compiled_extensions())
