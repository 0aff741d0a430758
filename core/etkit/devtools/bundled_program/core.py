"""``BundledProgram``: a program and the test cases of some of its methods, checked against each other
(ExecuTorch's ``executorch.devtools.bundled_program.core.BundledProgram``; seed page "Bundled Program")."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Union

import torch

from etkit.devtools.bundled_program.config import ConfigValue, MethodTestCase, MethodTestSuite
from etkit.emit import dtypes

#: The layout version written in ``BundledProgram.version`` (ExecuTorch 1.5.1 writes 2).
BUNDLED_PROGRAM_SCHEMA_VERSION = 2

_TAG_OF_TYPE = {bool: "Bool", int: "Int", float: "Double"}


class BundledProgramError(ValueError):
    """Test cases that do not fit the program (unknown method, or a case whose inputs or expected outputs
    differ from the method's signature in count, dtype or shape)."""


def _dtype_name(scalar_type: int) -> str:
    from etkit.scalar_types import scalar_type_name

    return scalar_type_name(scalar_type)


def _describe_info(info, tag: str) -> str:
    """``float32[2, 3]``; dynamic dims as upper bounds (``float32[<=8, 3]``); scalars by tag (``Int``)."""
    if info is None:
        return tag
    bound = "<=" if info.dynamic else ""
    return f"{_dtype_name(info.scalar_type)}[{', '.join(bound + str(s) for s in info.sizes)}]"


def _describe_value(value: ConfigValue) -> str:
    if isinstance(value, torch.Tensor):
        name = _dtype_name(dtypes.SCALAR_TYPE[value.dtype]) if value.dtype in dtypes.SCALAR_TYPE else str(value.dtype)
        return f"{name}[{', '.join(str(s) for s in value.shape)}]"
    return _TAG_OF_TYPE[type(value)]


def _signature(values) -> str:
    return "(" + ", ".join(values) + ")"


def _both(method_verb: str, case_verb: str, name: str, index: int, method_values, case_values) -> str:
    """Both signatures, one per line, aligned."""
    left = [f"method '{name}' {method_verb}", f"test case {index} {case_verb}"]
    width = max(len(x) for x in left)
    return (f"\n  {left[0]:<{width}} {_signature(method_values)}"
            f"\n  {left[1]:<{width}} {_signature(case_values)}")


def _value_problem(value: ConfigValue, info, tag: str) -> Optional[str]:
    """Why ``value`` cannot stand for a method value planned as ``info``/``tag``; None when it fits."""
    if info is None:
        if isinstance(value, torch.Tensor):
            return f"is a tensor, the method's value is a {tag}"
        if _TAG_OF_TYPE[type(value)] != tag:
            return f"is a {_TAG_OF_TYPE[type(value)]}, the method's value is a {tag}"
        return None
    if not isinstance(value, torch.Tensor):
        return f"is a {_TAG_OF_TYPE[type(value)]}, the method's value is a tensor"
    if dtypes.SCALAR_TYPE.get(value.dtype) != info.scalar_type:
        return f"has dtype {_describe_value(value).split('[')[0]}, the method's is {_dtype_name(info.scalar_type)}"
    shape = tuple(value.shape)
    if len(shape) != len(info.sizes):
        return f"has rank {len(shape)}, the method's is {len(info.sizes)}"
    if info.dynamic:
        if any(s > b for s, b in zip(shape, info.sizes)):
            return f"has shape {list(shape)}, above the method's upper bounds {list(info.sizes)}"
    elif shape != tuple(info.sizes):
        return f"has shape {list(shape)}, the method's is {list(info.sizes)}"
    return None


def _program_bytes(executorch_program, pte_file_path) -> bytes:
    if executorch_program is None and pte_file_path is None:
        raise BundledProgramError("BundledProgram needs executorch_program or pte_file_path")
    if executorch_program is not None and pte_file_path is not None:
        raise BundledProgramError("BundledProgram takes executorch_program or pte_file_path, not both")
    if pte_file_path is not None:
        return Path(pte_file_path).read_bytes()
    if isinstance(executorch_program, (bytes, bytearray, memoryview)):
        return bytes(executorch_program)
    buffer = getattr(executorch_program, "buffer", None)
    if buffer is None:
        raise BundledProgramError(
            f"BundledProgram: executorch_program is a {type(executorch_program).__name__}; pass an "
            f"ExecutorchProgramManager (from to_executorch()) or the .pte bytes"
        )
    return bytes(buffer)


class BundledProgram:
    """A program with test cases for some of its methods, ready to be written as a .bpte.

    Args:
        executorch_program: the program: an ``ExecutorchProgramManager`` (``to_executorch()``'s result; its
            ``.buffer`` is bundled) or the .pte bytes.
        method_test_suites: one :class:`MethodTestSuite` per method to test (methods without one are
            allowed). Kept sorted by method name, as the format requires.
        pte_file_path: instead of ``executorch_program``, the path of a .pte file.

    Every test case is checked against its method's signature as written in the program: the input count,
    each input's kind (tensor or Int/Bool/Double), dtype and shape (at most the upper bounds for a dynamic
    input), and, when expected outputs are given, their count, dtypes and shapes.

    Raises:
        BundledProgramError: a suite names a method the program lacks (the message lists its methods), two
            suites name the same method, or a test case does not fit its method; the message names the suite,
            the test case and the value, and prints both signatures, e.g.
            ``method 'forward' takes (float32[2, 3], float32[2, 3]); test case 1 gives (float32[2, 4], ...)``.
        EtkitRuntimeError: the program bytes are not a valid .pte.
    """

    def __init__(self, executorch_program=None, method_test_suites: Sequence[MethodTestSuite] = (),
                 pte_file_path: Optional[Union[str, os.PathLike]] = None, *, _check: bool = True) -> None:
        self.executorch_program = executorch_program
        self._pte_file_path = pte_file_path
        self._program: bytes = _program_bytes(executorch_program, pte_file_path)
        #: The layout version (written in the file; read back by deserialization).
        self.version = BUNDLED_PROGRAM_SCHEMA_VERSION
        self.method_test_suites: List[MethodTestSuite] = sorted(method_test_suites, key=lambda s: s.method_name)
        names = [s.method_name for s in self.method_test_suites]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise BundledProgramError(
                f"BundledProgram: more than one MethodTestSuite for method(s) {duplicates}; put all of a method's "
                f"test cases in one suite"
            )
        #: ``{method name: MethodMeta}`` of the methods that have suites (etkit.runtime.MethodMeta).
        self._metas = self._check_against_program() if _check else {}

    @property
    def program(self) -> bytes:
        """The .pte bytes that are bundled."""
        return self._program

    def _check_against_program(self) -> dict:
        from etkit.runtime import Runtime

        program = Runtime.get().load_program(self._program)
        metas = {}
        for suite in self.method_test_suites:
            if suite.method_name not in program.method_names:
                raise BundledProgramError(
                    f"BundledProgram: MethodTestSuite names method '{suite.method_name}', which the program does "
                    f"not have; its methods are {sorted(program.method_names)}"
                )
            meta = program.metadata(suite.method_name)
            metas[suite.method_name] = meta
            for index, case in enumerate(suite.test_cases):
                if not isinstance(case, MethodTestCase):
                    raise BundledProgramError(
                        f"BundledProgram: test case {index} of method '{suite.method_name}' is a "
                        f"{type(case).__name__}, not a MethodTestCase"
                    )
                self._check_case(meta, index, case)
        return metas

    @staticmethod
    def _check_case(meta, index: int, case: MethodTestCase) -> None:
        method_inputs = [_describe_info(i, t) for i, t in zip(meta.inputs, meta.input_tags)]
        case_inputs = [_describe_value(v) for v in case.inputs]
        where = f"test case {index} of method '{meta.name}'"
        both = _both("takes", "gives", meta.name, index, method_inputs, case_inputs)
        if len(case.inputs) != meta.num_inputs:
            raise BundledProgramError(
                f"BundledProgram: {where} has {len(case.inputs)} input(s), the method takes {meta.num_inputs}:{both}"
            )
        for i, (value, info, tag) in enumerate(zip(case.inputs, meta.inputs, meta.input_tags)):
            problem = _value_problem(value, info, tag)
            if problem:
                raise BundledProgramError(f"BundledProgram: {where}: input {i} {problem}:{both}")
        if not case.expected_outputs:
            return
        method_outputs = [_describe_info(i, t) for i, t in zip(meta.outputs, meta.output_tags)]
        case_outputs = [_describe_value(v) for v in case.expected_outputs]
        both = _both("returns", "expects", meta.name, index, method_outputs, case_outputs)
        if len(case.expected_outputs) != meta.num_outputs:
            raise BundledProgramError(
                f"BundledProgram: {where} has {len(case.expected_outputs)} expected output(s), the method returns "
                f"{meta.num_outputs}:{both}"
            )
        for i, (value, info, tag) in enumerate(zip(case.expected_outputs, meta.outputs, meta.output_tags)):
            problem = _value_problem(value, info, tag)
            if problem:
                raise BundledProgramError(f"BundledProgram: {where}: expected output {i} {problem}:{both}")

    def __repr__(self) -> str:
        cases = ", ".join(f"{s.method_name}: {len(s.test_cases)}" for s in self.method_test_suites)
        return f"BundledProgram(program={len(self._program)} bytes, test cases {{{cases}}})"
