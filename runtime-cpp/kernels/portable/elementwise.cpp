// Elementwise portable kernels: binary arithmetic/comparison/logic with broadcasting (Tensor and
// Scalar overloads), unary math and activations, where, clamp. Semantics follow PyTorch's eager ops;
// computation is done in double for floating outputs and int64 for integral outputs, then stored in
// the output dtype (results agree with eager float32 to within rounding).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

enum class Bin {
  Add, Sub, Mul, Div, DivTrunc, DivFloor, Pow, Eq, Ne, Lt, Le, Gt, Ge,
  BitAnd, BitOr, BitXor, LogicalAnd, LogicalOr, LogicalXor, Maximum, Minimum, Remainder, Fmod, Atan2,
};

bool is_comparison(Bin op) {
  return op == Bin::Eq || op == Bin::Ne || op == Bin::Lt || op == Bin::Le || op == Bin::Gt || op == Bin::Ge ||
         op == Bin::LogicalAnd || op == Bin::LogicalOr || op == Bin::LogicalXor;
}

double python_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double apply(Bin op, double a, double b) {
  switch (op) {
    case Bin::Add: return a + b;
    case Bin::Sub: return a - b;
    case Bin::Mul: return a * b;
    case Bin::Div: return a / b;
    case Bin::DivTrunc: return std::trunc(a / b);
    case Bin::DivFloor: return b == 0 ? a / b : std::floor(a / b);
    case Bin::Pow: return std::pow(a, b);
    case Bin::Eq: return a == b;
    case Bin::Ne: return a != b;
    case Bin::Lt: return a < b;
    case Bin::Le: return a <= b;
    case Bin::Gt: return a > b;
    case Bin::Ge: return a >= b;
    case Bin::LogicalAnd: return (a != 0) && (b != 0);
    case Bin::LogicalOr: return (a != 0) || (b != 0);
    case Bin::LogicalXor: return (a != 0) != (b != 0);
    case Bin::Maximum: return (std::isnan(a) || std::isnan(b)) ? NAN : (a > b ? a : b);
    case Bin::Minimum: return (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? a : b);
    case Bin::Remainder: return python_mod(a, b);
    case Bin::Fmod: return std::fmod(a, b);
    case Bin::Atan2: return std::atan2(a, b);
    case Bin::BitAnd: return double(double_to_int64(a) & double_to_int64(b));  // (a float `out`: 2^63 is a double)
    case Bin::BitOr: return double(double_to_int64(a) | double_to_int64(b));
    case Bin::BitXor: return double(double_to_int64(a) ^ double_to_int64(b));
  }
  return 0;
}

