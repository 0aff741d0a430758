// Reductions and normalisations: sum, mean, amax, amin, any, argmax, argmin, max.dim, min.dim,
// cumsum, _softmax, _log_softmax, native_layer_norm, _native_batch_norm_legit_no_training.
// Accumulation is in double (int64 for integer sums); results are stored in the output dtype.
#include <cmath>
#include <initializer_list>
#include <limits>

#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

/// Which input dims are kept and which are reduced, and the output shape.
struct ReducePlan {
  size_t kept[runtime::kTensorDimensionLimit];
  size_t nkept = 0;
  size_t red[runtime::kTensorDimensionLimit];
  size_t nred = 0;
  SizesType out_sizes[runtime::kTensorDimensionLimit];
  size_t out_dim = 0;
};

/// `dims` empty (or `all`) reduces every dim, as torch does for dim=None / dim=[].
bool make_plan(KernelRuntimeContext& ctx, const char* name, const Tensor& in, Span<const int64_t> dims, bool all,
               bool keepdim, ReducePlan* p) {
  bool reduce[runtime::kTensorDimensionLimit] = {false};
  if (all || dims.empty()) {
    for (size_t d = 0; d < in.dim(); ++d) reduce[d] = true;
  } else {
    for (int64_t d : dims) {
      size_t nd;
      if (!normalize_dim(ctx, name, d, in.dim(), &nd)) return false;
      if (in.dim() > 0) reduce[nd] = true;
    }
  }
  for (size_t d = 0; d < in.dim(); ++d) {
    if (reduce[d]) {
      p->red[p->nred++] = d;
      if (keepdim) p->out_sizes[p->out_dim++] = 1;
    } else {
      p->kept[p->nkept++] = d;
      p->out_sizes[p->out_dim++] = in.size(d);
    }
  }
  return true;
}

/// For each output element (row-major over kept dims) calls begin(), then step(in_offset) for every
/// reduced element, then end(out_index, count).
template <typename Begin, typename Step, typename End>
void reduce_loop(const Tensor& in, const ReducePlan& p, Begin begin, Step step, End end) {
  size_t n_out = 1, n_red = 1;
  for (size_t j = 0; j < p.nkept; ++j) n_out *= static_cast<size_t>(in.size(p.kept[j]));
  for (size_t j = 0; j < p.nred; ++j) n_red *= static_cast<size_t>(in.size(p.red[j]));
  int64_t kidx[runtime::kTensorDimensionLimit] = {0};
  for (size_t o = 0; o < n_out; ++o) {
    int64_t base = 0;
    for (size_t j = 0; j < p.nkept; ++j) base += kidx[j] * in.stride(p.kept[j]);
    begin();
    int64_t ridx[runtime::kTensorDimensionLimit] = {0};
    for (size_t r = 0; r < n_red; ++r) {
      int64_t off = base;
      for (size_t j = 0; j < p.nred; ++j) off += ridx[j] * in.stride(p.red[j]);
      step(static_cast<size_t>(off));
      for (size_t j = p.nred; j-- > 0;) {
        if (++ridx[j] < in.size(p.red[j])) break;
        ridx[j] = 0;
      }
    }
    end(o, n_red);
    for (size_t j = p.nkept; j-- > 0;) {
      if (++kidx[j] < in.size(p.kept[j])) break;
      kidx[j] = 0;
    }
  }
}

bool check_contiguous_out(KernelRuntimeContext& ctx, const char* name, const Tensor& out) {
  if (!out.is_contiguous_dim_order()) {
    return fail(ctx, Error::NotSupported, "%s: the portable kernel needs a contiguous output", name);
  }
  return true;
}

enum class Red { Sum, Mean, Max, Min, Any, Prod };

