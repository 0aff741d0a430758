// llama::custom_sdpa.out: scaled dot-product attention of query [B, S, H, D] over the first
// start_pos + S rows of the key/value caches [B, max_S, H_kv, D] (grouped-query attention: query head h
// reads kv head h / (H / H_kv)). With is_causal, query row i sees key rows 0 .. start_pos + i; the mask
// is computed from the row index, never materialized. Contiguous float32 or float16 tensors (float16:
// every product and sum in float32, each query row converted once, the output rounded once).
//
// This file checks the arguments and picks the copy of the math (attention_impl.h) for the CPU: one per
// instruction set, see attention.h.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "attention.h"
#include "../portable/kernel_binding.h"
#include "llm_checks.h"

namespace etkit::portable {

namespace {

/// 2: AVX-512F, 1: AVX2 + FMA, 0: the generic copy. The widest the CPU supports, lowered (never raised)
/// by the environment variable ETKIT_CPU_CAPABILITY=generic|avx2|avx512; asked once per process.
int capability_level() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const int level = [] {
    int cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? 2
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1
                                                                               : 0;
    const char* asked = std::getenv("ETKIT_CPU_CAPABILITY");
    if (asked != nullptr) {
      const int want = std::strcmp(asked, "generic") == 0 ? 0 : std::strcmp(asked, "avx2") == 0 ? 1 : 2;
      cpu = std::min(cpu, want);
    }
    return cpu;
  }();
  return level;
#else
  return 0;
#endif
}

}  // namespace

const char* llm::attention_capability() {
  static const char* const names[] = {"generic", "avx2", "avx512"};
  return names[capability_level()];
}

void llm::attend(const llm::AttentionProblem& problem) {
  const int level = capability_level();
  if (level >= 2 && llm::avx512::attend(problem)) return;
  if (level >= 1 && llm::avx2::attend(problem)) return;
  llm::generic::attend(problem);
}

// custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None,
//     float drpout_p=0.0, bool is_causal=False, float? scale=None, *, Tensor(a!) out) -> Tensor(a!)
ETKIT_KERNEL(llama_custom_sdpa_out, Tensor* query, Tensor* key, Tensor* value, int64_t start_pos, Tensor* attn_mask,
             double dropout, bool is_causal, OptionalScalar scale_arg, Tensor* out) {
  const bool has_scale = scale_arg.has_value;
  const double scale = scale_arg.value;

  if (attn_mask != nullptr) {
    fail(ctx, Error::InvalidArgument, "%s: attn_mask is not supported (it must be None; use is_causal)", name);
    return;
  }
  if (dropout != 0.0) {
    fail(ctx, Error::InvalidArgument, "%s: drpout_p is %g; only 0 is supported", name, dropout);
    return;
  }
  if (!llm::check_rank4(ctx, name, *query, "query") || !llm::check_rank4(ctx, name, *key, "key") ||
      !llm::check_rank4(ctx, name, *value, "value") || !llm::check_float_or_half(ctx, name, *query, "query")) {
    return;
  }
  const ScalarType dtype = query->scalar_type();
  const Tensor* same[3] = {key, value, out};
  const char* same_names[3] = {"key", "value", "out"};
  for (int i = 0; i < 3; ++i) {
    if (same[i]->scalar_type() != dtype) {
      fail(ctx, Error::InvalidArgument, "%s: argument '%s' has dtype %s but query has %s", name, same_names[i],
           runtime::scalar_type_name(same[i]->scalar_type()), runtime::scalar_type_name(dtype));
      return;
    }
  }
  if (!same_shape(*key, *value)) {
    fail(ctx, Error::InvalidArgument, "%s: key %s and value %s differ", name, llm::Shape4(*key).text,
         llm::Shape4(*value).text);
    return;
  }
  if (query->size(0) != key->size(0) || query->size(3) != key->size(3)) {
    fail(ctx, Error::InvalidArgument, "%s: query %s and key %s differ in batch or head size", name,
         llm::Shape4(*query).text, llm::Shape4(*key).text);
    return;
  }
  const int64_t batch = query->size(0), seq = query->size(1), heads = query->size(2), head_dim = query->size(3);
  const int64_t max_seq = key->size(1), kv_heads = key->size(2);
  if (kv_heads == 0 ? heads != 0 : heads % kv_heads != 0) {
    fail(ctx, Error::InvalidArgument, "%s: %lld query heads are not a multiple of %lld key/value heads", name,
         static_cast<long long>(heads), static_cast<long long>(kv_heads));
    return;
  }
  if (!llm::check_window(ctx, name, start_pos, seq, max_seq) || !llm::check_contiguous(ctx, name, *query, "query") ||
      !llm::check_contiguous(ctx, name, *key, "key") || !llm::check_contiguous(ctx, name, *value, "value")) {
    return;
  }
  if (!resize_out(ctx, name, *out, query->sizes().data(), 4) || !llm::check_contiguous(ctx, name, *out, "out")) {
    return;
  }
  if (out->numel() == 0) return;
  if (!llm::check_not_aliased(ctx, name, *out, *query, "query") ||
      !llm::check_not_aliased(ctx, name, *out, *key, "key") ||
      !llm::check_not_aliased(ctx, name, *out, *value, "value")) {
    return;
  }
  if (has_scale && std::isfinite(scale) && std::fabs(scale) > std::numeric_limits<float>::max()) {
    fail(ctx, Error::InvalidArgument, "%s: scale %g is outside float32's range", name, scale);
    return;
  }

  if (dtype == ScalarType::Half && head_dim > llm::kMaxHalfDim) {
    fail(ctx, Error::InvalidArgument, "%s: float16 heads of %lld elements exceed the kernel's %lld", name,
         static_cast<long long>(head_dim), static_cast<long long>(llm::kMaxHalfDim));
    return;
  }

  const float scale_f = has_scale ? static_cast<float>(scale) : 1.f / std::sqrt(static_cast<float>(head_dim));
  llm::attend(llm::AttentionProblem{query->const_data_ptr(), key->const_data_ptr(), value->const_data_ptr(),
                                    out->mutable_data_ptr(), dtype == ScalarType::Half, batch, seq, heads,
                                    kv_heads, head_dim, max_seq, start_pos, is_causal, scale_f});
}

}  // namespace etkit::portable
