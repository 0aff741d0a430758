// Matrix products: mm, bmm, addmm. Float32 accumulates in float (row-major i-k-j loop for locality),
// other floating dtypes in double; integer dtypes in int64.
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

/// C[m,n] = sum_k A[m,k] * B[k,n] for matrix views given by base offsets and strides (in elements).
struct MatView {
  const Tensor* t;
  size_t base;
  int64_t rs, cs;  // row and column strides
};

void matmul(const MatView& a, const MatView& b, Tensor& c, size_t c_base, int64_t c_rs, int64_t c_cs, size_t m,
            size_t k, size_t n, double beta, const Tensor* bias, const int64_t* bias_strides, double alpha) {
  const ScalarType ct = c.scalar_type();
  if (ct == ScalarType::Float && a.t->scalar_type() == ScalarType::Float && b.t->scalar_type() == ScalarType::Float &&
      (bias == nullptr || bias->scalar_type() == ScalarType::Float)) {
    const float* A = a.t->const_data_ptr<float>();
    const float* B = b.t->const_data_ptr<float>();
    float* C = c.mutable_data_ptr<float>();
    for (size_t i = 0; i < m; ++i) {
      float* crow = C + c_base + i * c_rs;
      for (size_t j = 0; j < n; ++j) crow[j * c_cs] = 0.f;
      for (size_t p = 0; p < k; ++p) {
        const float av = A[a.base + i * a.rs + p * a.cs];
        const float* brow = B + b.base + p * b.rs;
        if (c_cs == 1 && b.cs == 1) {
          for (size_t j = 0; j < n; ++j) crow[j] += av * brow[j];
        } else {
          for (size_t j = 0; j < n; ++j) crow[j * c_cs] += av * brow[j * b.cs];
        }
      }
      if (bias != nullptr || alpha != 1.0) {
        const float* bp = bias ? bias->const_data_ptr<float>() : nullptr;
        for (size_t j = 0; j < n; ++j) {
          float v = static_cast<float>(alpha) * crow[j * c_cs];
          if (bp) v += static_cast<float>(beta) * bp[i * bias_strides[0] + j * bias_strides[1]];
          crow[j * c_cs] = v;
        }
      }
    }
    return;
  }
  const bool use_int = !is_floating(ct);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double accd = 0;
      int64_t acci = 0;
      for (size_t p = 0; p < k; ++p) {
        size_t ao = a.base + i * a.rs + p * a.cs, bo = b.base + p * b.rs + j * b.cs;
        if (use_int) {
          acci = wrap_add(acci, wrap_mul(load_int(a.t->const_data_ptr(), a.t->scalar_type(), ao),
                                         load_int(b.t->const_data_ptr(), b.t->scalar_type(), bo)));
        } else {
          accd += load_double(a.t->const_data_ptr(), a.t->scalar_type(), ao) *
                  load_double(b.t->const_data_ptr(), b.t->scalar_type(), bo);
        }
      }
      size_t co = c_base + i * c_rs + j * c_cs;
      if (use_int) {
        int64_t v = wrap_mul(double_to_int64(alpha), acci);
        if (bias) {
          v = wrap_add(v, wrap_mul(double_to_int64(beta), load_int(bias->const_data_ptr(), bias->scalar_type(),
                                                                   i * bias_strides[0] + j * bias_strides[1])));
        }
        store_int(c.mutable_data_ptr(), ct, co, v);
      } else {
        double v = alpha * accd;
        if (bias) v += beta * load_double(bias->const_data_ptr(), bias->scalar_type(),
                                          i * bias_strides[0] + j * bias_strides[1]);
        store_double(c.mutable_data_ptr(), ct, co, v);
      }
    }
  }
}

bool check_2d(KernelRuntimeContext& ctx, const char* name, const Tensor& t, const char* arg, size_t rank) {
  if (t.dim() != rank) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' must be %zu-D, got %zu-D", name, arg, rank, t.dim());
  }
  return true;
}

}  // namespace

// mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)
ETKIT_KERNEL(mm_out, Tensor* a, Tensor* b, Tensor* out) {
  if (!check_2d(ctx, name, *a, "self", 2) || !check_2d(ctx, name, *b, "mat2", 2)) return;
  if (a->size(1) != b->size(0)) {
    fail(ctx, Error::InvalidArgument, "%s: shapes [%d, %d] and [%d, %d] cannot be multiplied", name, a->size(0),
         a->size(1), b->size(0), b->size(1));
    return;
  }
  SizesType s[2] = {a->size(0), b->size(1)};
  if (!resize_out(ctx, name, *out, s, 2)) return;
  matmul({a, 0, a->stride(0), a->stride(1)}, {b, 0, b->stride(0), b->stride(1)}, *out, 0, out->stride(0),
         out->stride(1), a->size(0), a->size(1), b->size(1), 0, nullptr, nullptr, 1.0);
}

// bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)
ETKIT_KERNEL(bmm_out, Tensor* a, Tensor* b, Tensor* out) {
  if (!check_2d(ctx, name, *a, "self", 3) || !check_2d(ctx, name, *b, "mat2", 3)) return;
  if (a->size(0) != b->size(0) || a->size(2) != b->size(1)) {
    fail(ctx, Error::InvalidArgument, "%s: shapes [%d, %d, %d] and [%d, %d, %d] cannot be batch-multiplied", name,
         a->size(0), a->size(1), a->size(2), b->size(0), b->size(1), b->size(2));
    return;
  }
  SizesType s[3] = {a->size(0), a->size(1), b->size(2)};
  if (!resize_out(ctx, name, *out, s, 3)) return;
  for (SizesType i = 0; i < a->size(0); ++i) {
    matmul({a, size_t(i) * a->stride(0), a->stride(1), a->stride(2)},
           {b, size_t(i) * b->stride(0), b->stride(1), b->stride(2)}, *out, size_t(i) * out->stride(0),
           out->stride(1), out->stride(2), a->size(1), a->size(2), b->size(2), 0, nullptr, nullptr, 1.0);
  }
}

// addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, Tensor(a!) out)
ETKIT_KERNEL(addmm_out, Tensor* bias, Tensor* a, Tensor* b, double beta, double alpha, Tensor* out) {
  if (!check_2d(ctx, name, *a, "mat1", 2) || !check_2d(ctx, name, *b, "mat2", 2)) return;
  if (a->size(1) != b->size(0)) {
    fail(ctx, Error::InvalidArgument, "%s: shapes [%d, %d] and [%d, %d] cannot be multiplied", name, a->size(0),
         a->size(1), b->size(0), b->size(1));
    return;
  }
  const SizesType m = a->size(0), n = b->size(1);
  if (bias->dim() > 2) {
    fail(ctx, Error::InvalidArgument, "%s: argument 'self' must be at most 2-D, got %zu-D", name, bias->dim());
    return;
  }
  // Broadcast strides for the bias (shape [n], [1, n], [m, 1], [m, n] or scalar).
  int64_t bs[2] = {0, 0};
  for (size_t d = 0; d < bias->dim(); ++d) {
    size_t od = 2 - bias->dim() + d;
    SizesType want = od == 0 ? m : n;
    if (bias->size(d) != 1 && bias->size(d) != want) {
      fail(ctx, Error::InvalidArgument, "%s: argument 'self' of size %d cannot broadcast to %d at dim %zu", name,
           bias->size(d), want, od);
      return;
    }
    bs[od] = bias->size(d) == 1 ? 0 : bias->stride(d);
  }
  SizesType s[2] = {m, n};
  if (!resize_out(ctx, name, *out, s, 2)) return;
  matmul({a, 0, a->stride(0), a->stride(1)}, {b, 0, b->stride(0), b->stride(1)}, *out, 0, out->stride(0),
         out->stride(1), m, a->size(1), n, beta, bias, bs, alpha);
}

}  // namespace etkit::portable
