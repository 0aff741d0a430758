// Element sizes and names for ScalarType (numbering from schema/scalar_type.fbs).
#include "etkit/runtime/scalar_type.h"

namespace etkit::runtime {

size_t element_size(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Bool:
    case ScalarType::QInt8:
    case ScalarType::QUInt8:
    case ScalarType::QUInt4x2:
    case ScalarType::QUInt2x4:
    case ScalarType::Bits1x8:
    case ScalarType::Bits2x4:
    case ScalarType::Bits4x2:
    case ScalarType::Bits8:
    case ScalarType::Float8_e5m2:
    case ScalarType::Float8_e4m3fn:
    case ScalarType::Float8_e5m2fnuz:
    case ScalarType::Float8_e4m3fnuz:
      return 1;
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Bits16:
    case ScalarType::UInt16:
      return 2;
    case ScalarType::Int:
    case ScalarType::Float:
    case ScalarType::QInt32:
    case ScalarType::UInt32:
    case ScalarType::ComplexHalf:
      return 4;
    case ScalarType::Long:
    case ScalarType::Double:
    case ScalarType::UInt64:
    case ScalarType::ComplexFloat:
      return 8;
    case ScalarType::ComplexDouble:
      return 16;
    case ScalarType::Undefined:
      return 0;
  }
  return 0;
}

const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Long: return "Long";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::Double: return "Double";
    case ScalarType::ComplexHalf: return "ComplexHalf";
    case ScalarType::ComplexFloat: return "ComplexFloat";
    case ScalarType::ComplexDouble: return "ComplexDouble";
    case ScalarType::Bool: return "Bool";
    case ScalarType::QInt8: return "QInt8";
    case ScalarType::QUInt8: return "QUInt8";
    case ScalarType::QInt32: return "QInt32";
    case ScalarType::BFloat16: return "BFloat16";
    case ScalarType::QUInt4x2: return "QUInt4x2";
    case ScalarType::QUInt2x4: return "QUInt2x4";
    case ScalarType::Bits1x8: return "Bits1x8";
    case ScalarType::Bits2x4: return "Bits2x4";
    case ScalarType::Bits4x2: return "Bits4x2";
    case ScalarType::Bits8: return "Bits8";
    case ScalarType::Bits16: return "Bits16";
    case ScalarType::Float8_e5m2: return "Float8_e5m2";
    case ScalarType::Float8_e4m3fn: return "Float8_e4m3fn";
    case ScalarType::Float8_e5m2fnuz: return "Float8_e5m2fnuz";
    case ScalarType::Float8_e4m3fnuz: return "Float8_e4m3fnuz";
    case ScalarType::UInt16: return "UInt16";
    case ScalarType::UInt32: return "UInt32";
    case ScalarType::UInt64: return "UInt64";
    case ScalarType::Undefined: return "Undefined";
  }
  return "Unknown";
}

bool is_valid_scalar_type(int value) {
  return value >= 0 && value < static_cast<int>(ScalarType::Undefined) &&
         element_size(static_cast<ScalarType>(value)) != 0;
}

}  // namespace etkit::runtime
