// C++ tests of the XNNPACK delegate through etkit's BackendInterface, with payloads built here with
// the flatc-generated builders (the same wire layout ExecuTorch's XNNPACK preprocess writes).
// Prints one line per test and closes with "N passed, M failed"; exits non-zero on any failure.
// ETKIT_XNNPACK_TEST_TRACE=1 logs each byte flip of the corruption test to stderr and writes the
// payload being tried to /tmp/etkit_xnnpack_flip.bin (to find the input of a crash).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/tensor.h"
#include "etkit_xnnpack/register.h"
#include "xnnpack_graph_generated.h"

namespace fb = etkit_xnnpack::fb;
using namespace etkit::runtime;

namespace {

int g_failed_checks = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::printf("    CHECK failed at line %d: %s\n", __LINE__, #cond);       \
      ++g_failed_checks;                                                       \
    }                                                                          \
  } while (0)

constexpr uint32_t kInvalidId = 0xFFFFFFFFu;
constexpr uint32_t kIn = 1, kOut = 2;  // XNN_VALUE_FLAG_EXTERNAL_INPUT / OUTPUT

// --------------------------------------------------------------------------- payload building

struct GraphSpec {
  std::vector<std::function<flatbuffers::Offset<fb::XValue>(flatbuffers::FlatBufferBuilder&)>> values;
  std::vector<std::function<flatbuffers::Offset<fb::XNode>(flatbuffers::FlatBufferBuilder&)>> nodes;
  std::vector<std::pair<std::vector<uint8_t>, std::string>> constants;  // bytes (or empty) + named key
  uint32_t num_externs = 0;
};

auto tensor_value(std::vector<uint32_t> dims, uint32_t id, uint32_t const_idx = 0, uint32_t ext = kInvalidId,
                  uint32_t flags = 0) {
  return [=](flatbuffers::FlatBufferBuilder& b) {
    auto tv = fb::CreateXNNTensorValue(b, fb::XNNDatatype::xnn_datatype_fp32, uint32_t(dims.size()),
                                       b.CreateVector(dims), const_idx, ext, flags, id);
    return fb::CreateXValue(b, fb::XValueUnion::XNNTensorValue, tv.Union());
  };
}

std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

void put_le(std::vector<uint8_t>& buf, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) buf[at + i] = uint8_t(v >> (8 * i));
}

/// XH00 header + flatbuffer + 16-byte aligned constant section (ExecuTorch's serialize_xnnpack_binary);
/// with with_header=false only the flatbuffer (constants must then be named).
std::vector<uint8_t> build_payload(const GraphSpec& spec, bool with_header = true) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::XValue>> values;
  for (auto& v : spec.values) values.push_back(v(b));
  std::vector<flatbuffers::Offset<fb::XNode>> nodes;
  for (auto& n : spec.nodes) nodes.push_back(n(b));
  std::vector<uint8_t> constant_section;
  std::vector<flatbuffers::Offset<fb::ConstantDataOffset>> offsets{fb::CreateConstantDataOffset(b, 0, 0)};
  for (auto& c : spec.constants) {
    if (!c.second.empty()) {
      offsets.push_back(fb::CreateConstantDataOffset(b, UINT64_MAX, 0, b.CreateString(c.second)));
      continue;
    }
    offsets.push_back(fb::CreateConstantDataOffset(b, constant_section.size(), c.first.size()));
    constant_section.insert(constant_section.end(), c.first.begin(), c.first.end());
    constant_section.resize((constant_section.size() + 15) / 16 * 16, 0);
  }
  auto graph = fb::CreateXNNGraph(b, b.CreateString("0"), b.CreateVector(nodes), b.CreateVector(values),
                                  spec.num_externs, 0, 0, b.CreateVector(offsets));
  b.Finish(graph, "XN01");
  std::vector<uint8_t> fbuf(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  if (!with_header) return fbuf;
  const size_t header = 32, fb_padded = (fbuf.size() + 15) / 16 * 16;
  std::vector<uint8_t> out(header + fb_padded + constant_section.size(), 0);
  std::memcpy(&out[4], "XH00", 4);
  put_le(out, 8, 30, 2);
  put_le(out, 10, header, 4);
  put_le(out, 14, fbuf.size(), 4);
  put_le(out, 18, header + fb_padded, 4);
  put_le(out, 22, constant_section.size(), 8);
  std::memcpy(&out[header], fbuf.data(), fbuf.size());
  if (!constant_section.empty()) std::memcpy(&out[header + fb_padded], constant_section.data(), constant_section.size());
  return out;
}