// Shared body of sum/mean/amax/amin/any over `dims`.
void reduce_op(KernelRuntimeContext& ctx, const char* name, Red kind, const Tensor& in, Span<const int64_t> dims,
               bool all, bool keepdim, Tensor& out) {
  ReducePlan p;
  if (!make_plan(ctx, name, in, dims, all, keepdim, &p)) return;
  if (!resize_out(ctx, name, out, p.out_sizes, p.out_dim) || !check_contiguous_out(ctx, name, out)) return;
  const void* x = in.const_data_ptr();
  const ScalarType it = in.scalar_type(), ot = out.scalar_type();
  const bool int_sum = (kind == Red::Sum || kind == Red::Prod) && !is_floating(ot) && !is_floating(it);
  double acc = 0;
  int64_t iacc = 0;
  reduce_loop(
      in, p,
      [&] {
        iacc = kind == Red::Prod ? 1 : 0;
        acc = kind == Red::Max ? -std::numeric_limits<double>::infinity()
              : kind == Red::Min ? std::numeric_limits<double>::infinity()
              : kind == Red::Prod ? 1.0
                                  : 0.0;
      },
      [&](size_t off) {
        switch (kind) {
          case Red::Sum:
          case Red::Mean:
            if (int_sum) iacc = wrap_add(iacc, load_int(x, it, off));
            else acc += load_double(x, it, off);
            break;
          case Red::Max: {
            double v = load_double(x, it, off);
            if (std::isnan(v) || v > acc) acc = std::isnan(acc) ? acc : v;
            break;
          }
          case Red::Min: {
            double v = load_double(x, it, off);
            if (std::isnan(v) || v < acc) acc = std::isnan(acc) ? acc : v;
            break;
          }
          case Red::Any:
            if (load_double(x, it, off) != 0) acc = 1;
            break;
          case Red::Prod:  // integer products wrap like torch's int64 arithmetic
            if (int_sum) iacc = static_cast<int64_t>(static_cast<uint64_t>(iacc) * static_cast<uint64_t>(load_int(x, it, off)));
            else acc *= load_double(x, it, off);
            break;
        }
      },
      [&](size_t o, size_t count) {
        if (int_sum) {
          store_int(out.mutable_data_ptr(), ot, o, iacc);
        } else if (kind == Red::Mean) {
          store_double(out.mutable_data_ptr(), ot, o, count == 0 ? NAN : acc / double(count));
        } else if ((kind == Red::Max || kind == Red::Min) && !is_floating(ot)) {
          store_int(out.mutable_data_ptr(), ot, o, double_to_int64(acc));  // +-inf of an empty reduction: defined
        } else {
          store_double(out.mutable_data_ptr(), ot, o, acc);
        }
      });
}

}  // namespace

// sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out)
ETKIT_KERNEL(sum_intlist_out, Tensor* a, IntList dims_arg, bool keepdim, Tensor* out) {
  Span<const int64_t> dims = dims_arg.list;
  bool all = dims_arg.is_none || dims.empty();
  reduce_op(ctx, name, Red::Sum, *a, dims, all, keepdim, *out);
}

// prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out)
ETKIT_KERNEL(prod_int_out, Tensor* a, int64_t dim, bool keepdim, Tensor* out) {
  const int64_t dims[1] = {dim};
  reduce_op(ctx, name, Red::Prod, *a, Span<const int64_t>(dims, 1), false, keepdim, *out);
}

// prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)
ETKIT_KERNEL(prod_out, Tensor* a, Tensor* out) {
  reduce_op(ctx, name, Red::Prod, *a, {}, true, false, *out);
}

// mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out)
ETKIT_KERNEL(mean_out, Tensor* a, IntList dims_arg, bool keepdim, Tensor* out) {
  Span<const int64_t> dims = dims_arg.list;
  bool all = dims_arg.is_none || dims.empty();
  if (check_floating(ctx, name, *out, "out")) reduce_op(ctx, name, Red::Mean, *a, dims, all, keepdim, *out);
}

// mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)
ETKIT_KERNEL(mean_dtype_out, Tensor* a, Tensor* out) {
  if (check_floating(ctx, name, *out, "out")) reduce_op(ctx, name, Red::Mean, *a, {}, true, false, *out);
}

// amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)
ETKIT_KERNEL(amax_out, Tensor* a, IntList dims_arg, bool keepdim, Tensor* out) {
  Span<const int64_t> dims = dims_arg.list;
  bool all = dims_arg.is_none || dims.empty();
  reduce_op(ctx, name, Red::Max, *a, dims, all, keepdim, *out);
}

// amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)
ETKIT_KERNEL(amin_out, Tensor* a, IntList dims_arg, bool keepdim, Tensor* out) {
  Span<const int64_t> dims = dims_arg.list;
  bool all = dims_arg.is_none || dims.empty();
  reduce_op(ctx, name, Red::Min, *a, dims, all, keepdim, *out);
}

// any.all_out(Tensor self, *, Tensor(a!) out)
ETKIT_KERNEL(any_all_out, Tensor* a, Tensor* out) {
  reduce_op(ctx, name, Red::Any, *a, {}, true, false, *out);
}

// any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)
ETKIT_KERNEL(any_dims_out, Tensor* a, IntList dims_arg, bool keepdim, Tensor* out) {
  Span<const int64_t> dims = dims_arg.list;
  bool all = dims_arg.is_none || dims.empty();
  reduce_op(ctx, name, Red::Any, *a, dims, all, keepdim, *out);
}

// any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)
ETKIT_KERNEL(any_out, Tensor* a, int64_t dim, bool keepdim, Tensor* out) {
  reduce_op(ctx, name, Red::Any, *a, Span<const int64_t>(&dim, 1), false, keepdim, *out);
}

namespace {
// Shared body of argmax/argmin/max.dim/min.dim: writes values (may be null) and int64 indices.
void arg_reduce(KernelRuntimeContext& ctx, const char* name, bool is_max, const Tensor& in, bool has_dim, int64_t dim,
                bool keepdim, Tensor* values, Tensor* indices) {
  ReducePlan p;
  if (!make_plan(ctx, name, in, Span<const int64_t>(&dim, 1), !has_dim, keepdim, &p)) return;
  if (values && (!resize_out(ctx, name, *values, p.out_sizes, p.out_dim) || !check_contiguous_out(ctx, name, *values)))
    return;
  if (!resize_out(ctx, name, *indices, p.out_sizes, p.out_dim) || !check_contiguous_out(ctx, name, *indices)) return;
  double best = 0;
  int64_t best_i = 0, i = 0;
  bool first = true;
  reduce_loop(
      in, p, [&] { first = true; i = 0; best_i = 0; },
      [&](size_t off) {
        double v = load_double(in.const_data_ptr(), in.scalar_type(), off);
        bool better = first || (!std::isnan(best) && (std::isnan(v) || (is_max ? v > best : v < best)));
        if (better) { best = v; best_i = i; }
        first = false;
        ++i;
      },
      [&](size_t o, size_t) {
        if (values) store_double(values->mutable_data_ptr(), values->scalar_type(), o, best);
        store_int(indices->mutable_data_ptr(), indices->scalar_type(), o, best_i);
      });
}
}  // namespace

// argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)
ETKIT_KERNEL(argmax_out, Tensor* a, OptionalInt dim, bool keepdim, Tensor* out) {
  arg_reduce(ctx, name, true, *a, dim.has_value, dim.value, keepdim, nullptr, out);
}

// argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)
ETKIT_KERNEL(argmin_out, Tensor* a, OptionalInt dim, bool keepdim, Tensor* out) {
  arg_reduce(ctx, name, false, *a, dim.has_value, dim.value, keepdim, nullptr, out);
}

// max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values)
ETKIT_KERNEL(max_dim_max, Tensor* a, int64_t dim, bool keepdim, Tensor* v, Tensor* i) {
  arg_reduce(ctx, name, true, *a, true, dim, keepdim, v, i);
}

// min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!) min_indices)
ETKIT_KERNEL(min_dim_min, Tensor* a, int64_t dim, bool keepdim, Tensor* v, Tensor* i) {
  arg_reduce(ctx, name, false, *a, true, dim, keepdim, v, i);
}

