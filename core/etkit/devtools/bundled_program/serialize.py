"""Write and read .bpte files (ExecuTorch's ``executorch.devtools.bundled_program.serialize``).

The layout is schema/bundled_program.fbs, ExecuTorch 1.5.1's ``bundled_program_schema.fbs`` (file
identifier ``BP08``, version 2): a .bpte written here is read by ExecuTorch's runtime and the other way
round. Bytes are packed with the code flatc generates from the schema (``etkit.fb.bundled``), with the
two aligned vectors of the schema (tensor data: 16 bytes, the program: 32 bytes) aligned by hand since
flatc's Python ignores ``force_align``.
"""
from __future__ import annotations

from typing import List

import flatbuffers
import numpy as np
import torch

from etkit.devtools.bundled_program.config import ConfigValue, MethodTestCase, MethodTestSuite
from etkit.devtools.bundled_program.core import BUNDLED_PROGRAM_SCHEMA_VERSION, BundledProgram
from etkit.emit import dtypes
from etkit.serialize.program_flatbuffer import _aligned_byte_vector

try:
    from etkit.fb.bundled import BundledMethodTestCase as _case_fb
    from etkit.fb.bundled import BundledMethodTestSuite as _suite_fb
    from etkit.fb.bundled import BundledProgram as _program_fb
    from etkit.fb.bundled import Bool as _bool_fb
    from etkit.fb.bundled import Double as _double_fb
    from etkit.fb.bundled import Int as _int_fb
    from etkit.fb.bundled import Tensor as _tensor_fb
    from etkit.fb.bundled import Value as _value_fb
    from etkit.fb.bundled.ValueUnion import ValueUnion
except ImportError as error:  # pragma: no cover - only without a build
    raise ImportError(
        "etkit.fb.bundled (Python code generated from schema/bundled_program.fbs) is missing; build and install "
        "etkit (`pip install -e .` in the repository root) so flatc generates it"
    ) from error

__all__ = ["deserialize_from_flatbuffer_to_bundled_program", "serialize_from_bundled_program_to_flatbuffer"]

FILE_IDENTIFIER = b"BP08"
#: force_align of ``Tensor.data`` and ``BundledProgram.program`` in the schema.
TENSOR_DATA_ALIGNMENT = 16
PROGRAM_ALIGNMENT = 32


# ---- writing -------------------------------------------------------------------------------------

def _tensor_bytes(t: torch.Tensor, order: List[int]) -> bytes:
    """The elements of ``t`` laid out in ``order`` (outermost dimension first)."""
    physical = t.detach().cpu().permute(order).contiguous() if order else t.detach().cpu().contiguous()
    if physical.numel() == 0:
        return b""
    return physical.reshape(-1).view(torch.uint8).numpy().tobytes()


def _pack_tensor(builder: flatbuffers.Builder, t: torch.Tensor, info) -> int:
    if t.dtype not in dtypes.SCALAR_TYPE:
        raise TypeError(f"bundled tensor of dtype {t.dtype} cannot be stored in a .bpte")
    # Inputs and outputs are written in the layout the method plans for them (so the runtime can take the
    # bytes as they are); a value the method does not describe keeps its own layout.
    order = list(info.dim_order) if info is not None and len(info.dim_order) == t.dim() else dtypes.dim_order(t)
    data = _aligned_byte_vector(builder, _tensor_bytes(t, order), TENSOR_DATA_ALIGNMENT)
    dim_order = builder.CreateByteVector(bytes(order))
    sizes = builder.CreateNumpyVector(np.asarray(list(t.shape), dtype=np.int32))
    _tensor_fb.TensorStart(builder)
    _tensor_fb.TensorAddScalarType(builder, dtypes.SCALAR_TYPE[t.dtype])
    _tensor_fb.TensorAddSizes(builder, sizes)
    _tensor_fb.TensorAddData(builder, data)
    _tensor_fb.TensorAddDimOrder(builder, dim_order)
    return _tensor_fb.TensorEnd(builder)


