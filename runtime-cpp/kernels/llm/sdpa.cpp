// llama::custom_sdpa.out: scaled dot-product attention of query [B, S, H, D] over the first
// start_pos + S rows of the key/value caches [B, max_S, H_kv, D] (grouped-query attention: query head h
// reads kv head h / (H / H_kv)). With is_causal, query row i sees key rows 0 .. start_pos + i; the mask
// is computed from the row index, never materialized. Contiguous float32 or float16 tensors (float16:
// every product and sum in float32, each query row converted once, the output rounded once).
//
// The query heads that share a kv head (up to kMaxRows of them, same position) go together over the key
// rows in tiles of kTile, so each key/value row loaded serves all of them. The scores of a tile go to a
// stack buffer, then a streaming softmax folds the tile into each output row (the running accumulator):
// with m the running max and l the running sum of exp(score - m), a tile with a larger max rescales the
// accumulator and l by exp(m_old - m_new) before adding exp(score - m_new) * v for each of its keys.
// No allocation, any cache length. The loops over D are written for the compiler to vectorize
// (independent float lanes in the dot product, __restrict rows). The items (batch row, position, kv
// head, block of query heads) are spread over the runtime's worker pool (threadpool.h) when there is
// enough work to pay for waking it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "etkit/runtime/threadpool.h"
#include "llm_checks.h"

namespace etkit::portable {
namespace {

constexpr int64_t kTile = 256;      // key rows per tile
constexpr int kMaxRows = 4;         // query heads sharing one kv head, processed together (GQA)
constexpr int64_t kMaxHalfDim = 512;  // float16: head size the stack buffers of converted rows hold

/// A cache element as float: float32 as is, float16 (IEEE binary16 bits) converted.
inline float f32(float x) { return x; }
inline float f32(uint16_t h) { return half_to_float(h); }

/// res[r] = q_r . k for the NQ query rows q_r = q + r * n. Each row keeps L independent partial sums
/// (lanes), so the loop vectorizes without reassociating one float sum, and each key element loaded
/// serves all NQ rows.
template <int NQ, typename T>
inline void dot_rows(const float* __restrict q, const T* __restrict k, int64_t n, float* __restrict res) {
  constexpr int L = NQ == 1 ? 16 : 8;
  float acc[NQ][L] = {};
  int64_t d = 0;
  for (; d + L <= n; d += L) {
    for (int j = 0; j < L; ++j) {
      const float kv = f32(k[d + j]);
      for (int r = 0; r < NQ; ++r) acc[r][j] += q[r * n + d + j] * kv;
    }
  }
  for (int r = 0; r < NQ; ++r) {
    for (int w = L / 2; w >= 1; w /= 2) {
      for (int j = 0; j < w; ++j) acc[r][j] += acc[r][j + w];
    }
    float s = acc[r][0];
    for (int64_t e = d; e < n; ++e) s += q[r * n + e] * f32(k[e]);
    res[r] = s;
  }
}

inline void scale_row(float* __restrict y, float f, int64_t n) {
  for (int64_t d = 0; d < n; ++d) y[d] *= f;
}

/// y += p0 * x0 + p1 * x1 + p2 * x2 + p3 * x3 (one pass over y for four key rows).
template <typename T>
inline void axpy4(float* __restrict y, const T* __restrict x0, const T* __restrict x1, const T* __restrict x2,
                  const T* __restrict x3, float p0, float p1, float p2, float p3, int64_t n) {
  for (int64_t d = 0; d < n; ++d) {
    y[d] += (p0 * f32(x0[d]) + p1 * f32(x1[d])) + (p2 * f32(x2[d]) + p3 * f32(x3[d]));
  }
}

template <typename T>
inline void axpy(float* __restrict y, const T* __restrict x, float p, int64_t n) {
  for (int64_t d = 0; d < n; ++d) y[d] += p * f32(x[d]);
}

/// For NQ query rows q_r = q + r * head_dim that read the same kv head and see the same key rows
/// [0, length): out_r = sum_j softmax_j(scale * q_r . k_j) v_j, out_r = out + r * head_dim.
/// k and v point at key row 0 of the kv head; consecutive key rows are row_stride floats apart.
template <int NQ, typename T>
void attend_rows(const float* __restrict q, const T* k, const T* v, int64_t row_stride, int64_t length,
                 int64_t head_dim, float scale, float* __restrict out) {
  float scores[NQ][kTile];  // at most 4 KiB of stack
  float running_max[NQ], running_sum[NQ];
  for (int r = 0; r < NQ; ++r) {
    running_max[r] = -std::numeric_limits<float>::infinity();
    running_sum[r] = 0.f;
  }
  std::fill(out, out + NQ * head_dim, 0.f);
  for (int64_t t0 = 0; t0 < length; t0 += kTile) {
    const int64_t n = std::min(kTile, length - t0);
    const T* kt = k + t0 * row_stride;
    const T* vt = v + t0 * row_stride;
    // 1. scores of the tile and their max, per row
    float tile_max[NQ];
    for (int r = 0; r < NQ; ++r) tile_max[r] = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      float s[NQ];
      dot_rows<NQ, T>(q, kt + j * row_stride, head_dim, s);
      for (int r = 0; r < NQ; ++r) {
        scores[r][j] = scale * s[r];
        tile_max[r] = std::max(tile_max[r], scores[r][j]);
      }
    }
    for (int r = 0; r < NQ; ++r) {
      // 2. rescale what row r accumulated so far to its new max
      float* o = out + r * head_dim;
      const float new_max = std::max(running_max[r], tile_max[r]);
      if (new_max > running_max[r] && running_sum[r] != 0.f) {
        const float c = std::exp(running_max[r] - new_max);
        running_sum[r] *= c;
        scale_row(o, c, head_dim);
      }
      running_max[r] = new_max;
      // 3. unnormalised probabilities of the tile
      float tile_sum = 0.f;
      for (int64_t j = 0; j < n; ++j) {
        const float p = std::exp(scores[r][j] - new_max);
        scores[r][j] = p;
        tile_sum += p;
      }
      running_sum[r] += tile_sum;
    }
    // 4. accumulate the value rows, four at a time (they stay in cache across the NQ rows)
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const T* vj = vt + j * row_stride;
      for (int r = 0; r < NQ; ++r) {
        axpy4(out + r * head_dim, vj, vj + row_stride, vj + 2 * row_stride, vj + 3 * row_stride, scores[r][j],
              scores[r][j + 1], scores[r][j + 2], scores[r][j + 3], head_dim);
      }
    }
    for (; j < n; ++j) {
      for (int r = 0; r < NQ; ++r) axpy(out + r * head_dim, vt + j * row_stride, scores[r][j], head_dim);
    }
  }
  for (int r = 0; r < NQ; ++r) scale_row(out + r * head_dim, 1.f / running_sum[r], head_dim);
}

