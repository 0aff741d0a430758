// Helpers shared by the portable kernels (see kernels.h).
#include <cstdarg>
#include <cstdio>

#include "kernels.h"

namespace etkit::portable {

bool fail(KernelRuntimeContext& ctx, Error error, const char* format, ...) {
  char buf[768];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  runtime::set_error(error, "%s", buf);
  ctx.fail(error);
  return false;
}

bool check_nargs(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t n) {
  if (args.size() < n) {
    return fail(ctx, Error::InvalidProgram, "%s: expected at least %zu arguments, got %zu", op, n, args.size());
  }
  return true;
}

Tensor* tensor_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name) {
  if (i >= args.size() || !args[i]->is_tensor()) {
    fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be a Tensor, got %s", op, name, i,
         i >= args.size() ? "nothing" : runtime::tag_name(args[i]->tag()));
    return nullptr;
  }
  Tensor* t = &args[i]->to_tensor();
  if (!check_dtype(ctx, op, *t, name)) return nullptr;
  return t;
}

bool optional_tensor_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                         Tensor** out) {
  *out = nullptr;
  if (i < args.size() && args[i]->is_none()) return true;
  *out = tensor_arg(ctx, op, args, i, name);
  return *out != nullptr;
}

bool scalar_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                double* out) {
  if (i >= args.size() || !args[i]->is_scalar()) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be a Scalar, got %s", op, name, i,
                i >= args.size() ? "nothing" : runtime::tag_name(args[i]->tag()));
  }
  *out = args[i]->scalar_to_double();
  return true;
}

bool int_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name, int64_t* out) {
  if (i >= args.size() || !(args[i]->is_int() || args[i]->is_bool())) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be an int, got %s", op, name, i,
                i >= args.size() ? "nothing" : runtime::tag_name(args[i]->tag()));
  }
  *out = args[i]->scalar_to_int();
  return true;
}

bool int_list_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                  Span<const int64_t>* out, bool* is_none) {
  if (is_none != nullptr) *is_none = false;
  if (i < args.size() && args[i]->is_none()) {
    *out = Span<const int64_t>();
    if (is_none != nullptr) *is_none = true;
    return true;
  }
  if (i < args.size() && args[i]->is_int()) {  // int[1] given as a plain int is not emitted, but be lenient
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' must be an int list, got a single int", op, name);
  }
  if (i >= args.size() || !args[i]->is_int_list()) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be an int list, got %s", op, name,
                i, i >= args.size() ? "nothing" : runtime::tag_name(args[i]->tag()));
  }
  *out = args[i]->to_int_list();
  return true;
}

bool tensor_list_arg(KernelRuntimeContext& ctx, const char* name, Span<EValue*> args, size_t i, const char* arg,
                     Span<Tensor* const>* out) {
  if (i >= args.size() || !args[i]->is_tensor_list()) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' must be a list of tensors", name, arg);
  }
  *out = args[i]->to_tensor_list();
  for (size_t k = 0; k < out->size(); ++k) {  // checked at load; kept true at run time, checked again as cheap
    if ((*out)[k] == nullptr) {
      return fail(ctx, Error::InvalidArgument, "%s: element %zu of '%s' is not a Tensor", name, k, arg);
    }
  }
  return true;
}

bool shape_list(KernelRuntimeContext& ctx, const char* op, Span<const int64_t> list, const char* name,
                SizesType* sizes, bool allow_minus_one) {
  if (list.size() > runtime::kTensorDimensionLimit) {
    return fail(ctx, Error::InvalidArgument, "%s: '%s' has %zu dims (limit %zu)", op, name, list.size(),
                runtime::kTensorDimensionLimit);
  }
  for (size_t d = 0; d < list.size(); ++d) {
    const int64_t v = list[d];
    if ((v < 0 && !(allow_minus_one && v == -1)) || v >= (int64_t(1) << 31)) {
      return fail(ctx, Error::InvalidArgument, "%s: '%s'[%zu] is %lld; a size must be in [0, 2^31)%s", op, name, d,
                  (long long)v, allow_minus_one ? " or -1" : "");
    }
    sizes[d] = static_cast<SizesType>(v);
  }
  return true;
}

bool int_in_range(KernelRuntimeContext& ctx, const char* op, int64_t v, int64_t lo, int64_t hi, const char* name) {
  if (v >= lo && v <= hi) return true;
  return fail(ctx, Error::InvalidArgument, "%s: '%s' is %lld; it must be in [%lld, %lld]", op, name, (long long)v,
              (long long)lo, (long long)hi);
}

