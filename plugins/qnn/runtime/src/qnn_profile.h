// Per-operator time inside a QNN context, from QNN's own profiler. With the QNN execution provider's
// `profiling_level=detailed` and `profiling_file_path=F`, ONNX Runtime's QNN EP appends each run's QNN
// profile to F as CSV lines "<timestamp>,<message>,<value>,<unit>,<source>,<level>,<identifier>":
//
//   0,BACKEND,598641,CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)
//   0,NODE,234934,CYCLES,BACKEND,SUB-EVENT,Transpose:OpId_17 (cycles)      one per QNN op, in order
//   0,NODE,159769,CYCLES,BACKEND,SUB-EVENT,Relu__3:OpId_26 (cycles)
//   0,BACKEND,3842,US,BACKEND,ROOT,Accelerator (execute) time
//   0,EXECUTE,3945,US,BACKEND,ROOT,QNN (execute) time                     ends the run
//
// What QNN gives per op is HTP cycles, not time (measured with onnxruntime-qnn 2.7.0, HTP simulator on
// x86): the ops' cycles sum to the accelerator's cycle count. The delegate turns them into time by giving
// each op its share of the run's measured accelerator time (microseconds). A QNN op is named after the
// ONNX node it came from (QNN appends "_token_<n>" when it splits one), so the Edge-node map written by
// preprocess (ONNX node name -> debug handles) finds it; ops QNN adds itself (layout transposes, "Input",
// "Output") map nowhere.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace etkit_qnn {

struct QnnOpProfile {
  std::string name;   // the ONNX node name: identifier without ":OpId_<n> (cycles)" and "_token_<n>"
  uint64_t cycles = 0;
};

/// The last complete run in the lines of `text`: its ops, and the accelerator's execute time in
/// microseconds (0 when QNN did not report it). Returns false when `text` holds no complete run.
/// Lines that do not parse are skipped. `ops` is reused (cleared, then filled).
bool parse_last_qnn_run(const std::string& text, std::vector<QnnOpProfile>* ops, uint64_t* accelerator_us);

/// Follows the profile file one run at a time: each read() returns the text appended since the last
/// complete line it consumed.
class QnnProfileFile {
 public:
  QnnProfileFile() = default;
  QnnProfileFile(const QnnProfileFile&) = delete;
  QnnProfileFile& operator=(const QnnProfileFile&) = delete;
  ~QnnProfileFile();

  /// Creates an empty file under $TMPDIR (or /tmp) for QNN to append to. False if that fails. The file,
  /// and the binary log QNN writes beside it ("<path>_qnn.log"), are removed with this object.
  bool create();
  const std::string& path() const { return path_; }
  /// The complete lines appended since the last call, in `text` (reused). False when nothing new.
  bool read_new(std::string* text);

 private:
  std::string path_;
  long offset_ = 0;
};

}  // namespace etkit_qnn
