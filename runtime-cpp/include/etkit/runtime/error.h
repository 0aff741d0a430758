// Error codes returned by every fallible etkit runtime call.
//
// The numbering follows ExecuTorch's runtime/core/error.h (seed page "Detailed C++ Runtime APIs
// Tutorial") so that codes printed by either runtime mean the same thing. A human-readable message
// for the most recent failure on the calling thread is kept by `last_error_message()`; it names the
// thing that failed, the value and what to do.
#pragma once

#include <cstdint>

namespace etkit::runtime {

enum class Error : uint32_t {
  Ok = 0x00,
  Internal = 0x01,
  InvalidState = 0x02,
  EndOfMethod = 0x03,

  NotSupported = 0x10,
  NotImplemented = 0x11,
  InvalidArgument = 0x12,
  InvalidType = 0x13,
  OperatorMissing = 0x14,

  NotFound = 0x20,
  MemoryAllocationFailed = 0x21,
  AccessFailed = 0x22,
  InvalidProgram = 0x23,
  InvalidExternalData = 0x24,
  OutOfResources = 0x25,

  DelegateInvalidCompatibility = 0x30,
  DelegateMemoryAllocationFailed = 0x31,
  DelegateInvalidHandle = 0x32,
};

/// The enumerator's name, e.g. "InvalidProgram". Never null.
const char* error_name(Error error);

/// The message recorded by the last failing call on this thread ("" if none). The storage is a
/// fixed thread-local buffer: copy it before the next runtime call if it must be kept.
const char* last_error_message();

/// Records a printf-style message for `last_error_message()` and returns `error` so a failure can be
/// reported in one line: `return set_error(Error::InvalidProgram, "segment %u out of range", i);`.
/// Never allocates; messages longer than the buffer (1024 bytes) are truncated.
Error set_error(Error error, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/// Clears `last_error_message()` and `last_error_context()`.
void clear_error_message();

/// Where the last failure on this thread happened, as far as the runtime knows it, beside its message: what
/// bindings turn into exception attributes instead of parsing the text. Empty strings and -1 are unknown.
/// set_error() resets it (code = the error, nothing else known); the runtime fills in the rest where it
/// reports a failure of a kernel, a delegate or a backend.
struct ErrorContext {
  Error code = Error::Ok;
  char backend_id[64] = {0};  // the backend whose delegate failed or is missing
  char method[128] = {0};     // the method being loaded or executed
  char op[128] = {0};         // the operator ("aten::add.out") whose kernel failed
  int64_t instruction = -1;   // index of the failing instruction in the method's plan
  int64_t delegate_index = -1;
};
const ErrorContext& last_error_context();
/// Adds what is known to the context of the failure just recorded (null / -1: unknown). Never allocates.
void set_error_context(const char* backend_id, const char* method, const char* op, int64_t instruction,
                       int64_t delegate_index);

}  // namespace etkit::runtime

/// Returns early from the enclosing function when `expr` yields an Error other than Ok.
#define ETKIT_CHECK_OK(expr)                                     \
  do {                                                           \
    ::etkit::runtime::Error etkit_err_ = (expr);                 \
    if (etkit_err_ != ::etkit::runtime::Error::Ok) return etkit_err_; \
  } while (0)
