// Arithmetic on sizes (dynamic shapes): ExecuTorch's prim ops, executorch_prim::<op>.Scalar(a, b, out)
// and executorch_prim::neg/sym_float.Scalar(a, out). Operands are Int, Double or Bool EValues; the result
// replaces the value in `out`. Int op Int stays Int (floordiv and mod round toward negative infinity,
// as Python does); anything with a Double is computed in double; truediv is always Double.
#include <cmath>

#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

enum class Prim { Add, Sub, Mul, FloorDiv, TrueDiv, Mod, Eq, Gt, Lt, Ge, Le, Max, Min };

bool number(KernelRuntimeContext& ctx, const char* name, const EValue& v, const char* arg, bool* is_int, int64_t* i,
            double* d) {
  if (v.is_int() || v.is_bool()) {
    *is_int = true;
    *i = v.is_int() ? v.to_int() : int64_t(v.to_bool());
    *d = double(*i);
    return true;
  }
  if (v.is_double()) {
    *is_int = false;
    *d = v.to_double();
    return true;
  }
  return fail(ctx, Error::InvalidArgument, "%s: argument '%s' must be an int, float or bool, got %s", name, arg,
              runtime::tag_name(v.tag()));
}

template <Prim op>
void binary(KernelRuntimeContext& ctx, const char* name, EValue* a_arg, EValue* b_arg, EValue* out_arg) {
  bool ai = false, bi = false;
  int64_t a = 0, b = 0;
  double x = 0, y = 0;
  if (!number(ctx, name, *a_arg, "a", &ai, &a, &x) || !number(ctx, name, *b_arg, "b", &bi, &b, &y)) return;
  const bool ints = ai && bi;
  switch (op) {
    case Prim::Eq: set_scalar_out(ctx, name, out_arg, EValue(ints ? a == b : x == y)); return;
    case Prim::Gt: set_scalar_out(ctx, name, out_arg, EValue(ints ? a > b : x > y)); return;
    case Prim::Lt: set_scalar_out(ctx, name, out_arg, EValue(ints ? a < b : x < y)); return;
    case Prim::Ge: set_scalar_out(ctx, name, out_arg, EValue(ints ? a >= b : x >= y)); return;
    case Prim::Le: set_scalar_out(ctx, name, out_arg, EValue(ints ? a <= b : x <= y)); return;
    case Prim::TrueDiv: set_scalar_out(ctx, name, out_arg, EValue(x / y)); return;
    default: break;
  }
  if ((op == Prim::FloorDiv || op == Prim::Mod) && ((ints && b == 0) || (!ints && y == 0))) {
    fail(ctx, Error::InvalidArgument, "%s: division by zero", name);
    return;
  }
  if (ints) {  // SymInt arithmetic wraps (two's complement) rather than overflow; INT64_MIN / -1 traps on x86
    int64_t r = 0;
    switch (op) {
      case Prim::Add: r = wrap_add(a, b); break;
      case Prim::Sub: r = wrap_sub(a, b); break;
      case Prim::Mul: r = wrap_mul(a, b); break;
      case Prim::FloorDiv:
        r = b == -1 ? wrap_sub(0, a) : a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
        break;
      case Prim::Mod:
        r = b == -1 ? 0 : a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        break;
      case Prim::Max: r = a > b ? a : b; break;
      case Prim::Min: r = a < b ? a : b; break;
      default: break;
    }
    set_scalar_out(ctx, name, out_arg, EValue(r));
    return;
  }
  double r = 0;
  switch (op) {
    case Prim::Add: r = x + y; break;
    case Prim::Sub: r = x - y; break;
    case Prim::Mul: r = x * y; break;
    case Prim::FloorDiv: r = std::floor(x / y); break;
    case Prim::Mod: r = x - std::floor(x / y) * y; break;
    case Prim::Max: r = std::fmax(x, y); break;
    case Prim::Min: r = std::fmin(x, y); break;
    default: break;
  }
  set_scalar_out(ctx, name, out_arg, EValue(r));
}

}  // namespace

