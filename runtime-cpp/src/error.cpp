// Error names and the per-thread last-error message (see error.h).
#include "etkit/runtime/error.h"

#include <cstdarg>
#include <cstdio>

#include "etkit/runtime/log.h"
#include "etkit/runtime/threadpool.h"

namespace etkit::runtime {
namespace {
constexpr size_t kMessageCapacity = 1024;
ETKIT_THREAD_LOCAL char g_message[kMessageCapacity] = {0};
ETKIT_THREAD_LOCAL ErrorContext g_context;

void copy_field(char* dst, size_t capacity, const char* src) {
  if (src == nullptr) return;
  std::snprintf(dst, capacity, "%s", src);
}
}  // namespace

const char* error_name(Error error) {
  switch (error) {
    case Error::Ok: return "Ok";
    case Error::Internal: return "Internal";
    case Error::InvalidState: return "InvalidState";
    case Error::EndOfMethod: return "EndOfMethod";
    case Error::NotSupported: return "NotSupported";
    case Error::NotImplemented: return "NotImplemented";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidType: return "InvalidType";
    case Error::OperatorMissing: return "OperatorMissing";
    case Error::NotFound: return "NotFound";
    case Error::MemoryAllocationFailed: return "MemoryAllocationFailed";
    case Error::AccessFailed: return "AccessFailed";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::InvalidExternalData: return "InvalidExternalData";
    case Error::OutOfResources: return "OutOfResources";
    case Error::DelegateInvalidCompatibility: return "DelegateInvalidCompatibility";
    case Error::DelegateMemoryAllocationFailed: return "DelegateMemoryAllocationFailed";
    case Error::DelegateInvalidHandle: return "DelegateInvalidHandle";
  }
  return "UnknownError";
}

const char* last_error_message() { return g_message; }

Error set_error(Error error, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(g_message, kMessageCapacity, format, args);
  va_end(args);
  g_context = ErrorContext();
  g_context.code = error;
  // The caller hands the message on with the Error; the log has it for whoever follows the runtime at Debug
  // (vlogf returns at once below that level).
  internal::vlogf(LogLevel::Debug, "", "", 0, "%s: %s", error_name(error), g_message);
  return error;
}

namespace internal {
void result_value_of_error(Error error) {
  ETKIT_LOG(Fatal, "a Result holding the error %s was read as a value (check ok() first)", error_name(error));
  pal_abort();
}
}  // namespace internal

void clear_error_message() {
  g_message[0] = '\0';
  g_context = ErrorContext();
}

const ErrorContext& last_error_context() { return g_context; }

void set_error_context(const char* backend_id, const char* method, const char* op, int64_t instruction,
                       int64_t delegate_index) {
  copy_field(g_context.backend_id, sizeof(g_context.backend_id), backend_id);
  copy_field(g_context.method, sizeof(g_context.method), method);
  copy_field(g_context.op, sizeof(g_context.op), op);
  if (instruction >= 0) g_context.instruction = instruction;
  if (delegate_index >= 0) g_context.delegate_index = delegate_index;
}

}  // namespace etkit::runtime
