"""The build: the in-tree backend asks for mypy only for a compiled build, and setup.py
names modules that exist (the compiled build itself is .ci/compiled's)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from support.paths import REPO_ROOT


def _load(name: str, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # setuptools runs ./setup.py to answer
    monkeypatch.setattr(sys, "argv", ["setup.py"])
    return _load("automask_build", REPO_ROOT / "build_backend" / "automask_build.py")


def test_mypy_is_a_build_requirement_of_a_compiled_wheel_only(backend, monkeypatch):
    monkeypatch.delenv("AUTOMASK_COMPILE", raising=False)
    plain = backend.get_requires_for_build_wheel()
    assert not any(r.startswith("mypy") for r in plain)
    monkeypatch.setenv("AUTOMASK_COMPILE", "1")
    # (answered without mypy installed in the build environment: setup.py builds no
    # extension while asked)
    assert backend.get_requires_for_build_wheel() == plain + [backend.MYPYC_REQUIREMENT]
    assert backend.get_requires_for_build_editable() == plain


def test_setup_compiles_existing_engine_modules_and_the_untrack_source(monkeypatch):
    monkeypatch.delenv("AUTOMASK_COMPILE", raising=False)
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setattr("setuptools.setup", lambda **kw: None)
    setup = _load("automask_setup", REPO_ROOT / "setup.py")
    assert setup.compiled_extensions() == []
    assert "automask/engine/masks.py" in setup.COMPILED_MODULES
    for module in setup.COMPILED_MODULES:
        assert (REPO_ROOT / "src" / module).is_file(), module
    assert (REPO_ROOT / setup.UNTRACK_SOURCE).is_file()
    assert setup.UNTRACK_SOURCE in (REPO_ROOT / "MANIFEST.in").read_text()  # (in an sdist)


def test_a_compiled_build_starts_without_an_earlier_builds_staged_modules(backend, tmp_path):
    stale = tmp_path / "build" / "lib.linux-x86_64-cpython-311" / "automask" / "regex"
    stale.mkdir(parents=True)
    (stale / "nodes.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    objects = tmp_path / "build" / "temp.linux-x86_64-cpython-311"
    objects.mkdir()
    backend.drop_staged_build(str(tmp_path))
    assert not (tmp_path / "build" / "lib.linux-x86_64-cpython-311").exists()
    assert objects.is_dir()  # (what is never packed stays)
