"""What the tests share, and nothing else: no test module imports another one.

* :mod:`support.oracle`: the byte-level Earley oracle over the grammar IR (sentences and
  viable prefixes), and the token ids it allows after an output.
* :mod:`support.walks`: the masks met along JSON instances, with or without some scan
  shortcuts (the engine's ``Compiler(shortcuts=...)`` option), to compare the two.
* :mod:`support.schema_reference`: the ``jsonschema`` reference (numbers exact, formats
  asserted) and our verdicts by tokens and by bytes; :mod:`support.schema_cases`: the
  keyword cases checked against it.
* :mod:`support.shortcuts`: the engine's scan shortcuts watched or forced, by name (the
  one place that monkeypatches the engine's private methods, to spy on them).
* :mod:`support.models`: why the default model cannot run here (the skip reason), or None.
* :mod:`support.threads`: one piece of work run in several threads at once, with what
  they raised.
* :mod:`support.paths`: the repository root and the shared data folder beside it (found
  from this package, so a test file may sit at any depth).

``pyproject.toml`` puts ``tests/`` on ``sys.path`` (``pythonpath``), so a test writes
``from support.walks import masks_along``.
"""
