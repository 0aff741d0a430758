// The attention math of llama::custom_sdpa.out, included by attention_<isa>.cpp with
// ETKIT_ATTENTION_ISA naming the namespace of that copy (see attention.h). Not a public header.
//
// The query heads that share a kv head (up to kMaxRows of them, same position) go together over the key
// rows in tiles of kTile, so each key/value row loaded serves all of them. The scores of a tile go to a
// stack buffer, then a streaming softmax folds the tile into each output row (the running accumulator):
// with m the running max and l the running sum of exp(score - m), a tile with a larger max rescales the
// accumulator and l by exp(m_old - m_new) before adding exp(score - m_new) * v for each of its keys.
// No allocation, any cache length. The loops over D are written for the compiler to vectorize
// (independent float lanes in the dot product, __restrict rows), so each copy uses the vector width its
// flags allow. The items (batch row, position, kv head, block of query heads) are spread over the
// runtime's worker pool (threadpool.h) when there is enough work to pay for waking it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "../portable/kernels.h"
#include "attention.h"
#include "etkit/runtime/threadpool.h"

#ifndef ETKIT_ATTENTION_ISA
#error "define ETKIT_ATTENTION_ISA (the namespace of this copy) before including attention_impl.h"
#endif

// Every function here has internal linkage, and the two that are entered from outside (the pool's
// callback and the entry) are flattened: the header-inline helpers they call (std::fill, std::min,
// half_to_float, ...) are inlined into them, so no out-of-line copy built with wider instructions can
// be chosen by the linker for a narrower copy's caller.
#if defined(__GNUC__) || defined(__clang__)
#define ETKIT_ATTENTION_FLATTEN __attribute__((flatten))
#else
#define ETKIT_ATTENTION_FLATTEN
#endif

namespace etkit::portable::llm::ETKIT_ATTENTION_ISA {
namespace {

constexpr int64_t kTile = 256;      // key rows per tile
constexpr int kMaxRows = 4;         // query heads sharing one kv head, processed together (GQA)

/// A cache element as float: float32 as is, float16 (IEEE binary16 bits) converted.
inline float f32(float x) { return x; }
inline float f32(uint16_t h) { return half_to_float(h); }

// Vec: kLanes floats in one register of this copy's instruction set (AVX-512: 16, AVX2: 8), or, in the
// generic copy, an array of 8 the compiler vectorizes as the target allows. load() converts float16.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
struct Vec {
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec splat(float x) { return {_mm512_set1_ps(x)}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  float sum() const { return _mm512_reduce_add_ps(v); }
};
inline Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
struct Vec {
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec splat(float x) { return {_mm256_set1_ps(x)}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec load(const uint16_t* p) {
    float f[8];
    for (int j = 0; j < 8; ++j) f[j] = half_to_float(p[j]);
    return load(f);
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  float sum() const {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }
};
inline Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
#else
constexpr int kLanes = 8;
struct Vec {
  float v[kLanes];
  static Vec zero() { return splat(0.f); }
  static Vec splat(float x) {
    Vec r;
    for (int j = 0; j < kLanes; ++j) r.v[j] = x;
    return r;
  }
  template <typename T>
  static Vec load(const T* p) {
    Vec r;
    for (int j = 0; j < kLanes; ++j) r.v[j] = f32(p[j]);
    return r;
  }
  void store(float* p) const {
    for (int j = 0; j < kLanes; ++j) p[j] = v[j];
  }
  float sum() const {  // pairwise, as the vector copies reduce
    float t[kLanes];
    for (int j = 0; j < kLanes; ++j) t[j] = v[j];
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int j = 0; j < w; ++j) t[j] += t[j + w];
    }
    return t[0];
  }
};
inline Vec fma(Vec a, Vec b, Vec c) {
  for (int j = 0; j < kLanes; ++j) c.v[j] += a.v[j] * b.v[j];
  return c;
}
inline Vec mul(Vec a, Vec b) {
  for (int j = 0; j < kLanes; ++j) a.v[j] *= b.v[j];
  return a;
}
#endif

/// res[r] = q_r . k for the NQ query rows q_r = q + r * n: kLanes partial sums per row (one register),
/// reduced at the end; each key element loaded serves all NQ rows.
template <int NQ, typename T>
inline void dot_rows(const float* __restrict q, const T* __restrict k, int64_t n, float* __restrict res) {
  Vec acc[NQ];
  for (int r = 0; r < NQ; ++r) acc[r] = Vec::zero();
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    const Vec kv = Vec::load(k + d);
    for (int r = 0; r < NQ; ++r) acc[r] = fma(Vec::load(q + r * n + d), kv, acc[r]);
  }
  for (int r = 0; r < NQ; ++r) {
    float s = acc[r].sum();
    for (int64_t e = d; e < n; ++e) s += q[r * n + e] * f32(k[e]);
    res[r] = s;
  }
}

inline void scale_row(float* __restrict y, float f, int64_t n) {
  const Vec fv = Vec::splat(f);
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) mul(Vec::load(y + d), fv).store(y + d);
  for (; d < n; ++d) y[d] *= f;
}

/// y += p0 * x0 + p1 * x1 + p2 * x2 + p3 * x3 (one pass over y for four key rows).
template <typename T>
inline void axpy4(float* __restrict y, const T* __restrict x0, const T* __restrict x1, const T* __restrict x2,
                  const T* __restrict x3, float p0, float p1, float p2, float p3, int64_t n) {
  const Vec v0 = Vec::splat(p0), v1 = Vec::splat(p1), v2 = Vec::splat(p2), v3 = Vec::splat(p3);
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    Vec acc = Vec::load(y + d);
    acc = fma(v0, Vec::load(x0 + d), acc);
    acc = fma(v1, Vec::load(x1 + d), acc);
    acc = fma(v2, Vec::load(x2 + d), acc);
    acc = fma(v3, Vec::load(x3 + d), acc);
    acc.store(y + d);
  }
  for (; d < n; ++d) y[d] += (p0 * f32(x0[d]) + p1 * f32(x1[d])) + (p2 * f32(x2[d]) + p3 * f32(x3[d]));
}

