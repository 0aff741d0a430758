// The attention math of llama::custom_sdpa.out, included by attention_<isa>.cpp with
// ETKIT_ATTENTION_ISA naming the namespace of that copy (see attention.h). Not a public header.
//
// An item is the query rows that read one kv head: up to kMaxRows query heads (GQA) of up to
// kMaxBlockRows / heads consecutive positions. They go together over the cache rows in tiles of kTile,
// so each key/value row loaded from the cache serves all of them from L1. A row's scores are computed
// kLanes keys at a time, one accumulator per key and one transposing reduction (sum_each) for all of
// them, instead of a horizontal sum per key. The scores of a tile go to a stack buffer and are
// exponentiated a vector at a time (exp_nonpositive); a streaming softmax folds the tile into each
// output row: with m the running max and l the running sum of exp(score - m), a tile with a larger max
// rescales the accumulator and l by exp(m_old - m_new) before adding exp(score - m_new) * v for each of
// its keys, with a block of every output row held in registers over the tile's value rows. The causal
// mask is computed (each row's length), never materialized. No allocation, any cache length, under
// 7 KiB of stack. The generic copy leaves the vector width to the compiler. The items are spread over
// the runtime's worker pool (threadpool.h) when there is enough work to pay for waking it.
#include <algorithm>
#include <cmath>
#include <cstring>
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

constexpr int64_t kTile = 128;      // key rows per tile
constexpr int kMaxRows = 4;         // query heads of one position sharing one kv head, processed together (GQA)
constexpr int kMaxBlockRows = 12;   // query rows of one item: up to kMaxRows heads of consecutive positions

/// Asks for the cache lines of `count` rows of `elements` values each, `row_stride` elements apart, to be
/// brought to L1 (kLocality 3) or L2 (2): a hint that never faults (nothing where the compiler has none). The
/// cache is read a few hundred bytes per row at a stride of every kv head's row, and between two decode
/// steps the weights have streamed through the caches, so without it each row's first load waits for memory.
template <int kLocality, typename T>
inline void prefetch_rows(const T* rows, int64_t count, int64_t row_stride, int64_t elements) {
#if defined(__GNUC__) || defined(__clang__)
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(T));
  for (int64_t j = 0; j < count; ++j) {
    const char* row = reinterpret_cast<const char*>(rows + j * row_stride);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, kLocality);
  }
#else
  (void)rows, (void)count, (void)row_stride, (void)elements;
#endif
}

/// A cache element as float: float32 as is, float16 (IEEE binary16 bits) converted.
inline float f32(float x) { return x; }
inline float f32(uint16_t h) { return half_to_float(h); }

// Vec: kLanes floats in one register of this copy's instruction set (AVX-512: 16, AVX2: 8), or, in the
// generic copy, 4 lanes of a GCC/Clang vector type (8 floats with another compiler). load() converts float16.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kAccRegs = 24;  // registers accumulate_values may hold output blocks in (of 32)
constexpr bool kWideItems = true;  // items of several consecutive positions (see Attention)
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
  float max() const { return _mm512_reduce_max_ps(v); }
};
inline Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline Vec add(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec sub(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec vmax(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }

/// Lane j = the sum of a[j]'s lanes. Four halving steps, each adding two shuffles of a pair of
/// vectors: 512-bit blocks of 8 lanes, then of 4, then pairs within 128-bit lanes, then single lanes.
/// The steps leave key j in lane kLaneOfKey[j] (the table is its own inverse), which one permute undoes.
inline Vec sum_each(const Vec* a) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i) {  // lanes 0-7: a[i]'s 8 partial sums, lanes 8-15: a[i + 8]'s
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i].v, a[i + 8].v, 0x44), _mm512_shuffle_f32x4(a[i].v, a[i + 8].v, 0xEE));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit quarters: keys i, i + 8, i + 4, i + 12 (4 partial sums each)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[i], b[i + 4], 0x88), _mm512_shuffle_f32x4(b[i], b[i + 4], 0xDD));
  }
  for (int i = 0; i < 2; ++i) {  // per quarter: 2 partial sums of c[i]'s key, then 2 of c[i + 2]'s
    d[i] = _mm512_add_ps(_mm512_shuffle_ps(c[i], c[i + 2], 0x44), _mm512_shuffle_ps(c[i], c[i + 2], 0xEE));
  }
  const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
  const __m512i kLaneOfKey = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return {_mm512_permutexvar_ps(kLaneOfKey, e)};
}

