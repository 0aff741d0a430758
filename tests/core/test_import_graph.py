"""The core's modules form a straight pipeline: no import cycles, and backends never reach into passes.

The graph is read from the source with :mod:`ast` (nothing is imported), over every ``.py`` file of
``core/etkit``. How an import statement becomes edges:

- Every import counts wherever it is written: at module level, inside a function or method, inside
  ``try``/``if`` blocks. A function-level import still ties the two modules together; it only moves the
  moment the tie is felt.
- ``import a.b.c`` is an edge to ``a.b.c``. The packages it passes through (``a``, ``a.b``), which Python
  also initialises, are not edges: otherwise every submodule would depend on its package's ``__init__``,
  and every ``__init__`` that re-exports its submodules would close a cycle that is not one.
- ``from pkg import name`` is an edge to ``pkg.name`` when that is a module of the tree, else to ``pkg``.
  Relative imports are resolved against the importing module's package first (``from . import x`` in
  ``etkit/plugins/manager.py`` is ``etkit.plugins.x``).
- A package's ``__init__`` importing its own submodules counts like any other import (it is the
  package's facade, and nothing below it may import the facade back).
- Modules that are not source files of the tree (the generated ``etkit.fb`` flatbuffer classes, the
  compiled ``etkit._runtime`` extension) and modules outside ``etkit`` are left out: they import nothing
  of the core.
- Imports under ``if TYPE_CHECKING:`` are annotation-only: they never run, so they cannot make an import
  order matter. They are left out of the cycle check and kept in the layering check (a type named in an
  annotation is still a dependency of the layer that names it).

Rules checked:

(a) no cycle: the graph has no strongly connected component of more than one module;
(b) layering: no module of ``etkit.backend`` imports a module of ``etkit.passes``. Helpers both need
    (constant placeholders, the graph signature, debug handles) live in :mod:`etkit.graph`, which imports
    no other module of etkit.
"""
from __future__ import annotations

import ast
import os
import pathlib
from dataclasses import dataclass

import pytest

CORE = pathlib.Path(__file__).resolve().parents[2] / "core"
PACKAGE = "etkit"
#: Modules under ``etkit`` that are not Python source of the tree (generated or compiled).
NOT_SOURCE = ("etkit.fb", "etkit._runtime")


@dataclass(frozen=True)
class Import:
    """One edge: ``source`` imports ``target`` at ``line``; ``type_only`` when under ``if TYPE_CHECKING:``."""

    source: str
    target: str
    line: int
    type_only: bool


def _source_modules(core: pathlib.Path) -> dict[str, pathlib.Path]:
    """``{dotted module name: path}`` of every ``.py`` file under ``core/etkit`` (symlinks not followed)."""
    modules = {}
    for folder, dirs, files in os.walk(core / PACKAGE):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)) and d != "__pycache__")
        for name in files:
            if not name.endswith(".py"):
                continue
            path = pathlib.Path(folder, name)
            parts = list(path.relative_to(core).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST, type_only: bool = False):
    """Yield ``(import statement, type_only)`` for every import in ``node``, at any depth."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, type_only
    elif isinstance(node, ast.If) and _is_type_checking(node.test):
        for statement in node.body:
            yield from _imports(statement, True)
        for statement in node.orelse:
            yield from _imports(statement, type_only)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _imports(child, type_only)


def _targets(statement, module: str, is_package: bool, modules: dict) -> list[str]:
    """The modules of the tree ``statement`` (in ``module``) imports, by the rules of the module docstring."""
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        base = statement.module or ""
        if statement.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[:len(package) - statement.level + 1]
            base = ".".join(package + ([base] if base else []))
        names = []
        for alias in statement.names:
            candidate = f"{base}.{alias.name}"
            names.append(candidate if candidate in modules or candidate.startswith(NOT_SOURCE) else base)
    return [n for n in names if n in modules and n != module]


def import_graph(core: pathlib.Path = CORE) -> tuple[dict, list[Import]]:
    """``({module: path}, [Import, ...])`` for the source tree under ``core``."""
    modules = _source_modules(core)
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for statement, type_only in _imports(tree):
            for target in _targets(statement, module, path.name == "__init__.py", modules):
                edges.append(Import(module, target, statement.lineno, type_only))
    return modules, list(dict.fromkeys(edges))  # ``from m import a, b`` of one module is one edge


def strongly_connected(nodes, edges: list[Import]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; returns the components of more than one module, each sorted."""
    successors: dict = {n: sorted({e.target for e in edges if e.source == n}) for n in nodes}
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(successors[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def _where(modules: dict, edge: Import) -> str:
    return f"{modules[edge.source].relative_to(CORE.parent)}:{edge.line}: {edge.source} -> {edge.target}"


def test_the_parser_sees_every_kind_of_import(graph):
    """Guards the checks below against passing because the graph came out empty."""
    modules, edges = graph
    pairs = {(e.source, e.target, e.type_only) for e in edges}
    assert "etkit.program" in modules and "etkit.backend" in modules
    assert ("etkit.plugins.manager", "etkit.plugins.hookspecs", False) in pairs  # from . import hookspecs
    assert ("etkit.program", "etkit.backend.lowering", False) in pairs  # relative, module level
    assert ("etkit.program", "etkit.emit.program_builder", False) in pairs  # inside a method
    assert ("etkit.plugins.hookspecs", "etkit.plugins.spec", True) in pairs  # under TYPE_CHECKING
    assert ("etkit.plugins", "etkit.plugins.manager", False) in pairs  # a package's facade


def test_no_import_cycle(graph):
    modules, edges = graph
    runtime_edges = [e for e in edges if not e.type_only]
    cycles = strongly_connected(modules, runtime_edges)
    report = []
    for component in cycles:
        members = set(component)
        report.append(f"cycle of {len(component)} modules:")
        report += ["  " + _where(modules, e) for e in runtime_edges if e.source in members and e.target in members]
    assert not cycles, "\n".join(report)


def test_backend_imports_no_pass(graph):
    modules, edges = graph

    def inside(name: str, package: str) -> bool:
        return name == package or name.startswith(package + ".")

    offenders = [_where(modules, e) for e in edges
                 if inside(e.source, "etkit.backend") and inside(e.target, "etkit.passes")]
    assert not offenders, ("etkit.backend must not import etkit.passes (helpers both need go to etkit.graph):\n"
                           + "\n".join(offenders))


def test_graph_helpers_import_no_other_layer(graph):
    """``etkit.graph`` is what passes, backends and emission share: it may import only itself."""
    modules, edges = graph
    offenders = [_where(modules, e) for e in edges
                 if e.source.startswith("etkit.graph") and not e.target.startswith("etkit.graph")]
    assert not offenders, "\n".join(offenders)