int64_t floor_div_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ipow(int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
  int64_t r = 1;
  while (exp) {
    if (exp & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return r;
}

// Returns false (after failing ctx) on integer division by zero.
bool apply_int(KernelRuntimeContext& ctx, const char* name, Bin op, int64_t a, int64_t b, int64_t* r) {
  switch (op) {
    case Bin::Add: *r = wrap_add(a, b); return true;
    case Bin::Sub: *r = wrap_sub(a, b); return true;
    case Bin::Mul: *r = wrap_mul(a, b); return true;
    case Bin::Div:
    case Bin::DivTrunc:
    case Bin::DivFloor:
    case Bin::Remainder:
    case Bin::Fmod:
      if (b == 0) return fail(ctx, Error::InvalidArgument, "%s: integer division by zero", name);
      if (b == -1) {  // INT64_MIN / -1 traps on x86: the quotient is -a (wrapping), the remainder 0
        *r = (op == Bin::Remainder || op == Bin::Fmod) ? 0 : wrap_sub(0, a);
        return true;
      }
      if (op == Bin::DivFloor) *r = floor_div_int(a, b);
      else if (op == Bin::Remainder) { *r = a % b; if (*r != 0 && ((*r < 0) != (b < 0))) *r += b; }
      else if (op == Bin::Fmod) *r = a % b;
      else *r = a / b;
      return true;
    case Bin::Pow: *r = ipow(a, b); return true;
    case Bin::BitAnd: *r = a & b; return true;
    case Bin::BitOr: *r = a | b; return true;
    case Bin::BitXor: *r = a ^ b; return true;
    case Bin::Maximum: *r = a > b ? a : b; return true;
    case Bin::Minimum: *r = a < b ? a : b; return true;
    default: *r = double_to_int64(apply(op, double(a), double(b))); return true;
  }
}

/// out = self (op) alpha*other with broadcasting. `other` may be a 0-dim stack tensor for Scalar overloads.
void binary(KernelRuntimeContext& ctx, const char* name, Bin op, const Tensor& self, const Tensor& other,
            double alpha, Tensor& out, bool swap = false) {
  if (!check_dtype(ctx, name, out, "out")) return;
  SizesType shape[runtime::kTensorDimensionLimit];
  size_t dim = 0;
  if (!broadcast_shape(ctx, name, self, other, shape, &dim)) return;
  if (!resize_out(ctx, name, out, shape, dim)) return;
  const Tensor& a = swap ? other : self;
  const Tensor& b = swap ? self : other;
  const ScalarType at = a.scalar_type(), bt = b.scalar_type(), ot = out.scalar_type();
  const void* ap = a.const_data_ptr();
  const void* bp = b.const_data_ptr();
  void* op_ = out.mutable_data_ptr();

  if ((op == Bin::BitAnd || op == Bin::BitOr || op == Bin::BitXor) && (is_floating(at) || is_floating(bt))) {
    fail(ctx, Error::NotSupported, "%s: bitwise ops need integer or bool tensors, got %s and %s", name,
         runtime::scalar_type_name(at), runtime::scalar_type_name(bt));
    return;
  }
  // float32 fast path for the common arithmetic ops.
  if (at == ScalarType::Float && bt == ScalarType::Float && ot == ScalarType::Float &&
      (op == Bin::Add || op == Bin::Sub || op == Bin::Mul || op == Bin::Div)) {
    const float* x = static_cast<const float*>(ap);
    const float* y = static_cast<const float*>(bp);
    float* z = static_cast<float*>(op_);
    const float al = static_cast<float>(alpha);
    const Tensor* ins[2] = {&a, &b};
    for_each_broadcast(out, ins, [&](size_t o, const size_t* in) {
      float u = x[in[0]], v = y[in[1]];
      switch (op) {
        case Bin::Add: z[o] = u + al * v; break;
        case Bin::Sub: z[o] = u - al * v; break;
        case Bin::Mul: z[o] = u * v; break;
        default: z[o] = u / v; break;
      }
    });
    return;
  }
  const bool compare = is_comparison(op);
  // Comparisons compute in the inputs' common kind; arithmetic in the output's kind.
  const bool use_float = compare ? (is_floating(at) || is_floating(bt))
                                 : (is_floating(ot) || op == Bin::Div || op == Bin::Atan2 ||
                                    (op == Bin::Pow && (is_floating(at) || is_floating(bt))));
  const Tensor* ins[2] = {&a, &b};
  bool ok = true;
  const int64_t alpha_i = double_to_int64(alpha);
  for_each_broadcast(out, ins, [&](size_t o, const size_t* in) {
    if (!ok) return;
    if (use_float) {
      double u = load_double(ap, at, in[0]), v = load_double(bp, bt, in[1]);
      if (op == Bin::Add || op == Bin::Sub) v *= alpha;
      store_double(op_, ot, o, apply(op, u, v));
    } else {
      int64_t u = load_int(ap, at, in[0]), v = load_int(bp, bt, in[1]);
      if (op == Bin::Add || op == Bin::Sub) v = wrap_mul(v, alpha_i);
      int64_t r = 0;
      if (!apply_int(ctx, name, op, u, v, &r)) { ok = false; return; }
      if (ot == ScalarType::Bool && (op == Bin::Add || op == Bin::Mul)) r = r != 0;
      store_int(op_, ot, o, r);
    }
  });
}

/// A 0-dim tensor on the stack holding a Scalar argument (Int stays int64, Double/Bool as given).
struct ScalarTensor {
  int64_t i = 0;
  double d = 0;
  bool b = false;
  Tensor t;
  explicit ScalarTensor(const EValue& v) {
    if (v.is_int()) {
      i = v.to_int();
      t = Tensor(ScalarType::Long, 0, nullptr, &i, nullptr, nullptr);
    } else if (v.is_bool()) {
      b = v.to_bool();
      t = Tensor(ScalarType::Bool, 0, nullptr, &b, nullptr, nullptr);
    } else {
      d = v.scalar_to_double();
      t = Tensor(ScalarType::Double, 0, nullptr, &d, nullptr, nullptr);
    }
  }
};

Bin rounding_mode_op(KernelRuntimeContext& ctx, const char* name, StringValue rounding_mode, bool* ok) {
  const char* mode = rounding_mode.data;
  const size_t len = rounding_mode.size;
  *ok = true;
  if (mode == nullptr) return Bin::Div;
  if (string_equals(mode, len, "trunc")) return Bin::DivTrunc;
  if (string_equals(mode, len, "floor")) return Bin::DivFloor;
  *ok = fail(ctx, Error::InvalidArgument, "%s: rounding_mode must be None, 'trunc' or 'floor', got '%.*s'", name,
             (int)len, mode);
  return Bin::Div;
}

// (self, other, out)
template <Bin OP>
void tensor_tensor(KernelRuntimeContext& ctx, const char* name, Tensor* a, Tensor* b, Tensor* out) {
  binary(ctx, name, OP, *a, *b, 1.0, *out);
}
// (self, Scalar other, out). With `wrap_int_scalar`, an integer scalar is first converted to an integer
// tensor's dtype (torch does so for remainder: uint8 % -2 is uint8 % 254).
template <Bin OP, bool wrap_int_scalar = false>
void tensor_scalar(KernelRuntimeContext& ctx, const char* name, Tensor* a, ScalarValue scalar, Tensor* out) {
  EValue other = *scalar.evalue;
  if (wrap_int_scalar && other.is_int() && is_integral(a->scalar_type())) {
    int64_t wrapped = 0;
    store_int(&wrapped, a->scalar_type(), 0, other.to_int());
    other = EValue(load_int(&wrapped, a->scalar_type(), 0));
  }
  ScalarTensor s(other);
  binary(ctx, name, OP, *a, s.t, 1.0, *out);
}

#define ETKIT_TT(fn, OP) ETKIT_KERNEL_FROM(fn, tensor_tensor<OP>)
#define ETKIT_TS(fn, OP) ETKIT_KERNEL_FROM(fn, tensor_scalar<OP>)

}  // namespace

// ---------------------------------------------------------------- arithmetic

// add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)
ETKIT_KERNEL(add_out, Tensor* a, Tensor* b, double alpha, Tensor* out) {
  binary(ctx, name, Bin::Add, *a, *b, alpha, *out);
}
// add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)
ETKIT_KERNEL(add_scalar_out, Tensor* a, ScalarValue other, double alpha, Tensor* out) {
  ScalarTensor s(*other.evalue);
  binary(ctx, name, Bin::Add, *a, s.t, alpha, *out);
}
// sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)
ETKIT_KERNEL(sub_out, Tensor* a, Tensor* b, double alpha, Tensor* out) {
  binary(ctx, name, Bin::Sub, *a, *b, alpha, *out);
}
// sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)
ETKIT_KERNEL(sub_scalar_out, Tensor* a, ScalarValue other, double alpha, Tensor* out) {
  ScalarTensor s(*other.evalue);
  binary(ctx, name, Bin::Sub, *a, s.t, alpha, *out);
}
// rsub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out): other - alpha*self
ETKIT_KERNEL(rsub_scalar_out, Tensor* a, ScalarValue other, double alpha, Tensor* out) {
  ScalarTensor s(*other.evalue);
  binary(ctx, name, Bin::Sub, *a, s.t, alpha, *out, /*swap=*/true);
}
ETKIT_TT(mul_out, Bin::Mul)
ETKIT_TS(mul_scalar_out, Bin::Mul)
ETKIT_TT(div_out, Bin::Div)
ETKIT_TS(div_scalar_out, Bin::Div)
// div.out_mode(Tensor self, Tensor other, *, str? rounding_mode, Tensor(a!) out)
ETKIT_KERNEL(div_out_mode, Tensor* a, Tensor* b, StringValue rounding_mode, Tensor* out) {
  bool ok = false;
  const Bin op = rounding_mode_op(ctx, name, rounding_mode, &ok);
  if (ok) binary(ctx, name, op, *a, *b, 1.0, *out);
}
// div.Scalar_mode_out(Tensor self, Scalar other, *, str? rounding_mode, Tensor(a!) out)
ETKIT_KERNEL(div_scalar_mode_out, Tensor* a, ScalarValue other, StringValue rounding_mode, Tensor* out) {
  bool ok = false;
  const Bin op = rounding_mode_op(ctx, name, rounding_mode, &ok);
  if (!ok) return;
  ScalarTensor s(*other.evalue);
  binary(ctx, name, op, *a, s.t, 1.0, *out);
}
ETKIT_TT(pow_tensor_tensor_out, Bin::Pow)
ETKIT_TS(pow_tensor_scalar_out, Bin::Pow)
// pow.Scalar_out(Scalar self, Tensor exponent, *, Tensor(a!) out)
ETKIT_KERNEL(pow_scalar_out, ScalarValue base, Tensor* e, Tensor* out) {
  ScalarTensor s(*base.evalue);
  binary(ctx, name, Bin::Pow, s.t, *e, 1.0, *out);
}
ETKIT_TT(remainder_tensor_out, Bin::Remainder)
// remainder.Scalar_out: an integer scalar takes the tensor's integer dtype first, as in torch
ETKIT_KERNEL_FROM(remainder_scalar_out, tensor_scalar<Bin::Remainder, true>)
ETKIT_TT(fmod_tensor_out, Bin::Fmod)
ETKIT_TS(fmod_scalar_out, Bin::Fmod)
ETKIT_TT(floor_divide_out, Bin::DivFloor)
ETKIT_TT(maximum_out, Bin::Maximum)
ETKIT_TT(minimum_out, Bin::Minimum)
ETKIT_TT(atan2_out, Bin::Atan2)

// ---------------------------------------------------------------- comparison and logic
ETKIT_TT(eq_tensor_out, Bin::Eq)
ETKIT_TS(eq_scalar_out, Bin::Eq)
ETKIT_TT(ne_tensor_out, Bin::Ne)
ETKIT_TS(ne_scalar_out, Bin::Ne)
ETKIT_TT(lt_tensor_out, Bin::Lt)
ETKIT_TS(lt_scalar_out, Bin::Lt)
ETKIT_TT(le_tensor_out, Bin::Le)
ETKIT_TS(le_scalar_out, Bin::Le)
ETKIT_TT(gt_tensor_out, Bin::Gt)
ETKIT_TS(gt_scalar_out, Bin::Gt)
ETKIT_TT(ge_tensor_out, Bin::Ge)
ETKIT_TS(ge_scalar_out, Bin::Ge)
ETKIT_TT(logical_and_out, Bin::LogicalAnd)
ETKIT_TT(logical_or_out, Bin::LogicalOr)
ETKIT_TT(logical_xor_out, Bin::LogicalXor)
ETKIT_TT(bitwise_and_tensor_out, Bin::BitAnd)
ETKIT_TS(bitwise_and_scalar_out, Bin::BitAnd)
ETKIT_TT(bitwise_or_tensor_out, Bin::BitOr)
ETKIT_TS(bitwise_or_scalar_out, Bin::BitOr)
ETKIT_TT(bitwise_xor_tensor_out, Bin::BitXor)
ETKIT_TS(bitwise_xor_scalar_out, Bin::BitXor)

// where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out)
ETKIT_KERNEL(where_self_out, Tensor* c, Tensor* a, Tensor* b, Tensor* out) {
  SizesType s1[runtime::kTensorDimensionLimit], s2[runtime::kTensorDimensionLimit];
  size_t d1, d2;
  if (!broadcast_shape(ctx, name, *a, *b, s1, &d1)) return;
  Tensor ab(ScalarType::Bool, d1, s1, nullptr, nullptr, nullptr);  // shape carrier only
  if (!broadcast_shape(ctx, name, *c, ab, s2, &d2)) return;
  if (!resize_out(ctx, name, *out, s2, d2)) return;
  const Tensor* ins[3] = {c, a, b};
  const bool use_float = is_floating(out->scalar_type());
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    bool cond = load_int(c->const_data_ptr(), c->scalar_type(), in[0]) != 0;
    const Tensor* src = cond ? a : b;
    size_t si = cond ? in[1] : in[2];
    if (use_float) {
      store_double(out->mutable_data_ptr(), out->scalar_type(), o,
                   load_double(src->const_data_ptr(), src->scalar_type(), si));
    } else {
      store_int(out->mutable_data_ptr(), out->scalar_type(), o, load_int(src->const_data_ptr(), src->scalar_type(), si));
    }
  });
}