/// The pieces of exp_nonpositive (below) this instruction set does its own way: rounding to the nearest
/// integer; y * 2^n for integral n in [-126, 0]; and y where x >= lowest, else 0 (NaN x keeps y).
inline Vec round_nearest(Vec x) { return {_mm512_roundscale_ps(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline Vec times_pow2(Vec y, Vec n) { return {_mm512_scalef_ps(y.v, n.v)}; }
inline Vec zero_below(Vec y, Vec x, Vec lowest) {
  return {_mm512_mask_mov_ps(y.v, _mm512_cmp_ps_mask(x.v, lowest.v, _CMP_LT_OQ), _mm512_setzero_ps())};
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
constexpr int kAccRegs = 12;  // of 16 registers: the rest hold value vectors and a broadcast
constexpr bool kWideItems = true;
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
  float max() const {
    const __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(q, _mm_movehdup_ps(q)));
  }
};
inline Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
inline Vec sub(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline Vec vmax(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }

/// Lane j = the sum of a[j]'s lanes: horizontal adds of pairs, twice (within 128-bit lanes), then the
/// two 128-bit halves added.
inline Vec sum_each(const Vec* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0].v, a[1].v), t1 = _mm256_hadd_ps(a[2].v, a[3].v);
  const __m256 t2 = _mm256_hadd_ps(a[4].v, a[5].v), t3 = _mm256_hadd_ps(a[6].v, a[7].v);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);  // keys 0-3 | 4-7, per 128-bit half
  return {_mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31))};
}

