// The generic libFuzzer target of a backend delegate's payload reader (docs/fuzzing.md). A plugin builds
// it with etkit_add_delegate_fuzzer() (cmake/etkitFuzz.cmake), which defines
//   ETKIT_FUZZ_BACKEND_ID  the backend id, e.g. "MyBackend"
//   ETKIT_FUZZ_REGISTER    the plugin's extern "C" int register function
//
// Each input is one delegate call as the runtime would make it: the payload goes straight to the backend's
// init() (what Method loading does with BackendDelegate.processed), and when init succeeds execute() runs
// once on zero-filled tensors of the shapes the case declares (the DelegateCall's arguments: the
// delegate's inputs, then its outputs), then destroy(). A refusal is a normal
// outcome; a sanitizer report, a crash, a hang or a leak is a finding.
//
// Test-case layout (little-endian; written by scripts/fuzz_corpus.py from real lowered programs):
//   u8  n_args (<= 32)
//   per argument (a tensor), in DelegateCall order:
//       u8 type    low 7 bits: ScalarType (schema/scalar_type.fbs); bit 7: DYNAMIC_BOUND (else STATIC)
//       u8 rank    (<= 8)
//       rank x u16 sizes
//   u8  n_compile_specs (<= 16), each: u8 key length, key bytes, u16 value length, value bytes
//   u8  n_named_data (<= 64), each:    u8 key length, key bytes, u32 length, bytes
//   the payload: every remaining byte
// A case whose header does not parse, or whose tensors need more than kMaxTensorBytes, is rejected
// (libFuzzer keeps it out of the corpus).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/memory_allocator.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/program.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"

#if !defined(ETKIT_FUZZ_BACKEND_ID) || !defined(ETKIT_FUZZ_REGISTER)
#error "define ETKIT_FUZZ_BACKEND_ID and ETKIT_FUZZ_REGISTER (etkit_add_delegate_fuzzer does)"
#endif

extern "C" int ETKIT_FUZZ_REGISTER(void);

namespace rt = etkit::runtime;

