// Bundled programs (.bpte): checking, program extraction, loading test inputs and verifying outputs.
// See include/etkit/extension/devtools/bundled_program.h; format: schema/bundled_program.fbs.
//
// Built into the core runtime library (no exceptions, no heap allocation): a .bpte is read in place.
#include "etkit/runtime/float16.h"
#include "etkit/extension/devtools/bundled_program.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "bundled_program_generated.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/program.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"

namespace etkit::bundled_program {

using runtime::DimOrderType;
using runtime::EValue;
using runtime::ScalarType;
using runtime::set_error;
using runtime::SizesType;
using runtime::StridesType;
using runtime::Tensor;
using runtime::kTensorDimensionLimit;
namespace bfb = ::etkit::fb::bundled;
using ::etkit::runtime::bf16_to_float;
using ::etkit::runtime::half_to_float;

namespace {

constexpr size_t kNoIndex = SIZE_MAX;

// ---- where in the file: "method_test_suites[0].test_cases[1].inputs[2]" ---------------------------

struct Path {
  char text[160];
};

Path path_of(size_t suite, size_t test_case = kNoIndex, const char* list = nullptr, size_t item = kNoIndex) {
  Path p;
  int n = std::snprintf(p.text, sizeof(p.text), "method_test_suites[%zu]", suite);
  if (test_case != kNoIndex && n > 0 && size_t(n) < sizeof(p.text)) {
    n += std::snprintf(p.text + n, sizeof(p.text) - n, ".test_cases[%zu]", test_case);
  }
  if (list != nullptr && n > 0 && size_t(n) < sizeof(p.text)) {
    std::snprintf(p.text + n, sizeof(p.text) - n, ".%s[%zu]", list, item);
  }
  return p;
}

void format_sizes(char* out, size_t cap, const SizesType* sizes, size_t rank) {
  size_t n = 0;
  n += std::snprintf(out + n, cap - n, "[");
  for (size_t i = 0; i < rank && n < cap; ++i) {
    n += std::snprintf(out + n, cap - n, i ? ", %d" : "%d", int(sizes[i]));
  }
  if (n < cap) std::snprintf(out + n, cap - n, "]");
}

flatbuffers::Verifier::Options verifier_options() {
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 64;
  opts.max_tables = 100000000;
  return opts;
}

// ---- structure: the flatbuffers verifier, narrowed to the first part that fails -----------------

// Generated tables derive privately from flatbuffers::Table; the root-level checks below need its
// field accessors (the object is a Table at the same address).
const flatbuffers::Table* as_table(const void* p) { return static_cast<const flatbuffers::Table*>(p); }

Error structure_error(const uint8_t* data, size_t size) {
  // Called after VerifyBundledProgramBuffer failed: find which part is broken, top-down.
  flatbuffers::Verifier v(data, size, verifier_options());
  const auto* root = bfb::GetBundledProgram(data);
  const flatbuffers::Table* t = as_table(root);
  if (!t->VerifyTableStart(v)) {
    return set_error(Error::InvalidProgram,
                     "bundled program: the root table (at offset %u) lies outside the %zu-byte file or its "
                     "field table is corrupted: the file is truncated or corrupted",
                     unsigned(flatbuffers::ReadScalar<uint32_t>(data)), size);
  }
  if (!t->VerifyField<uint32_t>(v, bfb::BundledProgram::VT_VERSION, 4)) {
    return set_error(Error::InvalidProgram, "bundled program: the version field is outside the file");
  }
  if (!t->VerifyOffset(v, bfb::BundledProgram::VT_PROGRAM) || !v.VerifyVector(root->program())) {
    return set_error(Error::InvalidProgram,
                     "bundled program: the embedded program (field 'program') runs past the end of the "
                     "%zu-byte file or its offset is corrupted: the file is truncated or corrupted",
                     size);
  }
  if (!t->VerifyOffset(v, bfb::BundledProgram::VT_METHOD_TEST_SUITES) || !v.VerifyVector(root->method_test_suites())) {
    return set_error(Error::InvalidProgram,
                     "bundled program: the list of method test suites runs past the end of the %zu-byte file "
                     "or its offset is corrupted",
                     size);
  }
  const auto* suites = root->method_test_suites();
  for (size_t s = 0; suites != nullptr && s < suites->size(); ++s) {
    const bfb::BundledMethodTestSuite* suite = suites->Get(flatbuffers::uoffset_t(s));
    flatbuffers::Verifier vs(data, size, verifier_options());
    if (suite->Verify(vs)) continue;
    // Inside the suite: its own fields, then each test case, then each value.
    flatbuffers::Verifier vt(data, size, verifier_options());
    const flatbuffers::Table* st = as_table(suite);
    if (!st->VerifyTableStart(vt) ||
        !st->VerifyOffset(vt, bfb::BundledMethodTestSuite::VT_METHOD_NAME) || !vt.VerifyString(suite->method_name()) ||
        !st->VerifyOffset(vt, bfb::BundledMethodTestSuite::VT_TEST_CASES) || !vt.VerifyVector(suite->test_cases())) {
      return set_error(Error::InvalidProgram,
                       "bundled program: %s (method name or list of test cases) lies outside the file or is "
                       "corrupted",
                       path_of(s).text);
    }
    const auto* cases = suite->test_cases();
    for (size_t c = 0; cases != nullptr && c < cases->size(); ++c) {
      const bfb::BundledMethodTestCase* tc = cases->Get(flatbuffers::uoffset_t(c));
      flatbuffers::Verifier vc(data, size, verifier_options());
      const flatbuffers::Table* ct = as_table(tc);
      if (!ct->VerifyTableStart(vc) ||
          !ct->VerifyOffset(vc, bfb::BundledMethodTestCase::VT_INPUTS) || !vc.VerifyVector(tc->inputs()) ||
          !ct->VerifyOffset(vc, bfb::BundledMethodTestCase::VT_EXPECTED_OUTPUTS) ||
          !vc.VerifyVector(tc->expected_outputs())) {
        return set_error(Error::InvalidProgram,
                         "bundled program: %s (its lists of inputs and expected outputs) lies outside the file "
                         "or is corrupted",
                         path_of(s, c).text);
      }
      const char* lists[2] = {"inputs", "expected_outputs"};
      const flatbuffers::Vector<flatbuffers::Offset<bfb::Value>>* values[2] = {tc->inputs(), tc->expected_outputs()};
      for (int l = 0; l < 2; ++l) {
        for (size_t k = 0; values[l] != nullptr && k < values[l]->size(); ++k) {
          flatbuffers::Verifier vv(data, size, verifier_options());
          if (!values[l]->Get(flatbuffers::uoffset_t(k))->Verify(vv)) {
            return set_error(Error::InvalidProgram,
                             "bundled program: %s (a tensor or scalar) lies outside the file or is corrupted",
                             path_of(s, c, lists[l], k).text);
          }
        }
      }
    }
    return set_error(Error::InvalidProgram, "bundled program: %s is corrupted", path_of(s).text);
  }
  return set_error(Error::InvalidProgram,
                   "bundled program: the %zu-byte flatbuffer failed verification: the file is truncated or "
                   "corrupted",
                   size);
}

// ---- contents: what the verifier does not check ------------------------------------------------

/// Checks a bundled tensor and fills rank/sizes/dim_order (dim_order defaults to row-major) and nbytes.
struct TensorFacts {
  ScalarType type;
  size_t rank;
  SizesType sizes[kTensorDimensionLimit];
  DimOrderType dim_order[kTensorDimensionLimit];
  size_t nbytes;
};

Error tensor_facts(const bfb::Tensor* t, const Path& where, TensorFacts* out) {
  int st = static_cast<int>(t->scalar_type());
  if (!runtime::is_valid_scalar_type(st) || runtime::element_size(ScalarType(st)) == 0) {
    return set_error(Error::InvalidProgram, "bundled program: %s: scalar type %d is not one this runtime knows",
                     where.text, st);
  }
  out->type = ScalarType(st);
  const auto* sizes = t->sizes();
  out->rank = sizes == nullptr ? 0 : sizes->size();
  if (out->rank > kTensorDimensionLimit) {
    return set_error(Error::InvalidProgram, "bundled program: %s: rank %zu is above the limit of %zu", where.text,
                     out->rank, kTensorDimensionLimit);
  }
  size_t numel = 1;
  // Strides are int32 and skip zero sizes: the product of the non-zero sizes must fit (it does for any
  // tensor whose bytes are in the file, unless a zero size hides the others).
  int32_t extent = 1;
  for (size_t d = 0; d < out->rank; ++d) {
    int32_t s = sizes->Get(flatbuffers::uoffset_t(d));
    if (s < 0) {
      return set_error(Error::InvalidProgram, "bundled program: %s: size %d of dim %zu is negative", where.text,
                       int(s), d);
    }
    out->sizes[d] = s;
    if (__builtin_mul_overflow(numel, size_t(s), &numel) || __builtin_mul_overflow(extent, s > 0 ? s : 1, &extent)) {
      return set_error(Error::InvalidProgram, "bundled program: %s: the shape's element count overflows", where.text);
    }
  }
  if (__builtin_mul_overflow(numel, runtime::element_size(out->type), &out->nbytes)) {
    return set_error(Error::InvalidProgram, "bundled program: %s: the tensor's byte size overflows", where.text);
  }
  const auto* order = t->dim_order();
  if (order == nullptr || (order->size() == 0 && out->rank > 0)) {
    for (size_t d = 0; d < out->rank; ++d) out->dim_order[d] = DimOrderType(d);
  } else {
    if (order->size() != out->rank) {
      return set_error(Error::InvalidProgram, "bundled program: %s: dim_order has %u entries for rank %zu", where.text,
                       unsigned(order->size()), out->rank);
    }
    uint32_t seen = 0;
    for (size_t d = 0; d < out->rank; ++d) {
      uint8_t o = order->Get(flatbuffers::uoffset_t(d));
      if (o >= out->rank || (seen & (1u << o))) {
        return set_error(Error::InvalidProgram, "bundled program: %s: dim_order is not a permutation of 0..%zu",
                         where.text, out->rank - 1);
      }
      seen |= 1u << o;
      out->dim_order[d] = o;
    }
  }
  // ExecuTorch's writer stores the tensor's whole storage, which can be longer than the tensor.
  size_t have = t->data() == nullptr ? 0 : t->data()->size();
  // Kernels read the elements in place: they must be aligned to their size (the format aligns them to 16
  // bytes; only a corrupted offset breaks that).
  if (have > 0 && reinterpret_cast<uintptr_t>(t->data()->data()) % runtime::element_size(out->type) != 0) {
    return set_error(Error::InvalidProgram,
                     "bundled program: %s: tensor data is not aligned to its %zu-byte elements (the format aligns it "
                     "to 16 bytes): the file is corrupted, or was loaded at an address not aligned to 16",
                     where.text, runtime::element_size(out->type));
  }
  if (have < out->nbytes) {
    char shape[160];
    format_sizes(shape, sizeof(shape), out->sizes, out->rank);
    return set_error(Error::InvalidProgram, "bundled program: %s: tensor data has %zu bytes, shape %s of %s needs %zu",
                     where.text, have, shape, runtime::scalar_type_name(out->type), out->nbytes);
  }
  return Error::Ok;
}

Error check_value(const bfb::Value* value, const Path& where) {
  switch (value->val_type()) {
    case bfb::ValueUnion::Tensor: {
      const bfb::Tensor* t = value->val_as_Tensor();
      if (t == nullptr) break;
      TensorFacts facts;
      return tensor_facts(t, where, &facts);
    }
    case bfb::ValueUnion::Int:
      if (value->val_as_Int() == nullptr) break;
      return Error::Ok;
    case bfb::ValueUnion::Bool:
      if (value->val_as_Bool() == nullptr) break;
      return Error::Ok;
    case bfb::ValueUnion::Double:
      if (value->val_as_Double() == nullptr) break;
      return Error::Ok;
    default:
      return set_error(Error::InvalidProgram,
                       "bundled program: %s: value type %d is not Tensor, Int, Bool or Double (a newer format, or a "
                       "corrupted file)",
                       where.text, int(value->val_type()));
  }
  return set_error(Error::InvalidProgram, "bundled program: %s: the value is missing", where.text);
}

Error check_contents(const bfb::BundledProgram* bp) {
  const auto* program = bp->program();
  if (program == nullptr || program->size() < 8) {
    return set_error(Error::InvalidProgram,
                     "bundled program: the embedded program is missing or shorter than 8 bytes (%u bytes)",
                     program == nullptr ? 0u : unsigned(program->size()));
  }
  const auto* suites = bp->method_test_suites();
  for (size_t s = 0; suites != nullptr && s < suites->size(); ++s) {
    const bfb::BundledMethodTestSuite* suite = suites->Get(flatbuffers::uoffset_t(s));
    if (suite->method_name() == nullptr || suite->method_name()->size() == 0) {
      return set_error(Error::InvalidProgram, "bundled program: %s has no method name", path_of(s).text);
    }
    const auto* cases = suite->test_cases();
    for (size_t c = 0; cases != nullptr && c < cases->size(); ++c) {
      const bfb::BundledMethodTestCase* tc = cases->Get(flatbuffers::uoffset_t(c));
      const char* lists[2] = {"inputs", "expected_outputs"};
      const flatbuffers::Vector<flatbuffers::Offset<bfb::Value>>* values[2] = {tc->inputs(), tc->expected_outputs()};
      for (int l = 0; l < 2; ++l) {
        for (size_t k = 0; values[l] != nullptr && k < values[l]->size(); ++k) {
          ETKIT_CHECK_OK(check_value(values[l]->Get(flatbuffers::uoffset_t(k)), path_of(s, c, lists[l], k)));
        }
      }
    }
  }
  return Error::Ok;
}

// ---- helpers for a method --------------------------------------------------------------------------

const bfb::BundledProgram* root_of(const BundledProgramView& bundle) {
  return static_cast<const bfb::BundledProgram*>(bundle.root());
}

/// The name a method's suite is found under: `method_name`, or the method's own name without the
/// fallback suffix (a method that runs its fallback twin is still tested as itself).
void suite_name_for(const Method& method, const char* method_name, char* out, size_t cap) {
  const char* name = method_name != nullptr ? method_name : method.method_meta().name();
  if (name == nullptr) name = "";
  size_t n = std::strlen(name);
  size_t suffix = std::strlen(runtime::kFallbackMethodSuffix);
  if (method_name == nullptr && n >= suffix && std::strcmp(name + n - suffix, runtime::kFallbackMethodSuffix) == 0) {
    n -= suffix;
  }
  if (n >= cap) n = cap - 1;
  std::memcpy(out, name, n);
  out[n] = '\0';
}

Result<const bfb::BundledMethodTestCase*> find_test_case(const BundledProgramView& bundle, const char* name,
                                                         size_t test_case_index, size_t* suite_index) {
  const auto* suites = root_of(bundle)->method_test_suites();
  for (size_t s = 0; suites != nullptr && s < suites->size(); ++s) {
    const bfb::BundledMethodTestSuite* suite = suites->Get(flatbuffers::uoffset_t(s));
    if (std::strcmp(suite->method_name()->c_str(), name) != 0) continue;
    size_t n = suite->test_cases() == nullptr ? 0 : suite->test_cases()->size();
    if (test_case_index >= n) {
      return set_error(Error::InvalidArgument,
                       "bundled program: test case %zu of method '%s' does not exist: the method has %zu test "
                       "case(s) (indices 0..%zu)",
                       test_case_index, name, n, n == 0 ? 0 : n - 1);
    }
    *suite_index = s;
    return suite->test_cases()->Get(flatbuffers::uoffset_t(test_case_index));
  }
  char names[256];
  size_t used = 0;
  names[0] = '\0';
  for (size_t s = 0; suites != nullptr && s < suites->size() && used < sizeof(names); ++s) {
    used += std::snprintf(names + used, sizeof(names) - used, s ? ", '%s'" : "'%s'",
                          suites->Get(flatbuffers::uoffset_t(s))->method_name()->c_str());
  }
  return set_error(Error::NotFound, "bundled program has no test cases for method '%s'; it has test cases for: %s",
                   name, used ? names : "no method");
}

/// Row-major element `i` of a tensor whose layout is given by `strides` (in elements).
size_t offset_of(size_t i, size_t rank, const SizesType* sizes, const StridesType* strides) {
  size_t off = 0;
  for (size_t d = rank; d-- > 0;) {
    size_t s = size_t(sizes[d]);
    if (s == 0) return 0;
    off += (i % s) * size_t(strides[d]);
    i /= s;
  }
  return off;
}

/// The tensor's bytes; `empty` for a tensor without data (zero elements: nothing is read from it).
const uint8_t* tensor_bytes(const bfb::Tensor* t, const uint8_t* empty) {
  return t->data() != nullptr && t->data()->size() > 0 ? t->data()->data() : empty;
}

bool is_floating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

/// Element `off` of a buffer of type `t`, as a double (integers and bools by value).
double element_as_double(const void* base, size_t off, ScalarType t) {
  switch (t) {
    case ScalarType::Float: return static_cast<const float*>(base)[off];
    case ScalarType::Double: return static_cast<const double*>(base)[off];
    case ScalarType::Half: return half_to_float(static_cast<const uint16_t*>(base)[off]);
    case ScalarType::BFloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[off]);
    case ScalarType::Byte: case ScalarType::QUInt8: return static_cast<const uint8_t*>(base)[off];
    case ScalarType::Char: case ScalarType::QInt8: return static_cast<const int8_t*>(base)[off];
    case ScalarType::Short: return static_cast<const int16_t*>(base)[off];
    case ScalarType::Int: case ScalarType::QInt32: return static_cast<const int32_t*>(base)[off];
    case ScalarType::Long: return double(static_cast<const int64_t*>(base)[off]);
    case ScalarType::Bool: return static_cast<const uint8_t*>(base)[off] ? 1.0 : 0.0;
    case ScalarType::UInt16: return static_cast<const uint16_t*>(base)[off];
    case ScalarType::UInt32: return static_cast<const uint32_t*>(base)[off];
    case ScalarType::UInt64: return double(static_cast<const uint64_t*>(base)[off]);
    default: return 0.0;
  }
}

/// One output's comparison (the fields of VerifyReport's failed_*).
struct Comparison {
  bool passed = true;
  double max_abs_diff = 0.0;
  size_t mismatches = 0;
  size_t worst = 0;
  double expected_at_worst = 0.0;
  double actual_at_worst = 0.0;
};

void compare_elements(const TensorFacts& e, const void* e_data, const Tensor& a, double rtol, double atol,
                      Comparison* out) {
  StridesType e_strides[kTensorDimensionLimit];
  StridesType running = 1;
  for (size_t k = e.rank; k-- > 0;) {
    size_t d = e.dim_order[k];
    e_strides[d] = running;
    running *= e.sizes[d] > 0 ? e.sizes[d] : 1;
  }
  const size_t numel = a.numel();
  const size_t es = runtime::element_size(e.type);
  const bool floating = is_floating(e.type);
  bool have_worst = false;
  for (size_t i = 0; i < numel; ++i) {
    size_t eo = offset_of(i, e.rank, e.sizes, e_strides);
    size_t ao = offset_of(i, a.dim(), a.sizes().data(), a.strides().data());
    bool close;
    double x = element_as_double(e_data, eo, e.type);  // expected
    double y = element_as_double(a.const_data_ptr(), ao, e.type);  // actual
    double diff;
    if (floating) {
      if (std::isnan(x) && std::isnan(y)) {
        close = true;
        diff = 0.0;
      } else if (std::isinf(x) && std::isinf(y) && ((x > 0) == (y > 0))) {
        close = true;
        diff = 0.0;
      } else {
        diff = std::fabs(x - y);
        if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
        close = (rtol == 0 && atol == 0) ? x == y : (std::isfinite(diff) && diff <= atol + std::fabs(rtol * y));
      }
    } else {
      // Exact: compare the bytes (64-bit integers do not all fit a double).
      close = std::memcmp(static_cast<const uint8_t*>(e_data) + eo * es,
                          static_cast<const uint8_t*>(a.const_data_ptr()) + ao * es, es) == 0;
      diff = std::fabs(x - y);
      if (!close && diff == 0.0) diff = std::numeric_limits<double>::min();
    }
    if (!close) {
      out->passed = false;
      ++out->mismatches;
    }
    if (!have_worst || diff > out->max_abs_diff) {
      have_worst = true;
      out->max_abs_diff = diff;
      out->worst = i;
      out->expected_at_worst = x;
      out->actual_at_worst = y;
    }
  }
}

}  // namespace