bool window_list(KernelRuntimeContext& ctx, const char* op, Span<const int64_t> list, const char* name, size_t n,
                 const int64_t* fallback, int64_t dflt, int64_t lo, int64_t* out) {
  if (list.size() > 1 && list.size() != n) {
    return fail(ctx, Error::InvalidArgument, "%s: '%s' has %zu values; it takes 1 or %zu", op, name, list.size(), n);
  }
  for (size_t d = 0; d < n; ++d) {
    out[d] = list.empty() ? (fallback ? fallback[d] : dflt) : list[list.size() == 1 ? 0 : d];
    if (!int_in_range(ctx, op, out[d], lo, kMaxWindow, name)) return false;
  }
  return true;
}

bool set_scalar_out(KernelRuntimeContext& ctx, const char* op, EValue* out, const EValue& result) {
  if (out->tag() != result.tag() && !out->is_none()) {
    return fail(ctx, Error::InvalidArgument, "%s: its result is %s but its out value is %s (a value keeps its type)",
                op, runtime::tag_name(result.tag()), runtime::tag_name(out->tag()));
  }
  *out = result;
  return true;
}

bool bool_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name, bool* out) {
  if (i >= args.size() || !(args[i]->is_bool() || args[i]->is_int())) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be a bool, got %s", op, name, i,
                i >= args.size() ? "nothing" : runtime::tag_name(args[i]->tag()));
  }
  *out = args[i]->is_bool() ? args[i]->to_bool() : args[i]->to_int() != 0;
  return true;
}

bool string_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                const char** data, size_t* size) {
  *data = nullptr;
  *size = 0;
  if (i < args.size() && args[i]->is_none()) return true;
  if (i >= args.size() || !args[i]->is_string()) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be a string, got %s", op, name, i,
                i >= args.size() ? "nothing" : runtime::tag_name(args[i]->tag()));
  }
  Span<const char> s = args[i]->to_string();
  *data = s.data();
  *size = s.size();
  return true;
}

bool string_equals(const char* data, size_t size, const char* literal) {
  return data != nullptr && std::strlen(literal) == size && std::memcmp(data, literal, size) == 0;
}

bool is_supported_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
    case ScalarType::Half:
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::BFloat16:
      return true;
    default:
      return false;
  }
}

bool is_floating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

bool is_integral(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int ||
         t == ScalarType::Long;
}

bool check_dtype(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  if (!is_supported_dtype(t.scalar_type())) {
    return fail(ctx, Error::NotSupported,
                "%s: argument '%s' has dtype %s, which the portable kernel does not support (supported: Bool, "
                "Byte, Char, Short, Int, Long, Half, BFloat16, Float, Double)",
                op, name, runtime::scalar_type_name(t.scalar_type()));
  }
  return true;
}

bool check_floating(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  if (!is_floating(t.scalar_type())) {
    return fail(ctx, Error::NotSupported, "%s: argument '%s' has dtype %s; the portable kernel needs a floating dtype",
                op, name, runtime::scalar_type_name(t.scalar_type()));
  }
  return true;
}

double load_double(const void* base, ScalarType t, size_t i) {
  switch (t) {
    case ScalarType::Bool: return static_cast<const uint8_t*>(base)[i] != 0 ? 1.0 : 0.0;  // any byte: not only 0/1
    case ScalarType::Byte: return static_cast<const uint8_t*>(base)[i];
    case ScalarType::Char: return static_cast<const int8_t*>(base)[i];
    case ScalarType::Short: return static_cast<const int16_t*>(base)[i];
    case ScalarType::Int: return static_cast<const int32_t*>(base)[i];
    case ScalarType::Long: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case ScalarType::Half: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case ScalarType::Float: return static_cast<const float*>(base)[i];
    case ScalarType::Double: return static_cast<const double*>(base)[i];
    case ScalarType::BFloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return 0.0;
  }
}

int64_t double_to_int64(double v) {
  // [-2^63, 2^63): the doubles whose truncation fits in int64_t (NaN fails both comparisons).
  if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) return static_cast<int64_t>(v);
  return INT64_MIN;
}

int32_t double_to_int32(double v) {
  if (v > -2147483649.0 && v < 2147483648.0) return static_cast<int32_t>(v);
  return INT32_MIN;
}

int64_t load_int(const void* base, ScalarType t, size_t i) {
  switch (t) {
    case ScalarType::Bool: return static_cast<const uint8_t*>(base)[i] != 0 ? 1 : 0;  // any byte: not only 0/1
    case ScalarType::Byte: return static_cast<const uint8_t*>(base)[i];
    case ScalarType::Char: return static_cast<const int8_t*>(base)[i];
    case ScalarType::Short: return static_cast<const int16_t*>(base)[i];
    case ScalarType::Int: return static_cast<const int32_t*>(base)[i];
    case ScalarType::Long: return static_cast<const int64_t*>(base)[i];
    default: return double_to_int64(load_double(base, t, i));
  }
}