namespace {

constexpr size_t kMaxArgs = 32;
constexpr size_t kMaxRank = 8;
constexpr size_t kMaxSpecs = 16;
constexpr size_t kMaxNamed = 64;
// All tensors of one case together. The seeds' cases need under 2 KiB; a few MiB still lets a payload meet real
// activation sizes, while each rejected or accepted case stays cheap in time and in ASan's quarantine.
constexpr size_t kMaxTensorBytes = size_t{8} << 20;
constexpr size_t kArenaBytes = size_t{64} << 20;      // init()'s runtime allocator
constexpr size_t kTempBytes = size_t{16} << 20;       // execute()'s temp allocator
// What the runtime may use (set_memory_limit): a delegate must refuse a payload that claims more. Well under
// libFuzzer's own limit (-rss_limit_mb), because a delegate may hold a tensor more than once (a device buffer
// and its staging copy are both host memory on a CPU device) on top of its driver's and AddressSanitizer's own
// memory (docs/fuzzing.md).
constexpr uint64_t kMemoryLimit = uint64_t{256} << 20;

/// Reads the case header; every read is bounds-checked.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool u8(uint8_t* v) {
    if (end_ - p_ < 1) return false;
    *v = *p_++;
    return true;
  }
  bool u16(uint16_t* v) {
    if (end_ - p_ < 2) return false;
    *v = static_cast<uint16_t>(p_[0] | (p_[1] << 8));
    p_ += 2;
    return true;
  }
  bool u32(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    *v = static_cast<uint32_t>(p_[0]) | (static_cast<uint32_t>(p_[1]) << 8) |
         (static_cast<uint32_t>(p_[2]) << 16) | (static_cast<uint32_t>(p_[3]) << 24);
    p_ += 4;
    return true;
  }
  bool bytes(size_t n, const uint8_t** out) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    *out = p_;
    p_ += n;
    return true;
  }
  const uint8_t* rest() const { return p_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, FreeDeleter>;

/// `n` zeroed bytes (at least 64), 64-byte aligned, or null.
AlignedBytes aligned_zeroed(size_t n) {
  const size_t padded = n == 0 ? 64 : (n + 63) & ~size_t{63};
  AlignedBytes p(static_cast<uint8_t*>(std::aligned_alloc(64, padded)));
  if (p) std::memset(p.get(), 0, padded);
  return p;
}

struct OwnedTensor {
  rt::SizesType sizes[kMaxRank];
  rt::DimOrderType dim_order[kMaxRank];
  rt::StridesType strides[kMaxRank];
  AlignedBytes data;
  rt::Tensor tensor;
  rt::EValue value;
};

/// Named data of the case: key -> a heap copy of exactly the stored bytes (so overreads are caught).
class CaseNamedData final : public rt::NamedDataMap {
 public:
  struct Entry {
    std::string key;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries;

  rt::Result<rt::FreeableBuffer> get_data(const char* key) const override {
    for (const Entry& e : entries) {
      if (e.key == key) {
        // A fresh exact-size copy per request, released through the FreeableBuffer.
        auto* copy = static_cast<uint8_t*>(std::malloc(e.bytes.empty() ? 1 : e.bytes.size()));
        if (copy == nullptr) return rt::set_error(rt::Error::MemoryAllocationFailed, "fuzz: out of memory");
        if (!e.bytes.empty()) std::memcpy(copy, e.bytes.data(), e.bytes.size());
        return rt::FreeableBuffer(copy, e.bytes.size(), [](void*, void* data, size_t) { std::free(data); });
      }
    }
    return rt::set_error(rt::Error::NotFound, "fuzz: no named data '%s'", key);
  }
  rt::Result<size_t> get_num_keys() const override { return entries.size(); }
  rt::Result<const char*> get_key(size_t index) const override {
    if (index >= entries.size()) return rt::set_error(rt::Error::InvalidArgument, "fuzz: key index %zu", index);
    return entries[index].key.c_str();
  }
};

rt::BackendInterface* g_backend = nullptr;
AlignedBytes g_arena;
AlignedBytes g_temp;

bool read_tensor(Reader& r, OwnedTensor* t, size_t* total_bytes) {
  uint8_t type = 0, rank = 0;
  if (!r.u8(&type) || !r.u8(&rank) || rank > kMaxRank) return false;
  const int scalar = type & 0x7f;
  if (!rt::is_valid_scalar_type(scalar)) return false;
  const auto st = static_cast<rt::ScalarType>(scalar);
  const size_t elem = rt::element_size(st);
  if (elem == 0) return false;
  size_t numel = 1;
  for (uint8_t d = 0; d < rank; ++d) {
    uint16_t size = 0;
    if (!r.u16(&size)) return false;
    t->sizes[d] = size;
    t->dim_order[d] = d;
    numel *= size;
    if (numel * elem > kMaxTensorBytes) return false;
  }
  const size_t nbytes = numel * elem;
  *total_bytes += nbytes;
  if (*total_bytes > kMaxTensorBytes) return false;
  t->data = aligned_zeroed(nbytes);  // never null for an empty tensor either
  if (!t->data) return false;
  t->tensor = rt::Tensor(st, rank, t->sizes, t->data.get(), t->dim_order, t->strides,
                         (type & 0x80) ? rt::TensorShapeDynamism::DYNAMIC_BOUND : rt::TensorShapeDynamism::STATIC);
  t->value = rt::EValue(&t->tensor);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rt::set_memory_limit(kMemoryLimit);
  const int rc = ETKIT_FUZZ_REGISTER();
  g_backend = rt::get_backend(ETKIT_FUZZ_BACKEND_ID);
  if (rc != 0 || g_backend == nullptr) {
    std::fprintf(stderr, "fuzz: registering %s failed (%d): %s\n", ETKIT_FUZZ_BACKEND_ID, rc,
                 etkit_backend_registration_error());
    std::abort();
  }
  if (!g_backend->is_available()) {
    std::fprintf(stderr, "fuzz: %s is not available on this machine: %s\n", ETKIT_FUZZ_BACKEND_ID,
                 rt::last_error_message());
    std::abort();
  }
  g_arena = aligned_zeroed(kArenaBytes);
  g_temp = aligned_zeroed(kTempBytes);
  if (!g_arena || !g_temp) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(data, size);
  uint8_t n_args = 0;
  if (!r.u8(&n_args) || n_args > kMaxArgs) return -1;

  std::vector<std::unique_ptr<OwnedTensor>> tensors;
  size_t total_bytes = 0;
  for (size_t i = 0; i < n_args; ++i) {
    tensors.push_back(std::make_unique<OwnedTensor>());
    if (!read_tensor(r, tensors.back().get(), &total_bytes)) return -1;
  }

  uint8_t n_specs = 0;
  if (!r.u8(&n_specs) || n_specs > kMaxSpecs) return -1;
  std::vector<std::string> spec_keys(n_specs);
  std::vector<std::vector<uint8_t>> spec_values(n_specs);
  std::vector<rt::CompileSpec> specs(n_specs);
  for (size_t i = 0; i < n_specs; ++i) {
    uint8_t key_len = 0;
    uint16_t value_len = 0;
    const uint8_t* key = nullptr;
    const uint8_t* value = nullptr;
    if (!r.u8(&key_len) || !r.bytes(key_len, &key) || !r.u16(&value_len) || !r.bytes(value_len, &value)) return -1;
    spec_keys[i].assign(reinterpret_cast<const char*>(key), key_len);
    spec_values[i].assign(value, value + value_len);
  }
  for (size_t i = 0; i < n_specs; ++i) {
    specs[i] = rt::CompileSpec{spec_keys[i].c_str(),
                               rt::SizedBuffer{spec_values[i].empty() ? nullptr : spec_values[i].data(),
                                               spec_values[i].size()}};
  }

  uint8_t n_named = 0;
  if (!r.u8(&n_named) || n_named > kMaxNamed) return -1;
  CaseNamedData named;
  for (size_t i = 0; i < n_named; ++i) {
    uint8_t key_len = 0;
    uint32_t len = 0;
    const uint8_t* key = nullptr;
    const uint8_t* bytes = nullptr;
    if (!r.u8(&key_len) || !r.bytes(key_len, &key) || !r.u32(&len) || !r.bytes(len, &bytes)) return -1;
    named.entries.push_back({std::string(reinterpret_cast<const char*>(key), key_len),
                             std::vector<uint8_t>(bytes, bytes + len)});
  }

  // The payload in a heap block of exactly its size: a read past its end is an ASan report. The
  // backend may Free() it during init (after copying what it keeps).
  const size_t payload_size = r.remaining();
  auto* payload = static_cast<uint8_t*>(std::malloc(payload_size == 0 ? 1 : payload_size));
  if (payload == nullptr) return -1;
  if (payload_size != 0) std::memcpy(payload, r.rest(), payload_size);
  rt::FreeableBuffer processed(payload, payload_size, [](void*, void* p, size_t) { std::free(p); });

  rt::MemoryAllocator runtime_allocator(kArenaBytes, g_arena.get());
  rt::BackendInitContext init_ctx(&runtime_allocator, n_named != 0 ? &named : nullptr, "forward");
  rt::Result<rt::DelegateHandle*> handle = g_backend->init(init_ctx, &processed, {specs.data(), specs.size()});
  if (handle.ok()) {
    std::vector<rt::EValue*> args;
    for (auto& t : tensors) args.push_back(&t->value);
    rt::MemoryAllocator temp(kTempBytes, g_temp.get());
    rt::BackendExecutionContext exec_ctx(&temp, "forward");
    (void)g_backend->execute(exec_ctx, handle.get(), {args.data(), args.size()});
    g_backend->destroy(handle.get());
  }
  processed.Free();
  rt::clear_error_message();
  return 0;
}