bool is_bundled_program(const void* data, size_t size) {
  return data != nullptr && size >= 8 && bfb::BundledProgramBufferHasIdentifier(data);
}

Result<BundledProgramView> BundledProgramView::from(const void* data, size_t size) {
  if (data == nullptr) return set_error(Error::InvalidArgument, "bundled program: the buffer is null");
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  if (size < 8) {
    return set_error(Error::InvalidProgram, "bundled program: the file is %zu bytes long, too short to be a .bpte",
                     size);
  }
  if (!bfb::BundledProgramBufferHasIdentifier(data)) {
    char id[5] = {0};
    for (int i = 0; i < 4; ++i) id[i] = (bytes[4 + i] >= 32 && bytes[4 + i] < 127) ? char(bytes[4 + i]) : '?';
    return set_error(Error::InvalidProgram,
                     "not a bundled program: file identifier is '%s', expected '%s'%s", id,
                     bfb::BundledProgramIdentifier(),
                     std::memcmp(bytes + 4, "ET12", 4) == 0 ? " (this is a .pte program: load it as a program)" : "");
  }
  uint32_t root_offset = flatbuffers::ReadScalar<uint32_t>(bytes);
  if (root_offset < 8 || root_offset > size - 4) {
    return set_error(Error::InvalidProgram,
                     "bundled program: the root offset %u (bytes 0..3) is outside the %zu-byte file: the file is "
                     "truncated or corrupted",
                     unsigned(root_offset), size);
  }
  flatbuffers::Verifier verifier(bytes, size, verifier_options());
  if (!bfb::VerifyBundledProgramBuffer(verifier)) return structure_error(bytes, size);
  const bfb::BundledProgram* bp = bfb::GetBundledProgram(bytes);
  ETKIT_CHECK_OK(check_contents(bp));
  return BundledProgramView(bytes, size, bp);
}

