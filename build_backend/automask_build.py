"""The build backend: setuptools', plus mypy as a build requirement when the compiled
engine is asked for (``AUTOMASK_COMPILE=1``, see setup.py).

An in-tree backend because PEP 517 build requirements are static in pyproject.toml: mypy
(15 MB) would otherwise be fetched for every install, pure ones included.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import contextmanager

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (every hook not defined here)

#: the mypy (mypyc) that compiles the engine; pinned, as the compiled code depends on it
MYPYC_REQUIREMENT = "mypy==2.4.1"


@contextmanager
def _no_extensions():
    """setup.py runs for what it declares only (it reads this: see compiled_extensions)."""
    os.environ["AUTOMASK_NO_EXTENSIONS"] = "1"
    try:
        yield
    finally:
        del os.environ["AUTOMASK_NO_EXTENSIONS"]


def _compiling() -> bool:
    return os.environ.get("AUTOMASK_COMPILE", "") == "1"


def get_requires_for_build_wheel(config_settings=None):
    # setuptools runs setup.py to answer, and mypy is not installed yet at this point
    with _no_extensions():
        required = _setuptools.get_requires_for_build_wheel(config_settings)
    return required + [MYPYC_REQUIREMENT] if _compiling() else required


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # the metadata only: mypyc run for it would run again in build_wheel
    with _no_extensions():
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


# An editable install runs the checkout's .py files, and compiled modules beside them would
# shadow every later edit: it is always pure Python.
def get_requires_for_build_editable(config_settings=None):
    with _no_extensions():
        return _setuptools.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    with _no_extensions():
        return _setuptools.prepare_metadata_for_build_editable(metadata_directory,
                                                               config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    if _compiling():
        print("automask: an editable install stays pure Python (AUTOMASK_COMPILE ignored)",
              file=sys.stderr)
    with _no_extensions():
        return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    drop_staged_build()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def drop_staged_build(root: str = ".") -> None:
    """Remove what an earlier build left staged for its wheel (``build/lib*``).

    setuptools packs that whole tree, so an extension module compiled by an earlier build
    would ship in the new wheel: in a pure one, or beside the new build's modules (one
    since dropped from setup.py's list), where it breaks their import. A wheel built from
    a source tree starts clean.
    """
    build = os.path.join(root, "build")
    if os.path.isdir(build):
        for name in os.listdir(build):
            if name.startswith("lib"):
                shutil.rmtree(os.path.join(build, name))
