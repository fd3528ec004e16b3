"""Where the tests find things: the repository root, and the shared data folder beside it.

Computed from this file (``tests/support/paths.py``), so a test file may live at any
depth under ``tests/``.
"""

from __future__ import annotations

from pathlib import Path

#: the repository root (the folder holding ``src``, ``tests`` and ``examples``)
REPO_ROOT = Path(__file__).resolve().parents[2]
#: ``../shared/data`` beside the repository (the data tier; absent in a bare clone)
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