namespace {
/// Splits a contiguous tensor around `dim` into outer x size x inner.
void split_dims(const Tensor& t, size_t dim, size_t* outer, size_t* size, size_t* inner) {
  *outer = 1;
  *inner = 1;
  for (size_t d = 0; d < dim; ++d) *outer *= static_cast<size_t>(t.size(d));
  for (size_t d = dim + 1; d < t.dim(); ++d) *inner *= static_cast<size_t>(t.size(d));
  *size = t.dim() == 0 ? 1 : static_cast<size_t>(t.size(dim));
}

bool check_contiguous(KernelRuntimeContext& ctx, const char* name, const Tensor& t, const char* arg) {
  if (!t.is_contiguous_dim_order()) {
    return fail(ctx, Error::NotSupported, "%s: argument '%s' must be contiguous for the portable kernel", name, arg);
  }
  return true;
}

/// (self, dim, out) of _softmax / _log_softmax.
template <bool log>
void softmax_impl(KernelRuntimeContext& ctx, const char* name, Tensor* a, int64_t dim, Tensor* out) {
  size_t d;
  if (!check_floating(ctx, name, *a, "self") || !normalize_dim(ctx, name, dim, a->dim(), &d) ||
      !check_contiguous(ctx, name, *a, "self") || !check_contiguous(ctx, name, *out, "out") ||
      !resize_out(ctx, name, *out, a->sizes().data(), a->dim()))
    return;
  size_t outer, size, inner;
  split_dims(*a, d, &outer, &size, &inner);
  const void* x = a->const_data_ptr();
  void* y = out->mutable_data_ptr();
  const ScalarType it = a->scalar_type(), ot = out->scalar_type();
  for (size_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < inner; ++i) {
      size_t base = o * size * inner + i;
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < size; ++k) mx = std::fmax(mx, load_double(x, it, base + k * inner));
      double sum = 0;
      for (size_t k = 0; k < size; ++k) sum += std::exp(load_double(x, it, base + k * inner) - mx);
      const double lse = std::log(sum);
      for (size_t k = 0; k < size; ++k) {
        double v = load_double(x, it, base + k * inner) - mx;
        store_double(y, ot, base + k * inner, log ? v - lse : std::exp(v) / sum);
      }
    }
  }
}
}  // namespace

// _softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)
ETKIT_KERNEL_FROM(softmax_out, softmax_impl<false>)
// _log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)
ETKIT_KERNEL_FROM(log_softmax_out, softmax_impl<true>)

// cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out)
ETKIT_KERNEL(cumsum_out, Tensor* a, int64_t dim, Tensor* out) {
  size_t d, outer, size, inner;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d) || !check_contiguous(ctx, name, *a, "self") ||
      !check_contiguous(ctx, name, *out, "out") || !resize_out(ctx, name, *out, a->sizes().data(), a->dim()))
    return;
  split_dims(*a, d, &outer, &size, &inner);
  const bool use_int = !is_floating(out->scalar_type());
  for (size_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < inner; ++i) {
      double acc = 0;
      int64_t iacc = 0;
      for (size_t k = 0; k < size; ++k) {
        size_t off = o * size * inner + k * inner + i;
        if (use_int) {
          iacc = wrap_add(iacc, load_int(a->const_data_ptr(), a->scalar_type(), off));
          store_int(out->mutable_data_ptr(), out->scalar_type(), off, iacc);
        } else {
          acc += load_double(a->const_data_ptr(), a->scalar_type(), off);
          store_double(out->mutable_data_ptr(), out->scalar_type(), off, acc);
        }
      }
    }
  }
}