/// The pieces of exp_nonpositive (see the AVX-512 copy); 2^n is built in the float's exponent bits.
inline Vec round_nearest(Vec x) { return {_mm256_round_ps(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline Vec times_pow2(Vec y, Vec n) {  // (n + 127) << 23 is 2^n as a normal float
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127)), 23);
  return {_mm256_mul_ps(y.v, _mm256_castsi256_ps(bits))};
}
inline Vec zero_below(Vec y, Vec x, Vec lowest) {
  return {_mm256_blendv_ps(y.v, _mm256_setzero_ps(), _mm256_cmp_ps(x.v, lowest.v, _CMP_LT_OQ))};
}
#else
// The generic copy. With GCC or Clang, 4 lanes as a vector type: one register on every 128-bit SIMD
// target (SSE2, NEON), so a Vec never goes through memory between functions; with another compiler, 8
// floats it may vectorize. Items stay one position wide (kMaxRows rows) and scores go a key at a time
// for all rows (dot_rows).
constexpr bool kWideItems = false;
constexpr int kAccRegs = 8;
#if defined(__GNUC__) || defined(__clang__)
#define ETKIT_ATTENTION_VECTOR_TYPE 1
constexpr int kLanes = 4;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
#else
constexpr int kLanes = 8;
struct Lanes {
  float x[kLanes];
  float& operator[](int j) { return x[j]; }
  float operator[](int j) const { return x[j]; }
};
#endif
struct Vec {
  Lanes v;
  static Vec zero() { return splat(0.f); }
  static Vec splat(float x) {
    Vec r;
    for (int j = 0; j < kLanes; ++j) r.v[j] = x;
    return r;
  }
  static Vec load(const float* p) {
    Vec r;
    std::memcpy(&r.v, p, sizeof(r.v));
    return r;
  }
  static Vec load(const uint16_t* p) {
    float f[kLanes];
    for (int j = 0; j < kLanes; ++j) f[j] = half_to_float(p[j]);
    return load(f);
  }
  void store(float* p) const { std::memcpy(p, &v, sizeof(v)); }
  float sum() const {  // pairwise, as the vector copies reduce
    float t[kLanes];
    std::memcpy(t, &v, sizeof(v));
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int j = 0; j < w; ++j) t[j] += t[j + w];
    }
    return t[0];
  }
  float max() const {
    float m = v[0];
    for (int j = 1; j < kLanes; ++j) m = m > v[j] ? m : v[j];
    return m;
  }
};
#ifdef ETKIT_ATTENTION_VECTOR_TYPE
inline Vec fma(Vec a, Vec b, Vec c) { return {a.v * b.v + c.v}; }
inline Vec mul(Vec a, Vec b) { return {a.v * b.v}; }
inline Vec add(Vec a, Vec b) { return {a.v + b.v}; }
inline Vec sub(Vec a, Vec b) { return {a.v - b.v}; }
#undef ETKIT_ATTENTION_VECTOR_TYPE
#else
inline Vec fma(Vec a, Vec b, Vec c) {
  for (int j = 0; j < kLanes; ++j) c.v[j] += a.v[j] * b.v[j];
  return c;
}
inline Vec mul(Vec a, Vec b) {
  for (int j = 0; j < kLanes; ++j) a.v[j] *= b.v[j];
  return a;
}
inline Vec add(Vec a, Vec b) {
  for (int j = 0; j < kLanes; ++j) a.v[j] += b.v[j];
  return a;
}
inline Vec sub(Vec a, Vec b) {
  for (int j = 0; j < kLanes; ++j) a.v[j] -= b.v[j];
  return a;
}
#endif
inline Vec vmax(Vec a, Vec b) {  // as the vector instructions: b unless a > b (so b when either is NaN)
  for (int j = 0; j < kLanes; ++j) a.v[j] = a.v[j] > b.v[j] ? a.v[j] : b.v[j];
  return a;
}
inline Vec sum_each(const Vec* a) {
  Vec r;
  for (int j = 0; j < kLanes; ++j) r.v[j] = a[j].sum();
  return r;
}
inline Vec exp_nonpositive(Vec x) {
  for (int j = 0; j < kLanes; ++j) x.v[j] = std::exp(x.v[j]);
  return x;
}
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/// exp(x) for x <= 0 (a score minus the row's max); NaN stays NaN, x < -87 gives 0. x = n ln2 + r with
/// |r| <= ln2 / 2 (ln2 in two parts, so r is exact to float rounding); e^r by its Taylor series to r^6
/// (relative error below 2e-7), then times 2^n.
inline Vec exp_nonpositive(Vec x) {
  const Vec lowest = Vec::splat(-87.f);
  const Vec xc = vmax(lowest, x);  // the second operand when either is NaN: NaN stays
  const Vec n = round_nearest(mul(xc, Vec::splat(1.44269504088896341f)));
  Vec r = fma(n, Vec::splat(-0.693145751953125f), xc);
  r = fma(n, Vec::splat(-1.428606765330187e-06f), r);
  Vec p = Vec::splat(1.f / 720);
  for (const float c : {1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f}) p = fma(p, r, Vec::splat(c));
  return zero_below(times_pow2(p, n), x, lowest);
}
#endif

/// res[r] = q[r] . k for NQ rows: kLanes partial sums per row, reduced at the end; each key element
/// loaded serves all NQ rows (the copies without kWideItems score keys this way, the others a tile's
/// last few keys).
template <int NQ, typename T>
inline void dot_rows(const float* const* q, const T* __restrict k, int64_t n, float* __restrict res) {
  Vec acc[NQ];
  for (int r = 0; r < NQ; ++r) acc[r] = Vec::zero();
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    const Vec kv = Vec::load(k + d);
    for (int r = 0; r < NQ; ++r) acc[r] = fma(Vec::load(q[r] + d), kv, acc[r]);
  }
  for (int r = 0; r < NQ; ++r) {
    float s = acc[r].sum();
    for (int64_t e = d; e < n; ++e) s += q[r][e] * f32(k[e]);
    res[r] = s;
  }
}

