#include "weights_cache.h"

#include "packed_memory.h"

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

namespace etkit_xnnpack {

namespace {

/// What look_up/look_up_or_insert return for "no entry" (xnn_weights_cache_provider: SIZE_MAX).
constexpr size_t kNotFound = SIZE_MAX;

std::atomic<size_t> g_entries{0};
std::atomic<size_t> g_bytes{0};
std::atomic<size_t> g_packs{0};
std::atomic<size_t> g_reuses{0};
std::atomic<size_t> g_deduplicated{0};
std::atomic<size_t> g_huge_page_bytes{0};

uint64_t content_hash(const void* data, size_t size) {
  return std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(data), size));
}

}  // namespace

/// One block of packed weights, owned jointly by the sessions (delegates) that use it.
struct PackedWeights {
  PackedWeights(PackedSpace space_in, uint64_t hash_in)
      : space(std::move(space_in)), data(space.data()), size(space.size()), hash(hash_in) {
    g_entries.fetch_add(1);
    g_bytes.fetch_add(size);
    if (space.in_huge_pages()) g_huge_page_bytes.fetch_add(size);
  }
  ~PackedWeights() {
    g_entries.fetch_sub(1);
    g_bytes.fetch_sub(size);
    if (space.in_huge_pages()) g_huge_page_bytes.fetch_sub(size);
  }
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  PackedSpace space;
  void* data;
  size_t size;
  uint64_t hash;
};

namespace {

/// The two indexes over live blocks. Blocks are owned by sessions; the store only points at them.
struct Store {
  std::mutex mutex;
  std::unordered_map<std::string, std::weak_ptr<PackedWeights>> by_key;
  std::unordered_multimap<uint64_t, std::weak_ptr<PackedWeights>> by_content;

  /// Drops index entries whose block is gone. Caller holds `mutex`.
  void prune() {
    for (auto it = by_key.begin(); it != by_key.end();) it = it->second.expired() ? by_key.erase(it) : std::next(it);
    for (auto it = by_content.begin(); it != by_content.end();) {
      it = it->second.expired() ? by_content.erase(it) : std::next(it);
    }
  }
};

Store& store() {
  static Store* instance = new Store();  // never destroyed: delegates may outlive static destructors
  return *instance;
}

}  // namespace

WeightsCacheStats weights_cache_stats() {
  WeightsCacheStats stats;
  stats.entries = g_entries.load();
  stats.bytes = g_bytes.load();
  stats.packs = g_packs.load();
  stats.reuses = g_reuses.load();
  stats.deduplicated = g_deduplicated.load();
  stats.huge_page_bytes = g_huge_page_bytes.load();
  return stats;
}

WeightsCacheSession::WeightsCacheSession(uint64_t payload_hash) : payload_hash_(payload_hash) {
  provider_.context = this;
  provider_.look_up = &WeightsCacheSession::look_up;
  provider_.reserve_space = &WeightsCacheSession::reserve_space;
  provider_.look_up_or_insert = &WeightsCacheSession::look_up_or_insert;
  provider_.is_finalized = &WeightsCacheSession::is_finalized;
  provider_.offset_to_addr = &WeightsCacheSession::offset_to_addr;
  provider_.delete_cache = &WeightsCacheSession::delete_cache;
}

WeightsCacheSession::~WeightsCacheSession() {
  reserved_.reset();
  blocks_.clear();
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.prune();
}

void WeightsCacheSession::name_constant(const void* data, std::string name, bool payload_scoped, bool is_float) {
  if (data == nullptr) return;
  const bool shareable = is_float && !payload_scoped;
  auto [it, inserted] = names_.try_emplace(data, ConstantName{std::move(name), shareable});
  if (!inserted && !shareable) it->second.shareable = false;  // one pointer seen as two kinds: be strict
}

void WeightsCacheSession::discard_blocks() {
  reserved_.reset();
  blocks_.clear();
  found_.clear();
}

void WeightsCacheSession::finalize() {
  finalized_ = true;
  names_.clear();
  found_.clear();
  reserved_.reset();
}

