"""Core ML cannot run on Linux: the plugin says so plainly, and a program with a fallback twin
(``ExecutorchBackendConfig(delegate_fallback=True)``) runs everywhere. Seed page: "Core ML Backend"."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest
import torch

import etkit
from coreml_helpers import delegates, load_demo, lower
from etkit import ExecutorchBackendConfig
from etkit.runtime import EtkitRuntimeError, Runtime
from etkit_coreml import CoreMLPartitioner

pytestmark = pytest.mark.skipif(platform.system() == "Darwin", reason="checks the behaviour where Core ML is absent")

LINUX_MESSAGE = ("Core ML delegate is not available on this platform (Linux); re-lower without CoreMLPartitioner "
                 "or run on macOS/iOS")


@pytest.fixture(scope="module")
def mobilenet():
    """MobileNetV2 (batch norm calibrated so logits spread) lowered to Core ML first, XNNPACK second."""
    etkit_xnnpack = pytest.importorskip("etkit_xnnpack")
    model, inputs = load_demo().mobilenet_case(2)
    manager = lower(model, inputs[0], [CoreMLPartitioner(), etkit_xnnpack.XnnpackPartitioner()])
    return model, inputs, manager


def test_backends_listing_says_why_core_ml_is_unavailable():
    out = subprocess.run([sys.executable, "-m", "etkit", "backends"], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("CoreMLBackend"))
    assert LINUX_MESSAGE in line and " no: " in line


def test_loading_a_core_ml_method_fails_with_the_platform_message(mobilenet, tmp_path):
    _, _, manager = mobilenet
    assert len(delegates(manager)) == 1
    path = tmp_path / "mv2_coreml.pte"
    manager.to_executorch().write_to_file(path)
    with pytest.raises(EtkitRuntimeError) as info:
        Runtime.get().load_program(path).load_method("forward")
    assert LINUX_MESSAGE in str(info.value)
    assert "CoreMLBackend" in str(info.value)


def test_fallback_twin_runs_where_core_ml_cannot_and_matches_eager(mobilenet, tmp_path):
    model, inputs, manager = mobilenet
    path = tmp_path / "mv2_everywhere.pte"
    manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).write_to_file(path)
    program = Runtime.get().load_program(path)
    assert program.method_names == {"forward"}  # the twin plan is not a user method
    method = program.load_method("forward")
    assert method.fallback_reason and "CoreMLBackend" in method.fallback_reason
    # the twin is the XNNPACK lowering: one delegate, no Core ML
    assert method.metadata.backends == ("XnnpackBackend",)
    for x in inputs:
        with torch.no_grad():
            expected = model(*x)
        (actual,) = method.execute(list(x))
        spread = (expected.max() - expected.min()).item()
        # XNNPACK fp32: 1e-4 of the logit range, as in tests/e2e/test_models_xnnpack.py
        torch.testing.assert_close(actual, expected, atol=1e-4 * spread, rtol=0)


def test_the_twin_is_an_extra_execution_plan_other_runtimes_can_ignore(mobilenet):
    from etkit.serialize.pte import read_layout

    _, _, manager = mobilenet
    data = manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).buffer
    plans = read_layout(data).program.executionPlan
    names = [p.name.decode() if isinstance(p.name, bytes) else p.name for p in plans]
    assert names == ["forward", "forward#fallback"]
    backends = [[d.id.decode() if isinstance(d.id, bytes) else d.id for d in p.delegates] for p in plans]
    assert backends == [["CoreMLBackend"], ["XnnpackBackend"]]


def test_fallback_needs_the_exported_program():
    model = torch.nn.Linear(4, 4).eval()
    edge = etkit.to_edge(torch.export.export(model, (torch.randn(1, 4),)))
    lowered = edge.to_backend(CoreMLPartitioner()).transform([lambda gm: gm])
    with pytest.raises(ValueError, match="to_edge_transform_and_lower"):
        lowered.to_executorch(ExecutorchBackendConfig(delegate_fallback=True))


def test_native_runner_runs_the_twin_too(mobilenet, tmp_path):
    """The fallback lives in the C++ runtime (Program::load_method), so etkit_runner gets it as well."""
    import numpy as np

    from coreml_helpers import REPO_ROOT

    runner = REPO_ROOT / "build" / "native" / "runner" / "etkit_runner"
    assert runner.exists(), f"{runner} is missing: run `make native` first"
    model, inputs, manager = mobilenet
    path = tmp_path / "mv2_everywhere.pte"
    manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).write_to_file(path)
    np.save(tmp_path / "x.npy", inputs[0][0].numpy())
    proc = subprocess.run([str(runner), "--model_path", str(path), "--input", str(tmp_path / "x.npy"),
                           "--output_prefix", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with torch.no_grad():
        expected = model(*inputs[0])
    actual = torch.from_numpy(np.load(tmp_path / "out0.npy"))
    spread = (expected.max() - expected.min()).item()
    torch.testing.assert_close(actual, expected, atol=1e-4 * spread, rtol=0)


def test_inspect_says_which_plan_runs_here(mobilenet, tmp_path):
    _, _, manager = mobilenet
    plain, twin = tmp_path / "plain.pte", tmp_path / "twin.pte"
    manager.to_executorch().write_to_file(plain)
    manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).write_to_file(twin)

    def inspect(path):
        return subprocess.run([sys.executable, "-m", "etkit", "inspect", str(path)], capture_output=True, text=True,
                              check=True).stdout

    out = inspect(plain)
    assert "runs here: no" in out and LINUX_MESSAGE in out
    out = inspect(twin)
    assert "runs here: yes" in out
    assert "method 'forward' runs its fallback plan 'forward#fallback' here" in out and LINUX_MESSAGE in out
    # BackendSpec.describe_payload: the Core ML model under its delegate
    assert "       Core ML model executorch_" in out
    assert "mlProgram, specification version" in out and "conv 52" in out


def test_describe_payload_is_the_backend_specs_and_reads_core_ml_payloads_only():
    from etkit.plugins import get_backend_spec
    from etkit_coreml.payload.inmemoryfs import InMemoryFSError
    from etkit_coreml.plugin import BACKEND_ID

    describe = get_backend_spec(BACKEND_ID).resolve("describe_payload")
    with pytest.raises(InMemoryFSError):
        describe(b"not a payload", {})


def test_docs_fallback_example_runs(tmp_path, monkeypatch):
    """docs/fallback.md's example, as written: on Linux the twin runs and matches eager."""
    import re

    from coreml_helpers import REPO_ROOT

    (block,) = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "docs" / "fallback.md").read_text(), re.S)
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "docs_example"}
    exec(compile(block, "docs/fallback.md", "exec"), scope)
    assert scope["method"].fallback_reason and "CoreMLBackend" in scope["method"].fallback_reason
    with torch.no_grad():
        expected = scope["model"](scope["x"])
    spread = (expected.max() - expected.min()).item()
    torch.testing.assert_close(scope["y"], expected, atol=1e-4 * spread, rtol=0)
