"""Bundled programs (.bpte) both ways with ExecuTorch 1.5.1.

For each model of bundled_models.py (one lowered to XNNPACK, one on portable kernels) etkit writes a .bpte
with two test cases whose expected outputs are eager's, and a copy whose test case 1 expects output 0 shifted
by 0.5 at element 0. In the oracle (oracle_scripts/et_bundled.py) ExecuTorch's runtime verifies every case of
both, and ExecuTorch writes its own .bpte of the same model and cases, which etkit then reads and verifies.
Tolerance on both sides: |expected - actual| <= 1e-5 + 1e-5 * |actual| (bundling.RTOL/ATOL).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from etkit.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
from etkit.runtime import Runtime, load_bundled_input, verify_method_outputs
from etkit.runtime.bundled import BundledProgramBuffer, BundledVerificationError

from . import bundled_models
from ..devtools import bundling

pytestmark = pytest.mark.oracle

pytest.importorskip("etkit_xnnpack")

SCRIPT = Path(__file__).parent / "oracle_scripts" / "et_bundled.py"


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory, et_oracle):
    """The directory with etkit_NAME.bpte, etkit_NAME_wrong.bpte, et_NAME.bpte, and ExecuTorch's results."""
    directory = tmp_path_factory.mktemp("bundled")
    for name in bundled_models.MODELS:
        lowered = bundling.lower(name)
        (directory / f"etkit_{name}.bpte").write_bytes(bundling.bpte(name, lowered=lowered))
        (directory / f"etkit_{name}_wrong.bpte").write_bytes(bundling.bpte(name, wrong_case=1, lowered=lowered))
    et_oracle(SCRIPT, directory, *bundled_models.MODELS)
    return directory, torch.load(directory / "et_bundled.pt")


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_executorch_verifies_etkit_bpte(exchanged, name):
    _, report = exchanged
    results = report[name]["etkit"]
    assert len(results) == bundled_models.NUM_CASES
    model, _ = bundled_models.build(name)
    for index, result in enumerate(results):
        assert result["passed"], f"ExecuTorch refused etkit's test case {index}: {result['error']}"
        # ExecuTorch ran etkit's program on the bundled inputs: its outputs are eager's.
        eager = bundled_models.expected(model, bundled_models.inputs(name, index))
        for got, want in zip(result["outputs"], eager):
            torch.testing.assert_close(got, want, rtol=bundling.RTOL, atol=bundling.ATOL)


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_executorch_reads_etkit_bpte_inputs_exactly(exchanged, name):
    """ExecuTorch's schema reader finds etkit's bundled inputs as float32 tensors of the right shape, row-major,
    with the seeded inputs' bytes."""
    _, report = exchanged
    for index, result in enumerate(report[name]["etkit"]):
        want = bundled_models.inputs(name, index)
        assert len(result["stored_inputs"]) == len(want)
        for (scalar_type, sizes, dim_order, data), tensor in zip(result["stored_inputs"], want):
            assert (scalar_type, sizes, dim_order) == (6, list(tensor.shape), list(range(tensor.dim())))
            assert data == tensor.contiguous().numpy().tobytes()


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_executorch_fails_etkit_case_with_wrong_expected_output(exchanged, name):
    _, report = exchanged
    results = report[name]["etkit_wrong"]
    assert results[0]["passed"], results[0]["error"]
    assert not results[1]["passed"], "ExecuTorch accepted an expected output shifted by 0.5"


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_executorch_verifies_its_own_bpte(exchanged, name):
    """Control: the oracle's own file passes in its own runtime at the same tolerance."""
    _, report = exchanged
    assert all(r["passed"] for r in report[name]["et_self"]), report[name]["et_self"]


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_etkit_verifies_executorch_bpte(exchanged, name):
    directory, _ = exchanged
    path = directory / f"et_{name}.bpte"
    bundle = BundledProgramBuffer(path)
    assert bundle.version == 2 and bundle.num_test_cases("forward") == bundled_models.NUM_CASES
    method = Runtime.get().load_program(path).load_method("forward")
    model, _ = bundled_models.build(name)
    for index in range(bundled_models.NUM_CASES):
        load_bundled_input(method, bundle, index)
        outputs = method.execute()
        report = verify_method_outputs(method, bundle, index, rtol=bundling.RTOL, atol=bundling.ATOL)
        assert report.num_outputs == 2
        eager = bundled_models.expected(model, bundled_models.inputs(name, index))
        for got, want in zip(outputs, eager):
            torch.testing.assert_close(torch.from_numpy(got), want, rtol=bundling.RTOL, atol=bundling.ATOL)


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_etkit_reads_executorch_bpte_values_exactly(exchanged, name):
    """ExecuTorch's stored inputs are the oracle's seeded inputs, bit for bit, and its expected outputs are
    eager's (same torch, same seeds: equal to 1e-6, the order of float sums in one process vs another)."""
    directory, _ = exchanged
    read = deserialize_from_flatbuffer_to_bundled_program((directory / f"et_{name}.bpte").read_bytes())
    cases = read.method_test_suites[0].test_cases
    model, _ = bundled_models.build(name)
    for index, case in enumerate(cases):
        case_inputs = bundled_models.inputs(name, index)
        assert all(torch.equal(a, b) for a, b in zip(case.inputs, case_inputs))
        for got, want in zip(case.expected_outputs, bundled_models.expected(model, case_inputs)):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", bundled_models.MODELS)
def test_etkit_fails_executorch_case_after_changing_an_expected_value(exchanged, name):
    """etkit's verifier catches a wrong expected output in ExecuTorch's file too, naming case, output and
    the largest difference (one float32 shifted by 0.5 in place)."""
    import numpy as np

    from etkit.fb.bundled.BundledProgram import BundledProgram as Root
    from etkit.fb.bundled.Tensor import Tensor

    directory, _ = exchanged
    data = bytearray((directory / f"et_{name}.bpte").read_bytes())
    root = Root.GetRootAs(bytes(data), 0)
    value = root.MethodTestSuites(0).TestCases(1).ExpectedOutputs(0)
    tensor = Tensor()
    tensor.Init(value.Val().Bytes, value.Val().Pos)
    at = tensor.DataAsNumpy().ctypes.data - np.frombuffer(value.Val().Bytes, np.uint8).ctypes.data
    old = np.frombuffer(bytes(data[at:at + 4]), np.float32)[0]
    data[at:at + 4] = np.float32(old + 0.5).tobytes()
    method = Runtime.get().load_program(bytes(data)).load_method("forward")
    load_bundled_input(method, bytes(data), 1)
    method.execute()
    with pytest.raises(BundledVerificationError) as info:
        verify_method_outputs(method, bytes(data), 1, rtol=bundling.RTOL, atol=bundling.ATOL)
    assert (info.value.test_case_index, info.value.output_index, info.value.element) == (1, 0, 0)
    assert abs(info.value.max_abs_diff - 0.5) < 1e-4
