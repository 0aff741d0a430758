// A truncated or bit-flipped program must be rejected with an Error and a message, never crash
// (seed page ".pte file format"; verification as in ExecuTorch's Program::load). Every prefix length
// and every single-byte corruption of the sample program is tried: load, load_method and execute
// either succeed or return an Error.
#include <cstdio>
#include <cstring>

#include "etkit/runtime/runtime.h"
#include "test_check.h"
#include "test_program_builder.h"

namespace rt = etkit::runtime;

// Loads and, if that works, runs; returns the first error (Ok if all worked).
static rt::Error try_run(const std::vector<uint8_t>& bytes) {
  rt::BufferDataLoader loader(bytes.data(), bytes.size());
  auto program = rt::Program::load(&loader);
  if (!program.ok()) return program.error();
  auto method = program->load_method("forward");
  if (!method.ok()) return method.error();
  float x[6] = {0}, y[6] = {0};
  int32_t s1[2] = {2, 3}, s2[2] = {2, 3};
  uint8_t o1[2] = {0, 1}, o2[2] = {0, 1};
  int32_t st1[2], st2[2];
  rt::Tensor tx(rt::ScalarType::Float, 2, s1, x, o1, st1), ty(rt::ScalarType::Float, 2, s2, y, o2, st2);
  if (method->inputs_size() >= 1) {
    rt::Error e = method->set_input(rt::EValue(&tx), 0);
    if (e != rt::Error::Ok) return e;
  }
  if (method->inputs_size() >= 2) {
    rt::Error e = method->set_input(rt::EValue(&ty), 1);
    if (e != rt::Error::Ok) return e;
  }
  return method->execute();
}

int main() {
  if (etkit_register_portable_kernels() != 0) return 1;
  const std::vector<uint8_t> good = etkit_test::build_sample_program();
  CHECK(try_run(good) == rt::Error::Ok);

  size_t truncated_rejected = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    rt::Error e = try_run(cut);
    CHECK(e != rt::Error::Ok);
    CHECK(std::strlen(rt::last_error_message()) > 0);
    truncated_rejected += e != rt::Error::Ok;
  }
  size_t flips = 0, flip_rejected = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= mask;
      rt::Error e = try_run(bad);  // must not crash; may succeed if the byte is unused
      ++flips;
      flip_rejected += e != rt::Error::Ok;
      if (e != rt::Error::Ok) CHECK(std::strlen(rt::last_error_message()) > 0);
    }
  }
  std::printf("truncations rejected: %zu/%zu; corruptions tried: %zu (rejected %zu)\n", truncated_rejected,
              good.size(), flips, flip_rejected);

  // Wrong identifier gives a message naming it.
  std::vector<uint8_t> wrong = good;
  std::memcpy(wrong.data() + 4, "XX99", 4);
  CHECK(try_run(wrong) == rt::Error::InvalidProgram);
  CHECK(std::strstr(rt::last_error_message(), "XX99") != nullptr);

  // A resize to an empty shape whose nonzero sizes multiply past 2^31 would overflow the int32 strides.
  {
    rt::SizesType sizes[3] = {1, 2, 3};
    rt::DimOrderType order[3] = {0, 1, 2};
    rt::StridesType strides[3] = {0, 0, 0};
    float data[6] = {0};
    rt::Tensor t(rt::ScalarType::Float, 3, sizes, data, order, strides, rt::TensorShapeDynamism::DYNAMIC_BOUND);
    const rt::SizesType overflowing[3] = {0, 65536, 65536};
    CHECK(t.resize(rt::Span<const rt::SizesType>(overflowing, 3)) == rt::Error::InvalidArgument);
    CHECK(std::strstr(rt::last_error_message(), "int32 strides") != nullptr);
    CHECK(sizes[1] == 2 && strides[0] == 6);  // unchanged
    const rt::SizesType empty[3] = {0, 2, 3};
    CHECK(t.resize(rt::Span<const rt::SizesType>(empty, 3)) == rt::Error::Ok && t.numel() == 0);
  }

  std::printf("%d passed, %d failed\n", failures == 0 ? 1 : 0, failures == 0 ? 0 : 1);
  return failures == 0 ? 0 : 1;
}
