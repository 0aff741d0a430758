// llama::update_cache.out: writes value [B, S, H, D] into rows start_pos .. start_pos + S - 1 of a KV
// cache [B, max_S, H, D], in place. The op's tensor result is a 1-element placeholder (0).
//
// A plain row copy, so any dtype works as long as value and cache agree. Both must be contiguous: then
// the S rows of one batch entry are one block of memory in each.
#include <cstring>

#include "../portable/kernel_binding.h"
#include "llm_checks.h"

namespace etkit::portable {

// update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out) -> Tensor(b!)
ETKIT_KERNEL(llama_update_cache_out, Tensor* value, Tensor* cache, int64_t start_pos, Tensor* out) {
  if (!llm::check_rank4(ctx, name, *value, "value") || !llm::check_rank4(ctx, name, *cache, "cache")) return;
  if (value->scalar_type() != cache->scalar_type()) {
    fail(ctx, Error::InvalidArgument, "%s: value has dtype %s but the cache has dtype %s", name,
         runtime::scalar_type_name(value->scalar_type()), runtime::scalar_type_name(cache->scalar_type()));
    return;
  }
  const size_t checked_dims[3] = {0, 2, 3};
  for (size_t d : checked_dims) {
    if (value->size(d) != cache->size(d)) {
      fail(ctx, Error::InvalidArgument, "%s: value %s and cache %s differ in dim %zu", name,
           llm::Shape4(*value).text, llm::Shape4(*cache).text, d);
      return;
    }
  }
  const int64_t batch = value->size(0), seq = value->size(1), max_seq = cache->size(1);
  if (!llm::check_window(ctx, name, start_pos, seq, max_seq) || !llm::check_contiguous(ctx, name, *value, "value") ||
      !llm::check_contiguous(ctx, name, *cache, "cache")) {
    return;
  }
  if (cache->is_read_only()) {  // written in place, not resized: refused here rather than by resize()
    fail(ctx, Error::InvalidArgument, "%s: cache is a constant of the program (read-only)", name);
    return;
  }
  const SizesType one[1] = {1};
  if (!resize_out(ctx, name, *out, one, 1)) return;

  const size_t row_bytes = static_cast<size_t>(value->size(2)) * static_cast<size_t>(value->size(3)) *
                           value->element_size();
  const char* src = static_cast<const char*>(value->const_data_ptr());
  char* dst = static_cast<char*>(cache->mutable_data_ptr());
  if (row_bytes != 0 && seq != 0) {
    for (int64_t b = 0; b < batch; ++b) {
      // memmove: value may be a view of the cache itself.
      std::memmove(dst + static_cast<size_t>(b * max_seq + start_pos) * row_bytes,
                   src + static_cast<size_t>(b * seq) * row_bytes, static_cast<size_t>(seq) * row_bytes);
    }
  }
  store_double(out->mutable_data_ptr(), out->scalar_type(), 0, 0.0);
}

}  // namespace etkit::portable
