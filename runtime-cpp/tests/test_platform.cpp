// The platform layer (platform.h) and logging (log.h): et_pal_*() replaced at link time (this file defines
// the log sink and the clock; the runtime's own are weak), then at run time with register_pal(); the log
// level filter; a message longer than the buffer; set_error() at Debug; EventTracer's clock; and the PAL
// abort when a Result holding an error is read (in a child process).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/log.h"
#include "etkit/runtime/platform.h"
#include "etkit/runtime/result.h"

namespace rt = etkit::runtime;

namespace {

struct Captured {
  char level;
  std::string filename, function, message;
  size_t line, length;
};
std::vector<Captured> g_link_time, g_run_time;
et_timestamp_t g_ticks = 1000;
int g_failures = 0;

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                     \
    }                                                                   \
  } while (0)

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

void run_time_sink(et_timestamp_t, et_pal_log_level_t level, const char* filename, const char* function, size_t line,
                   const char* message, size_t length) {
  g_run_time.push_back({static_cast<char>(level), filename, function, std::string(message, length), line, length});
}

int g_abort_pipe = -1;
void pipe_sink(et_timestamp_t, et_pal_log_level_t level, const char*, const char*, size_t, const char* message,
               size_t length) {
  if (level == kFatal) (void)!write(g_abort_pipe, message, length);
}
void exit_42() { _exit(42); }

}  // namespace

// Link-time overrides: strong definitions win over the runtime's weak ones.
extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char* filename,
                                        const char* function, size_t line, const char* message, size_t length) {
  g_link_time.push_back({static_cast<char>(level), filename, function, std::string(message, length), line, length});
}
extern "C" et_timestamp_t et_pal_current_ticks(void) { return g_ticks; }
extern "C" et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) { return {5, 2}; }  // 2.5 ns per tick

int main() {
  // Link time: the level letter, the call site and the formatted text reach this file's sink.
  const size_t line = __LINE__ + 1;
  ETKIT_LOG(Info, "loaded %d methods from %s", 3, "model.pte");
  CHECK(g_link_time.size() == 1);
  if (!g_link_time.empty()) {
    const Captured& c = g_link_time.back();
    CHECK(c.level == 'I' && c.message == "loaded 3 methods from model.pte" && c.length == c.message.size());
    CHECK(ends_with(c.filename, "test_platform.cpp") && c.line == line && c.function == "main");
  }

  // Below the run-time level (Info by default) nothing is emitted; set_error() logs at Debug.
  ETKIT_LOG(Debug, "not shown");
  (void)rt::set_error(rt::Error::InvalidArgument, "input %d has %d dims", 0, 7);
  CHECK(g_link_time.size() == 1);
  rt::set_log_level(rt::LogLevel::Debug);
  (void)rt::set_error(rt::Error::InvalidArgument, "input %d has %d dims", 0, 7);
  CHECK(g_link_time.size() == 2 && g_link_time.back().level == 'D' &&
        g_link_time.back().message == "InvalidArgument: input 0 has 7 dims");
  rt::set_log_level(rt::LogLevel::Error);
  ETKIT_LOG(Info, "filtered");
  ETKIT_LOG(Error, "kept");
  CHECK(g_link_time.size() == 3 && g_link_time.back().level == 'E' && g_link_time.back().message == "kept");

  // A message longer than the buffer is cut to kMaxLogMessage - 1 bytes, never overflowing it.
  const std::string long_text(3 * rt::kMaxLogMessage, 'x');
  ETKIT_LOG(Error, "%s", long_text.c_str());
  CHECK(g_link_time.back().length == rt::kMaxLogMessage - 1 && g_link_time.back().message == long_text.substr(0, rt::kMaxLogMessage - 1));

  // The clock: ticks scaled by the PAL's ratio; profiling events use it.
  g_ticks = 4000;
  CHECK(rt::pal_current_time_ns() == 10000);
  CHECK(rt::EventTracer::now_ns() == 10000);
  g_ticks = 4001;  // 4001 * 5 / 2 = 10002.5, rounded down
  CHECK(rt::EventTracer::now_ns() == 10002);

  // Run time: register_pal replaces the sink; fields left null keep the current functions.
  CHECK(rt::register_pal(rt::PalImpl::create(&run_time_sink, __FILE__)));
  CHECK(rt::get_pal_impl()->current_ticks == &et_pal_current_ticks);
  ETKIT_LOG(Error, "to the registered sink");
  CHECK(g_link_time.size() == 4 && g_run_time.size() == 1 && g_run_time.back().message == "to the registered sink");

  // A Result holding an error read as a value: a Fatal message, then the PAL's abort (here: exit 42).
  int fds[2];
  CHECK(pipe(fds) == 0);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    g_abort_pipe = fds[1];
    rt::PalImpl impl = rt::PalImpl::create(&pipe_sink, __FILE__);
    impl.abort = &exit_42;
    rt::register_pal(impl);
    rt::Result<int> missing(rt::Error::NotFound);
    std::printf("%d\n", missing.get());  // must not return
    _exit(0);
  }
  close(fds[1]);
  char text[256] = {0};
  const ssize_t n = read(fds[0], text, sizeof(text) - 1);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);
  CHECK(n > 0 && std::strstr(text, "a Result holding the error NotFound was read as a value") != nullptr);

  if (g_failures == 0) std::printf("test_platform: all checks passed\n");
  return g_failures == 0 ? 0 : 1;
}