// masked_fill.Scalar_out(Tensor self, Tensor mask, Scalar value, *, Tensor(a!) out)
ETKIT_KERNEL(masked_fill_scalar_out, Tensor* a, Tensor* m, double value, Tensor* out) {
  SizesType s[runtime::kTensorDimensionLimit];
  size_t d;
  if (!broadcast_shape(ctx, name, *a, *m, s, &d) || !resize_out(ctx, name, *out, s, d)) return;
  const Tensor* ins[2] = {a, m};
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    bool masked = load_int(m->const_data_ptr(), m->scalar_type(), in[1]) != 0;
    double v = masked ? value : load_double(a->const_data_ptr(), a->scalar_type(), in[0]);
    store_double(out->mutable_data_ptr(), out->scalar_type(), o, v);
  });
}

// ---------------------------------------------------------------- unary

namespace {

using UnaryFn = double (*)(double);

// pi and 1/sqrt(2): M_PI and M_SQRT1_2 are POSIX, absent from a strict C++17 <cmath> (newlib's, bare metal).
constexpr double kPi = 3.14159265358979323846;
constexpr double kSqrt1_2 = 0.70710678118654752440;

/// out = fn(self); integral outputs go through int64 when `int_fn` is given.
void unary(KernelRuntimeContext& ctx, const char* name, const Tensor* a, Tensor* out, UnaryFn fn,
           int64_t (*int_fn)(int64_t)) {
  if (!resize_out(ctx, name, *out, a->sizes().data(), a->dim())) return;
  const ScalarType at = a->scalar_type(), ot = out->scalar_type();
  if (int_fn == nullptr && !is_floating(ot) && ot != ScalarType::Bool) {
    fail(ctx, Error::NotSupported, "%s: output dtype %s is not supported (needs a floating dtype)", name,
         runtime::scalar_type_name(ot));
    return;
  }
  const Tensor* ins[1] = {a};
  if (at == ScalarType::Float && ot == ScalarType::Float) {
    const float* x = a->const_data_ptr<float>();
    float* y = out->mutable_data_ptr<float>();
    for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) { y[o] = static_cast<float>(fn(x[in[0]])); });
    return;
  }
  const bool use_int = int_fn != nullptr && !is_floating(ot) && !is_floating(at);
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    if (use_int) {
      store_int(out->mutable_data_ptr(), ot, o, int_fn(load_int(a->const_data_ptr(), at, in[0])));
    } else {
      store_double(out->mutable_data_ptr(), ot, o, fn(load_double(a->const_data_ptr(), at, in[0])));
    }
  });
}

