"""Bundled programs (.bpte) in etkit alone: bundle, write, read, run and verify; the signature checks; bad
files. Expected outputs come from torch eager; tolerances are bundling.RTOL/ATOL (1e-5 each) unless a test
says otherwise. ExecuTorch's side is tests/interop/test_bundled_program_interop.py."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from etkit.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from etkit.devtools.bundled_program.core import BundledProgram, BundledProgramError
from etkit.devtools.bundled_program.serialize import (
    deserialize_from_flatbuffer_to_bundled_program,
    serialize_from_bundled_program_to_flatbuffer,
)
from etkit.runtime import EtkitRuntimeError, Runtime, load_bundled_input, verify_method_outputs
from etkit.runtime.bundled import BundledProgramBuffer, BundledVerificationError
from tests.interop import bundled_models

from . import bundling

pytest.importorskip("etkit_xnnpack")


@pytest.fixture(scope="module", params=bundled_models.MODELS)
def lowered(request):
    """(name, eager model, ExecutorchProgramManager, .bpte bytes with eager's expected outputs)."""
    name = request.param
    model, program = bundling.lower(name)
    data = serialize_from_bundled_program_to_flatbuffer(bundling.bundle(name, lowered=(model, program)))
    return name, model, program, data


def _run_case(method, data, index):
    load_bundled_input(method, data, index)
    return method.execute()


def test_etkit_verifies_its_own_bpte_and_outputs_match_eager(lowered):
    name, model, _, data = lowered
    method = Runtime.get().load_program(data).load_method("forward")
    for index in range(bundled_models.NUM_CASES):
        outputs = _run_case(method, data, index)
        report = verify_method_outputs(method, data, index, rtol=bundling.RTOL, atol=bundling.ATOL)
        assert report.num_outputs == 2 and report.max_abs_diff <= 1e-5
        eager = bundled_models.expected(model, bundled_models.inputs(name, index))
        for out, ref in zip(outputs, eager):
            assert isinstance(out, np.ndarray)
            torch.testing.assert_close(torch.from_numpy(out), ref, rtol=bundling.RTOL, atol=bundling.ATOL)


def test_bpte_program_is_the_pte_and_runs_like_it(lowered):
    name, _, program, data = lowered
    bundle = BundledProgramBuffer(data)
    assert bundle.program == program.buffer and bundle.version == 2
    assert bundle.method_names == ["forward"] and bundle.num_test_cases("forward") == bundled_models.NUM_CASES
    inputs = list(bundled_models.inputs(name, 0))
    from_pte = Runtime.get().load_program(program.buffer).load_method().execute(inputs)
    from_bpte = Runtime.get().load_program(data).load_method().execute(inputs)
    for a, b in zip(from_pte, from_bpte):
        assert torch.equal(a, b)


def test_load_program_takes_a_bpte_path(lowered, tmp_path):
    name, _, _, data = lowered
    path = tmp_path / f"{name}.bpte"
    path.write_bytes(data)
    method = Runtime.get().load_program(path).load_method("forward")
    load_bundled_input(method, path, 1)
    method.execute()
    verify_method_outputs(method, str(path), 1, rtol=bundling.RTOL, atol=bundling.ATOL)


def test_wrong_expected_output_fails_with_index_output_and_largest_difference(lowered):
    name, model, program, _ = lowered
    data = serialize_from_bundled_program_to_flatbuffer(bundling.bundle(name, wrong_case=1, lowered=(model, program)))
    method = Runtime.get().load_program(data).load_method("forward")
    _run_case(method, data, 0)
    verify_method_outputs(method, data, 0, rtol=bundling.RTOL, atol=bundling.ATOL)
    _run_case(method, data, 1)
    with pytest.raises(BundledVerificationError) as info:
        verify_method_outputs(method, data, 1, rtol=bundling.RTOL, atol=bundling.ATOL)
    err = info.value
    assert isinstance(err, EtkitRuntimeError)
    assert (err.test_case_index, err.output_index, err.element) == (1, 0, 0)
    # The shifted element is the largest difference: OFFSET, give or take XNNPACK/eager rounding.
    assert abs(err.max_abs_diff - bundling.OFFSET) < 1e-4
    message = str(err)
    assert "test case 1" in message and "output 0" in message
    assert f"largest absolute difference {err.max_abs_diff:.9g} at element 0" in message


def test_roundtrip_keeps_values_bytes_and_program(lowered):
    name, _, program, data = lowered
    read = deserialize_from_flatbuffer_to_bundled_program(data)
    assert read.program == program.buffer and read.version == 2
    assert [s.method_name for s in read.method_test_suites] == ["forward"]
    for index, case in enumerate(read.method_test_suites[0].test_cases):
        for got, want in zip(case.inputs, bundled_models.inputs(name, index)):
            assert torch.equal(got, want)
    assert serialize_from_bundled_program_to_flatbuffer(read) == data


def test_bpte_layout_follows_the_schema(lowered):
    """Identifier, 32-byte aligned program and 16-byte aligned tensor data, read with the generated code."""
    from etkit.fb.bundled.BundledProgram import BundledProgram as Root
    from etkit.fb.bundled.Tensor import Tensor

    _, _, program, data = lowered
    assert data[4:8] == b"BP08"
    root = Root.GetRootAs(data, 0)
    start = root.ProgramAsNumpy().ctypes.data - np.frombuffer(data, np.uint8).ctypes.data
    assert start % 32 == 0 and data[start:start + root.ProgramLength()] == program.buffer
    value = root.MethodTestSuites(0).TestCases(0).Inputs(0)
    tensor = Tensor()
    tensor.Init(value.Val().Bytes, value.Val().Pos)
    offset = tensor.DataAsNumpy().ctypes.data - np.frombuffer(data, np.uint8).ctypes.data
    assert offset % 16 == 0 and tensor.ScalarType() == 6


# ---- the bundling side refuses test cases that do not fit ------------------------------------------

@pytest.fixture(scope="module")
def conv_program():
    return bundling.lower("conv_portable")


def _bundle_one(program, inputs, expected=None, method="forward"):
    return BundledProgram(program, [MethodTestSuite(method, [MethodTestCase(inputs=inputs, expected_outputs=expected)])])


def test_wrong_input_count_is_refused_with_both_signatures(conv_program):
    _, program = conv_program
    with pytest.raises(BundledProgramError) as info:
        _bundle_one(program, [torch.randn(1, 3, 8, 8)])
    message = str(info.value)
    assert "has 1 input(s), the method takes 2" in message
    assert "takes (float32[1, 3, 8, 8], float32[1, 4, 6, 6])" in message and "gives      (float32[1, 3, 8, 8])" in message


def test_wrong_input_dtype_is_refused_with_both_signatures(conv_program):
    _, program = conv_program
    with pytest.raises(BundledProgramError) as info:
        _bundle_one(program, [torch.randn(1, 3, 8, 8), torch.ones(1, 4, 6, 6, dtype=torch.int32)])
    message = str(info.value)
    assert "input 1 has dtype int32, the method's is float32" in message
    assert "(float32[1, 3, 8, 8], int32[1, 4, 6, 6])" in message


def test_wrong_input_shape_is_refused_with_both_signatures(conv_program):
    _, program = conv_program
    with pytest.raises(BundledProgramError) as info:
        _bundle_one(program, [torch.randn(1, 3, 9, 8), torch.randn(1, 4, 6, 6)])
    assert "input 0 has shape [1, 3, 9, 8], the method's is [1, 3, 8, 8]" in str(info.value)


def test_wrong_expected_output_signature_is_refused(conv_program):
    _, program = conv_program
    x, y = bundled_models.inputs("conv_portable", 0)
    with pytest.raises(BundledProgramError) as info:
        _bundle_one(program, [x, y], expected=[torch.zeros(1, 4, 6, 6)])
    assert "has 1 expected output(s), the method returns 2" in str(info.value)
    with pytest.raises(BundledProgramError) as info:
        _bundle_one(program, [x, y], expected=[torch.zeros(1, 4, 6, 6), torch.zeros(1, 5)])
    assert "expected output 1 has shape [1, 5], the method's is [1, 4]" in str(info.value)


def test_unknown_method_and_duplicate_suites_are_refused(conv_program):
    _, program = conv_program
    with pytest.raises(BundledProgramError, match=r"method 'encode', which the program does not have; its methods "
                                                  r"are \['forward'\]"):
        _bundle_one(program, list(bundled_models.inputs("conv_portable", 0)), method="encode")
    with pytest.raises(BundledProgramError, match="more than one MethodTestSuite"):
        BundledProgram(program, [MethodTestSuite("forward", []), MethodTestSuite("forward", [])])


def test_unsupported_value_type_is_refused():
    with pytest.raises(TypeError, match="input 1 is a str"):
        MethodTestCase(inputs=[torch.zeros(1), "text"])


# ---- the runtime side: misuse ------------------------------------------------------------------------

def test_runtime_refuses_out_of_range_case_unknown_suite_and_unexecuted_method(lowered):
    name, _, _, data = lowered
    method = Runtime.get().load_program(data).load_method("forward")
    with pytest.raises(EtkitRuntimeError, match=r"test case 5 of method 'forward' does not exist: the method has 2 "
                                                r"test case\(s\)"):
        load_bundled_input(method, data, 5)
    with pytest.raises(EtkitRuntimeError, match="no test cases for method 'encode'; it has test cases for: 'forward'"):
        load_bundled_input(method, data, 0, method_name="encode")
    load_bundled_input(method, data, 0)
    with pytest.raises(EtkitRuntimeError, match=r"not executed since load_bundled_input"):
        verify_method_outputs(method, data, 0)
    method.execute()
    with pytest.raises(EtkitRuntimeError, match="holds the inputs of bundled test case 0, not 1"):
        verify_method_outputs(method, data, 1)


def test_case_without_expected_outputs_runs_but_does_not_verify(conv_program):
    model, program = conv_program
    x, y = bundled_models.inputs("conv_portable", 0)
    data = serialize_from_bundled_program_to_flatbuffer(_bundle_one(program, [x, y]))
    method = Runtime.get().load_program(data).load_method()
    load_bundled_input(method, data, 0)
    outputs = method.execute()
    torch.testing.assert_close(torch.from_numpy(outputs[0]), model(x, y)[0], rtol=bundling.RTOL, atol=bundling.ATOL)
    with pytest.raises(EtkitRuntimeError, match="has no expected outputs"):
        verify_method_outputs(method, data, 0)


def test_bundled_runtime_path_never_imports_torch(lowered, tmp_path):
    name, _, _, data = lowered
    path = tmp_path / "m.bpte"
    path.write_bytes(data)
    code = textwrap.dedent(f"""
        import sys
        from etkit.runtime import Runtime, load_bundled_input, verify_method_outputs
        method = Runtime.get().load_program({str(path)!r}).load_method()
        load_bundled_input(method, {str(path)!r}, 1)
        out = method.execute()
        verify_method_outputs(method, {str(path)!r}, 1, rtol={bundling.RTOL}, atol={bundling.ATOL})
        assert type(out[0]).__module__ == "numpy", type(out[0])
        assert "torch" not in sys.modules, "torch was imported"
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


# ---- bad files: precise errors, never a crash --------------------------------------------------------

def test_bad_headers_give_precise_errors(lowered):
    _, _, program, data = lowered
    with pytest.raises(EtkitRuntimeError, match="4 bytes long, too short to be a .bpte"):
        BundledProgramBuffer(data[:4])
    with pytest.raises(EtkitRuntimeError, match="this is a .pte program: load it as a program"):
        BundledProgramBuffer(program.buffer)
    with pytest.raises(EtkitRuntimeError, match=r"root offset \d+ \(bytes 0..3\) is outside"):
        BundledProgramBuffer(b"\xff\xff\xff\x7f" + data[4:])
    with pytest.raises(EtkitRuntimeError, match="embedded program .* runs past the end"):
        BundledProgramBuffer(data[: len(data) // 2])
    with pytest.raises(EtkitRuntimeError, match="runs past the end"):
        deserialize_from_flatbuffer_to_bundled_program(data[: len(data) // 2])


def test_corrupt_tensor_data_names_the_test_case_and_input(lowered):
    """A bundled input whose byte count no longer matches its shape is reported with its path in the file."""
    from etkit.fb.bundled.BundledProgram import BundledProgram as Root
    from etkit.fb.bundled.Tensor import Tensor

    _, _, _, data = lowered
    root = Root.GetRootAs(data, 0)
    value = root.MethodTestSuites(0).TestCases(1).Inputs(0)
    tensor = Tensor()
    tensor.Init(value.Val().Bytes, value.Val().Pos)
    base = np.frombuffer(data, np.uint8).ctypes.data
    length_at = tensor.DataAsNumpy().ctypes.data - base - 4  # the vector's uint32 length precedes its bytes
    bad = bytearray(data)
    bad[length_at:length_at + 4] = (4).to_bytes(4, "little")
    with pytest.raises(EtkitRuntimeError, match=r"method_test_suites\[0\]\.test_cases\[1\]\.inputs\[0\]: tensor data "
                                                r"has 4 bytes, shape \[.*\] of Float needs \d+"):
        BundledProgramBuffer(bytes(bad))


_FUZZ = """
import random, sys
from etkit.runtime import EtkitRuntimeError, Runtime, load_bundled_input, verify_method_outputs
from etkit.runtime.bundled import BundledProgramBuffer
from etkit.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
data = open(sys.argv[1], "rb").read()
rng = random.Random(0)
variants = [data[:n] for n in sorted(set(rng.randrange(0, len(data)) for _ in range(150)))]
for _ in range(400):
    bad = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 8))):
        i = rng.randrange(len(bad))
        bad[i] ^= 1 << rng.randrange(8)
    variants.append(bytes(bad))
