"""Bare-metal images (``etkit runner build --target cortex-m55``) on QEMU's Cortex-M55 board (mps3-an547).

A small float CNN, planned into two arenas, is exported, built into an image with the runtime and only the
kernels it calls (no exceptions, RTTI, threads or OS; newlib with semihosting), booted on QEMU, and its
printed outputs compared with torch eager on the same input within 1e-5 (float32 on another CPU and C
library: the kernels accumulate in the same order, only libm's exp/rounding may differ). The image must make no
heap allocation after ``Program::load``. The PT2E-quantized digits CNN runs the same way in
plugins/ethosu/tests/test_ethosu_bare_metal.py.

Cost: one image build (the runtime and the portable kernels for Cortex-M55, ~1-2 min on 2 cores); QEMU boots
and runs in under a second.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import etkit
from etkit.native.baremetal import (BareMetalRunError, build_baremetal_image, parse_runner_output, run_on_qemu)
from etkit.native.cmake import NativeBuildError
from etkit.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from example_models import SmallCNN  # noqa: E402  (examples/: torch only)

pytestmark = pytest.mark.device_sim

ATOL = RTOL = 1e-5


class SmallInArenaOne(etkit.MemoryPlanningPass):
    """Tensors up to 1 KiB in arena 1 (a microcontroller's fast SRAM), the rest in arena 2."""

    def run(self, graph_module, graph_signature=None):
        for node in graph_module.graph.nodes:
            specs = node.meta.get("spec")
            for spec in specs if isinstance(specs, tuple) else [specs]:
                if spec is not None:
                    spec.mem_id = 1 if spec.nbytes <= 1024 else 2
        return super().run(graph_module, graph_signature)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """The model, its input, the .pte (two arenas) and the image built by the CLI."""
    model = SmallCNN()
    x = torch.randn(1, 3, 16, 16)
    program = etkit.to_edge(torch.export.export(model, (x,))).to_executorch(
        etkit.ExecutorchBackendConfig(memory_planning_pass=SmallInArenaOne()))
    out = tmp_path_factory.mktemp("cnn")
    (out / "cnn.pte").write_bytes(program.buffer)
    np.save(out / "x.npy", x.numpy())
    cmd = [sys.executable, "-m", "etkit", "runner", "build", "--target", "cortex-m55", "--model",
           str(out / "cnn.pte"), "--inputs", str(out / "x.npy"), "-o", str(out / "image")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"model": model, "x": x, "pte": program.buffer, "dir": out, "cli": proc.stdout,
            "elf": out / "image" / "etkit_baremetal_runner.elf"}


def test_float_cnn_on_cortex_m55_matches_eager(cnn):
    run = run_on_qemu(cnn["elf"])
    (y,) = run.outputs
    expected = cnn["model"](cnn["x"]).detach().numpy()
    assert y.dtype == np.float32 and y.shape == expected.shape
    np.testing.assert_allclose(y, expected, atol=ATOL, rtol=RTOL)
    # two arenas, sized as the program plans them, and nothing from the heap after Program::load
    planned = list(Runtime.get().load_program(cnn["pte"]).metadata("forward").memory_planned_buffer_sizes)
    assert len(planned) == 2 and run.planned_arena_bytes == planned
    assert run.method_allocator_bytes > 0
    assert run.heap_allocations_after_load == 0
    assert run.heap_allocations_at_start_up >= 1  # Program::load's state: the count sees the runtime's mallocs


def test_cli_prints_the_image_size_and_the_selective_kernels(cnn):
    assert "etkit_baremetal_runner.elf: text" in cnn["cli"] and "qemu-system-arm -M mps3-an547" in cnn["cli"]
    from etkit.native.kernels import program_kernels
    kernels = program_kernels(cnn["pte"])
    assert f"{len(kernels)} portable kernel(s)" in cnn["cli"]
    # only those kernels are linked: a kernel the program does not call is absent from the image
    symbols = subprocess.run(["arm-none-eabi-nm", "-C", str(cnn["elf"])], capture_output=True, text=True).stdout
    assert "etkit::portable::convolution_out" in symbols
    assert "etkit::portable::upsample_bilinear2d_vec_out" not in symbols


def test_inputs_of_the_wrong_shape_or_count_are_refused(cnn, tmp_path):
    with pytest.raises(NativeBuildError, match=r"input 0: the program plans float32\[1, 3, 16, 16\], got "
                                               r"float32\[1, 3, 8, 8\]"):
        build_baremetal_image(tmp_path, cnn["dir"] / "cnn.pte", inputs=[np.zeros((1, 3, 8, 8), np.float32)])
    with pytest.raises(NativeBuildError, match="takes 1 inputs; 2 given"):
        build_baremetal_image(tmp_path, cnn["dir"] / "cnn.pte", inputs=[cnn["x"].numpy()] * 2)
    with pytest.raises(NativeBuildError, match="unknown bare-metal target 'cortex-m4'"):
        build_baremetal_image(tmp_path, cnn["dir"] / "cnn.pte", target="cortex-m4")


def test_a_method_pool_too_small_is_an_error_on_the_target(cnn, tmp_path):
    image = build_baremetal_image(tmp_path, cnn["dir"] / "cnn.pte", inputs=[cnn["x"].numpy()], method_pool_bytes=256)
    with pytest.raises(BareMetalRunError) as error:
        run_on_qemu(image.elf)
    message = str(error.value).splitlines()[0]
    # the runtime's own message, sizes included (newlib's vsnprintf is taught %zu by the image's startup.c)
    assert message.startswith("the bare-metal runner failed: load_method: "), message
    assert re.search(r"\d+ bytes", message) and "zu" not in message, message


def test_a_delegated_program_is_refused(tmp_path):
    from etkit.plugins import get_plugin_manager
    from tests.core.toy_backend import TOY_ID, ToyPartitioner, ToyPlugin

    class AddMul(torch.nn.Module):
        def forward(self, a, b):
            return a + b * b

    a = torch.randn(4)
    manager = get_plugin_manager()
    manager.add_plugin(ToyPlugin(), name="toy")
    try:
        edge = etkit.to_edge_transform_and_lower(torch.export.export(AddMul(), (a, a)),
                                                 partitioner=[ToyPartitioner()])
        (tmp_path / "toy.pte").write_bytes(edge.to_executorch().buffer)
    finally:
        manager.remove_plugin("toy")
    with pytest.raises(NativeBuildError, match=f"delegates to {TOY_ID}; a bare-metal image runs portable kernels "
                                               f"only"):
        build_baremetal_image(tmp_path / "image", tmp_path / "toy.pte")


def test_runner_errors_are_reported_not_parsed_as_outputs():
    with pytest.raises(BareMetalRunError, match="load_method: planned buffer 1 is 10 bytes"):
        parse_runner_output("etkit-status error load_method: planned buffer 1 is 10 bytes\n")
    with pytest.raises(BareMetalRunError, match="no status line"):
        parse_runner_output("etkit-output 0 6 2 0000803f0000803f\n")  # stopped before the end (a fault, a hang)
    run = parse_runner_output("etkit-output 0 6 2 0000803f00000040\netkit-output 1 scalar 7\n"
                              "etkit-memory planned=64,32 method=100 temp=8\netkit-heap start_up=3 after_load_program=0\n"
                              "etkit-status ok\n")
    np.testing.assert_array_equal(run.outputs[0], np.array([1.0, 2.0], np.float32))
    assert run.outputs[1] == 7 and run.peak_arena_bytes == 64 + 32 + 100 + 8


def test_docs_example_runs_on_qemu(capsys):
    from tests.docs_examples import run_docs_example
    run_docs_example("bare_metal.md", "## Running a model on a Cortex-M55")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("etkit_baremetal_runner.elf ['aten::addmm.out', 'aten::convolution.out'")
    assert printed[1] == "[1152] 0"  # one planned arena; no heap allocation after Program::load
