"""The ScalarType values stored in a program: element sizes, names, and the torch and numpy dtypes of the
ones the runtime handles (torch-free: the runtime imports it).

The table is generated from schema/scalar_type.fbs (``_scalar_type_table.py``, by scripts/gen_scalar_types.py):
numbering and sizes are the schema's, names are torch's dtype names.
"""

from __future__ import annotations

from ._scalar_type_table import SCALAR_TYPES as _GENERATED

# value -> (name, bytes per element)
_SCALAR_TYPES: dict[int, tuple[str, int]] = {code: (name, size) for code, (_, name, size) in _GENERATED.items()}
_CODE_OF_NAME = {name: code for code, (name, _) in _SCALAR_TYPES.items()}


def is_known(scalar_type: int) -> bool:
    return scalar_type in _SCALAR_TYPES


def scalar_type_name(scalar_type: int) -> str:
    """e.g. 6 -> "float32"; unknown values -> "ScalarType(99)"."""
    entry = _SCALAR_TYPES.get(scalar_type)
    return entry[0] if entry else f"ScalarType({scalar_type})"


def element_size(scalar_type: int) -> int:
    """Bytes per element. Raises KeyError for a value the schema does not define."""
    return _SCALAR_TYPES[scalar_type][1]


#: The ScalarTypes the runtime's tensors, kernels and Python API handle (the others can be read and printed,
#: not run). Their names are torch's dtype names, and numpy's where numpy has the type (not bfloat16): the one
#: table the emitter (torch dtype -> ScalarType), the Edge dialect's dtype check and the runtime (ScalarType ->
#: torch or numpy dtype) build theirs from.
RUNTIME_SCALAR_TYPES = tuple(_CODE_OF_NAME[name] for name in (
    "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool", "bfloat16",
    "uint16", "uint32", "uint64"))

#: ``{ScalarType: numpy dtype name}`` of the runtime's types numpy has.
NUMPY_DTYPE_NAMES: dict[int, str] = {code: _SCALAR_TYPES[code][0] for code in RUNTIME_SCALAR_TYPES
                                     if _SCALAR_TYPES[code][0] != "bfloat16"}


def torch_dtypes() -> dict:
    """``{ScalarType: torch.dtype}`` of :data:`RUNTIME_SCALAR_TYPES` (imports torch)."""
    import torch
    return {code: getattr(torch, _SCALAR_TYPES[code][0]) for code in RUNTIME_SCALAR_TYPES}
