"""Run and check the test cases of a bundled program (.bpte) with etkit's runtime.

    from etkit.runtime import Runtime, load_bundled_input, verify_method_outputs
    program = Runtime.get().load_program("model.bpte")      # the program embedded in the .bpte
    method = program.load_method("forward")
    load_bundled_input(method, "model.bpte", 0)             # test case 0's inputs
    method.execute()                                        # runs on them
    verify_method_outputs(method, "model.bpte", 0)          # raises BundledVerificationError if off

The format is schema/bundled_program.fbs (ExecuTorch 1.5.1's ``bundled_program_schema.fbs``, file
identifier ``BP08``); the function names and tolerances are ExecuTorch's C++ runtime's
(``executorch::bundled_program::load_bundled_input`` / ``verify_method_outputs``; seed page "Bundled
Program"). The work is done by the C++ runtime (runtime-cpp/extension/devtools/bundled_program.cpp),
which checks the whole file first: a truncated or corrupted .bpte raises :class:`EtkitRuntimeError`
naming the broken part. Needs numpy only; torch is never imported.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from etkit import _runtime
from etkit._runtime import EtkitRuntimeError

if TYPE_CHECKING:
    from etkit.runtime import Method

__all__ = [
    "BundledProgramBuffer",
    "BundledVerificationError",
    "VerificationReport",
    "load_bundled_input",
    "verify_method_outputs",
]


class BundledProgramBuffer:
    """A .bpte read into memory and checked (ExecuTorch's pybindings call this a ``BundledModule``).

    Args:
        data: the file's path, or its bytes.

    Raises:
        EtkitRuntimeError: the file cannot be read, is not a .bpte, or is truncated or corrupted (the
            message names the file and the part, e.g. ``method_test_suites[0].test_cases[1].inputs[0]:
            tensor data has 12 bytes, shape [2, 3] of Float needs 24``).
    """

    def __init__(self, data: Union[str, os.PathLike, bytes, bytearray, memoryview]):
        if isinstance(data, (bytes, bytearray, memoryview)):
            self.path: str | None = None
            raw = bytes(data)
            what = f"({len(raw)} bytes)"
        else:
            self.path = os.fspath(Path(data))
            what = repr(self.path)
            try:
                raw = Path(self.path).read_bytes()
            except OSError as exc:
                raise EtkitRuntimeError(f"cannot read bundled program {what}: {exc}") from None
        self._native = _runtime.BundledProgram.load_bytes(raw, what)

    @property
    def version(self) -> int:
        """The schema version written in the file (2 for ExecuTorch 1.5.1)."""
        return int(self._native.version)

    @property
    def method_names(self) -> list[str]:
        """Methods that have test cases, in file order (sorted by name)."""
        return list(self._native.method_names())

    def num_test_cases(self, method_name: str = "forward") -> int:
        """Raises EtkitRuntimeError when ``method_name`` has no test suite (the message lists those that do)."""
        return int(self._native.num_test_cases(method_name))

    @property
    def program(self) -> bytes:
        """The embedded .pte file."""
        return self._native.program_bytes()


BundledLike = Union[BundledProgramBuffer, str, os.PathLike, bytes, bytearray, memoryview]


#: The last ``bytes`` object read and its BundledProgramBuffer: the same (immutable) object passed again, as
#: in a load/verify loop, is not copied and checked again. Paths are always read (the file may change).
_last_bytes: tuple = (None, None)


def _bundle(bpte: BundledLike) -> BundledProgramBuffer:
    global _last_bytes
    if isinstance(bpte, BundledProgramBuffer):
        return bpte
    if type(bpte) is bytes:
        last = _last_bytes
        if last[0] is bpte:
            return last[1]
        bundle = BundledProgramBuffer(bpte)
        _last_bytes = (bpte, bundle)
        return bundle
    return BundledProgramBuffer(bpte)


def _index(test_case_index) -> int:
    index = int(test_case_index)
    if index < 0 or index != test_case_index:
        raise ValueError(f"test_case_index must be a non-negative integer, got {test_case_index!r}")
    return index


def load_bundled_input(method: "Method", bpte: BundledLike, test_case_index: int,
                       method_name: str | None = None) -> None:
    """Sets every input of ``method`` from test case ``test_case_index``; ``method.execute()`` (no
    arguments) then runs on them and returns numpy arrays.

    Args:
        method: a loaded :class:`etkit.runtime.Method`.
        bpte: a :class:`BundledProgramBuffer`, or a .bpte's path (read and checked on each call) or bytes
            (checked once per bytes object).
        test_case_index: index into the method's test cases.
        method_name: the test suite to take the case from; default: the method's own name.

    Raises:
        EtkitRuntimeError: the .bpte is invalid, has no suite for the method (the message lists those it
            has), the index is out of range, or the test case does not fit the method (input count, dtype,
            shape or layout; the message names the input and both values).
    """
    bundle = _bundle(bpte)
    index = _index(test_case_index)
    method._bundled = None  # a failed load leaves no test case loaded
    method._native.load_bundled_input(bundle._native, index, method_name or "")
    method._bundled = {"bundle": bundle, "index": index, "method_name": method_name, "executed": False}


@dataclass(frozen=True)
class VerificationReport:
    """What :func:`verify_method_outputs` found for one test case.

    ``max_abs_diff`` is the largest ``|expected - actual|`` over all outputs (``inf`` when a dtype/shape
    differs or a NaN/inf is in one place only), ``max_abs_diff_output`` the output it is in.
    """

    method_name: str
    test_case_index: int
    num_outputs: int
    max_abs_diff: float
    max_abs_diff_output: int
    rtol: float
    atol: float


class BundledVerificationError(EtkitRuntimeError):
    """An output of a bundled test case is outside tolerance.

    Attributes:
        test_case_index: the test case.
        output_index: the first output that differs.
        max_abs_diff: that output's largest ``|expected - actual|`` (``inf`` for a dtype/shape mismatch).
        mismatched: how many of its elements are outside tolerance (0 for a dtype/shape mismatch).
        element, expected, actual: where its largest difference is (row-major index) and both values.
    """

    def __init__(self, message: str, *, method_name: str, test_case_index: int, output_index: int,
                 max_abs_diff: float, mismatched: int, numel: int, element: int, expected: float,
                 actual: float):
        super().__init__(message)
        self.method_name = method_name
        self.test_case_index = test_case_index
        self.output_index = output_index
        self.max_abs_diff = max_abs_diff
        self.mismatched = mismatched
        self.numel = numel
        self.element = element
        self.expected = expected
        self.actual = actual


def verify_method_outputs(method: "Method", bpte: BundledLike, test_case_index: int, rtol: float = 1e-5,
                          atol: float = 1e-8, method_name: str | None = None) -> VerificationReport:
    """Checks the outputs of the last ``method.execute()`` against test case ``test_case_index``'s
    expected outputs.

    Floating-point outputs (float32/64, float16, bfloat16) pass where
    ``|expected - actual| <= atol + rtol * |actual|`` for every element (NaN matches NaN, inf matches an
    inf of the same sign; ExecuTorch's rule and defaults), other dtypes must be equal; dtypes and shapes
    must equal the expected ones. Run ``load_bundled_input`` and ``method.execute()`` first.

    Returns:
        A :class:`VerificationReport` (largest difference over all outputs).

    Raises:
        BundledVerificationError: an output differs; the message names the method, the test case, the
            output, the number of elements outside tolerance and the largest absolute difference with
            where it is.
        EtkitRuntimeError: the .bpte is invalid, has no suite or test case for the method, the case has no
            expected outputs (or another number than the method returns), or the method was not executed
            on this test case's inputs since ``load_bundled_input``.
        ValueError: ``rtol`` or ``atol`` is negative.
    """
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    bundle = _bundle(bpte)
    index = _index(test_case_index)
    name = method_name or method._meta.name
    loaded = getattr(method, "_bundled", None)
    if loaded is not None and loaded["index"] != index:
        raise EtkitRuntimeError(
            f"method '{name}' holds the inputs of bundled test case {loaded['index']}, not {index}: call "
            f"load_bundled_input(method, bpte, {index}) and method.execute() before verifying test case {index}"
        )
    if loaded is not None and not loaded["executed"]:
        raise EtkitRuntimeError(
            f"method '{name}' was not executed since load_bundled_input(..., {index}): call method.execute() "
            f"before verify_method_outputs"
        )
    r = method._native.verify_outputs(bundle._native, index, float(rtol), float(atol), method_name or "")
    if not r["passed"]:
        if r["failed_output"] < 0:
            raise EtkitRuntimeError(f"verify_method_outputs: {r['message']}")
        raise BundledVerificationError(
            r["message"], method_name=name, test_case_index=index, output_index=int(r["failed_output"]),
            max_abs_diff=float(r["failed_max_abs_diff"]), mismatched=int(r["failed_mismatches"]),
            numel=int(r["failed_numel"]), element=int(r["failed_element"]), expected=float(r["failed_expected"]),
            actual=float(r["failed_actual"]),
        )
    return VerificationReport(
        method_name=name, test_case_index=index, num_outputs=int(r["num_outputs"]),
        max_abs_diff=float(r["max_abs_diff"]), max_abs_diff_output=int(r["max_abs_diff_output"]),
        rtol=float(rtol), atol=float(atol),
    )
