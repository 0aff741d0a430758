"""``etkit new-backend`` writes a plugin that builds, installs and passes the conformance suite as
generated; and the conformance suite fails a backend that computes wrong numbers or breaks the contract.

The plugin is built once per module (a few seconds: two C++ files) into a temporary ``--target``
directory, never into the project's venv.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import etkit
from etkit.cli import main as etkit_main
from etkit.scaffold import ScaffoldError, new_backend, substitutions, template_files

NAME = "scaffoldtest"
BACKEND_ID = "ScaffoldtestBackend"
BUILD_LOCK = "/tmp/etkit-build.lock"
#: The directory holding the ``etkit`` package under test: subprocesses import that one (and the plugin build
#: finds its CMake package through it), even when it is a checkout put first on ``PYTHONPATH``.
ETKIT_ROOT = str(Path(etkit.__file__).resolve().parents[1])
CONFORMANCE = ["-m", "pytest", "-p", "etkit.conformance.pytest_plugin", "-p", "no:cacheprovider", "-q"]


def _env(site: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ETKIT_PLUGINS", "ETKIT_BLOCK_PLUGINS", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *extra.pop("pythonpath", []), ETKIT_ROOT])
    env.update(extra)
    return env


def _run(args, cwd, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _tail(proc: subprocess.CompletedProcess, lines: int = 60) -> str:
    return "\n".join((proc.stdout + proc.stderr).splitlines()[-lines:])


@pytest.fixture(scope="module")
def built_plugin(tmp_path_factory):
    """``(site, source dir, seconds from new_backend to installed)`` for the generated plugin."""
    root = tmp_path_factory.mktemp("new_backend")
    start = time.perf_counter()
    source = new_backend(NAME, root / f"etkit-{NAME}")
    site = root / "site"
    pip = ["flock", BUILD_LOCK, sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
           "--no-index", "--no-cache-dir", "--disable-pip-version-check", "-q", "--target", str(site), str(source)]
    proc = _run(pip, root, _env(site), timeout=900)
    assert proc.returncode == 0, f"building the generated plugin failed:\n{_tail(proc)}"
    return site, source, time.perf_counter() - start


# ------------------------------------------------------------------------------------------------ generation

def test_generated_tree_has_every_template_rendered(tmp_path):
    out = new_backend("mynpu", tmp_path / "p")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(files) == len(template_files())
    for expected in ("pyproject.toml", "CMakeLists.txt", "README.md", ".gitignore", "cmake/etkit_mynpuConfig.cmake.in",
                     "etkit_mynpu/plugin.py", "etkit_mynpu/partition/partitioner.py", "etkit_mynpu/preprocess.py",
                     "runtime/src/backend.cpp", "runtime/include/etkit_mynpu/register.h", "tests/test_mynpu_backend.py"):
        assert expected in files
    for path in out.rglob("*"):
        if path.is_file():
            assert "{{" not in path.read_text(), f"{path} has an unrendered placeholder"
    pyproject = (out / "pyproject.toml").read_text()
    assert 'mynpu = "etkit_mynpu.plugin"' in pyproject and '[project.entry-points."cmake.prefix"]' in pyproject
    assert '"MynpuBackend"' in (out / "runtime/src/backend.cpp").read_text()
    assert "## Payload format" in (out / "README.md").read_text()
    assert substitutions("my_npu")["backend_id"] == "MyNpuBackend"


@pytest.mark.parametrize("bad", ["MyNpu", "my-npu", "9npu", "", "my npu", "class", "npu_", "a" * 41])
def test_bad_names_are_refused_with_a_reason(bad, tmp_path):
    with pytest.raises(ScaffoldError, match="backend name"):
        new_backend(bad, tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_a_non_empty_directory_is_not_overwritten(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not empty; refusing to overwrite"):
        new_backend("mynpu", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    new_backend("mynpu", tmp_path / "empty_ok")  # an existing empty directory is fine
    (tmp_path / "empty").mkdir()
    assert new_backend("mynpu", tmp_path / "empty") == (tmp_path / "empty").resolve()


def test_cli_new_backend_writes_to_the_default_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert etkit_main(["new-backend", "mynpu"]) == 0
    assert (tmp_path / "etkit-mynpu" / "etkit_mynpu" / "plugin.py").is_file()
    assert "MynpuBackend" in capsys.readouterr().out
    assert etkit_main(["new-backend", "mynpu"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert etkit_main(["new-backend", "My-Npu", "-o", str(tmp_path / "x")]) == 2
    assert "not a lowercase identifier" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ build + run

def test_generated_plugin_passes_the_conformance_suite(built_plugin, tmp_path, capsys):
    site, _, build_seconds = built_plugin
    start = time.perf_counter()
    proc = _run([sys.executable, *CONFORMANCE, "--etkit-backend", NAME], tmp_path, _env(site))
    seconds = build_seconds + time.perf_counter() - start
    assert proc.returncode == 0, f"conformance suite failed on the generated plugin:\n{_tail(proc, 120)}"
    out = proc.stdout
    assert f"etkit conformance: {BACKEND_ID}" in out
    for case in ("add", "mul", "relu", "linear", "elementwise_chain", "mlp", "residual_block"):
        assert f" {case}," in out or f" {case}\n" in out, f"{case} should be delegated and match eager:\n{out}"
    assert "sigmoid: not delegated: aten.sigmoid.default" in out
    with capsys.disabled():
        print(f"\n[etkit new-backend] new-backend -> built -> conformance passing: {seconds:.1f} s "
              f"(generate + build {build_seconds:.1f} s)")


def test_generated_plugin_own_tests_pass(built_plugin, tmp_path):
    site, source, _ = built_plugin
    proc = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")], tmp_path,
                _env(site))
    assert proc.returncode == 0, _tail(proc, 120)
    assert "skipped" not in proc.stdout.splitlines()[-1], proc.stdout


def test_generated_plugin_is_listed_by_etkit_backends(built_plugin, tmp_path):
    site, _, _ = built_plugin
    proc = _run([sys.executable, "-m", "etkit", "backends"], tmp_path, _env(site), timeout=120)
    line = next((l for l in proc.stdout.splitlines() if l.startswith(BACKEND_ID)), "")
    assert NAME in line and "yes" in line, proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------------------ not vacuous

BROKEN_PLUGIN = f'''
"""The generated backend, broken three ways (registered in-process in place of the real plugin)."""
import dataclasses
import itertools

from etkit.backend import PreprocessResult, Rejection
from etkit.plugins import get_plugin_manager, hookimpl
from etkit_{NAME} import payload
from etkit_{NAME}.plugin import etkit_register_backends as real_register
from etkit_{NAME}.partition import {BACKEND_ID[:-len("Backend")]}Partitioner
from etkit_{NAME}.preprocess import {BACKEND_ID[:-len("Backend")]}BackendDetails

_counter = itertools.count()


class WrongNumbers({BACKEND_ID[:-len("Backend")]}BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        graph = payload.parse({BACKEND_ID[:-len("Backend")]}BackendDetails.preprocess(edge_program, compile_specs).processed_bytes)
        # 1. add computes a subtraction
        graph.ops = [op._replace(opcode=payload.OP_SUB) if op.opcode == payload.OP_ADD else op for op in graph.ops]
        data = payload.serialize(graph)
        # 2. partitions with a mul get a different (ignored) trailing byte every time
        if any(op.opcode == payload.OP_MUL for op in graph.ops):
            data += bytes([next(_counter) % 256])
        return PreprocessResult(processed_bytes=data)


class LyingPartitioner({BACKEND_ID[:-len("Backend")]}Partitioner):
    def partition(self, ep):
        result = super().partition(ep)
        # 3. the report calls a node it tagged rejected
        for node in ep.graph.nodes:
            if node.meta.get("delegation_tag") and "relu" in node.name:
                self._report.rejected.append(Rejection(node.name, "aten.relu.default", "lying"))
        return result


class Broken:
    @hookimpl
    def etkit_register_backends(self, register):
        def patched(spec):
            register(dataclasses.replace(
                spec, backend_details=f"{{__name__}}:WrongNumbers",
                partitioners={{"LyingPartitioner": f"{{__name__}}:LyingPartitioner"}}))
        real_register(patched)


def pytest_configure(config):
    get_plugin_manager().add_plugin(Broken(), name="broken_{NAME}")
'''


def test_conformance_fails_a_broken_backend(built_plugin, tmp_path):
    site, _, _ = built_plugin
    (tmp_path / "broken_backend.py").write_text(textwrap.dedent(BROKEN_PLUGIN))
    env = _env(site, pythonpath=[str(tmp_path)], ETKIT_BLOCK_PLUGINS=NAME)
    proc = _run([sys.executable, *CONFORMANCE, "-p", "broken_backend", "--etkit-backend", BACKEND_ID], tmp_path, env)
    out = proc.stdout
    assert proc.returncode == 1, _tail(proc, 120)
    failed = {line.split()[1].split("::")[-1] for line in out.splitlines() if line.startswith("FAILED ")}
    assert {"test_program_matches_eager[add]", "test_init_execute_destroy_lifecycle[add]",
            "test_preprocess_is_deterministic[mul]", "test_tags_only_on_supported_nodes[relu]"} <= failed, out
    assert "test_program_matches_eager[sub]" not in failed and "test_program_matches_eager[mul]" not in failed
    assert "differs from torch eager" in out and "two preprocess runs" in out and "report rejects it" in out