/// Lane j = q . k_j for the kLanes key rows k_j = k + j * row_stride: one accumulator per key (the query
/// loaded once per kLanes elements serves all of them), then one sum_each for the kLanes horizontal sums.
template <typename T>
inline Vec dot_keys(const float* __restrict q, const T* __restrict k, int64_t row_stride, int64_t n) {
  Vec acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = Vec::zero();
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    const Vec qv = Vec::load(q + d);
    for (int j = 0; j < kLanes; ++j) acc[j] = fma(qv, Vec::load(k + j * row_stride + d), acc[j]);
  }
  Vec s = sum_each(acc);
  if (d < n) {  // a head_dim that is not a multiple of kLanes
    float t[kLanes];
    s.store(t);
    for (int j = 0; j < kLanes; ++j) {
      for (int64_t e = d; e < n; ++e) t[j] += q[e] * f32(k[j * row_stride + e]);
    }
    s = Vec::load(t);
  }
  return s;
}

inline void scale_row(float* __restrict y, float f, int64_t n) {
  const Vec fv = Vec::splat(f);
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) mul(Vec::load(y + d), fv).store(y + d);
  for (; d < n; ++d) y[d] *= f;
}

template <typename T>
inline void axpy(float* __restrict y, const T* __restrict x, float p, int64_t n) {
  const Vec pv = Vec::splat(p);
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) fma(pv, Vec::load(x + d), Vec::load(y + d)).store(y + d);
  for (; d < n; ++d) y[d] += p * f32(x[d]);
}

