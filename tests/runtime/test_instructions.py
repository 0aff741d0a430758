"""Instruction-level behaviour on programs built with the generated flatbuffers classes: kernel dtype
dispatch and errors, integer arithmetic, control flow (JumpFalseCall)."""
from __future__ import annotations

import pytest
import torch

from etkit.runtime import EtkitRuntimeError, Runtime

from .programs import add_program


def test_unsupported_dtype_fails_naming_op_argument_and_dtype():
    """The portable add kernel has no QInt8 support: execute fails with a message naming all three."""
    from etkit.fb.ScalarType import ScalarType

    method = Runtime.get().load_program(add_program(scalar_type=ScalarType.QINT8)).load_method("forward")
    raw = torch.zeros(6, dtype=torch.uint8).numpy()
    with pytest.raises(EtkitRuntimeError) as info:
        method._native.execute([(12, [2, 3], raw), (12, [2, 3], raw)])
    msg = str(info.value)
    assert "aten::add.out" in msg and "'self'" in msg and "QInt8" in msg, msg


def test_int64_add_runs_in_integer_arithmetic():
    from etkit.fb.ScalarType import ScalarType

    method = Runtime.get().load_program(add_program(scalar_type=ScalarType.LONG)).load_method("forward")
    a = torch.tensor([[2**40, -3, 7], [0, 1, 2]], dtype=torch.int64)
    (out,) = method.execute([a, a])
    assert out.dtype == torch.int64 and torch.equal(out, a + a)


def test_jump_false_skips_instructions_when_the_condition_is_false():
    from .programs import jump_false_program

    method = Runtime.get().load_program(jump_false_program()).load_method("forward")
    assert method.metadata.input_tags == ("Tensor", "Bool")
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert torch.equal(method.execute([a, True])[0], a + a)
    assert torch.equal(method.execute([a, False])[0], a * a)