// y = relu(x @ W^T + b), x [N, 4] (external 0), W [3, 4], b [3], y [N, 3] (external 1).
const std::vector<float> kW = {0.5f, -1.f, 2.f, 0.25f, 1.f, 1.f, -1.f, 0.f, -0.5f, 0.75f, 0.1f, 3.f};
const std::vector<float> kB = {0.1f, -0.2f, 0.3f};

/// `max_batch`: the input's and output's first dim in the payload (their upper bound).
GraphSpec linear_relu_spec(bool named_weight = false, uint32_t max_batch = 2) {
  GraphSpec s;
  s.num_externs = 2;
  s.values = {tensor_value({max_batch, 4}, 0, 0, 0, kIn), tensor_value({3, 4}, 1, 1), tensor_value({3}, 2, 2),
              tensor_value({max_batch, 3}, 3, 0, 1, kOut)};
  s.constants = {{named_weight ? std::vector<uint8_t>{} : float_bytes(kW), named_weight ? "w" : ""},
                 {float_bytes(kB), ""}};
  s.nodes = {[](flatbuffers::FlatBufferBuilder& b) {
    auto fc = fb::CreateXNNFullyConnected(b, 0, 1, 2, 3, 0);
    return fb::CreateXNode(b, fb::XNodeUnion::XNNFullyConnected, fc.Union(), 7,
                           fb::CreateOutputMinMax(b, 0.f, INFINITY));
  }};
  return s;
}

std::vector<float> linear_relu_reference(const std::vector<float>& x, size_t n) {
  std::vector<float> y(n * 3);
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < 3; ++o) {
      float acc = kB[o];
      for (size_t k = 0; k < 4; ++k) acc += x[i * 4 + k] * kW[o * 4 + k];
      y[i * 3 + o] = acc > 0 ? acc : 0;
    }
  return y;
}

// --------------------------------------------------------------------------- runtime-side helpers

/// A float tensor that owns its storage; capacity for `capacity` elements.
struct OwnedTensor {
  std::vector<float> data;
  std::vector<SizesType> sizes;
  std::vector<DimOrderType> order;
  std::vector<StridesType> strides;
  Tensor tensor;
  EValue value;
  OwnedTensor(std::vector<SizesType> s, size_t capacity, ScalarType type = ScalarType::Float,
              TensorShapeDynamism dyn = TensorShapeDynamism::DYNAMIC_BOUND)
      : data(capacity * 2, 0.f), sizes(s), order(s.size()), strides(s.size()) {
    for (size_t i = 0; i < s.size(); ++i) order[i] = DimOrderType(i);
    tensor = Tensor(type, s.size(), sizes.data(), data.data(), order.data(), strides.data(), dyn);
    tensor.recompute_strides_and_numel();
    tensor.set_capacity_nbytes(capacity * 4);
    value = EValue(&tensor);
  }
};

struct MapOfBytes final : NamedDataMap {
  std::map<std::string, std::vector<uint8_t>> entries;
  Result<FreeableBuffer> get_data(const char* key) const override {
    auto it = entries.find(key);
    if (it == entries.end()) return set_error(Error::NotFound, "no named data '%s'", key);
    return FreeableBuffer(it->second.data(), it->second.size(), nullptr);
  }
  Result<size_t> get_num_keys() const override { return entries.size(); }
  Result<const char*> get_key(size_t i) const override {
    if (i >= entries.size()) return Error::InvalidArgument;
    auto it = entries.begin();
    std::advance(it, i);
    return it->first.c_str();
  }
};

BackendInterface* backend() { return get_backend("XnnpackBackend"); }

Result<DelegateHandle*> init_payload(const std::vector<uint8_t>& bytes, const NamedDataMap* named = nullptr) {
  BackendInitContext ctx(nullptr, named, "forward");
  FreeableBuffer processed(bytes.data(), bytes.size(), nullptr);
  return backend()->init(ctx, &processed, Span<const CompileSpec>());
}