template <typename T>
inline void axpy(float* __restrict y, const T* __restrict x, float p, int64_t n) {
  const Vec pv = Vec::splat(p);
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) fma(pv, Vec::load(x + d), Vec::load(y + d)).store(y + d);
  for (; d < n; ++d) y[d] += p * f32(x[d]);
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

  ETKIT_ATTENTION_FLATTEN static void run_range(void* self, size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) static_cast<const Attention*>(self)->run(static_cast<int64_t>(item));
  }
};

/// Items of less work than this (multiply-adds, both passes) run on the calling thread: waking a worker
/// costs more than a short decode step's attention.
constexpr int64_t kParallelWork = int64_t(1) << 16;

template <typename T>
ETKIT_ATTENTION_FLATTEN void attend_all(const AttentionProblem& p) {
  const int64_t groups = p.heads / p.kv_heads;
  const int64_t blocks = (groups + kMaxRows - 1) / kMaxRows;
  const Attention<T> attention{static_cast<const T*>(p.query), static_cast<const T*>(p.key),
                               static_cast<const T*>(p.value), static_cast<T*>(p.out),
                               p.seq, p.heads, p.kv_heads, p.head_dim, p.max_seq, p.start_pos, p.is_causal,
                               p.scale, groups, blocks};
  const int64_t items = attention.items(p.batch);
  const int64_t rows = p.is_causal ? p.start_pos + (p.seq + 1) / 2 : p.start_pos + p.seq;  // cache rows, on average
  const int64_t work_per_item = std::max<int64_t>(1, 2 * rows * p.head_dim * kMaxRows);
  const int64_t grain = std::max<int64_t>(1, kParallelWork / work_per_item);
  runtime::parallel_for(static_cast<size_t>(items), static_cast<size_t>(grain), &Attention<T>::run_range,
                        const_cast<Attention<T>*>(&attention));
}

}  // namespace

/// Runs one call (kv_heads > 0 and heads a multiple of it: the caller checked).
ETKIT_ATTENTION_FLATTEN inline bool attend_impl(const AttentionProblem& problem) {
  if (problem.half) {
    attend_all<uint16_t>(problem);
  } else {
    attend_all<float>(problem);
  }
  return true;
}

}  // namespace etkit::portable::llm::ETKIT_ATTENTION_ISA