counts = {"refused": 0, "read": 0, "ran": 0}
for variant in variants:
    try:
        bundle = BundledProgramBuffer(variant)
    except EtkitRuntimeError as exc:
        assert str(exc).startswith("cannot read bundled program"), str(exc)
        counts["refused"] += 1
        try:
            deserialize_from_flatbuffer_to_bundled_program(variant)
            raise AssertionError("deserialize read a file the runtime refused")
        except EtkitRuntimeError:
            pass
        continue
    counts["read"] += 1
    try:
        deserialize_from_flatbuffer_to_bundled_program(variant)
        method = Runtime.get().load_program(variant).load_method()
        load_bundled_input(method, bundle, 0)
        method.execute()
        verify_method_outputs(method, bundle, 0, rtol=1e-5, atol=1e-5)
        counts["ran"] += 1
    except (EtkitRuntimeError, ValueError, TypeError):
        pass
print(counts)
"""


def test_truncated_and_bit_flipped_bptes_never_crash(lowered, tmp_path):
    """550 variants (150 truncations, 400 files with 1-8 flipped bits) in a child process: each is refused with
    an EtkitRuntimeError or read (then run and verified, which may fail with an error); the child must exit 0."""
    _, _, _, data = lowered
    path = tmp_path / "good.bpte"
    path.write_bytes(data)
    run = subprocess.run([sys.executable, "-c", _FUZZ, str(path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-3000:]}"
    counts = eval(run.stdout.strip().splitlines()[-1])
    assert counts["refused"] >= 150, counts  # every truncation at least


# ---- shapes and layouts the method plans -----------------------------------------------------------

def _verify_all(data, model, inputs_per_case):
    method = Runtime.get().load_program(data).load_method()
    for index, case_inputs in enumerate(inputs_per_case):
        load_bundled_input(method, data, index)
        (out,) = method.execute()
        with torch.no_grad():
            want = model(*case_inputs)
        torch.testing.assert_close(torch.from_numpy(np.ascontiguousarray(out)), want, rtol=bundling.RTOL,
                                   atol=bundling.ATOL)
        verify_method_outputs(method, data, index, rtol=bundling.RTOL, atol=bundling.ATOL)


def test_dynamic_shape_cases_of_different_sizes_run_and_verify():
    """Each case runs at its own size within the exported bounds; a size over the bound is refused."""
    import etkit

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).eval()
    seq = torch.export.Dim("seq", min=2, max=16)
    ep = torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes=({0: seq},))
    program = etkit.to_edge(ep).to_executorch()
    inputs = [(torch.randn(3, 8),), (torch.randn(16, 8),)]
    cases = [MethodTestCase(inputs=list(i), expected_outputs=model(*i)) for i in inputs]
    data = serialize_from_bundled_program_to_flatbuffer(BundledProgram(program, [MethodTestSuite("forward", cases)]))
    _verify_all(data, model, inputs)
    with pytest.raises(BundledProgramError, match=r"shape \[17, 8\], above the method's upper bounds \[16, 8\]"):
        _bundle_one(program, [torch.randn(17, 8)])


def test_channels_last_input_is_stored_in_the_method_layout():
    """A program exported with a channels-last input takes the bundled bytes in that layout (dim_order
    [0, 2, 3, 1]), whatever the layout of the tensor given to MethodTestCase."""
    import etkit
    from etkit.fb.bundled.BundledProgram import BundledProgram as Root
    from etkit.fb.bundled.Tensor import Tensor

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 6, 6).to(memory_format=torch.channels_last)
    program = etkit.to_edge(torch.export.export(model, (x,))).to_executorch()
    inputs = [(x.contiguous(),), (torch.randn(1, 3, 6, 6).to(memory_format=torch.channels_last),)]
    cases = [MethodTestCase(inputs=list(i), expected_outputs=model(*i)) for i in inputs]
    data = serialize_from_bundled_program_to_flatbuffer(BundledProgram(program, [MethodTestSuite("forward", cases)]))
    value = Root.GetRootAs(data, 0).MethodTestSuites(0).TestCases(0).Inputs(0)
    tensor = Tensor()
    tensor.Init(value.Val().Bytes, value.Val().Pos)
    assert list(tensor.DimOrderAsNumpy()) == [0, 2, 3, 1]
    assert tensor.DataAsNumpy().tobytes() == x.permute(0, 2, 3, 1).contiguous().numpy().tobytes()
    _verify_all(data, model, inputs)
    read = deserialize_from_flatbuffer_to_bundled_program(data)
    assert torch.equal(read.method_test_suites[0].test_cases[0].inputs[0], x)


def test_repeated_execute_runs_the_loaded_case_each_time(lowered):
    """execute() after load_bundled_input can be repeated: each run sees the case's inputs (planned input
    memory may hold other values after a run), so the outputs are the same every time."""
    name, model, _, data = lowered
    method = Runtime.get().load_program(data).load_method()
    load_bundled_input(method, data, 1)
    first = method.execute()
    for _ in range(2):
        again = method.execute()
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
    verify_method_outputs(method, data, 1, rtol=bundling.RTOL, atol=bundling.ATOL)
