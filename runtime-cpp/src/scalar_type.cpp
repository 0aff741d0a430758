// Element sizes and names of ScalarType, from the table generated from schema/scalar_type.fbs.
#include "etkit/runtime/scalar_type.h"

#include <type_traits>

#include "scalar_type_generated.h"  // flatc's etkit::fb::ScalarType, from the same schema

namespace etkit::runtime {

// The generated table must hold exactly the values flatc reads from the schema: each enumerator has the
// value of its schema enumerator, and there are as many as the schema has (a table generated from an older
// schema, or edited by hand, does not compile).
#define ETKIT_CHECK_SCALAR_TYPE(name, schema_name, bytes)                                        \
  static_assert(static_cast<int>(ScalarType::name) == static_cast<int>(fb::ScalarType::schema_name), \
                "scalar_type_table.h is stale: rerun scripts/gen_scalar_types.py");
ETKIT_FOR_EACH_SCALAR_TYPE(ETKIT_CHECK_SCALAR_TYPE)
#undef ETKIT_CHECK_SCALAR_TYPE
#define ETKIT_COUNT_SCALAR_TYPE(name, schema_name, bytes) +1
static_assert(0 ETKIT_FOR_EACH_SCALAR_TYPE(ETKIT_COUNT_SCALAR_TYPE) ==
                  std::extent_v<std::remove_reference_t<decltype(fb::EnumValuesScalarType())>>,
              "scalar_type_table.h is stale: rerun scripts/gen_scalar_types.py");
#undef ETKIT_COUNT_SCALAR_TYPE

size_t element_size(ScalarType type) {
  switch (type) {
#define ETKIT_SCALAR_TYPE_SIZE(name, schema_name, bytes) \
  case ScalarType::name:                                \
    return bytes;
    ETKIT_FOR_EACH_SCALAR_TYPE(ETKIT_SCALAR_TYPE_SIZE)
#undef ETKIT_SCALAR_TYPE_SIZE
  }
  return 0;
}

const char* scalar_type_name(ScalarType type) {
  switch (type) {
#define ETKIT_SCALAR_TYPE_NAME(name, schema_name, bytes) \
  case ScalarType::name:                                \
    return #name;
    ETKIT_FOR_EACH_SCALAR_TYPE(ETKIT_SCALAR_TYPE_NAME)
#undef ETKIT_SCALAR_TYPE_NAME
  }
  return "Unknown";
}

bool is_valid_scalar_type(int value) {
  return value >= INT8_MIN && value <= INT8_MAX && element_size(static_cast<ScalarType>(value)) != 0;
}

}  // namespace etkit::runtime
