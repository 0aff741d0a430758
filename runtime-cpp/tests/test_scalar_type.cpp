// ScalarType (scalar_type.h, generated from schema/scalar_type.fbs) against flatc's enum from the same schema:
// is_valid_scalar_type() accepts exactly the schema's values over the whole byte range, each with a size and a
// name; the values c10 has and the schema lacks (complex 8..10, Bits1x8..Bits8 18..21, Undefined 30) and
// kUndefinedScalarType are refused, with size 0 and the name "Unknown".
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <set>

#include "etkit/runtime/scalar_type.h"
#include "scalar_type_generated.h"
#include "test_check.h"

namespace rt = etkit::runtime;


int main() {
  std::set<int> schema;
  for (etkit::fb::ScalarType v : etkit::fb::EnumValuesScalarType()) schema.insert(static_cast<int>(v));

  for (int v = INT8_MIN - 1; v <= INT8_MAX + 1; ++v) {
    const bool valid = rt::is_valid_scalar_type(v);
    if (valid != (schema.count(v) == 1)) {
      std::fprintf(stderr, "value %d: is_valid_scalar_type says %d, the schema %s it\n", v, valid,
                   schema.count(v) ? "has" : "lacks");
      ++failures;
    }
    if (v < INT8_MIN || v > INT8_MAX) continue;
    const auto t = static_cast<rt::ScalarType>(v);
    const bool named = std::strcmp(rt::scalar_type_name(t), "Unknown") != 0;
    if ((rt::element_size(t) != 0) != valid || named != valid) {
      std::fprintf(stderr, "value %d: element_size %zu, name %s, in the schema: %d\n", v, rt::element_size(t),
                   rt::scalar_type_name(t), valid);
      ++failures;
    }
  }

  // c10's values the schema lacks, and the runtime's sentinel.
  for (int v : {8, 9, 10, 18, 19, 20, 21, 30}) CHECK(!rt::is_valid_scalar_type(v));
  CHECK(!rt::is_valid_scalar_type(static_cast<int>(rt::kUndefinedScalarType)));
  CHECK(rt::element_size(rt::kUndefinedScalarType) == 0);

  // Sizes and names of a few types, as c10 has them.
  CHECK(rt::element_size(rt::ScalarType::Float) == 4);
  CHECK(std::strcmp(rt::scalar_type_name(rt::ScalarType::Float), "Float") == 0);
  CHECK(rt::element_size(rt::ScalarType::Long) == 8 && rt::element_size(rt::ScalarType::Bool) == 1);
  CHECK(rt::element_size(rt::ScalarType::BFloat16) == 2 && rt::element_size(rt::ScalarType::QInt32) == 4);
  CHECK(std::strcmp(rt::scalar_type_name(rt::ScalarType::QUInt4x2), "QUInt4x2") == 0);
  CHECK(static_cast<int>(rt::ScalarType::UInt64) == static_cast<int>(etkit::fb::ScalarType::UINT64));

  if (failures == 0) std::printf("test_scalar_type: ok\n");
  return failures == 0 ? 0 : 1;
}
