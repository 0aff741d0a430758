// Bundled programs (.bpte): a .pte program plus test cases for some of its methods, in the format of
// schema/bundled_program.fbs (ExecuTorch 1.5.1's bundled_program_schema.fbs, file identifier "BP08";
// seed page "Bundled Program"). ExecuTorch's runtime names are kept: get_program_data,
// load_bundled_input, verify_method_outputs.
//
//   auto bundle = BundledProgramView::from(bytes, size);             // checks the whole file
//   BufferDataLoader loader(bundle->program().data(), bundle->program().size());
//   auto program = Program::load(&loader);                           // the embedded .pte
//   auto method = program->load_method("forward");
//   load_bundled_input(*method, *bundle, 0);                         // test case 0's inputs
//   method->execute();
//   VerifyReport report;
//   Error e = verify_method_outputs(*method, *bundle, 0, 1e-5, 1e-8, &report);
//
// (each Result checked with ok() first; runner/main.cpp is a complete example).
//
// A .bpte is untrusted input. BundledProgramView::from runs the flatbuffers verifier and then checks
// what the verifier cannot (scalar types, ranks, sizes against the data bytes, dim orders); every
// failure is an Error with last_error_message() naming the part, e.g.
// "method_test_suites[0].test_cases[1].inputs[0]: tensor data has 12 bytes, sizes [2, 3] of Float
// need 24". Nothing here aborts or reads outside the buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "etkit/runtime/method.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/span.h"

namespace etkit::bundled_program {

using runtime::Error;
using runtime::Method;
using runtime::Result;
using runtime::Span;

/// True when `data` carries the bundled-program file identifier "BP08" at bytes 4..7. Says nothing
/// about the rest of the buffer.
bool is_bundled_program(const void* data, size_t size);

/// A checked view of a .bpte held in memory. It does not own the bytes: they must outlive the view,
/// and stay at an address aligned to 16 bytes when inputs are read from them in place.
class BundledProgramView final {
 public:
  /// Verifies `data[0..size)` as a bundled program (structure and contents).
  /// Errors: InvalidProgram (not a .bpte, truncated or corrupted; the message names the part).
  static Result<BundledProgramView> from(const void* data, size_t size);

  /// The schema version written in the file (2 for ExecuTorch 1.5.1's writer).
  uint32_t version() const;
  /// The embedded .pte file.
  Span<const uint8_t> program() const;
  size_t num_method_test_suites() const;
  /// Name of suite `index` (< num_method_test_suites()).
  const char* method_name(size_t index) const;
  /// Test cases bundled for `method_name`. Errors: NotFound (no suite for that method; the message
  /// lists the methods that have one).
  Result<size_t> num_test_cases(const char* method_name) const;

  /// The flatbuffer root (etkit::fb::bundled::BundledProgram) for code that reads more fields.
  const void* root() const { return root_; }

 private:
  BundledProgramView(const uint8_t* data, size_t size, const void* root) : data_(data), size_(size), root_(root) {}
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  const void* root_ = nullptr;
};

/// ExecuTorch's get_program_data: where the program is in a file that may be a .bpte. For a .bpte
/// (after full verification) the embedded program; for anything else `data` itself, unchanged (the
/// program loader checks it).
/// Errors: InvalidProgram for a .bpte that fails verification; InvalidArgument for null pointers.
Error get_program_data(const void* data, size_t size, const void** program_data, size_t* program_size);

/// Sets every input of `method` from test case `test_case_index` of the suite for `method_name` (the
/// method's own name when null). Tensor inputs are copied into memory-planned inputs; an input that is
/// not memory-planned is bound to the bytes inside the .bpte, which must then outlive the next
/// execute(). Int/Double/Bool inputs replace the method's value. A traced method's event tracer is told the
/// test case index (EventTracer::set_bundled_input_index: the ETDump's next "Execute" blocks carry it).
/// Errors: NotFound (no suite for the method), InvalidArgument (index out of range, input count,
/// dtype, rank, shape or layout differs from the method's: the message names the input and both).
Error load_bundled_input(Method& method, const BundledProgramView& bundle, size_t test_case_index,
                         const char* method_name = nullptr);

/// What verify_method_outputs found. When several outputs differ, `failed_output` is the first.
struct VerifyReport {
  bool passed = false;
  size_t num_outputs = 0;
  /// Index of the first output outside tolerance, or SIZE_MAX when all pass.
  size_t failed_output = SIZE_MAX;
  /// Largest |expected - actual| over all outputs (infinite when a dtype/shape or a NaN/inf
  /// pattern differs).
  double max_abs_diff = 0.0;
  size_t max_abs_diff_output = 0;
  /// For `failed_output`: its largest difference, how many of its elements are outside tolerance, and
  /// the (row-major) element where the difference is largest with both values there.
  double failed_max_abs_diff = 0.0;
  size_t failed_mismatches = 0;
  size_t failed_numel = 0;
  size_t failed_element = 0;
  double failed_expected = 0.0;
  double failed_actual = 0.0;
};

/// Compares the outputs `method` holds (after execute()) with the expected outputs of test case
/// `test_case_index`. Floating-point tensors (Float, Double, Half, BFloat16) pass where
/// |expected - actual| <= atol + rtol * |actual| element by element (NaN matches NaN, inf matches inf
/// of the same sign), as ExecuTorch's verify_method_outputs decides; other dtypes must be equal.
/// Dtype and shape must equal the expected ones. `report` (optional) receives the details.
/// Errors: NotFound when an output differs (ExecuTorch's code for it; the message names the test case,
/// the output, the largest absolute difference and where), InvalidArgument (index out of range, no
/// expected outputs, expected output count differs from the method's), plus NotFound for a missing
/// suite as load_bundled_input.
Error verify_method_outputs(Method& method, const BundledProgramView& bundle, size_t test_case_index, double rtol,
                            double atol, VerifyReport* report = nullptr, const char* method_name = nullptr);

}  // namespace etkit::bundled_program