double d_neg(double x) { return -x; }
int64_t i_neg(int64_t x) { return wrap_sub(0, x); }  // -INT64_MIN wraps to itself, as in torch
double d_abs(double x) { return std::fabs(x); }
int64_t i_abs(int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }
double d_exp(double x) { return std::exp(x); }
double d_expm1(double x) { return std::expm1(x); }
double d_log(double x) { return std::log(x); }
double d_log1p(double x) { return std::log1p(x); }
double d_log2(double x) { return std::log2(x); }
double d_log10(double x) { return std::log10(x); }
double d_sqrt(double x) { return std::sqrt(x); }
double d_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double d_reciprocal(double x) { return 1.0 / x; }
double d_sin(double x) { return std::sin(x); }
double d_cos(double x) { return std::cos(x); }
double d_tan(double x) { return std::tan(x); }
double d_asin(double x) { return std::asin(x); }
double d_acos(double x) { return std::acos(x); }
double d_atan(double x) { return std::atan(x); }
double d_sinh(double x) { return std::sinh(x); }
double d_cosh(double x) { return std::cosh(x); }
double d_tanh(double x) { return std::tanh(x); }
double d_asinh(double x) { return std::asinh(x); }
double d_acosh(double x) { return std::acosh(x); }
double d_atanh(double x) { return std::atanh(x); }
double d_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double d_relu(double x) { return std::isnan(x) ? x : (x > 0 ? x : 0); }
int64_t i_relu(int64_t x) { return x > 0 ? x : 0; }
double d_erf(double x) { return std::erf(x); }
double d_ceil(double x) { return std::ceil(x); }
double d_floor(double x) { return std::floor(x); }
double d_round(double x) { return std::nearbyint(x); }  // half to even, like torch.round
double d_trunc(double x) { return std::trunc(x); }
int64_t i_identity(int64_t x) { return x; }
double d_sign(double x) { return double((x > 0) - (x < 0)); }  // sign(nan) = 0, as torch.sign
int64_t i_sign(int64_t x) { return (x > 0) - (x < 0); }
double d_logical_not(double x) { return x == 0; }
int64_t i_logical_not(int64_t x) { return x == 0; }
double d_isnan(double x) { return std::isnan(x); }
double d_isinf(double x) { return std::isinf(x); }
double d_hardswish(double x) { return x * std::fmin(std::fmax(x + 3.0, 0.0), 6.0) / 6.0; }
double d_hardsigmoid(double x) { return std::fmin(std::fmax(x + 3.0, 0.0), 6.0) / 6.0; }
double d_silu(double x) { return x / (1.0 + std::exp(-x)); }
double d_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x * kSqrt1_2)); }
double d_gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / kPi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

}  // namespace

