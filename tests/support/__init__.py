"""What the tests share, and nothing else: no test module imports another one.

* :mod:`support.oracle`: the byte-level Earley oracle over the grammar IR (sentences and
  viable prefixes), and the token ids it allows after an output.
* :mod:`support.walks`: the masks met along JSON instances, to compare two ways of
  computing them.
* :mod:`support.schema_reference`: the ``jsonschema`` reference (numbers exact, formats
  asserted) and our verdicts by tokens and by bytes; :mod:`support.schema_cases`: the
  keyword cases checked against it.
* :mod:`support.shortcuts`: the engine's scan shortcuts switched off, forced or watched,
  by name (the one place that monkeypatches the engine's private functions for them).
* :mod:`support.models`: why the default model cannot run here (the skip reason), or None.
* :mod:`support.paths`: the repository root and the shared data folder beside it (found
  from this package, so a test file may sit at any depth).

``pyproject.toml`` puts ``tests/`` on ``sys.path`` (``pythonpath``), so a test writes
``from support.walks import masks_along``.
"""