uint32_t BundledProgramView::version() const { return root_of(*this)->version(); }

Span<const uint8_t> BundledProgramView::program() const {
  const auto* p = root_of(*this)->program();
  return {p->data(), p->size()};
}

size_t BundledProgramView::num_method_test_suites() const {
  const auto* suites = root_of(*this)->method_test_suites();
  return suites == nullptr ? 0 : suites->size();
}

const char* BundledProgramView::method_name(size_t index) const {
  if (index >= num_method_test_suites()) return "";
  return root_of(*this)->method_test_suites()->Get(flatbuffers::uoffset_t(index))->method_name()->c_str();
}

Result<size_t> BundledProgramView::num_test_cases(const char* method_name) const {
  size_t suite = 0;
  auto found = find_test_case(*this, method_name == nullptr ? "" : method_name, 0, &suite);
  if (found.ok()) {
    return size_t(root_of(*this)->method_test_suites()->Get(flatbuffers::uoffset_t(suite))->test_cases()->size());
  }
  if (found.error() == Error::InvalidArgument) return size_t(0);  // the suite exists but is empty
  return found.error();
}

Error get_program_data(const void* data, size_t size, const void** program_data, size_t* program_size) {
  if (data == nullptr || program_data == nullptr || program_size == nullptr) {
    return set_error(Error::InvalidArgument, "get_program_data: null pointer argument");
  }
  if (!is_bundled_program(data, size)) {
    *program_data = data;
    *program_size = size;
    return Error::Ok;
  }
  auto view = BundledProgramView::from(data, size);
  if (!view.ok()) return view.error();
  *program_data = view->program().data();
  *program_size = view->program().size();
  return Error::Ok;
}