namespace {
/// (self, out): the kernels of unary(), one per element function.
template <UnaryFn DFN, int64_t (*IFN)(int64_t)>
void unary_kernel(KernelRuntimeContext& ctx, const char* name, Tensor* a, Tensor* out) {
  unary(ctx, name, a, out, DFN, IFN);
}
}  // namespace
#define ETKIT_UNARY(fn, DFN, IFN) ETKIT_KERNEL_FROM(fn, unary_kernel<DFN, IFN>)

ETKIT_UNARY(neg_out, d_neg, i_neg)
ETKIT_UNARY(abs_out, d_abs, i_abs)
ETKIT_UNARY(exp_out, d_exp, nullptr)
ETKIT_UNARY(expm1_out, d_expm1, nullptr)
ETKIT_UNARY(log_out, d_log, nullptr)
ETKIT_UNARY(log1p_out, d_log1p, nullptr)
ETKIT_UNARY(log2_out, d_log2, nullptr)
ETKIT_UNARY(log10_out, d_log10, nullptr)
ETKIT_UNARY(sqrt_out, d_sqrt, nullptr)
ETKIT_UNARY(rsqrt_out, d_rsqrt, nullptr)
ETKIT_UNARY(reciprocal_out, d_reciprocal, nullptr)
ETKIT_UNARY(sin_out, d_sin, nullptr)
ETKIT_UNARY(cos_out, d_cos, nullptr)
ETKIT_UNARY(tan_out, d_tan, nullptr)
ETKIT_UNARY(asin_out, d_asin, nullptr)
ETKIT_UNARY(acos_out, d_acos, nullptr)
ETKIT_UNARY(atan_out, d_atan, nullptr)
ETKIT_UNARY(sinh_out, d_sinh, nullptr)
ETKIT_UNARY(cosh_out, d_cosh, nullptr)
ETKIT_UNARY(tanh_out, d_tanh, nullptr)
ETKIT_UNARY(asinh_out, d_asinh, nullptr)
ETKIT_UNARY(acosh_out, d_acosh, nullptr)
ETKIT_UNARY(atanh_out, d_atanh, nullptr)
ETKIT_UNARY(sigmoid_out, d_sigmoid, nullptr)
ETKIT_UNARY(relu_out, d_relu, i_relu)
ETKIT_UNARY(erf_out, d_erf, nullptr)
ETKIT_UNARY(ceil_out, d_ceil, i_identity)
ETKIT_UNARY(floor_out, d_floor, i_identity)
ETKIT_UNARY(round_out, d_round, i_identity)
ETKIT_UNARY(trunc_out, d_trunc, i_identity)
ETKIT_UNARY(sign_out, d_sign, i_sign)
ETKIT_UNARY(logical_not_out, d_logical_not, i_logical_not)
ETKIT_UNARY(isnan_out, d_isnan, nullptr)
ETKIT_UNARY(isinf_out, d_isinf, nullptr)
ETKIT_UNARY(hardswish_out, d_hardswish, nullptr)
ETKIT_UNARY(hardsigmoid_out, d_hardsigmoid, nullptr)
ETKIT_UNARY(silu_out, d_silu, nullptr)

