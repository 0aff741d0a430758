"""The C++ runtime's ScalarType table is the schema's: a program's tensor of any schema value loads, one of
a value the schema lacks (c10's complex and Bits types, its Undefined, anything else) is refused naming it."""
from __future__ import annotations

import pytest

from etkit.runtime import EtkitRuntimeError, Runtime

from .programs import add_program


def _schema_values() -> list[int]:
    from etkit.fb.ScalarType import ScalarType  # flatc's reading of schema/scalar_type.fbs
    return sorted(v for k, v in vars(ScalarType).items() if not k.startswith("_"))


@pytest.mark.parametrize("value", _schema_values())
def test_schema_values_load(value):
    Runtime.get().load_program(add_program(scalar_type=value)).load_method("forward")


@pytest.mark.parametrize("value", [8, 9, 10, 18, 19, 20, 21, 30, 99, -1])
def test_values_the_schema_lacks_are_refused(value):
    program = Runtime.get().load_program(add_program(scalar_type=value))
    with pytest.raises(EtkitRuntimeError, match=f"tensor has unknown scalar type {value}"):
        program.load_method("forward")