Error run(DelegateHandle* h, std::vector<EValue*> args) {
  BackendExecutionContext ctx(nullptr, "forward");
  return backend()->execute(ctx, h, Span<EValue*>(args.data(), args.size()));
}

bool close(const float* a, const std::vector<float>& b, float tol = 1e-5f) {
  for (size_t i = 0; i < b.size(); ++i)
    if (std::fabs(a[i] - b[i]) > tol) return false;
  return true;
}

// --------------------------------------------------------------------------- tests

void test_registration_is_idempotent() {
  CHECK(etkit_xnnpack_register_backends() == 0);
  CHECK(etkit_xnnpack_register_backends() == 0);
  CHECK(backend() != nullptr);
  CHECK(backend()->is_available());
}

void test_linear_relu_matches_reference_and_follows_shape_changes() {
  auto payload = build_payload(linear_relu_spec(/*named_weight=*/false, /*max_batch=*/5));
  auto h = init_payload(payload);
  CHECK(h.ok());
  if (!h.ok()) return std::printf("    %s\n", last_error_message()), void();
  OwnedTensor x({2, 4}, 6 * 4), y({2, 3}, 6 * 3);
  std::vector<float> xv = {1, 2, 3, 4, -1, 0.5f, 2, -3};
  std::memcpy(x.data.data(), xv.data(), xv.size() * 4);
  CHECK(run(h.get(), {&x.value, &y.value}) == Error::Ok);
  CHECK(close(y.data.data(), linear_relu_reference(xv, 2)));
  // Batch 5: the delegate reshapes the runtime and resizes the output.
  std::vector<float> xv5(20);
  for (size_t i = 0; i < 20; ++i) xv5[i] = float(i % 7) - 3.f;
  std::memcpy(x.data.data(), xv5.data(), 80);
  x.sizes[0] = 5;
  CHECK(x.tensor.resize(Span<const SizesType>(x.sizes.data(), 2)) == Error::Ok);
  CHECK(run(h.get(), {&x.value, &y.value}) == Error::Ok);
  CHECK(y.tensor.size(0) == 5 && y.tensor.size(1) == 3);
  CHECK(close(y.data.data(), linear_relu_reference(xv5, 5)));
  // Batch 6 is above the bound the payload declares (5): refused, naming both shapes.
  x.sizes[0] = 6;
  CHECK(x.tensor.resize(Span<const SizesType>(x.sizes.data(), 2)) == Error::Ok);
  CHECK(run(h.get(), {&x.value, &y.value}) == Error::InvalidArgument);
  CHECK(std::strstr(last_error_message(), "shape [6, 4] but the delegate was built for at most [5, 4]") != nullptr);
  // Back within the bound: runs again.
  x.sizes[0] = 2;
  std::memcpy(x.data.data(), xv.data(), xv.size() * 4);
  CHECK(x.tensor.resize(Span<const SizesType>(x.sizes.data(), 2)) == Error::Ok);
  CHECK(run(h.get(), {&x.value, &y.value}) == Error::Ok);
  CHECK(y.tensor.size(0) == 2 && close(y.data.data(), linear_relu_reference(xv, 2)));
  backend()->destroy(h.get());
}

void test_named_constant_comes_from_named_data_map() {
  MapOfBytes named;
  named.entries["w"] = float_bytes(kW);
  auto payload = build_payload(linear_relu_spec(/*named_weight=*/true));
  auto h = init_payload(payload, &named);
  CHECK(h.ok());
  if (!h.ok()) return std::printf("    %s\n", last_error_message()), void();
  OwnedTensor x({2, 4}, 8), y({2, 3}, 6);
  std::vector<float> xv = {1, 2, 3, 4, -1, 0.5f, 2, -3};
  std::memcpy(x.data.data(), xv.data(), 32);
  CHECK(run(h.get(), {&x.value, &y.value}) == Error::Ok);
  CHECK(close(y.data.data(), linear_relu_reference(xv, 2)));
  backend()->destroy(h.get());

  auto missing = init_payload(payload, nullptr);  // no named data at all
  CHECK(!missing.ok());
  CHECK(std::strstr(last_error_message(), "named data 'w'") != nullptr);
}

