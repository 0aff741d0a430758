"""The one ScalarType table: schema/scalar_type.fbs, from which scripts/gen_scalar_types.py generates the C++
runtime's enum and sizes and the Python table. The committed outputs must be what the schema generates now;
the Python table must agree with flatc's reading of the schema and with torch's element sizes; the generator
refuses a schema whose values lack their sizes or names. (The C++ runtime's side: runtime-cpp's
scalar_type.cpp checks the generated table against flatc's enum at compile time, ctest test_scalar_type and
tests/runtime/test_scalar_types.py check what it accepts.)"""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

from etkit import scalar_types

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_scalar_types", ROOT / "scripts" / "gen_scalar_types.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_generated_tables_match_the_schema(gen):
    stale = [str(path.relative_to(ROOT)) for path, text in gen.outputs(gen.SCHEMA.read_text()).items()
             if not path.exists() or path.read_text() != text]
    assert not stale, f"{stale} differ from schema/scalar_type.fbs: run python scripts/gen_scalar_types.py"


def test_python_table_is_flatcs_reading_of_the_schema():
    """flatc's generated Python enum (etkit.fb, a second parser of the same schema) has the same values and
    names as the generated table."""
    from etkit._scalar_type_table import SCALAR_TYPES
    from etkit.fb.ScalarType import ScalarType

    flatc = {value: name for name, value in vars(ScalarType).items() if not name.startswith("_")}
    assert flatc == {value: schema_name for value, (schema_name, _, _) in SCALAR_TYPES.items()}
    assert set(scalar_types._SCALAR_TYPES) == set(flatc)
    for value in (8, 9, 10, 18, 19, 20, 21, 30):  # c10 has them, the schema does not
        assert not scalar_types.is_known(value)
        with pytest.raises(KeyError):
            scalar_types.element_size(value)


def test_sizes_and_names_are_torchs():
    torch = pytest.importorskip("torch")
    for value, (name, size) in scalar_types._SCALAR_TYPES.items():
        dtype = getattr(torch, name)  # every name is a torch dtype
        assert dtype.itemsize == size, (value, name)
    assert {str(d) for d in scalar_types.torch_dtypes().values()} == {
        f"torch.{scalar_types.scalar_type_name(v)}" for v in scalar_types.RUNTIME_SCALAR_TYPES}
    assert scalar_types.NUMPY_DTYPE_NAMES[6] == "float32" and 15 not in scalar_types.NUMPY_DTYPE_NAMES


_GOOD = ("enum ScalarType : byte {\n  BYTE = 0,  // Byte uint8 1\n  // a comment line\n"
         "  HALF = 5,  // Half float16 2\n}\n")


@pytest.mark.parametrize("schema, message", [
    (_GOOD.replace("  // Byte uint8 1", ""), "is not 'NAME = N"),  # a value without its comment
    (_GOOD.replace("uint8 1", "uint8"), "is not 'NAME = N"),  # no size
    (_GOOD.replace("BYTE = 0,", "BYTE,"), "is not 'NAME = N"),  # implicit number
    (_GOOD.replace("Byte uint8 1", "Byte uint8 3"), "element size 3"),
    (_GOOD.replace("HALF = 5", "HALF = 0"), "value repeated: 0"),
    (_GOOD.replace("Half float16", "Byte float16"), "cpp_name repeated: Byte"),
    (_GOOD.replace("enum ScalarType", "enum Other"), "no 'enum ScalarType"),
], ids=["no-comment", "no-size", "implicit-number", "bad-size", "repeated-value", "repeated-name", "no-enum"])
def test_generator_refuses_an_incomplete_schema(gen, schema, message):
    with pytest.raises(ValueError, match=message):
        gen.parse(schema)


def test_generator_reads_values_and_comments(gen):
    entries = gen.parse(_GOOD)
    assert [(e.schema_name, e.value, e.cpp_name, e.py_name, e.size) for e in entries] == [
        ("BYTE", 0, "Byte", "uint8", 1), ("HALF", 5, "Half", "float16", 2)]
    assert "  Half = 5,\n" in gen.render_cpp(entries) and "X(Half, HALF, 2)" in gen.render_cpp(entries)
    assert '5: ("HALF", "float16", 2),' in gen.render_python(entries)