// native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps, *,
//                       Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)
ETKIT_KERNEL(native_layer_norm_out, Tensor* in, Span<const int64_t> norm, Tensor* w, Tensor* b, double eps, Tensor* out,
             Tensor* mean, Tensor* rstd) {
  if (!check_floating(ctx, name, *in, "input") || !check_contiguous(ctx, name, *in, "input")) return;
  if (norm.size() > in->dim()) {
    fail(ctx, Error::InvalidArgument, "%s: normalized_shape has %zu dims but input has %zu", name, norm.size(),
         in->dim());
    return;
  }
  size_t axis = in->dim() - norm.size();
  size_t n = 1;
  for (size_t j = 0; j < norm.size(); ++j) {
    if (in->size(axis + j) != norm[j]) {
      fail(ctx, Error::InvalidArgument, "%s: normalized_shape[%zu] = %lld does not match input size %d", name, j,
           (long long)norm[j], in->size(axis + j));
      return;
    }
    n *= static_cast<size_t>(norm[j]);
  }
  SizesType stat_sizes[runtime::kTensorDimensionLimit];
  for (size_t d = 0; d < in->dim(); ++d) stat_sizes[d] = d < axis ? in->size(d) : 1;
  if (!resize_out(ctx, name, *out, in->sizes().data(), in->dim()) || !check_contiguous(ctx, name, *out, "out0")) return;
  // mean/rstd may be planned with zero size when unused; only fill them when they have room.
  const bool write_stats = mean->numel() > 0 || rstd->numel() > 0;
  if (write_stats && (!resize_out(ctx, name, *mean, stat_sizes, in->dim()) ||
                      !resize_out(ctx, name, *rstd, stat_sizes, in->dim())))
    return;
  if ((w && w->numel() < n) || (b && b->numel() < n)) {
    fail(ctx, Error::InvalidArgument, "%s: weight/bias have fewer than the %zu normalized elements", name, n);
    return;
  }
  const size_t m = n == 0 ? 0 : in->numel() / n;
  const void* x = in->const_data_ptr();
  const ScalarType it = in->scalar_type(), ot = out->scalar_type();
  for (size_t r = 0; r < m; ++r) {
    double sum = 0, sq = 0;
    for (size_t k = 0; k < n; ++k) sum += load_double(x, it, r * n + k);
    const double mu = sum / double(n);
    for (size_t k = 0; k < n; ++k) {
      double c = load_double(x, it, r * n + k) - mu;
      sq += c * c;
    }
    const double inv = 1.0 / std::sqrt(sq / double(n) + eps);
    for (size_t k = 0; k < n; ++k) {
      double v = (load_double(x, it, r * n + k) - mu) * inv;
      if (w) v *= load_double(w->const_data_ptr(), w->scalar_type(), k);
      if (b) v += load_double(b->const_data_ptr(), b->scalar_type(), k);
      store_double(out->mutable_data_ptr(), ot, r * n + k, v);
    }
    if (write_stats) {
      store_double(mean->mutable_data_ptr(), mean->scalar_type(), r, mu);
      store_double(rstd->mutable_data_ptr(), rstd->scalar_type(), r, inv);
    }
  }
}

// _native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean,
//     Tensor running_var, float momentum, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)
ETKIT_KERNEL(native_batch_norm_legit_no_training_out, Tensor* in, Tensor* w, Tensor* b, Tensor* rm, Tensor* rv,
             double momentum, double eps, Tensor* out) {
  if (!check_floating(ctx, name, *in, "input") || in->dim() < 2) {
    if (in->dim() < 2) fail(ctx, Error::InvalidArgument, "%s: input must be at least 2-D", name);
    return;
  }
  if (!resize_out(ctx, name, *out, in->sizes().data(), in->dim())) return;
  const size_t channels = static_cast<size_t>(in->size(1));
  for (const Tensor* t : {w, b, rm, rv}) {
    if (t != nullptr && t->numel() < channels) {
      fail(ctx, Error::InvalidArgument, "%s: per-channel tensor has %zu elements for %zu channels", name, t->numel(),
           channels);
      return;
    }
  }
  int64_t idx[runtime::kTensorDimensionLimit] = {0};
  const size_t numel = in->numel();
  for (size_t i = 0; i < numel; ++i) {
    size_t c = static_cast<size_t>(idx[1]);
    if (c >= channels) break;
    double mu = load_double(rm->const_data_ptr(), rm->scalar_type(), c);
    double var = load_double(rv->const_data_ptr(), rv->scalar_type(), c);
    double v = (load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, idx)) - mu) / std::sqrt(var + eps);
    if (w) v *= load_double(w->const_data_ptr(), w->scalar_type(), c);
    if (b) v += load_double(b->const_data_ptr(), b->scalar_type(), c);
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx), v);
    next_index(idx, in->sizes().data(), in->dim());
  }
}