void store_double(void* base, ScalarType t, size_t i, double v) {
  switch (t) {
    case ScalarType::Bool: static_cast<bool*>(base)[i] = v != 0.0; break;
    // Narrow integers: through int32 then modular, as a float -> int8/int16 cast compiles on x86.
    case ScalarType::Byte: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(double_to_int32(v)); break;
    case ScalarType::Char: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(double_to_int32(v)); break;
    case ScalarType::Short: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(double_to_int32(v)); break;
    case ScalarType::Int: static_cast<int32_t*>(base)[i] = double_to_int32(v); break;
    case ScalarType::Long: static_cast<int64_t*>(base)[i] = double_to_int64(v); break;
    case ScalarType::Half: static_cast<uint16_t*>(base)[i] = float_to_half(static_cast<float>(v)); break;
    case ScalarType::Float: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case ScalarType::Double: static_cast<double*>(base)[i] = v; break;
    case ScalarType::BFloat16: static_cast<uint16_t*>(base)[i] = float_to_bf16(static_cast<float>(v)); break;
    default: break;
  }
}

void store_int(void* base, ScalarType t, size_t i, int64_t v) {
  switch (t) {
    case ScalarType::Bool: static_cast<bool*>(base)[i] = v != 0; break;
    case ScalarType::Byte: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case ScalarType::Char: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case ScalarType::Short: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v); break;
    case ScalarType::Int: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case ScalarType::Long: static_cast<int64_t*>(base)[i] = v; break;
    default: store_double(base, t, i, static_cast<double>(v)); break;
  }
}

bool normalize_dim(KernelRuntimeContext& ctx, const char* op, int64_t dim, size_t rank, size_t* out) {
  int64_t r = rank == 0 ? 1 : static_cast<int64_t>(rank);
  if (dim < -r || dim >= r) {
    return fail(ctx, Error::InvalidArgument, "%s: dim %lld is out of range for a tensor of rank %zu", op,
                (long long)dim, rank);
  }
  *out = static_cast<size_t>(dim < 0 ? dim + r : dim);
  return true;
}

bool resize_out(KernelRuntimeContext& ctx, const char* op, Tensor& out, const SizesType* sizes, size_t dim) {
  if (dim != out.dim()) {
    return fail(ctx, Error::InvalidArgument, "%s: output has rank %zu but the result has rank %zu", op, out.dim(),
                dim);
  }
  Error e = out.resize(Span<const SizesType>(sizes, dim));
  if (e != Error::Ok) {
    char msg[512];
    std::snprintf(msg, sizeof(msg), "%s", runtime::last_error_message());
    return fail(ctx, e, "%s: cannot resize the output: %s", op, msg);
  }
  return true;
}

bool broadcast_shape(KernelRuntimeContext& ctx, const char* op, const Tensor& a, const Tensor& b, SizesType* out,
                     size_t* out_dim) {
  size_t dim = a.dim() > b.dim() ? a.dim() : b.dim();
  for (size_t d = 0; d < dim; ++d) {
    size_t ai = d + a.dim(), bi = d + b.dim();
    SizesType as = ai >= dim ? a.size(ai - dim) : 1;
    SizesType bs = bi >= dim ? b.size(bi - dim) : 1;
    if (as != bs && as != 1 && bs != 1) {
      return fail(ctx, Error::InvalidArgument,
                  "%s: shapes cannot be broadcast together (dim %zu from the right: %d vs %d)", op, dim - d,
                  (int)as, (int)bs);
    }
    out[d] = as == 1 ? bs : as;
  }
  *out_dim = dim;
  return true;
}

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (size_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) != b.size(d)) return false;
  }
  return true;
}

void copy_elements(const Tensor& src, Tensor& dst) {
  const size_t n = src.numel();
  if (src.scalar_type() == dst.scalar_type() && src.is_contiguous_dim_order() && dst.is_contiguous_dim_order()) {
    std::memcpy(dst.mutable_data_ptr(), src.const_data_ptr(), n * src.element_size());
    return;
  }
  int64_t sidx[runtime::kTensorDimensionLimit] = {0};
  int64_t didx[runtime::kTensorDimensionLimit] = {0};
  const bool as_int = !is_floating(dst.scalar_type()) && !is_floating(src.scalar_type());
  for (size_t i = 0; i < n; ++i) {
    size_t so = offset_of(src, sidx), dO = offset_of(dst, didx);
    if (as_int) {
      store_int(dst.mutable_data_ptr(), dst.scalar_type(), dO, load_int(src.const_data_ptr(), src.scalar_type(), so));
    } else {
      store_double(dst.mutable_data_ptr(), dst.scalar_type(), dO,
                   load_double(src.const_data_ptr(), src.scalar_type(), so));
    }
    next_index(sidx, src.sizes().data(), src.dim());
    next_index(didx, dst.sizes().data(), dst.dim());
  }
}

}  // namespace etkit::portable
