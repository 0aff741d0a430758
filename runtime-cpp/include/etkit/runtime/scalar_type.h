// ScalarType: tensor element types, numbered exactly as schema/scalar_type.fbs (ExecuTorch's wire numbering,
// c10::ScalarType's), so the byte stored in a .pte maps directly onto this enum. The enum and the element
// sizes are generated from the schema (scalar_type_table.h, by scripts/gen_scalar_types.py): a value the
// schema lacks has no enumerator here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/scalar_type_table.h"

namespace etkit::runtime {

/// "No scalar type": a default-constructed Tensor's type, or a backend's answer for a type it cannot map.
/// Not a wire value (the schema has no negative ones), so is_valid_scalar_type() refuses it.
inline constexpr ScalarType kUndefinedScalarType = static_cast<ScalarType>(-1);

/// Bytes per element; 0 for a value the schema lacks (kUndefinedScalarType included).
size_t element_size(ScalarType type);

/// c10's name, e.g. "Float", "Long", "Bool"; "Unknown" for a value the schema lacks.
const char* scalar_type_name(ScalarType type);

/// True when `value` (e.g. a byte read from a .pte) is a ScalarType of the schema.
bool is_valid_scalar_type(int value);

}  // namespace etkit::runtime
