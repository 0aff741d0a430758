"""Programs made by ExecuTorch 1.5.1 (the oracle) run in etkit's runtime and match torch eager.

Tolerance: float32 results within atol=rtol=1e-5 of eager (1e-4 for the conv net), integer and
shape results exactly. The portable kernels compute in double and round to float32."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch

from etkit.runtime import Runtime

pytestmark = pytest.mark.oracle

SAMPLES = ["add", "mlp", "elementwise", "reductions", "convnet", "shape_ops", "dynamic", "vision"]


def _check(outputs, expected, tol):
    assert len(outputs) == len(expected)
    for got, ref in zip(outputs, expected):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        torch.testing.assert_close(got, ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("name", SAMPLES)
def test_executorch_program_matches_eager(et_programs, name):
    ref = torch.load(et_programs / f"{name}.pt")
    tol = 1e-4 if name == "convnet" else 1e-5
    runtime = Runtime.get()
    for source in (et_programs / f"{name}.pte", (et_programs / f"{name}.pte").read_bytes()):
        program = runtime.load_program(source)
        assert program.method_names == {"forward"}
        method = program.load_method("forward")
        _check(method.execute(ref["inputs"]), ref["outputs"], tol)
        # Running again gives the same answer (planned memory reused correctly).
        _check(method.execute(ref["inputs"]), ref["outputs"], tol)


def test_mutable_buffer_starts_from_its_initial_state_and_persists(et_programs):
    """A buffer mutated in forward starts from the value it had at export (the program's mutable data
    segment) and keeps its updates across calls of the same Method."""
    ref = torch.load(et_programs / "stateful.pt")
    method = Runtime.get().load_program(et_programs / "stateful.pte").load_method("forward")
    _check(method.execute(ref["inputs"]), ref["outputs"], 1e-6)
    _check(method.execute(ref["inputs"]), ref["second_outputs"], 1e-6)


def test_dynamic_batch_runs_at_smaller_sizes_within_the_bound(et_programs):
    ref = torch.load(et_programs / "dynamic.pt")
    method = Runtime.get().load_program(et_programs / "dynamic.pte").load_method("forward")
    assert method.metadata.input_tensor_meta(0).dynamic
    _check(method.execute(ref["small_inputs"]), ref["small_outputs"], 1e-5)
    _check(method.execute(ref["inputs"]), ref["outputs"], 1e-5)
    with pytest.raises(ValueError, match=r"expects shape at most \[8, 3\]"):
        method.execute([torch.randn(9, 3)])


def test_method_metadata_describes_inputs_and_outputs(et_programs):
    method = Runtime.get().load_program(et_programs / "shape_ops.pte").load_method("forward")
    meta = method.metadata
    assert meta.name == "forward"
    assert meta.input_tags == ("Tensor", "Tensor")
    assert meta.input_tensor_meta(0).dtype == torch.float32 and meta.input_tensor_meta(0).sizes == (2, 3, 4)
    assert meta.input_tensor_meta(1).dtype == torch.int64 and meta.input_tensor_meta(1).sizes == (2, 3)
    assert meta.num_outputs == 11
    assert meta.memory_planned_buffer_sizes[0] > 0


def test_execute_checks_dtype_shape_and_count(et_programs):
    method = Runtime.get().load_program(et_programs / "add.pte").load_method("forward")
    a = torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"input 1 expects dtype torch.float32, got torch.int64"):
        method.execute([a, torch.ones(2, 3, dtype=torch.int64)])
    with pytest.raises(ValueError, match=r"input 0 expects shape \[2, 3\], got \[3, 2\]"):
        method.execute([torch.randn(3, 2), a])
    with pytest.raises(ValueError, match="takes 2 inputs, got 1"):
        method.execute([a])


def test_cpp_set_input_rejects_wrong_dtype_without_python_checks(et_programs):
    """The C++ Method::set_input validates too (the Python checks are a convenience)."""
    from etkit.runtime import EtkitRuntimeError

    method = Runtime.get().load_program(et_programs / "add.pte").load_method("forward")
    raw = np.zeros(6, dtype=np.int64).view(np.uint8)
    ok = np.zeros(6, dtype=np.float32).view(np.uint8)
    with pytest.raises(EtkitRuntimeError, match="input 0 expects dtype Float, got Long"):
        method._native.execute([(4, [2, 3], raw), (6, [2, 3], ok)])


def test_outputs_are_copies_that_survive_the_next_execute(et_programs):
    method = Runtime.get().load_program(et_programs / "add.pte").load_method("forward")
    first = method.execute([torch.ones(2, 3), torch.ones(2, 3)])[0]
    method.execute([torch.zeros(2, 3), torch.zeros(2, 3)])
    assert torch.equal(first, torch.full((2, 3), 2.0))


def test_runner_runs_executorch_program_with_npy_inputs(et_programs, etkit_runner, tmp_path):
    ref = torch.load(et_programs / "mlp.pt")
    np.save(tmp_path / "x.npy", ref["inputs"][0].numpy())
    proc = subprocess.run(
        [str(etkit_runner), "--model_path", str(et_programs / "mlp.pte"), "--input", str(tmp_path / "x.npy"),
         "--iterations", "3", "--output_prefix", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "output 0: shape [2, 4] dtype Float" in proc.stdout
    assert "median latency:" in proc.stdout
    got = torch.from_numpy(np.load(tmp_path / "out0.npy"))
    torch.testing.assert_close(got, ref["outputs"][0], atol=1e-5, rtol=1e-5)


def test_runner_without_inputs_uses_ones(et_programs, etkit_runner):
    proc = subprocess.run([str(etkit_runner), "--model_path", str(et_programs / "add.pte")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "output 0: shape [2, 3] dtype Float values [2, 2, 2, 2, 2, 2]" in proc.stdout


@pytest.mark.parametrize("name", SAMPLES + ["stateful"])
def test_executing_executorch_program_allocates_no_heap_memory(et_programs, native_build, name):
    """tests/test_execute_no_alloc.cpp counts every malloc/new while Method::execute runs."""
    from tests.runtime.conftest import NATIVE_TARGETS

    tool = native_build / NATIVE_TARGETS["test_execute_no_alloc"]
    proc = subprocess.run([str(tool), str(et_programs / f"{name}.pte")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "heap allocations during 3 x Method::execute: 0" in proc.stdout
