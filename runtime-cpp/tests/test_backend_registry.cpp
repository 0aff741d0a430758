// Backend registration through the C ABI (docs/design/contracts.md section 3): a wrong ABI version is
// refused with a message naming both versions; a program whose delegate names an unregistered backend
// fails at load_method with a message saying to install/link the plugin; a registered backend gets
// init/execute/destroy and set_option("num_threads").
#include <cstdio>
#include <cstring>
#include <string>

#include "etkit/runtime/runtime.h"
#include "test_check.h"
#include "test_program_builder.h"

namespace rt = etkit::runtime;

namespace {
/// Copies its input to its output (args = [input, output]) and records calls.
class EchoBackend final : public rt::BackendInterface {
 public:
  mutable int inits = 0, executes = 0, destroys = 0;
  int64_t threads = 0;
  mutable size_t payload_size = 0;
  bool is_available() const override { return true; }
  rt::Result<rt::DelegateHandle*> init(rt::BackendInitContext& ctx, rt::FreeableBuffer* processed,
                                       rt::Span<const rt::CompileSpec>) const override {
    ++inits;
    payload_size = processed->size();
    void* handle = ctx.get_runtime_allocator()->allocate(16);
    return handle;
  }
  rt::Error execute(rt::BackendExecutionContext&, rt::DelegateHandle*, rt::Span<rt::EValue*> args) const override {
    ++executes;
    return args.size() == 2 ? rt::Error::Ok : rt::Error::InvalidArgument;
  }
  void destroy(rt::DelegateHandle*) const override { ++destroys; }
  rt::Error set_option(const char* key, int64_t value) override {
    if (std::strcmp(key, "num_threads") != 0) return rt::Error::NotSupported;
    threads = value;
    return rt::Error::Ok;
  }
};
EchoBackend g_echo;

rt::Error load_and_run(const std::vector<uint8_t>& bytes) {
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
  method->set_input(rt::EValue(&tx), 0);
  method->set_input(rt::EValue(&ty), 1);
  return method->execute();
}
}  // namespace

int main() {
  if (etkit_register_portable_kernels() != 0) return 1;

  // ABI mismatch is refused, naming both versions.
  int rc = etkit_register_backend(ETKIT_BACKEND_ABI_VERSION + 1, "EchoBackend", &g_echo);
  CHECK(rc != 0);
  std::string msg = etkit_backend_registration_error();
  CHECK(msg.find(std::to_string(ETKIT_BACKEND_ABI_VERSION + 1)) != std::string::npos);
  CHECK(msg.find(std::to_string(ETKIT_BACKEND_ABI_VERSION)) != std::string::npos);
  CHECK(rt::get_backend("EchoBackend") == nullptr);

  // Missing backend.
  rt::Error e = load_and_run(etkit_test::build_sample_program("EchoBackend"));
  CHECK(e == rt::Error::NotFound);
  CHECK(std::strstr(rt::last_error_message(),
                    "program needs backend 'EchoBackend' which is not registered in this runtime; install/link its "
                    "plugin") != nullptr);

  // Registered backend: init/execute/destroy, payload delivered.
  CHECK(etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, "EchoBackend", &g_echo) == 0);
  CHECK(etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, "EchoBackend", &g_echo) == 0);  // idempotent
  EchoBackend other;
  CHECK(etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, "EchoBackend", &other) != 0);  // id taken
  CHECK(load_and_run(etkit_test::build_sample_program("EchoBackend")) == rt::Error::Ok);
  CHECK(g_echo.inits == 1 && g_echo.executes == 1 && g_echo.destroys == 1);
  CHECK(g_echo.payload_size == 4);

  // Options.
  CHECK(rt::set_backend_option("*", "num_threads", 3) == rt::Error::Ok);
  CHECK(g_echo.threads == 3);
  CHECK(rt::set_backend_option("EchoBackend", "unknown_key", 1) == rt::Error::NotSupported);
  CHECK(rt::set_backend_option("NoSuch", "num_threads", 1) == rt::Error::NotFound);

  std::printf("%d passed, %d failed\n", failures == 0 ? 1 : 0, failures == 0 ? 0 : 1);
  return failures == 0 ? 0 : 1;
}
