"""The import graph of ``src/automask``: no cycles, and the layers point one way.

The graph is read from the source (the AST), not from ``sys.modules``, so it
sees every import a module may run: top-level ones and the function-local ones
that keep optional dependencies lazy. An edge ``a -> b`` means module ``a``
holds an ``import`` of module ``b``; ``from automask.x import name`` points at
``automask.x.name`` when that is a module, else at ``automask.x`` (whose
``__init__`` defines or re-exports ``name``). Importing a submodule also runs
its packages' ``__init__`` files; those implicit edges are not drawn, so a
package's ``__init__`` re-exporting its submodules is no cycle.

The package ``automask`` itself (its ``__init__``, the public surface) may
import anything, and so no module inside may import it: a module takes a name
from the module that defines it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

SRC = REPO_ROOT / "src"
ROOT = "automask"

#: packages of the core library: compile a constraint, scan a vocabulary
CORE = ("automask.engine", "automask.regex", "automask.grammar", "automask.schema",
        "automask.vocab")
#: what is built on the core: tools, servers, adapters; the core never imports them
APPLICATIONS = ("automask.bench", "automask.generation", "automask.serve",
                "automask.explore", "automask.integrations", "automask.cli")
#: modules allowed to import ``automask.cli`` (a ``python -m automask`` entry point)
CLI_IMPORTERS = {"automask.__main__"}

#: Import cycles known to remain, each as its set of modules. The test checks that
#: the cycles found are exactly these: a new cycle fails, and so does a fixed one
#: still listed here (remove it).
KNOWN_CYCLES: set[frozenset[str]] = set()  # none left
#: Imports of the package root or of the CLI known to remain, as (source, target).
KNOWN_LAYER_BREAKS: set[tuple[str, str]] = set()  # none left


@dataclass(frozen=True)
class Import:
    """One import statement: ``source`` imports ``target`` at ``where`` (file:line)."""

    source: str
    target: str
    where: str


def module_files(src: Path = SRC, root: str = ROOT) -> dict[str, Path]:
    """Every module of the package ``root`` under ``src``, by dotted name: its ``.py``
    files, and the stubs of its C modules (a ``.pyi`` with no ``.py`` beside it)."""
    files = {}
    paths = (src / root).rglob("*.py")
    stubs = [p for p in (src / root).rglob("*.pyi") if not p.with_suffix(".py").exists()]
    for path in sorted([*paths, *stubs]):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _shown(path: Path) -> Path:
    return path.relative_to(SRC.parent) if path.is_relative_to(SRC.parent) else path


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def read_imports(files: Mapping[str, Path], root: str = ROOT) -> list[Import]:
    """Every import of a module of ``files`` by a module of ``files``, wherever it stands."""
    imports: set[Import] = set()
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = module if _is_package(path) else module.rpartition(".")[0]
        for node in ast.walk(tree):
            where = f"{_shown(path)}:{getattr(node, 'lineno', 0)}"
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                for alias in node.names:
                    full = f"{name}.{alias.name}"
                    targets.append(full if full in files else name)
            for target in targets:
                if target == root or target.startswith(root + "."):
                    # ``import automask.x.y`` of a name that is not a module: its package
                    while target not in files and "." in target:
                        target = target.rpartition(".")[0]
                    imports.add(Import(module, target, where))
    return sorted(imports, key=lambda i: (i.source, i.target, i.where))


def strongly_connected(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's strongly connected components; those with a cycle (size > 1 or a self-loop)."""
    graph: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    for start in sorted(graph):
        if start in index:
            continue
        # iterative DFS: a frame is (node, its successors still to visit)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(sorted(component))
    return sorted(found)


def find_cycles(imports: list[Import]) -> list[list[str]]:
    """The import cycles: each strongly connected component's modules, sorted."""
    return strongly_connected({i.source for i in imports},
                              {(i.source, i.target) for i in imports})