std::string WeightsCacheSession::key_of(const xnn_weights_cache_look_up_key* key) const {
  if (key == nullptr) return {};
  const auto kernel = names_.find(key->kernel);
  if (kernel == names_.end()) return {};
  bool shareable = kernel->second.shareable;
  std::string bias_name = "-";
  if (key->bias != nullptr) {
    const auto bias = names_.find(key->bias);
    if (bias == names_.end()) return {};
    bias_name = bias->second.name;
    shareable = shareable && bias->second.shareable;
  }
  char scope[48];
  if (shareable) {
    std::snprintf(scope, sizeof(scope), "g|%08" PRIx32 "|", key->seed);
  } else {
    std::snprintf(scope, sizeof(scope), "p%016" PRIx64 "|%08" PRIx32 "|", payload_hash_, key->seed);
  }
  return std::string(scope) + kernel->second.name + "|" + bias_name;
}

size_t WeightsCacheSession::adopt(std::shared_ptr<PackedWeights> block) {
  blocks_.push_back(std::move(block));
  return blocks_.size() - 1;
}

size_t WeightsCacheSession::look_up(void* context, const xnn_weights_cache_look_up_key* key) {
  auto* self = static_cast<WeightsCacheSession*>(context);
  const std::string name = self->key_of(key);
  if (name.empty()) return kNotFound;
  Store& s = store();
  std::shared_ptr<PackedWeights> block;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const auto it = s.by_key.find(name);
    if (it != s.by_key.end()) block = it->second.lock();
  }
  if (block == nullptr) return kNotFound;
  g_reuses.fetch_add(1);
  const size_t offset = self->adopt(std::move(block));
  self->found_[name] = offset;
  return offset;
}

void* WeightsCacheSession::reserve_space(void* context, size_t n) {
  auto* self = static_cast<WeightsCacheSession*>(context);
  self->reserved_ = PackedSpace::allocate(n);
  return self->reserved_.data();
}

size_t WeightsCacheSession::look_up_or_insert(void* context, const xnn_weights_cache_look_up_key* key, void* ptr,
                                              size_t size) {
  auto* self = static_cast<WeightsCacheSession*>(context);
  if (ptr == nullptr) {
    // XNNPACK's convolution calls this even after a look_up hit, with nothing packed: answer with
    // the block that look_up found.
    const auto found = self->found_.find(self->key_of(key));
    return found != self->found_.end() ? found->second : look_up(context, key);
  }
  PackedSpace owned;
  if (ptr != nullptr && ptr == self->reserved_.data() && size <= self->reserved_.size()) {
    owned = std::move(self->reserved_);
    owned.shrink(size);
  } else {  // packed somewhere we did not hand out: keep a copy
    owned = PackedSpace::allocate(size);
    if (owned.data() == nullptr) return kNotFound;
    std::memcpy(owned.data(), ptr, size);
  }
  const uint64_t hash = content_hash(owned.data(), size);
  const std::string name = self->key_of(key);

  Store& s = store();
  std::shared_ptr<PackedWeights> block;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto [first, last] = s.by_content.equal_range(hash);
    for (auto it = first; it != last && block == nullptr; ++it) {
      std::shared_ptr<PackedWeights> candidate = it->second.lock();
      if (candidate != nullptr && candidate->size == size && std::memcmp(candidate->data, owned.data(), size) == 0) {
        block = std::move(candidate);
      }
    }
    if (block != nullptr) {
      owned.reset();
      g_deduplicated.fetch_add(1);
    } else {
      block = std::make_shared<PackedWeights>(std::move(owned), hash);
      s.by_content.emplace(hash, block);
      g_packs.fetch_add(1);
    }
    if (!name.empty()) {
      std::weak_ptr<PackedWeights>& slot = s.by_key[name];
      if (slot.expired()) slot = block;
    }
  }
  return self->adopt(std::move(block));
}

bool WeightsCacheSession::is_finalized(void* context) { return static_cast<WeightsCacheSession*>(context)->finalized_; }

void* WeightsCacheSession::offset_to_addr(void* context, size_t offset) {
  auto* self = static_cast<WeightsCacheSession*>(context);
  return offset < self->blocks_.size() ? self->blocks_[offset]->data : nullptr;
}

xnn_status WeightsCacheSession::delete_cache(void* context) {
  (void)context;  // the session belongs to its DelegateState, which deletes it after the runtime
  return xnn_status_success;
}

}  // namespace etkit_xnnpack