/// The attention problem of one call; an item is the query heads kvh * groups + g .. + kMaxRows - 1 (at
/// most) of one batch row and position, which read kv head kvh and the cache rows that position sees.
template <typename T>
struct Attention {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  int64_t seq, heads, kv_heads, head_dim, max_seq, start_pos;
  bool is_causal;
  float scale;
  int64_t groups, blocks;  // query heads per kv head; item blocks of kMaxRows per kv head

  int64_t items(int64_t batch) const { return batch * seq * kv_heads * blocks; }

  /// T: the storage type (float, or float16 bits); float16 rows are converted into float stack buffers
  /// (head_dim <= kMaxHalfDim, checked by the caller) and the result rounded back.
  void run(int64_t item) const {
    const int64_t block = item % blocks;
    const int64_t kvh = (item / blocks) % kv_heads;
    const int64_t i = (item / (blocks * kv_heads)) % seq;
    const int64_t b = item / (blocks * kv_heads * seq);
    const int64_t row_stride = kv_heads * head_dim;  // elements between consecutive key rows of one kv head
    const int64_t length = is_causal ? start_pos + i + 1 : start_pos + seq;
    const T* kh = k + b * max_seq * row_stride + kvh * head_dim;
    const T* vh = v + b * max_seq * row_stride + kvh * head_dim;
    const int64_t g = block * kMaxRows;
    // query heads kvh * groups + g ... are adjacent rows of query and out
    const int64_t offset = ((b * seq + i) * heads + kvh * groups + g) * head_dim;
    const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, groups - g));
    const float* qr;
    float* orow;
    float q_buf[std::is_same<T, float>::value ? 1 : kMaxRows * kMaxHalfDim];
    float o_buf[std::is_same<T, float>::value ? 1 : kMaxRows * kMaxHalfDim];
    if constexpr (std::is_same<T, float>::value) {
      qr = q + offset;
      orow = o + offset;
    } else {
      for (int64_t e = 0; e < rows * head_dim; ++e) q_buf[e] = f32(q[offset + e]);
      qr = q_buf;
      orow = o_buf;
    }
    switch (rows) {
      case 4: attend_rows<4, T>(qr, kh, vh, row_stride, length, head_dim, scale, orow); break;
      case 3: attend_rows<3, T>(qr, kh, vh, row_stride, length, head_dim, scale, orow); break;
      case 2: attend_rows<2, T>(qr, kh, vh, row_stride, length, head_dim, scale, orow); break;
      default: attend_rows<1, T>(qr, kh, vh, row_stride, length, head_dim, scale, orow); break;
    }
    if constexpr (!std::is_same<T, float>::value) {
      for (int64_t e = 0; e < rows * head_dim; ++e) o[offset + e] = float_to_half(o_buf[e]);
    }
  }

  static void run_range(void* self, size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) static_cast<const Attention*>(self)->run(static_cast<int64_t>(item));
  }
};

