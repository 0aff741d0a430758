"""`etkit runner build`: a native runner linking XNNPACK statically, with and without selective build,
runs a partly delegated program and matches torch eager; errors name what is missing."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch

import etkit
from etkit.native.cmake import NativeBuildError, cmake_prefixes
from etkit.native.kernels import portable_kernels, program_kernels
from etkit.native.runner_build import build_runner

etkit_xnnpack = pytest.importorskip("etkit_xnnpack")


class ConvThenCumsum(torch.nn.Module):
    """Conv/ReLU/linear go to XNNPACK; cumsum stays on the portable kernels."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return torch.cumsum(self.fc(y), dim=1)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    torch.manual_seed(0)
    model = ConvThenCumsum().eval()
    x = torch.randn(2, 3, 12, 12)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                             partitioner=[etkit_xnnpack.XnnpackPartitioner()])
    path = tmp_path_factory.mktemp("prog") / "model.pte"
    edge.to_executorch().write_to_file(str(path))
    with torch.no_grad():
        reference = model(x)
    np.save(path.parent / "x.npy", x.numpy())
    return path, reference


def _run_runner(binary, program_path, tmp_path) -> np.ndarray:
    proc = subprocess.run([str(binary), "--model_path", str(program_path), "--input",
                           str(program_path.parent / "x.npy"), "--iterations", "2", "--output_prefix",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return np.load(tmp_path / "out0.npy")


def test_selective_runner_links_only_the_programs_kernels(program, tmp_path):
    path, reference = program
    kernels = program_kernels(path.read_bytes())
    assert "aten::cumsum.out" in kernels and not any("convolution" in k for k in kernels), kernels
    full = build_runner(tmp_path / "full", backends=["xnnpack"], strip=True)
    selective = build_runner(tmp_path / "selective", backends=["xnnpack"], model=path, strip=True)
    assert full.kernels is None and selective.kernels == kernels
    for build in (full, selective):
        out = _run_runner(build.binary, path, tmp_path)
        np.testing.assert_allclose(out, reference.numpy(), atol=1e-4, rtol=1e-4)  # fp32 XNNPACK + portable
    print(f"\netkit_runner (XNNPACK, stripped): all {len(portable_kernels())} portable kernels "
          f"{full.size_bytes} bytes; selective ({len(kernels)} kernels) {selective.size_bytes} bytes")
    assert selective.size_bytes < full.size_bytes


def test_a_selective_runner_refuses_a_program_needing_other_kernels(program, tmp_path):
    path, _ = program
    runner = build_runner(tmp_path / "r", backends=["xnnpack"], model=path)
    other = tmp_path / "other.pte"
    etkit.to_edge(torch.export.export(torch.nn.Tanh(), (torch.randn(3),))).to_executorch().write_to_file(str(other))
    proc = subprocess.run([str(runner.binary), "--model_path", str(other)], capture_output=True, text=True)
    assert proc.returncode == 1 and "aten::tanh.out" in proc.stderr, proc.stderr


def test_errors_name_what_is_missing(program, tmp_path):
    path, _ = program
    with pytest.raises(NativeBuildError, match="no installed backend named 'nosuch'.*XnnpackBackend"):
        build_runner(tmp_path / "a", backends=["nosuch"])
    with pytest.raises(NativeBuildError, match="delegates to XnnpackBackend, which is not in --backends"):
        build_runner(tmp_path / "b", backends=[], model=path)


def test_cli_kernels_and_cmake_prefix_path(program, capsys):
    from etkit.cli import main
    path, _ = program
    assert main(["kernels", "--model", str(path)]) == 0
    assert capsys.readouterr().out.split() == program_kernels(path.read_bytes())
    assert main(["cmake-prefix-path"]) == 0
    printed = capsys.readouterr().out.strip().split(";")
    assert printed == [str(p) for p in cmake_prefixes().values()]
    assert {"etkit", "etkit_xnnpack"} <= set(cmake_prefixes())


def test_cmake_args_come_from_the_backend_specs():
    """What the Makefile's native builds pass to CMake is what the plugins' BackendSpecs declare."""
    import sys
    from etkit.plugins import get_plugin_manager
    (spec,) = get_plugin_manager().registry.find("xnnpack")
    proc = subprocess.run([sys.executable, "-m", "etkit.native.runner_build", "--cmake-args", "xnnpack", "--prefix",
                           "ETKIT_TEST"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"-DETKIT_TEST_PACKAGES={spec.cmake_package}",
                                   f"-DETKIT_TEST_BACKENDS={spec.cmake_package}::delegate={spec.register_function}"]
    proc = subprocess.run([sys.executable, "-m", "etkit.native.runner_build", "--cmake-args", "nosuchbackend"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "no installed backend named 'nosuchbackend'" in proc.stderr
