"""The ScalarType values stored in a program: element sizes, names, and the torch and numpy dtypes of the
ones the runtime handles (torch-free: the runtime imports it).

Numbering is schema/scalar_type.fbs (c10's ScalarType); sizes are c10's element sizes.
"""

from __future__ import annotations

# value -> (name, bytes per element)
_SCALAR_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("float16", 2),
    6: ("float32", 4),
    7: ("float64", 8),
    8: ("complex32", 4),
    9: ("complex64", 8),
    10: ("complex128", 16),
    11: ("bool", 1),
    12: ("qint8", 1),
    13: ("quint8", 1),
    14: ("qint32", 4),
    15: ("bfloat16", 2),
    16: ("quint4x2", 1),
    17: ("quint2x4", 1),
    18: ("bits1x8", 1),
    19: ("bits2x4", 1),
    20: ("bits4x2", 1),
    21: ("bits8", 1),
    22: ("bits16", 2),
    23: ("float8_e5m2", 1),
    24: ("float8_e4m3fn", 1),
    25: ("float8_e5m2fnuz", 1),
    26: ("float8_e4m3fnuz", 1),
    27: ("uint16", 2),
    28: ("uint32", 4),
    29: ("uint64", 8),
}


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
#: not run). Their names above are torch's dtype names, and numpy's where numpy has the type (not bfloat16):
#: the one table the emitter (torch dtype -> ScalarType) and the runtime (ScalarType -> torch or numpy dtype)
#: build theirs from.
RUNTIME_SCALAR_TYPES = (0, 1, 2, 3, 4, 5, 6, 7, 11, 15, 27, 28, 29)

#: ``{ScalarType: numpy dtype name}`` of the runtime's types numpy has.
NUMPY_DTYPE_NAMES: dict[int, str] = {code: _SCALAR_TYPES[code][0] for code in RUNTIME_SCALAR_TYPES
                                     if _SCALAR_TYPES[code][0] != "bfloat16"}


def torch_dtypes() -> dict:
    """``{ScalarType: torch.dtype}`` of :data:`RUNTIME_SCALAR_TYPES` (imports torch)."""
    import torch
    return {code: getattr(torch, _SCALAR_TYPES[code][0]) for code in RUNTIME_SCALAR_TYPES}