void test_bare_flatbuffer_add_with_threads() {
  GraphSpec s;
  s.num_externs = 3;
  s.values = {tensor_value({2, 3}, 0, 0, 0, kIn), tensor_value({1, 3}, 1, 0, 1, kIn),
              tensor_value({2, 3}, 2, 0, 2, kOut)};
  s.nodes = {[](flatbuffers::FlatBufferBuilder& b) {
    auto add = fb::Create_XNNNode2x1(b, 0, 1, 2, 0);
    return fb::CreateXNode(b, fb::XNodeUnion::XNNAdd, add.Union(), 0);
  }};
  CHECK(backend()->set_option("num_threads", 2) == Error::Ok);
  auto h = init_payload(build_payload(s, /*with_header=*/false));
  CHECK(backend()->set_option("num_threads", 1) == Error::Ok);
  CHECK(h.ok());
  if (!h.ok()) return std::printf("    %s\n", last_error_message()), void();
  OwnedTensor a({2, 3}, 6), b({1, 3}, 3), z({2, 3}, 6);
  for (int i = 0; i < 6; ++i) a.data[i] = float(i);
  for (int i = 0; i < 3; ++i) b.data[i] = 10.f * float(i + 1);
  CHECK(run(h.get(), {&a.value, &b.value, &z.value}) == Error::Ok);
  CHECK(close(z.data.data(), {10, 21, 32, 13, 24, 35}));
  backend()->destroy(h.get());
}

/// A scalar is a [1] value in the payload; the program's tensors are 0-dim (reductions, mean losses).
void test_zero_dim_tensors_bind_to_one_element_values() {
  GraphSpec s;
  s.num_externs = 3;
  s.values = {tensor_value({1}, 0, 0, 0, kIn), tensor_value({1}, 1, 0, 1, kIn), tensor_value({1}, 2, 0, 2, kOut)};
  s.nodes = {[](flatbuffers::FlatBufferBuilder& b) {
    auto add = fb::Create_XNNNode2x1(b, 0, 1, 2, 0);
    return fb::CreateXNode(b, fb::XNodeUnion::XNNAdd, add.Union(), 0);
  }};
  auto h = init_payload(build_payload(s));
  CHECK(h.ok());
  if (!h.ok()) return std::printf("    %s\n", last_error_message()), void();
  OwnedTensor a({}, 1, ScalarType::Float, TensorShapeDynamism::STATIC), b({1}, 1),
      z({}, 1, ScalarType::Float, TensorShapeDynamism::STATIC);
  a.data[0] = 1.5f;
  b.data[0] = 2.f;
  CHECK(run(h.get(), {&a.value, &b.value, &z.value}) == Error::Ok);
  CHECK(z.tensor.dim() == 0 && close(z.data.data(), {3.5f}));
  backend()->destroy(h.get());
}

void test_set_option_rejects_unknown_key_and_bad_thread_count() {
  CHECK(backend()->set_option("no_such_option", 1) == Error::NotSupported);
  CHECK(backend()->set_option("num_threads", 0) == Error::InvalidArgument);
}

void test_wrong_argument_dtype_is_rejected() {
  auto h = init_payload(build_payload(linear_relu_spec()));
  CHECK(h.ok());
  if (!h.ok()) return;
  OwnedTensor x({2, 4}, 8, ScalarType::Int), y({2, 3}, 6);
  CHECK(run(h.get(), {&x.value, &y.value}) == Error::InvalidArgument);
  CHECK(std::strstr(last_error_message(), "dtype") != nullptr);
  CHECK(run(h.get(), {&x.value}) == Error::InvalidArgument);  // missing output argument
  backend()->destroy(h.get());
}