Error load_bundled_input(Method& method, const BundledProgramView& bundle, size_t test_case_index,
                         const char* method_name) {
  char name[128];
  suite_name_for(method, method_name, name, sizeof(name));
  size_t suite = 0;
  auto found = find_test_case(bundle, name, test_case_index, &suite);
  if (!found.ok()) return found.error();
  const auto* inputs = found.get()->inputs();
  size_t n = inputs == nullptr ? 0 : inputs->size();
  if (n != method.inputs_size()) {
    return set_error(Error::InvalidArgument,
                     "bundled program: test case %zu of method '%s' has %zu input(s), the method takes %zu",
                     test_case_index, name, n, method.inputs_size());
  }
  for (size_t i = 0; i < n; ++i) {
    const bfb::Value* value = inputs->Get(flatbuffers::uoffset_t(i));
    Error e = Error::Ok;
    switch (value->val_type()) {
      case bfb::ValueUnion::Tensor: {
        TensorFacts f;
        ETKIT_CHECK_OK(tensor_facts(value->val_as_Tensor(), path_of(suite, test_case_index, "inputs", i), &f));
        StridesType strides[kTensorDimensionLimit];
        // The data is read, never written, by set_input; the Tensor type only holds mutable pointers.
        static uint8_t empty[16];
        Tensor t(f.type, f.rank, f.sizes, const_cast<uint8_t*>(tensor_bytes(value->val_as_Tensor(), empty)),
                 f.dim_order, strides);
        e = method.set_input(EValue(&t), i);
        break;
      }
      case bfb::ValueUnion::Int:
        e = method.set_input(EValue(int64_t(value->val_as_Int()->int_val())), i);
        break;
      case bfb::ValueUnion::Bool:
        e = method.set_input(EValue(bool(value->val_as_Bool()->bool_val())), i);
        break;
      case bfb::ValueUnion::Double:
        e = method.set_input(EValue(double(value->val_as_Double()->double_val())), i);
        break;
      default:
        return set_error(Error::InvalidProgram, "bundled program: %s: unsupported value type %d",
                         path_of(suite, test_case_index, "inputs", i).text, int(value->val_type()));
    }
    if (e != Error::Ok) {
      char detail[512];
      std::snprintf(detail, sizeof(detail), "%s", runtime::last_error_message());
      return set_error(e, "bundled program: test case %zu of method '%s' does not fit the method: %s",
                       test_case_index, name, detail);
    }
  }
  // As ExecuTorch's load_bundled_input: the ETDump's next runs say which test case they ran.
  if (runtime::EventTracer* tracer = method.event_tracer()) tracer->set_bundled_input_index(int32_t(test_case_index));
  return Error::Ok;
}