/// Items of less work than this (multiply-adds, both passes) run on the calling thread: waking a worker
/// costs more than a short decode step's attention.
constexpr int64_t kParallelWork = int64_t(1) << 16;

template <typename T>
void attend_all(const Attention<T>& attention, int64_t batch) {
  const int64_t items = attention.items(batch);
  const int64_t rows = attention.is_causal ? attention.start_pos + (attention.seq + 1) / 2
                                           : attention.start_pos + attention.seq;  // cache rows, on average
  const int64_t work_per_item = std::max<int64_t>(1, 2 * rows * attention.head_dim * kMaxRows);
  const int64_t grain = std::max<int64_t>(1, kParallelWork / work_per_item);
  runtime::parallel_for(static_cast<size_t>(items), static_cast<size_t>(grain), &Attention<T>::run_range,
                        const_cast<Attention<T>*>(&attention));
}

}  // namespace

// custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None,
//     float drpout_p=0.0, bool is_causal=False, float? scale=None, *, Tensor(a!) out) -> Tensor(a!)
void llama_custom_sdpa_out(KernelRuntimeContext& ctx, Span<EValue*> args) {
  const char* name = "llama::custom_sdpa.out";
  if (!check_nargs(ctx, name, args, 9)) return;
  Tensor* query = tensor_arg(ctx, name, args, 0, "query");
  Tensor* key = query ? tensor_arg(ctx, name, args, 1, "key") : nullptr;
  Tensor* value = key ? tensor_arg(ctx, name, args, 2, "value") : nullptr;
  if (!value) return;
  int64_t start_pos = 0;
  Tensor* attn_mask = nullptr;
  double dropout = 0;
  bool is_causal = false;
  if (!int_arg(ctx, name, args, 3, "start_pos", &start_pos) ||
      !optional_tensor_arg(ctx, name, args, 4, "attn_mask", &attn_mask) ||
      !scalar_arg(ctx, name, args, 5, "drpout_p", &dropout) || !bool_arg(ctx, name, args, 6, "is_causal", &is_causal)) {
    return;
  }
  double scale = 0;
  const bool has_scale = !args[7]->is_none();
  if (has_scale && !scalar_arg(ctx, name, args, 7, "scale", &scale)) return;
  Tensor* out = tensor_arg(ctx, name, args, 8, "out");
  if (!out) return;

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

  if (dtype == ScalarType::Half && head_dim > kMaxHalfDim) {
    fail(ctx, Error::InvalidArgument, "%s: float16 heads of %lld elements exceed the kernel's %lld", name,
         static_cast<long long>(head_dim), static_cast<long long>(kMaxHalfDim));
    return;
  }

  const float scale_f = has_scale ? static_cast<float>(scale) : 1.f / std::sqrt(static_cast<float>(head_dim));
  const int64_t groups = heads / kv_heads;
  const int64_t blocks = (groups + kMaxRows - 1) / kMaxRows;
  if (dtype == ScalarType::Float) {
    const Attention<float> attention{query->const_data_ptr<float>(), key->const_data_ptr<float>(),
                                     value->const_data_ptr<float>(), out->mutable_data_ptr<float>(),
                                     seq, heads, kv_heads, head_dim, max_seq, start_pos, is_causal, scale_f,
                                     groups, blocks};
    attend_all(attention, batch);
  } else {
    const Attention<uint16_t> attention{static_cast<const uint16_t*>(query->const_data_ptr()),
                                        static_cast<const uint16_t*>(key->const_data_ptr()),
                                        static_cast<const uint16_t*>(value->const_data_ptr()),
                                        static_cast<uint16_t*>(out->mutable_data_ptr()),
                                        seq, heads, kv_heads, head_dim, max_seq, start_pos, is_causal, scale_f,
                                        groups, blocks};
    attend_all(attention, batch);
  }
}

}  // namespace etkit::portable