void test_undefined_value_names_the_node() {
  GraphSpec s = linear_relu_spec();
  s.nodes = {[](flatbuffers::FlatBufferBuilder& b) {
    auto fc = fb::CreateXNNFullyConnected(b, 0, 42, 2, 3, 0);
    return fb::CreateXNode(b, fb::XNodeUnion::XNNFullyConnected, fc.Union(), 7);
  }};
  auto h = init_payload(build_payload(s));
  CHECK(!h.ok() && h.error() == Error::InvalidProgram);
  CHECK(std::strstr(last_error_message(), "node 0 (XNNFullyConnected") != nullptr);
  CHECK(std::strstr(last_error_message(), "value id 42") != nullptr);
}

void test_constant_outside_section_is_rejected() {
  GraphSpec s = linear_relu_spec();
  s.constants[0].first.resize(8);  // W needs 48 bytes
  auto h = init_payload(build_payload(s));
  CHECK(!h.ok());
  CHECK(std::strstr(last_error_message(), "value 1") != nullptr);
}

void test_corrupt_payloads_fail_cleanly() {
  const auto good = build_payload(linear_relu_spec());
  // Truncations.
  for (size_t n : {size_t(0), size_t(3), size_t(12), size_t(31), good.size() / 2, good.size() - 1}) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    auto h = init_payload(cut);
    if (n < good.size() - 1) CHECK(!h.ok());
    if (h.ok()) backend()->destroy(h.get());
  }
  // Unknown magic.
  auto bad = good;
  std::memcpy(&bad[4], "ZZZZ", 4);
  auto h = init_payload(bad);
  CHECK(!h.ok() && h.error() == Error::DelegateInvalidCompatibility);
  CHECK(std::strstr(last_error_message(), "ZZZZ") != nullptr);
  // Header offsets past the end.
  bad = good;
  put_le(bad, 10, 1u << 30, 4);
  CHECK(!init_payload(bad).ok());
  // Every single-byte corruption of the flatbuffer either fails init with a message or still runs.
  size_t rejected = 0, accepted = 0;
  for (size_t i = 32; i < good.size(); ++i) {
    for (uint8_t pattern : {uint8_t(0xFF), uint8_t(0x01)}) {
      bad = good;
      bad[i] ^= pattern;
      if (std::getenv("ETKIT_XNNPACK_TEST_TRACE")) {
        std::fprintf(stderr, "flip byte %zu ^ 0x%02x\n", i, pattern);
        if (FILE* f = std::fopen("/tmp/etkit_xnnpack_flip.bin", "wb")) {
          std::fwrite(bad.data(), 1, bad.size(), f);
          std::fclose(f);
        }
      }
      auto r = init_payload(bad);
      if (!r.ok()) {
        ++rejected;
        CHECK(last_error_message()[0] != '\0');
        continue;
      }
      ++accepted;
      OwnedTensor x({2, 4}, 64), y({2, 3}, 64);
      (void)run(r.get(), {&x.value, &y.value});
      backend()->destroy(r.get());
    }
  }
  std::printf("    byte flips: %zu rejected, %zu accepted\n", rejected, accepted);
  CHECK(rejected > 0);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // keep every line if a test crashes
  const std::pair<const char*, void (*)()> tests[] = {
      {"registration_is_idempotent", test_registration_is_idempotent},
      {"linear_relu_matches_reference_and_follows_shape_changes",
       test_linear_relu_matches_reference_and_follows_shape_changes},
      {"named_constant_comes_from_named_data_map", test_named_constant_comes_from_named_data_map},
      {"bare_flatbuffer_add_with_threads", test_bare_flatbuffer_add_with_threads},
      {"zero_dim_tensors_bind_to_one_element_values", test_zero_dim_tensors_bind_to_one_element_values},
      {"set_option_rejects_unknown_key_and_bad_thread_count", test_set_option_rejects_unknown_key_and_bad_thread_count},
      {"wrong_argument_dtype_is_rejected", test_wrong_argument_dtype_is_rejected},
      {"undefined_value_names_the_node", test_undefined_value_names_the_node},
      {"constant_outside_section_is_rejected", test_constant_outside_section_is_rejected},
      {"corrupt_payloads_fail_cleanly", test_corrupt_payloads_fail_cleanly},
  };
  int passed = 0, failed = 0;
  for (const auto& t : tests) {
    const int before = g_failed_checks;
    t.second();
    const bool ok = g_failed_checks == before;
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", t.first);
    (ok ? passed : failed)++;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