// bitwise_not.out(Tensor self, *, Tensor(a!) out)
ETKIT_KERNEL(bitwise_not_out, Tensor* a, Tensor* out) {
  if (is_floating(a->scalar_type())) {
    fail(ctx, Error::NotSupported, "%s: argument 'self' has dtype %s; bitwise_not needs an integer or bool tensor",
         name, runtime::scalar_type_name(a->scalar_type()));
    return;
  }
  if (!resize_out(ctx, name, *out, a->sizes().data(), a->dim())) return;
  const Tensor* ins[1] = {a};
  const bool is_bool = a->scalar_type() == ScalarType::Bool;
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    int64_t v = load_int(a->const_data_ptr(), a->scalar_type(), in[0]);
    store_int(out->mutable_data_ptr(), out->scalar_type(), o, is_bool ? (v == 0) : ~v);
  });
}

// gelu.out(Tensor self, *, str approximate='none', Tensor(a!) out)
ETKIT_KERNEL(gelu_out, Tensor* a, StringValue approximate, Tensor* out) {
  const char* mode = approximate.data;
  const size_t len = approximate.size;
  if (mode == nullptr || string_equals(mode, len, "none")) {
    unary(ctx, name, a, out, d_gelu, nullptr);
  } else if (string_equals(mode, len, "tanh")) {
    unary(ctx, name, a, out, d_gelu_tanh, nullptr);
  } else {
    fail(ctx, Error::InvalidArgument, "%s: approximate must be 'none' or 'tanh', got '%.*s'", name, (int)len, mode);
  }
}

