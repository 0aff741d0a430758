"""Meta-tests keeping the plugin API honest (in the style of datasette's): every hook in
``etkit.plugins.hookspecs`` is documented in docs/plugins.md with its signature and exercised by a test,
and a plugin implementing a hook the contract does not define is refused with a message."""
from __future__ import annotations

import inspect
import re
import sys
import types
from importlib import metadata
from pathlib import Path

import pluggy
import pytest

from etkit.plugins import hookimpl, hookspecs
from etkit.plugins.manager import EtkitPluginManager

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "plugins.md"
HOOKS = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("etkit_"))


def _doc_sections() -> dict:
    """``{hook name: its section of docs/plugins.md}``, from the ``#### `name(args)` `` headings."""
    text = DOCS.read_text()
    parts = re.split(r"^#### `(etkit_\w+)\((.*?)\)`\s*$", text, flags=re.M)
    return {parts[i]: (parts[i + 1], parts[i + 2]) for i in range(1, len(parts) - 2, 3)}


def _test_sources() -> str:
    files = [p for folder in (ROOT / "tests", ROOT / "plugins") for p in folder.rglob("test_*.py")
             if p.resolve() != Path(__file__).resolve()]
    return "\n".join(p.read_text(errors="replace") for p in files)


def test_the_hooks_are_the_ones_every_plugin_answers():
    """Plugin API 2.0: per-backend behaviour is a BackendSpec field, not a hook (the 1.x hooks are refused)."""
    from dataclasses import fields

    from etkit.plugins import BackendSpec

    assert HOOKS == ["etkit_memory_planning_requirements", "etkit_register_backends"]
    assert not set(hookspecs.MOVED_TO_BACKEND_SPEC) & set(HOOKS)
    assert set(hookspecs.MOVED_TO_BACKEND_SPEC.values()) <= {f.name for f in fields(BackendSpec)}


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented_with_its_signature(hook):
    sections = _doc_sections()
    assert hook in sections, f"docs/plugins.md has no '#### `{hook}(...)`' section"
    documented_args, body = sections[hook]
    params = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    assert [a.strip() for a in documented_args.split(",") if a.strip()] == params, \
        f"docs/plugins.md documents {hook}({documented_args}), the spec is {hook}({', '.join(params)})"
    assert len(body.split()) >= 25, f"the docs section of {hook} should say what it receives and returns"
    spec_opts = getattr(hookspecs, hook).etkit_spec
    if spec_opts.get("firstresult"):
        assert "first result wins" in body.lower(), f"{hook} is first-result: the docs must say so"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_exercised_by_a_test(hook):
    assert re.search(rf"\b{hook}\b", _test_sources()), f"no test (outside this file) implements or calls {hook}"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_docstring_says_what_it_receives_and_returns(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert len(doc) > 80 and ("register" in doc or ":returns:" in doc), doc


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_typed(hook):
    """Every parameter and the return value carry a real annotation (as pytest's hookspec.py does): the names
    imported under TYPE_CHECKING resolve, and no annotation is a bare string left for a linter to skip."""
    import typing

    import torch

    from etkit.plugins.spec import BackendSpec
    from etkit.program import EdgeProgramManager
    fn = getattr(hookspecs, hook)
    names = dict(vars(hookspecs), torch=torch, BackendSpec=BackendSpec, EdgeProgramManager=EdgeProgramManager)
    hints = typing.get_type_hints(fn, globalns=names)
    assert set(hints) == set(inspect.signature(fn).parameters) | {"return"}, hints


class _Misspelled:
    @hookimpl
    def etkit_register_backend(self, register):  # the contract's hook is etkit_register_backends
        raise AssertionError("never called")


def test_misspelled_hook_is_refused_in_process_with_a_suggestion():
    manager = EtkitPluginManager(load_entry_points=False)
    with pytest.raises(pluggy.PluginValidationError) as info:
        manager.add_plugin(_Misspelled(), name="misspelled")
    message = str(info.value)
    assert "unknown hook 'etkit_register_backend'" in message
    assert "did you mean 'etkit_register_backends'" in message
    assert manager.pm.get_plugin("misspelled") is None, "a refused plugin must not stay registered"
    assert manager.registry.specs() == []


def test_misspelled_hook_in_an_installed_plugin_is_reported_not_fatal(monkeypatch):
    module = types.ModuleType("misspelled_plugin")
    module.etkit_register_backend = hookimpl(lambda register: None)
    ep = metadata.EntryPoint(name="misspelled", value="misspelled_plugin", group="etkit.backends")
    monkeypatch.setattr(metadata, "entry_points", lambda group=None: [ep])
    monkeypatch.setitem(sys.modules, "misspelled_plugin", module)
    manager = EtkitPluginManager()
    error = manager.load_errors["misspelled"]
    assert "breaks the etkit plugin contract" in error and "did you mean 'etkit_register_backends'" in error
    assert manager.pm.get_plugin("misspelled") is None
