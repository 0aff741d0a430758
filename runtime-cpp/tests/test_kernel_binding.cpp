// The portable kernels unpack their arguments from the signatures of portable_kernels.inc
// (kernel_binding.h): every kernel reports a short argument list with its own op name and the
// signature's count, a wrong argument with its name, position and kind, and runs with good ones.
#include <cstdio>
#include <cstring>
#include <string>

#include "etkit/runtime/runtime.h"
#include "test_check.h"
#include "kernel_binding.h"

namespace rt = etkit::runtime;
namespace pk = etkit::portable;

namespace etkit::portable {
#define ETKIT_PORTABLE_KERNEL(op, fn, sig) void fn(KernelRuntimeContext&, Span<EValue*>);
#include "portable_kernels.inc"
#undef ETKIT_PORTABLE_KERNEL
}  // namespace etkit::portable

// The signature parser, at compile time.
static_assert(pk::signature::count("Tensor self, Tensor other, Scalar alpha, Tensor out") == 4);
static_assert(pk::signature::count("") == 0);
static_assert(pk::signature::kind("Tensor self, Scalar? min, int[] dim", 1) == pk::signature::Kind::OptionalScalar);
static_assert(pk::signature::kind("Tensor self, Scalar? min, int[] dim", 2) == pk::signature::Kind::IntList);
static_assert(pk::signature::kind("Tensor self, float min", 1) == pk::signature::Kind::Unknown);
static_assert(pk::signature::name<4>("Tensor self, Scalar? min", 1).text[2] == 'n');
static_assert(pk::signature::name_length("Tensor self, Scalar? min", 1) == 3);

// Calls `fn` with `args`; returns the failure (Ok when it ran).
static rt::Error call(rt::KernelFunction fn, rt::EValue** args, size_t n) {
  rt::clear_error_message();
  rt::KernelRuntimeContext ctx;
  fn(ctx, rt::Span<rt::EValue*>(args, n));
  return ctx.failure_state();
}

static bool message_is(const std::string& expected) {
  if (expected == rt::last_error_message()) return true;
  std::fprintf(stderr, "expected message: %s\n     got message: %s\n", expected.c_str(), rt::last_error_message());
  return false;
}

// Every kernel of the list checks its count against its own signature and names itself.
static void every_kernel_names_itself() {
  size_t checked = 0;
#define ETKIT_PORTABLE_KERNEL(op, fn, sig)                                                                 \
  {                                                                                                         \
    rt::EValue none;                                                                                        \
    rt::EValue* args[1] = {&none};                                                                          \
    constexpr size_t n = pk::signature::count(sig);                                                         \
    CHECK(n >= 2);                                                                                          \
    CHECK(call(pk::fn, args, 1) == rt::Error::InvalidProgram);                                              \
    CHECK(message_is(std::string(op) + ": expected at least " + std::to_string(n) + " arguments, got 1")); \
    ++checked;                                                                                              \
  }
#include "portable_kernels.inc"
#undef ETKIT_PORTABLE_KERNEL
  CHECK(checked == pk::kernel_table_size());
}

struct Vec3 {
  float data[3];
  int32_t sizes[1] = {3};
  uint8_t dim_order[1] = {0};
  int32_t strides[1] = {1};
  rt::Tensor tensor;
  Vec3(float a, float b, float c)
      : data{a, b, c}, tensor(rt::ScalarType::Float, 1, sizes, data, dim_order, strides) {}
};

static void wrong_arguments_are_named() {
  Vec3 a(1, 2, 3), b(10, 20, 30), out(0, 0, 0);
  rt::EValue ea(&a.tensor), eb(&b.tensor), eout(&out.tensor), none, two(2.0), dim(int64_t(0));
  {  // add.out: alpha must be a Scalar
    rt::EValue* args[4] = {&ea, &eb, &none, &eout};
    CHECK(call(pk::add_out, args, 4) == rt::Error::InvalidArgument);
    CHECK(message_is("aten::add.out: argument 'alpha' (position 2) must be a Scalar, got None"));
  }
  {  // ... and self a Tensor (the first bad argument is the one reported)
    rt::EValue* args[4] = {&two, &none, &none, &eout};
    CHECK(call(pk::add_out, args, 4) == rt::Error::InvalidArgument);
    CHECK(message_is("aten::add.out: argument 'self' (position 0) must be a Tensor, got Double"));
  }
  {  // sym_size.int: dim must be an int
    rt::EValue result;
    rt::EValue* args[3] = {&ea, &two, &result};
    CHECK(call(pk::sym_size_int, args, 3) == rt::Error::InvalidArgument);
    CHECK(message_is("aten::sym_size.int: argument 'dim' (position 1) must be an int, got Double"));
  }
  {  // leaky_relu.out: a Tensor where the Scalar negative_slope goes
    rt::EValue* args[3] = {&ea, &eb, &eout};
    CHECK(call(pk::leaky_relu_out, args, 3) == rt::Error::InvalidArgument);
    CHECK(message_is("aten::leaky_relu.out: argument 'negative_slope' (position 1) must be a Scalar, got Tensor"));
  }
  {  // good arguments run: out = a + 2 * b
    rt::EValue* args[4] = {&ea, &eb, &two, &eout};
    CHECK(call(pk::add_out, args, 4) == rt::Error::Ok);
    CHECK(out.data[0] == 21 && out.data[1] == 42 && out.data[2] == 63);
  }
  {  // clamp.out: None bounds (Scalar?) are absent, a number is a bound
    rt::EValue lo(15.0);
    rt::EValue* args[4] = {&eb, &lo, &none, &eout};
    CHECK(call(pk::clamp_out, args, 4) == rt::Error::Ok);
    CHECK(out.data[0] == 15 && out.data[1] == 20 && out.data[2] == 30);
  }
  {  // sym_size.int writes its EValue result
    rt::EValue result;
    rt::EValue* args[3] = {&ea, &dim, &result};
    CHECK(call(pk::sym_size_int, args, 3) == rt::Error::Ok);
    CHECK(result.is_int() && result.to_int() == 3);
  }
}

int main() {
  every_kernel_names_itself();
  wrong_arguments_are_named();
  if (failures == 0) std::printf("test_kernel_binding: all passed\n");
  return failures == 0 ? 0 : 1;
}
