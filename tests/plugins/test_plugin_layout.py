"""Every plugin in plugins/ and a freshly generated `etkit new-backend` plugin share one layout (issue 21, item 3).

What is checked, per plugin directory ``<root>`` of package ``etkit_<name>``:

- ``pyproject.toml`` declares the entry point ``<name> = "etkit_<name>.plugin"`` in group ``etkit.backends`` and
  takes its long description from the plugin's ``README.md``;
- ``etkit_<name>/__init__.py``, ``plugin.py`` and ``preprocess.py`` exist; the partitioner lives in the
  ``partition/`` package (the design's layout, as ExecuTorch's backends have it) and the spec names it
  ``etkit_<name>.partition:<Class>``; compile specs, when a plugin has a module for them, are in
  ``compile_spec.py``; ``plugin.py`` takes ``hookimpl`` from ``etkit.plugins`` (no marker of its own), implements
  only hooks of the contract, and registers a ``BackendSpec`` whose ``plugin_api`` is this etkit's;
- ``README.md`` (the plugin's manual) and ``tests/`` exist;
- the native delegate's sources are under ``runtime/``; a plugin built by a root ``CMakeLists.txt`` builds its
  delegate with ``etkit_add_delegate`` (and its payload schema, if any, with ``etkit_add_payload_schema``) instead
  of its own ``add_library``/flatc rules.

``DEVIATIONS`` lists what is not yet uniform, each with the reason; a deviation that disappears must be removed
from the list (the test fails), so the list only shrinks.
"""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from etkit.plugins import PLUGIN_API_VERSION, hookspecs

REPO = Path(__file__).resolve().parents[2]
PLUGINS = sorted(p.name for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").is_file())

#: (plugin, check) -> why it still differs.
DEVIATIONS: dict[tuple[str, str], str] = {}


def _layout_problems(root: Path, name: str) -> dict[str, str]:
    """``{check: what is wrong}`` for the plugin at ``root`` (empty when it has the layout)."""
    problems = {}
    package = root / f"etkit_{name}"
    project = tomllib.loads((root / "pyproject.toml").read_text())
    entry_points = project.get("project", {}).get("entry-points", {}).get("etkit.backends", {})
    if entry_points.get(name) != f"etkit_{name}.plugin":
        problems["entry_point"] = f"etkit.backends entry points are {entry_points}"
    if project.get("project", {}).get("readme") != "README.md":
        problems["readme"] = "pyproject.toml's readme is not the plugin's README.md"
    for required in ("__init__.py", "plugin.py", "preprocess.py"):
        if not (package / required).is_file():
            problems[f"package:{required}"] = f"no {package.name}/{required}"
    if not (package / "partition" / "__init__.py").is_file():
        problems["partition"] = f"no {package.name}/partition/ package (the partitioner and its op configs)"
    odd_spec_modules = sorted(m.name for m in package.glob("compile_*.py") if m.name != "compile_spec.py")
    if odd_spec_modules:
        problems["compile_spec"] = f"compile specs in {odd_spec_modules}, not {package.name}/compile_spec.py"
    for required in ("README.md", "tests", "runtime"):
        if not (root / required).exists():
            problems[f"root:{required}"] = f"no {required}"
    plugin_py = package / "plugin.py"
    if plugin_py.is_file():
        tree = ast.parse(plugin_py.read_text())
        imports = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   for alias in node.names}
        if ("etkit.plugins", "hookimpl") not in imports:
            problems["hookimpl"] = "plugin.py does not take hookimpl from etkit.plugins"
        if "HookimplMarker" in plugin_py.read_text():
            problems["own_marker"] = "plugin.py makes its own HookimplMarker"
        contract = {n for n in dir(hookspecs) if n.startswith("etkit_")}
        hooks = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("etkit_")}
        if hooks - contract:
            problems["hooks"] = f"implements {sorted(hooks - contract)}, which the contract does not have"
        named = re.findall(r'"(etkit_\w+)\.([\w.]+):\w*Partitioner"', plugin_py.read_text())
        if not named or any(module != "partition" for _, module in named):
            problems["partitioner_path"] = f"the BackendSpec's partitioners are not 'etkit_{name}.partition:<Class>': {named}"
    cmake = root / "CMakeLists.txt"
    if not cmake.is_file():
        problems["cmake_at_root"] = "no CMakeLists.txt at the plugin root"
    else:
        text = re.sub(r"#[^\n]*", "", cmake.read_text())
        if "etkit_add_delegate(" not in text:
            problems["cmake_helpers"] = "the delegate is not built with etkit_add_delegate"
        if re.search(r"add_library\(\s*\S*_delegate\b", text) or "--gen-object-api" in text:
            problems["cmake_own_rules"] = "own add_library/flatc rules for what the etkit helpers build"
    return problems


@pytest.mark.parametrize("name", PLUGINS)
def test_plugin_has_the_shared_layout(name):
    problems = _layout_problems(REPO / "plugins" / name, name)
    expected = {check for (plugin, check) in DEVIATIONS if plugin == name}
    unexpected = {check: why for check, why in problems.items() if check not in expected}
    assert not unexpected, f"plugins/{name} leaves the shared layout: {unexpected}"
    gone = expected - set(problems)
    assert not gone, f"plugins/{name} now has the layout for {sorted(gone)}: remove them from DEVIATIONS"


def test_generated_plugin_has_the_shared_layout(tmp_path):
    from etkit.scaffold import new_backend

    root = new_backend("layoutcheck", tmp_path / "etkit-layoutcheck")
    assert _layout_problems(root, "layoutcheck") == {}


def test_every_installed_in_tree_plugin_states_this_plugin_api():
    from etkit.plugins import get_plugin_manager

    registry = get_plugin_manager().registry
    owners = {registry.owner(spec.backend_id): spec for spec in registry.specs()}
    for name in PLUGINS:
        if name in owners:
            assert owners[name].plugin_api == PLUGIN_API_VERSION, (name, owners[name].plugin_api)