Error verify_method_outputs(Method& method, const BundledProgramView& bundle, size_t test_case_index, double rtol,
                            double atol, VerifyReport* report, const char* method_name) {
  VerifyReport local;
  VerifyReport& r = report != nullptr ? *report : local;
  r = VerifyReport();
  char name[128];
  suite_name_for(method, method_name, name, sizeof(name));
  size_t suite = 0;
  auto found = find_test_case(bundle, name, test_case_index, &suite);
  if (!found.ok()) return found.error();
  const auto* expected = found.get()->expected_outputs();
  size_t n = expected == nullptr ? 0 : expected->size();
  if (n == 0) {
    return set_error(Error::InvalidArgument,
                     "bundled program: test case %zu of method '%s' has no expected outputs to verify against "
                     "(it was bundled for running only)",
                     test_case_index, name);
  }
  if (n != method.outputs_size()) {
    return set_error(Error::InvalidArgument,
                     "bundled program: test case %zu of method '%s' has %zu expected output(s), the method returns "
                     "%zu",
                     test_case_index, name, n, method.outputs_size());
  }
  if (!(rtol >= 0) || !(atol >= 0)) {
    return set_error(Error::InvalidArgument, "verify_method_outputs: rtol (%g) and atol (%g) must be >= 0", rtol, atol);
  }
  r.num_outputs = n;
  const double inf = std::numeric_limits<double>::infinity();
  char why[640];
  why[0] = '\0';
  for (size_t i = 0; i < n; ++i) {
    const bfb::Value* value = expected->Get(flatbuffers::uoffset_t(i));
    const EValue& actual = method.get_output(i);
    Comparison c;
    char mismatch[512];
    mismatch[0] = '\0';
    if (value->val_type() == bfb::ValueUnion::Tensor) {
      TensorFacts f;
      ETKIT_CHECK_OK(tensor_facts(value->val_as_Tensor(), path_of(suite, test_case_index, "expected_outputs", i), &f));
      if (!actual.is_tensor()) {
        std::snprintf(mismatch, sizeof(mismatch), "expected a %s tensor, the method returned a %s",
                      runtime::scalar_type_name(f.type), runtime::tag_name(actual.tag()));
      } else {
        const Tensor& a = actual.to_tensor();
        bool same_shape = a.dim() == f.rank;
        for (size_t d = 0; same_shape && d < f.rank; ++d) same_shape = a.size(d) == f.sizes[d];
        if (a.scalar_type() != f.type || !same_shape) {
          char want[200], got[200];
          format_sizes(want, sizeof(want), f.sizes, f.rank);
          format_sizes(got, sizeof(got), a.sizes().data(), a.dim());
          std::snprintf(mismatch, sizeof(mismatch), "expected %s %s, the method returned %s %s",
                        runtime::scalar_type_name(f.type), want, runtime::scalar_type_name(a.scalar_type()), got);
        } else {
          static const uint8_t empty[16] = {0};
          compare_elements(f, tensor_bytes(value->val_as_Tensor(), empty), a, rtol, atol, &c);
          r.failed_numel = r.failed_output == SIZE_MAX && !c.passed ? a.numel() : r.failed_numel;
        }
      }
    } else {
      // A scalar output: equal values (doubles within tolerance).
      double x = 0;
      bool tag_ok = false;
      switch (value->val_type()) {
        case bfb::ValueUnion::Int: x = double(value->val_as_Int()->int_val()); tag_ok = actual.is_int(); break;
        case bfb::ValueUnion::Bool: x = value->val_as_Bool()->bool_val() ? 1 : 0; tag_ok = actual.is_bool(); break;
        case bfb::ValueUnion::Double: x = value->val_as_Double()->double_val(); tag_ok = actual.is_double(); break;
        default: break;
      }
      if (!tag_ok) {
        std::snprintf(mismatch, sizeof(mismatch), "expected a scalar of the bundled type, the method returned a %s",
                      runtime::tag_name(actual.tag()));
      } else {
        double y = actual.is_int() ? double(actual.to_int()) : actual.is_bool() ? (actual.to_bool() ? 1 : 0)
                                                                               : actual.to_double();
        c.max_abs_diff = std::fabs(x - y);
        c.passed = value->val_type() == bfb::ValueUnion::Double
                       ? (c.max_abs_diff <= atol + std::fabs(rtol * y) || (std::isnan(x) && std::isnan(y)))
                       : x == y;
        c.mismatches = c.passed ? 0 : 1;
        c.expected_at_worst = x;
        c.actual_at_worst = y;
        if (!c.passed) r.failed_numel = r.failed_output == SIZE_MAX ? 1 : r.failed_numel;
      }
    }
    if (mismatch[0] != '\0') {
      c.passed = false;
      c.max_abs_diff = inf;
      c.mismatches = 0;
    }
    if (i == 0 || c.max_abs_diff > r.max_abs_diff) {
      r.max_abs_diff = c.max_abs_diff;
      r.max_abs_diff_output = i;
    }
    if (!c.passed && r.failed_output == SIZE_MAX) {
      r.failed_output = i;
      r.failed_max_abs_diff = c.max_abs_diff;
      r.failed_mismatches = c.mismatches;
      r.failed_element = c.worst;
      r.failed_expected = c.expected_at_worst;
      r.failed_actual = c.actual_at_worst;
      if (mismatch[0] != '\0') {
        std::snprintf(why, sizeof(why), "%s", mismatch);
      } else {
        std::snprintf(why, sizeof(why),
                      "%zu of %zu element(s) outside atol=%g + rtol=%g * |actual|; largest absolute difference %.9g "
                      "at element %zu (expected %.9g, got %.9g)",
                      c.mismatches, r.failed_numel, atol, rtol, c.max_abs_diff, c.worst, c.expected_at_worst,
                      c.actual_at_worst);
      }
    }
  }
  r.passed = r.failed_output == SIZE_MAX;
  if (!r.passed) {
    return set_error(Error::NotFound,
                     "bundled test case %zu of method '%s' failed: output %zu differs from the expected output: %s",
                     test_case_index, name, r.failed_output, why);
  }
  return Error::Ok;
}

}  // namespace etkit::bundled_program