namespace {
/// _native_batch_norm_legit in both overloads. With training (or without running stats) each channel is
/// normalised by its batch mean and biased variance, and save_mean / save_invstd hold them; otherwise by
/// the running stats, and save_mean / save_invstd are empty (as torch returns them). Running stats are
/// not updated: a program's constants are read-only, and exported inference graphs do not read them back.
void batch_norm_legit(KernelRuntimeContext& ctx, const char* name, Tensor* in, Tensor* w, Tensor* b, Tensor* rm,
                      Tensor* rv, bool training, double momentum, double eps, Tensor* out, Tensor* save_mean,
                      Tensor* save_invstd) {
  const bool has_running = rm != nullptr;
  if (!check_floating(ctx, name, *in, "input")) return;
  if (in->dim() < 2) {
    fail(ctx, Error::InvalidArgument, "%s: input must be at least 2-D, got rank %zu", name, in->dim());
    return;
  }
  if (!resize_out(ctx, name, *out, in->sizes().data(), in->dim()) || !check_contiguous_out(ctx, name, *out)) return;
  const size_t channels = static_cast<size_t>(in->size(1));
  for (const Tensor* t : {w, b, rm, rv}) {
    if (t != nullptr && t->numel() != channels) {
      fail(ctx, Error::InvalidArgument, "%s: per-channel tensor has %zu elements for %zu channels", name, t->numel(),
           channels);
      return;
    }
  }
  const bool batch_stats = training || !has_running;
  const SizesType c_shape[1] = {static_cast<SizesType>(batch_stats ? channels : 0)};
  if (!resize_out(ctx, name, *save_mean, c_shape, 1) || !resize_out(ctx, name, *save_invstd, c_shape, 1)) return;
  ReducePlan p;  // reduce every dim but the channel dim
  int64_t dims[runtime::kTensorDimensionLimit];
  size_t nd = 0;
  for (size_t d = 0; d < in->dim(); ++d)
    if (d != 1) dims[nd++] = static_cast<int64_t>(d);
  if (!make_plan(ctx, name, *in, Span<const int64_t>(dims, nd), false, false, &p)) return;
  const void* x = in->const_data_ptr();
  const ScalarType it = in->scalar_type();
  double sum = 0, sq = 0;
  if (batch_stats) {
    reduce_loop(
        *in, p, [&] { sum = sq = 0; },
        [&](size_t off) {
          const double v = load_double(x, it, off);
          sum += v;
          sq += v * v;
        },
        [&](size_t c, size_t count) {
          const double mean = count ? sum / double(count) : NAN;
          const double var = count ? std::max(sq / double(count) - mean * mean, 0.0) : NAN;
          store_double(save_mean->mutable_data_ptr(), save_mean->scalar_type(), c, mean);
          store_double(save_invstd->mutable_data_ptr(), save_invstd->scalar_type(), c, 1.0 / std::sqrt(var + eps));
        });
  }
  int64_t idx[runtime::kTensorDimensionLimit] = {0};
  for (size_t i = 0; i < in->numel(); ++i, next_index(idx, in->sizes().data(), in->dim())) {
    const size_t c = static_cast<size_t>(idx[1]);
    const double mean = batch_stats ? load_double(save_mean->const_data_ptr(), save_mean->scalar_type(), c)
                                    : load_double(rm->const_data_ptr(), rm->scalar_type(), c);
    const double invstd = batch_stats ? load_double(save_invstd->const_data_ptr(), save_invstd->scalar_type(), c)
                                      : 1.0 / std::sqrt(load_double(rv->const_data_ptr(), rv->scalar_type(), c) + eps);
    double v = (load_double(x, it, offset_of(*in, idx)) - mean) * invstd;
    if (w) v *= load_double(w->const_data_ptr(), w->scalar_type(), c);
    if (b) v += load_double(b->const_data_ptr(), b->scalar_type(), c);
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx), v);
  }
}
}  // namespace

// _native_batch_norm_legit.out(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean,
//     Tensor(b!) running_var, bool training, float momentum, float eps, *, Tensor(d!) out, Tensor(e!) save_mean,
//     Tensor(f!) save_invstd)
ETKIT_KERNEL_FROM(native_batch_norm_legit_out, batch_norm_legit)

// _native_batch_norm_legit.no_stats_out(Tensor input, Tensor? weight, Tensor? bias, bool training,
//     float momentum, float eps, *, Tensor(a!) out, Tensor(b!) save_mean, Tensor(c!) save_invstd)
ETKIT_KERNEL(native_batch_norm_legit_no_stats_out, Tensor* in, Tensor* w, Tensor* b, bool training, double momentum,
             double eps, Tensor* out, Tensor* save_mean, Tensor* save_invstd) {
  batch_norm_legit(ctx, name, in, w, b, nullptr, nullptr, training, momentum, eps, out, save_mean, save_invstd);
}

}  // namespace etkit::portable