#define ETKIT_PRIM_BINARY(fn, op) ETKIT_KERNEL_FROM(fn, binary<op>)
ETKIT_PRIM_BINARY(prim_add_scalar, Prim::Add)
ETKIT_PRIM_BINARY(prim_sub_scalar, Prim::Sub)
ETKIT_PRIM_BINARY(prim_mul_scalar, Prim::Mul)
ETKIT_PRIM_BINARY(prim_floordiv_scalar, Prim::FloorDiv)
ETKIT_PRIM_BINARY(prim_truediv_scalar, Prim::TrueDiv)
ETKIT_PRIM_BINARY(prim_mod_scalar, Prim::Mod)
ETKIT_PRIM_BINARY(prim_eq_scalar, Prim::Eq)
ETKIT_PRIM_BINARY(prim_gt_scalar, Prim::Gt)
ETKIT_PRIM_BINARY(prim_lt_scalar, Prim::Lt)
ETKIT_PRIM_BINARY(prim_ge_scalar, Prim::Ge)
ETKIT_PRIM_BINARY(prim_le_scalar, Prim::Le)
ETKIT_PRIM_BINARY(prim_sym_max_scalar, Prim::Max)
ETKIT_PRIM_BINARY(prim_sym_min_scalar, Prim::Min)
#undef ETKIT_PRIM_BINARY

// executorch_prim::neg.Scalar(a, out)
ETKIT_KERNEL(prim_neg_scalar, EValue* a_arg, EValue* out) {
  bool is_int = false;
  int64_t a = 0;
  double x = 0;
  if (number(ctx, name, *a_arg, "a", &is_int, &a, &x)) set_scalar_out(ctx, name, out, is_int ? EValue(wrap_sub(0, a)) : EValue(-x));
}

// aten::_local_scalar_dense(Tensor self) -> Scalar: the value of a one-element tensor (Tensor.item()),
// as an Int for integer dtypes, a Bool for bool, a Double for floating dtypes.
ETKIT_KERNEL(local_scalar_dense, Tensor* t, EValue* out) {
  if (t->numel() != 1) {
    fail(ctx, Error::InvalidArgument, "%s: a tensor with %zu elements has no single value", name, t->numel());
    return;
  }
  const ScalarType s = t->scalar_type();
  if (s == ScalarType::Bool) set_scalar_out(ctx, name, out, EValue(load_int(t->const_data_ptr(), s, 0) != 0));
  else if (is_floating(s)) set_scalar_out(ctx, name, out, EValue(load_double(t->const_data_ptr(), s, 0)));
  else set_scalar_out(ctx, name, out, EValue(load_int(t->const_data_ptr(), s, 0)));
}

// executorch_prim::sym_ite.Scalar(cond, a, b, out): a if cond else b (torch.sym_ite).
ETKIT_KERNEL(prim_sym_ite_scalar, EValue* cond, EValue* a, EValue* b, EValue* out) {
  bool is_int = false;
  int64_t c = 0;
  double x = 0;
  if (!number(ctx, name, *cond, "cond", &is_int, &c, &x)) return;
  const EValue& chosen = x != 0 ? *a : *b;
  if (!chosen.is_int() && !chosen.is_double() && !chosen.is_bool()) {
    fail(ctx, Error::InvalidArgument, "%s: argument '%s' must be an int, float or bool, got %s", name,
         x != 0 ? "a" : "b", runtime::tag_name(chosen.tag()));
    return;
  }
  set_scalar_out(ctx, name, out, chosen);
}

// executorch_prim::sym_float.Scalar(a, out)
ETKIT_KERNEL(prim_sym_float_scalar, EValue* a_arg, EValue* out) {
  bool is_int = false;
  int64_t a = 0;
  double x = 0;
  if (number(ctx, name, *a_arg, "a", &is_int, &a, &x)) set_scalar_out(ctx, name, out, EValue(x));
}

}  // namespace etkit::portable