namespace {
/// out = clamp(self, lo, hi) where either bound may be absent.
void clamp_impl(KernelRuntimeContext& ctx, const char* name, const Tensor& a, bool has_lo, double lo, bool has_hi,
                double hi, Tensor& out) {
  if (!resize_out(ctx, name, out, a.sizes().data(), a.dim())) return;
  const Tensor* ins[1] = {&a};
  if (a.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float) {
    const float* x = a.const_data_ptr<float>();
    float* y = out.mutable_data_ptr<float>();
    const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
    for_each_broadcast(out, ins, [&](size_t o, const size_t* in) {
      float v = x[in[0]];
      if (!std::isnan(v)) {
        if (has_lo && v < flo) v = flo;
        if (has_hi && v > fhi) v = fhi;
      }
      y[o] = v;
    });
    return;
  }
  for_each_broadcast(out, ins, [&](size_t o, const size_t* in) {
    double v = load_double(a.const_data_ptr(), a.scalar_type(), in[0]);
    if (!std::isnan(v)) {
      if (has_lo && v < lo) v = lo;
      if (has_hi && v > hi) v = hi;
    }
    store_double(out.mutable_data_ptr(), out.scalar_type(), o, v);
  });
}
}  // namespace

// hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out)
ETKIT_KERNEL(hardtanh_out, Tensor* a, double lo, double hi, Tensor* out) {
  clamp_impl(ctx, name, *a, true, lo, true, hi, *out);
}

// clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)
ETKIT_KERNEL(clamp_out, Tensor* a, OptionalScalar lo, OptionalScalar hi, Tensor* out) {
  clamp_impl(ctx, name, *a, lo.has_value, lo.value, hi.has_value, hi.value, *out);
}

// clamp.Tensor_out(Tensor self, Tensor? min=None, Tensor? max=None, *, Tensor(a!) out)
ETKIT_KERNEL(clamp_tensor_out, Tensor* a, Tensor* lo, Tensor* hi, Tensor* out) {
  // Bounds absent -> use self as a stand-in so the three-way broadcast stays uniform.
  const Tensor* l = lo ? lo : a;
  const Tensor* h = hi ? hi : a;
  SizesType s1[runtime::kTensorDimensionLimit], s2[runtime::kTensorDimensionLimit];
  size_t d1, d2;
  if (!broadcast_shape(ctx, name, *a, *l, s1, &d1)) return;
  Tensor t1(ScalarType::Bool, d1, s1, nullptr, nullptr, nullptr);
  if (!broadcast_shape(ctx, name, t1, *h, s2, &d2) || !resize_out(ctx, name, *out, s2, d2)) return;
  const Tensor* ins[3] = {a, l, h};
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    // min(max(x, lo), hi) with NaN from x or from either bound propagated, as torch.clamp
    double v = load_double(a->const_data_ptr(), a->scalar_type(), in[0]);
    if (lo) {
      const double l = load_double(lo->const_data_ptr(), lo->scalar_type(), in[1]);
      v = (std::isnan(v) || std::isnan(l)) ? NAN : std::max(v, l);
    }
    if (hi) {
      const double h = load_double(hi->const_data_ptr(), hi->scalar_type(), in[2]);
      v = (std::isnan(v) || std::isnan(h)) ? NAN : std::min(v, h);
    }
    store_double(out->mutable_data_ptr(), out->scalar_type(), o, v);
  });
}

// leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out)
ETKIT_KERNEL(leaky_relu_out, Tensor* a, double slope, Tensor* out) {
  if (!resize_out(ctx, name, *out, a->sizes().data(), a->dim())) return;
  const Tensor* ins[1] = {a};
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    double v = load_double(a->const_data_ptr(), a->scalar_type(), in[0]);
    store_double(out->mutable_data_ptr(), out->scalar_type(), o, v > 0 ? v : v * slope);
  });
}

// elu.out(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1, *, Tensor(a!) out)
ETKIT_KERNEL(elu_out, Tensor* a, double alpha, double scale, double input_scale, Tensor* out) {
  if (!resize_out(ctx, name, *out, a->sizes().data(), a->dim())) return;
  const Tensor* ins[1] = {a};
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    double v = load_double(a->const_data_ptr(), a->scalar_type(), in[0]);
    double r = v > 0 ? v * scale : alpha * scale * std::expm1(v * input_scale);
    store_double(out->mutable_data_ptr(), out->scalar_type(), o, r);
  });
}

}  // namespace etkit::portable