def _pack_value(builder: flatbuffers.Builder, value: ConfigValue, info) -> int:
    if isinstance(value, torch.Tensor):
        kind, offset = ValueUnion.Tensor, _pack_tensor(builder, value, info)
    elif isinstance(value, bool):
        _bool_fb.BoolStart(builder)
        _bool_fb.BoolAddBoolVal(builder, value)
        kind, offset = ValueUnion.Bool, _bool_fb.BoolEnd(builder)
    elif isinstance(value, int):
        _int_fb.IntStart(builder)
        _int_fb.IntAddIntVal(builder, value)
        kind, offset = ValueUnion.Int, _int_fb.IntEnd(builder)
    elif isinstance(value, float):
        _double_fb.DoubleStart(builder)
        _double_fb.DoubleAddDoubleVal(builder, value)
        kind, offset = ValueUnion.Double, _double_fb.DoubleEnd(builder)
    else:
        raise TypeError(f"cannot bundle a {type(value).__name__}")
    _value_fb.ValueStart(builder)
    _value_fb.ValueAddValType(builder, kind)
    _value_fb.ValueAddVal(builder, offset)
    return _value_fb.ValueEnd(builder)


def _offset_vector(builder: flatbuffers.Builder, offsets: List[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _pack_case(builder: flatbuffers.Builder, case: MethodTestCase, meta) -> int:
    in_infos = list(meta.inputs) if meta is not None else [None] * len(case.inputs)
    out_infos = list(meta.outputs) if meta is not None else [None] * len(case.expected_outputs)
    inputs = [_pack_value(builder, v, i) for v, i in zip(case.inputs, in_infos + [None] * len(case.inputs))]
    outputs = [_pack_value(builder, v, i)
               for v, i in zip(case.expected_outputs, out_infos + [None] * len(case.expected_outputs))]
    inputs_vec = _offset_vector(builder, inputs)
    outputs_vec = _offset_vector(builder, outputs)
    _case_fb.BundledMethodTestCaseStart(builder)
    _case_fb.BundledMethodTestCaseAddInputs(builder, inputs_vec)
    _case_fb.BundledMethodTestCaseAddExpectedOutputs(builder, outputs_vec)
    return _case_fb.BundledMethodTestCaseEnd(builder)


def serialize_from_bundled_program_to_flatbuffer(bundled_program: BundledProgram) -> bytes:
    """The .bpte bytes of ``bundled_program``.

    Tensors are stored in the memory layout (dim order) the method plans for the input or output they
    stand for, so that the runtime uses the bytes as they are. Identical inputs give identical bytes.

    Raises:
        TypeError: a bundled tensor has a dtype the format cannot store (complex, quantized).
    """
    builder = flatbuffers.Builder(1024 + len(bundled_program.program))
    suites = []
    for suite in bundled_program.method_test_suites:
        meta = bundled_program._metas.get(suite.method_name)
        cases = [_pack_case(builder, case, meta) for case in suite.test_cases]
        cases_vec = _offset_vector(builder, cases)
        name = builder.CreateString(suite.method_name)
        _suite_fb.BundledMethodTestSuiteStart(builder)
        _suite_fb.BundledMethodTestSuiteAddMethodName(builder, name)
        _suite_fb.BundledMethodTestSuiteAddTestCases(builder, cases_vec)
        suites.append(_suite_fb.BundledMethodTestSuiteEnd(builder))
    suites_vec = _offset_vector(builder, suites)
    program = _aligned_byte_vector(builder, bundled_program.program, PROGRAM_ALIGNMENT)
    _program_fb.BundledProgramStart(builder)
    _program_fb.BundledProgramAddVersion(builder, BUNDLED_PROGRAM_SCHEMA_VERSION)
    _program_fb.BundledProgramAddMethodTestSuites(builder, suites_vec)
    _program_fb.BundledProgramAddProgram(builder, program)
    builder.Finish(_program_fb.BundledProgramEnd(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


# ---- reading ---------------------------------------------------------------------------------------

def _read_tensor(table) -> torch.Tensor:
    t = _tensor_fb.Tensor()
    t.Init(table.Bytes, table.Pos)
    dtype = dtypes.DTYPE.get(t.ScalarType())
    if dtype is None:
        raise TypeError(f"bundled tensor of scalar type {t.ScalarType()} has no torch dtype")
    sizes = [int(s) for s in t.SizesAsNumpy()] if not t.SizesIsNone() and t.SizesLength() else []
    order = [int(d) for d in t.DimOrderAsNumpy()] if not t.DimOrderIsNone() and t.DimOrderLength() else []
    order = order or list(range(len(sizes)))
    numel = 1
    for s in sizes:
        numel *= s
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    # The reader checked that data holds at least nbytes (ExecuTorch's writer may store more: a view's
    # whole storage).
    raw = bytearray(t.DataAsNumpy()[:nbytes].tobytes()) if nbytes else bytearray()
    flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    physical = flat.view(dtype).reshape([sizes[d] for d in order])
    inverse = sorted(range(len(order)), key=lambda d: order[d])
    return physical.permute(inverse)


def _read_value(value) -> ConfigValue:
    kind = value.ValType()
    table = value.Val()
    if kind == ValueUnion.Tensor:
        return _read_tensor(table)
    if kind == ValueUnion.Int:
        v = _int_fb.Int()
        v.Init(table.Bytes, table.Pos)
        return int(v.IntVal())
    if kind == ValueUnion.Bool:
        v = _bool_fb.Bool()
        v.Init(table.Bytes, table.Pos)
        return bool(v.BoolVal())
    if kind == ValueUnion.Double:
        v = _double_fb.Double()
        v.Init(table.Bytes, table.Pos)
        return float(v.DoubleVal())
    raise TypeError(f"bundled value of type {kind} is not Tensor, Int, Bool or Double")


def deserialize_from_flatbuffer_to_bundled_program(flatbuffer: bytes) -> BundledProgram:
    """Reads .bpte bytes back into a :class:`BundledProgram` (its ``program`` holds the .pte bytes, its
    suites hold torch tensors and Python scalars in the layouts stored).

    Unlike ExecuTorch, whose function returns its schema's dataclasses, this returns the same class that
    :func:`serialize_from_bundled_program_to_flatbuffer` takes, so that a read file can be written again.
    The test cases are not re-checked against the program (a file is read as it is).

    Raises:
        EtkitRuntimeError: the bytes are not a .bpte, or are truncated or corrupted (checked in full by the
            runtime's reader first; the message names the part, e.g. ``method_test_suites[0].test_cases[1]``).
    """
    from etkit import _runtime

    data = bytes(flatbuffer)
    checked = _runtime.BundledProgram.load_bytes(data, f"({len(data)} bytes)")
    root = _program_fb.BundledProgram.GetRootAs(data, 0)
    suites = []
    for s in range(root.MethodTestSuitesLength()):
        suite = root.MethodTestSuites(s)
        cases = []
        for c in range(suite.TestCasesLength()):
            case = suite.TestCases(c)
            inputs = [_read_value(case.Inputs(i)) for i in range(case.InputsLength())]
            expected = [_read_value(case.ExpectedOutputs(i)) for i in range(case.ExpectedOutputsLength())]
            test_case = MethodTestCase(inputs=inputs, expected_outputs=expected or None)
            cases.append(test_case)
        suites.append(MethodTestSuite(method_name=suite.MethodName().decode("utf-8", "replace"), test_cases=cases))
    bundled = BundledProgram(checked.program_bytes(), suites, _check=False)
    bundled.version = int(root.Version())
    return bundled
