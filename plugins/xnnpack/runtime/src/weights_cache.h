// The process-wide cache of packed XNNPACK weights, shared by every XnnpackBackend delegate.
//
// XNNPACK packs static weights (GEMM/IGEMM/dwconv layouts) while a runtime is created and asks a
// weights-cache provider (struct xnn_weights_cache_provider, XNNPACK 2024-11 include/xnnpack.h)
// whether the packed form already exists: look_up({seed, kernel, bias}) before packing,
// reserve_space + look_up_or_insert after. Its own cache keys on the kernel/bias *addresses*, so
// it only helps inside one runtime. This provider keys on what the bytes are instead:
//
// - a constant from the program's named data is named by its key, which is the sha256 of its bytes
//   in every .pte etkit or ExecuTorch 1.5 writes; a constant in the payload's own constant section
//   is named by its offset, scoped to the payload;
// - float weights (fp32/fp16 kernel and bias) are shared process-wide: loading a program twice, or
//   two methods/programs holding the same weights, packs them once;
// - quantized weights are shared only between delegates with the same payload bytes (a repeated
//   load), because their packing also folds in quantization parameters the look-up key omits
//   (input zero point, per-channel scales);
// - after packing, identical packed bytes are stored once whatever their names (content check), so
//   packing twice never stores twice.
//
// Entries are reference-counted by the delegates using them and freed with the last one.
// Their bytes are PackedSpace ranges (packed_memory.h): back to back, in transparent huge pages where
// the system has them, because an LLM's decode step streams them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <xnnpack.h>

#include "packed_memory.h"

namespace etkit_xnnpack {

/// Process-wide counters (bytes are packed-weight bytes held by the cache).
struct WeightsCacheStats {
  size_t entries = 0;       // packed weight blocks alive
  size_t bytes = 0;         // their total size, bytes
  size_t packs = 0;         // blocks XNNPACK packed and the cache kept (since process start)
  size_t reuses = 0;        // look-ups answered without packing
  size_t deduplicated = 0;  // packed blocks dropped because identical bytes were already cached
  size_t huge_page_bytes = 0;  // of `bytes`, those in memory advised for huge pages (packed_memory.h)
};

WeightsCacheStats weights_cache_stats();

struct PackedWeights;  // one cached block (weights_cache.cpp)

/// One delegate's view of the shared cache: the xnn_weights_cache_t given to
/// xnn_create_runtime_v3, the names of the delegate's constants, and the blocks its runtime uses.
/// Must outlive the runtime (XNNPACK resolves packed-weight offsets through it at every reshape).
class WeightsCacheSession {
 public:
  /// `payload_hash`: a hash of the delegate's payload bytes (scope of quantized weights).
  explicit WeightsCacheSession(uint64_t payload_hash);
  ~WeightsCacheSession();
  WeightsCacheSession(const WeightsCacheSession&) = delete;
  WeightsCacheSession& operator=(const WeightsCacheSession&) = delete;

  /// Names the constant at `data`: `name` is its named-data key (shared by content) or, with
  /// `payload_scoped`, a name only meaningful inside this payload. `is_float`: fp32/fp16 data.
  void name_constant(const void* data, std::string name, bool payload_scoped, bool is_float);

  /// Forgets the blocks of a failed runtime creation (before a retry with other flags).
  void discard_blocks();

  /// Called once the runtime exists: no more packing; names are dropped.
  void finalize();

  xnn_weights_cache_t provider() { return &provider_; }

 private:
  struct ConstantName {
    std::string name;
    bool shareable;  // float and named by content: shared process-wide
  };

  // The xnn_weights_cache_provider callbacks; `context` is the session.
  static size_t look_up(void* context, const xnn_weights_cache_look_up_key* key);
  static void* reserve_space(void* context, size_t n);
  static size_t look_up_or_insert(void* context, const xnn_weights_cache_look_up_key* key, void* ptr, size_t size);
  static bool is_finalized(void* context);
  static void* offset_to_addr(void* context, size_t offset);
  static xnn_status delete_cache(void* context);

  /// The cache key of {seed, kernel, bias}, or "" when a pointer has no name (nothing is shared).
  std::string key_of(const xnn_weights_cache_look_up_key* key) const;
  size_t adopt(std::shared_ptr<PackedWeights> block);

  xnn_weights_cache_provider provider_{};
  uint64_t payload_hash_;
  std::unordered_map<const void*, ConstantName> names_;
  std::vector<std::shared_ptr<PackedWeights>> blocks_;  // XNNPACK's "offsets" index this
  std::unordered_map<std::string, size_t> found_;        // look_up hits: key -> offset
  PackedSpace reserved_;                                 // space handed out by reserve_space
  bool finalized_ = false;
};

}  // namespace etkit_xnnpack
