// ScalarType: tensor element types, numbered exactly as ExecuTorch's scalar_type.fbs / c10::ScalarType
// (schema/scalar_type.fbs), so the byte stored in a .pte maps directly onto this enum.
#pragma once

#include <cstddef>
#include <cstdint>

namespace etkit::runtime {

enum class ScalarType : int8_t {
  Byte = 0,    // uint8
  Char = 1,    // int8
  Short = 2,   // int16
  Int = 3,     // int32
  Long = 4,    // int64
  Half = 5,    // float16
  Float = 6,   // float32
  Double = 7,  // float64
  ComplexHalf = 8,
  ComplexFloat = 9,
  ComplexDouble = 10,
  Bool = 11,
  QInt8 = 12,
  QUInt8 = 13,
  QInt32 = 14,
  BFloat16 = 15,
  QUInt4x2 = 16,
  QUInt2x4 = 17,
  Bits1x8 = 18,
  Bits2x4 = 19,
  Bits4x2 = 20,
  Bits8 = 21,
  Bits16 = 22,
  Float8_e5m2 = 23,
  Float8_e4m3fn = 24,
  Float8_e5m2fnuz = 25,
  Float8_e4m3fnuz = 26,
  UInt16 = 27,
  UInt32 = 28,
  UInt64 = 29,
  Undefined = 30,
};

/// Bytes per element; 0 for Undefined or a value outside the enum.
size_t element_size(ScalarType type);

/// PyTorch-style name, e.g. "Float", "Long", "Bool"; "Unknown" for a value outside the enum.
const char* scalar_type_name(ScalarType type);

/// True when `value` (e.g. a byte read from a .pte) names a ScalarType this runtime knows the size of.
bool is_valid_scalar_type(int value);

}  // namespace etkit::runtime