/// out[r][d0, d0 + CV * kLanes) += sum_j p[r][j] * v_j[...] for each block of CV vectors from d0 while a
/// whole block fits in n_dims; returns where the blocks stopped. The block of every output row stays in
/// registers for the whole pass over the value rows (NQ * CV independent accumulators, each value vector
/// loaded once for all NQ rows), so the loop is bound by multiply-add throughput, not by reloading and
/// storing out.
template <int NQ, int CV, typename T>
inline int64_t accumulate_blocks(float* const* out, const float (*p)[kTile], const T* __restrict v,
                                 int64_t row_stride, int64_t n, int64_t n_dims, int64_t d0) {
  int64_t d = d0;
  for (; d + CV * kLanes <= n_dims; d += CV * kLanes) {
    Vec acc[NQ][CV];
    for (int r = 0; r < NQ; ++r) {
      for (int c = 0; c < CV; ++c) acc[r][c] = Vec::load(out[r] + d + c * kLanes);
    }
    for (int64_t j = 0; j < n; ++j) {
      const T* vj = v + j * row_stride + d;
      Vec vv[CV];
      for (int c = 0; c < CV; ++c) vv[c] = Vec::load(vj + c * kLanes);
      for (int r = 0; r < NQ; ++r) {
        const Vec pr = Vec::splat(p[r][j]);
        for (int c = 0; c < CV; ++c) acc[r][c] = fma(pr, vv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < NQ; ++r) {
      for (int c = 0; c < CV; ++c) acc[r][c].store(out[r] + d + c * kLanes);
    }
  }
  return d;
}

/// Vectors per output-row block for NQ rows: the most (a power of two, at most 4) whose NQ * CV
/// accumulators fit kAccRegs.
constexpr int block_vecs(int nq) { return kAccRegs / nq >= 4 ? 4 : kAccRegs / nq >= 2 ? 2 : 1; }

/// out[r] += sum_j p[r][j] * v_j over the n value rows v_j = v + j * row_stride, for NQ output rows:
/// blocks of block_vecs(NQ) vectors, then single vectors, then the last columns.
template <int NQ, typename T>
inline void accumulate_values(float* const* out, const float (*p)[kTile], const T* __restrict v,
                              int64_t row_stride, int64_t n, int64_t n_dims) {
  int64_t d = 0;
  if constexpr (block_vecs(NQ) > 1) d = accumulate_blocks<NQ, block_vecs(NQ), T>(out, p, v, row_stride, n, n_dims, d);
  d = accumulate_blocks<NQ, 1, T>(out, p, v, row_stride, n, n_dims, d);
  if (d < n_dims) {
    for (int64_t j = 0; j < n; ++j) {
      for (int r = 0; r < NQ; ++r) axpy(out[r] + d, v + j * row_stride + d, p[r][j], n_dims - d);
    }
  }
}

/// For NQ query rows q[r] that read the same kv head, row r seeing key rows [0, lengths[r]) (rows of
/// consecutive positions see different lengths under the causal mask):
/// out[r] = sum_{j < lengths[r]} softmax_j(scale * q[r] . k_j) v_j.
/// k and v point at key row 0 of the kv head; consecutive key rows are row_stride elements apart, and
/// `readable` rows (the cache's max_seq) may be read. Scores are computed for every row over the
/// longest length, then a key past a row's length gets a score of -inf (probability exactly 0) and is
/// left out of that row's value sum, so cache rows a row must not see (even NaN ones) never reach its
/// output.
template <int NQ, typename T>
void attend_rows(const float* const* q, float* const* out, const int64_t* lengths, const T* k, const T* v,
                 int64_t readable, int64_t row_stride, int64_t head_dim, float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float scores[NQ][kTile];  // at most kMaxBlockRows * kTile floats (6 KiB) of stack
  float running_max[NQ], running_sum[NQ];
  int64_t longest = 0;
  for (int r = 0; r < NQ; ++r) {
    running_max[r] = kNegInf;
    running_sum[r] = 0.f;
    longest = std::max(longest, lengths[r]);
    std::fill(out[r], out[r] + head_dim, 0.f);
  }
  const Vec scale_v = Vec::splat(scale);
  for (int64_t t0 = 0; t0 < longest; t0 += kTile) {
    const int64_t n = std::min(kTile, longest - t0);
    const T* kt = k + t0 * row_stride;
    const T* vt = v + t0 * row_stride;
    // 1. scores of the tile: kLanes keys at a time for every row (the key block stays in L1 across rows),
    // the last block rounded up to kLanes keys while the cache has the rows (their scores are not used)
    const int64_t n_blocks = std::min((n + kLanes - 1) / kLanes * kLanes, readable - t0);
    int64_t j = 0;
    if constexpr (kWideItems) {
      for (; j + kLanes <= n_blocks; j += kLanes) {
        if constexpr (NQ <= kMaxRows) {
          // one position's rows (a decode step), too few to hide memory latency behind their arithmetic: ask
          // for the next block's keys (to L1) and this block's value rows (to L2: a tile of them can fill
          // L1; they are read after the tile's scores), a block at a time so the requests spread out. More
          // rows find the cache already near from the items before them, and would only pay the requests.
          const int64_t next = std::min<int64_t>(kLanes, n - j - kLanes);
          if (next > 0) prefetch_rows<3>(kt + (j + kLanes) * row_stride, next, row_stride, head_dim);
          prefetch_rows<2>(vt + j * row_stride, std::min<int64_t>(kLanes, n - j), row_stride, head_dim);
        }
        for (int r = 0; r < NQ; ++r) {
          mul(dot_keys<T>(q[r], kt + j * row_stride, row_stride, head_dim), scale_v).store(&scores[r][j]);
        }
      }
      for (; j < n; ++j) {
        for (int r = 0; r < NQ; ++r) {
          float dot;
          dot_rows<1, T>(&q[r], kt + j * row_stride, head_dim, &dot);
          scores[r][j] = scale * dot;
        }
      }
    } else {
      for (; j < n; ++j) {
        float dots[NQ];
        dot_rows<NQ, T>(q, kt + j * row_stride, head_dim, dots);
        for (int r = 0; r < NQ; ++r) scores[r][j] = scale * dots[r];
      }
    }
    int64_t seen[NQ];  // keys of this tile row r sees
    int64_t common = n;  // keys every row sees
    for (int r = 0; r < NQ; ++r) {
      seen[r] = std::clamp<int64_t>(lengths[r] - t0, 0, n);
      common = std::min(common, seen[r]);
      std::fill(&scores[r][seen[r]], &scores[r][n], kNegInf);
      // 2. the tile's max; rescale what row r accumulated so far to the new max
      Vec max_v = Vec::splat(kNegInf);
      int64_t e = 0;
      for (; e + kLanes <= n; e += kLanes) max_v = vmax(max_v, Vec::load(&scores[r][e]));
      float tile_max = max_v.max();
      for (; e < n; ++e) tile_max = std::max(tile_max, scores[r][e]);
      const float new_max = std::max(running_max[r], tile_max);
      if (new_max > running_max[r] && running_sum[r] != 0.f) {
        const float c = std::exp(running_max[r] - new_max);
        running_sum[r] *= c;
        scale_row(out[r], c, head_dim);
      }
      running_max[r] = new_max;
      // 3. unnormalised probabilities of the tile
      const Vec new_max_v = Vec::splat(new_max);
      Vec sum_v = Vec::zero();
      for (e = 0; e + kLanes <= n; e += kLanes) {
        const Vec p = exp_nonpositive(sub(Vec::load(&scores[r][e]), new_max_v));
        p.store(&scores[r][e]);
        sum_v = add(sum_v, p);
      }
      float tile_sum = sum_v.sum();
      for (; e < n; ++e) {
        const float p = std::exp(scores[r][e] - new_max);  // 0 for a key past the row's length
        scores[r][e] = p;
        tile_sum += p;
      }
      running_sum[r] += tile_sum;
    }
    // 4. the value rows: those every row sees together, then each row's last few alone
    accumulate_values<NQ, T>(out, scores, vt, row_stride, common, head_dim);
    for (j = common; j < n; ++j) {
      for (int r = 0; r < NQ; ++r) {
        if (j < seen[r]) axpy(out[r], vt + j * row_stride, scores[r][j], head_dim);
      }
    }
  }
  for (int r = 0; r < NQ; ++r) scale_row(out[r], 1.f / running_sum[r], head_dim);
}

/// Runs attend_rows with NQ = rows (1 ..= kMaxBlockRows) as a compile-time count.
template <typename T, int NQ = kMaxBlockRows>
inline void attend_dispatch(int rows, const float* const* q, float* const* out, const int64_t* lengths, const T* k,
                            const T* v, int64_t readable, int64_t row_stride, int64_t head_dim, float scale) {
  if constexpr (NQ > 1) {
    if (rows < NQ) {
      return attend_dispatch<T, NQ - 1>(rows, q, out, lengths, k, v, readable, row_stride, head_dim, scale);
    }
  }
  attend_rows<NQ, T>(q, out, lengths, k, v, readable, row_stride, head_dim, scale);
}

/// The attention problem of one call. An item is one batch row, one kv head, up to kMaxRows of the query
/// heads that read it (from query head kvh * groups + g) and `positions` consecutive positions of them:
/// up to kMaxBlockRows query rows that go over the same cache rows together.
template <typename T>
struct Attention {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  int64_t seq, heads, kv_heads, head_dim, max_seq, start_pos;
  bool is_causal;
  float scale;
  int64_t groups, blocks;  // query heads per kv head; blocks of kMaxRows of them per kv head
  int64_t positions;       // positions per item (1 for float16, whose rows are converted on the stack,
                           // and in the generic copy)

  int64_t position_blocks() const { return (seq + positions - 1) / positions; }
  int64_t items(int64_t batch) const { return batch * position_blocks() * kv_heads * blocks; }

  /// T: the storage type (float, or float16 bits); float16 rows are converted into float stack buffers
  /// (head_dim <= kMaxHalfDim, checked by the caller) and the result rounded back.
  void run(int64_t item) const {
    const int64_t block = item % blocks;
    const int64_t kvh = (item / blocks) % kv_heads;
    const int64_t i0 = (item / (blocks * kv_heads)) % position_blocks() * positions;
    const int64_t b = item / (blocks * kv_heads * position_blocks());
    const int64_t row_stride = kv_heads * head_dim;  // elements between consecutive key rows of one kv head
    const T* kh = k + b * max_seq * row_stride + kvh * head_dim;
    const T* vh = v + b * max_seq * row_stride + kvh * head_dim;
    const int64_t g = block * kMaxRows;
    const int per_position = static_cast<int>(std::min<int64_t>(kMaxRows, groups - g));
    const int count = static_cast<int>(std::min(positions, seq - i0));
    const int rows = per_position * count;
    const float* q_rows[kMaxBlockRows];
    float* o_rows[kMaxBlockRows];
    int64_t lengths[kMaxBlockRows];
    float q_buf[std::is_same<T, float>::value ? 1 : kMaxRows * kMaxHalfDim];
    float o_buf[std::is_same<T, float>::value ? 1 : kMaxRows * kMaxHalfDim];
    for (int p = 0; p < count; ++p) {
      // query heads kvh * groups + g ... of position i0 + p are adjacent rows of query and out
      const int64_t offset = ((b * seq + i0 + p) * heads + kvh * groups + g) * head_dim;
      for (int r = 0; r < per_position; ++r) {
        const int row = p * per_position + r;
        lengths[row] = is_causal ? start_pos + i0 + p + 1 : start_pos + seq;
        if constexpr (std::is_same<T, float>::value) {
          q_rows[row] = q + offset + r * head_dim;
          o_rows[row] = o + offset + r * head_dim;
        } else {  // positions == 1: row < kMaxRows
          for (int64_t e = 0; e < head_dim; ++e) q_buf[row * head_dim + e] = f32(q[offset + r * head_dim + e]);
          q_rows[row] = q_buf + row * head_dim;
          o_rows[row] = o_buf + row * head_dim;
        }
      }
    }
    attend_dispatch<T>(rows, q_rows, o_rows, lengths, kh, vh, max_seq, row_stride, head_dim, scale);
    if constexpr (!std::is_same<T, float>::value) {
      const int64_t offset = ((b * seq + i0) * heads + kvh * groups + g) * head_dim;
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
  const int64_t per_position = std::min<int64_t>(kMaxRows, groups);
  const int64_t positions = kWideItems && std::is_same<T, float>::value ? kMaxBlockRows / per_position : 1;
  const Attention<T> attention{static_cast<const T*>(p.query), static_cast<const T*>(p.key),
                               static_cast<const T*>(p.value), static_cast<T*>(p.out),
                               p.seq, p.heads, p.kv_heads, p.head_dim, p.max_seq, p.start_pos, p.is_causal,
                               p.scale, groups, blocks, positions};
  const int64_t items = attention.items(p.batch);
  const int64_t rows = p.is_causal ? p.start_pos + (p.seq + 1) / 2 : p.start_pos + p.seq;  // cache rows, on average
  if (p.seq == 1) {
    // A decode step: between two steps the weights have streamed through the caches, so every cache row this
    // call reads comes from memory, and read a head at a time (a few hundred bytes per row, strided) the loads
    // wait on memory latency. Asking for the whole used region at once, in address order, lets the memory
    // system fetch it at streaming speed while the items start; the per-block hints in attend_rows then bring
    // each block to L1.
    const int64_t row_elems = p.kv_heads * p.head_dim, used = std::min(p.max_seq, p.start_pos + 1);
    for (int64_t b = 0; b < p.batch; ++b) {
      prefetch_rows<2>(static_cast<const T*>(p.key) + b * p.max_seq * row_elems, 1, 0, used * row_elems);
      prefetch_rows<2>(static_cast<const T*>(p.value) + b * p.max_seq * row_elems, 1, 0, used * row_elems);
    }
  }
  const int64_t work_per_item = std::max<int64_t>(1, 2 * rows * p.head_dim * per_position * std::min(positions, p.seq));
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