def describe_cycles(imports: list[Import], components: list[list[str]] | None = None) -> list[str]:
    """One paragraph per import cycle: its modules and the imports that close it."""
    if components is None:
        components = find_cycles(imports)
    reports = []
    for component in components:
        members = set(component)
        lines = [f"cycle among {', '.join(component)}:"]
        lines += [f"  {i.source} -> {i.target}  ({i.where})"
                  for i in imports if i.source in members and i.target in members]
        reports.append("\n".join(lines))
    return reports


def _within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return read_imports(module_files())


# --- the checker itself, on small synthetic packages ---------------------------------


def test_cycle_finder_on_a_synthetic_graph():
    edges = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"),
             ("f", "f"), ("g", "a")}
    assert strongly_connected("abcdefgh", edges) == [["a", "b", "c"], ["d", "e"], ["f"]]
    assert strongly_connected("abc", {("a", "b"), ("b", "c"), ("a", "c")}) == []


def test_reader_sees_local_relative_and_from_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.sub.low import helper\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "low.py").write_text(
        "def helper():\n    from pkg.sub import high\n    return high\n")
    (pkg / "sub" / "high.py").write_text("from . import low\nimport pkg.sub.low.helper\n")
    (pkg / "other.py").write_text("from pkg import sub\nfrom pkg.sub import nothing\n")
    found = read_imports(module_files(tmp_path, "pkg"), "pkg")
    edges = {(i.source, i.target) for i in found}
    assert edges == {("pkg", "pkg.sub.low"), ("pkg.sub.low", "pkg.sub.high"),
                     ("pkg.sub.high", "pkg.sub.low"), ("pkg.other", "pkg.sub")}
    [report] = describe_cycles(found)
    assert "pkg.sub.high, pkg.sub.low" in report
    assert "low.py:2" in report and "high.py:1" in report


# --- the contracts on src/automask ---------------------------------------------------


def test_no_import_cycles(imports):
    found = find_cycles(imports)
    new = [c for c in found if frozenset(c) not in KNOWN_CYCLES]
    assert not new, "import cycles in src/automask:\n" + "\n".join(describe_cycles(imports, new))
    gone = KNOWN_CYCLES - {frozenset(c) for c in found}
    assert not gone, f"cycles fixed: remove them from KNOWN_CYCLES: {sorted(map(sorted, gone))}"


def test_known_layer_breaks_still_exist(imports):
    edges = {(i.source, i.target) for i in imports}
    gone = KNOWN_LAYER_BREAKS - edges
    assert not gone, f"fixed: remove them from KNOWN_LAYER_BREAKS: {sorted(gone)}"


def test_nothing_imports_the_package_root(imports):
    bad = [f"{i.source} imports {ROOT} ({i.where})" for i in imports
           if i.target == ROOT and (i.source, i.target) not in KNOWN_LAYER_BREAKS]
    assert not bad, "import names from their defining module, not the package root:\n" + \
        "\n".join(bad)


def test_core_never_imports_applications(imports):
    bad = [f"{i.source} -> {i.target} ({i.where})" for i in imports
           if _within(i.source, CORE) and _within(i.target, APPLICATIONS)]
    assert not bad, "the core library imports an application layer:\n" + "\n".join(bad)


def test_engine_never_imports_schema(imports):
    bad = [f"{i.source} -> {i.target} ({i.where})" for i in imports
           if _within(i.source, ["automask.engine"]) and _within(i.target, ["automask.schema"])]
    assert not bad, "the engine imports the JSON Schema front end:\n" + "\n".join(bad)


def test_the_grammar_ir_imports_no_front_end(imports):
    # the front ends build on the IR; Grammar.from_* finds them through register_front_end
    bad = [f"{i.source} -> {i.target} ({i.where})" for i in imports
           if i.source == "automask.grammar.ir"
           and _within(i.target, ["automask.grammar", "automask.schema"])]
    assert not bad, "the grammar IR imports a front end:\n" + "\n".join(bad)


def test_nothing_imports_the_cli(imports):
    bad = [f"{i.source} -> {i.target} ({i.where})" for i in imports
           if i.target == "automask.cli" and i.source not in CLI_IMPORTERS
           and (i.source, i.target) not in KNOWN_LAYER_BREAKS]
    assert not bad, "only the entry point imports automask.cli:\n" + "\n".join(bad)
