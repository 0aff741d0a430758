// libFuzzer target of the QNN delegate's profile reader (docs/fuzzing.md): each input is the text QNN's
// detailed profiler appends to its CSV file (qnn_profile.h), which a traced QNN delegate parses after every
// run. The file is written by QNN, not by the program's author, but it is still bytes from outside the
// runtime: parse_last_qnn_run must take any text. A sanitizer report or a run that breaks its own promises
// (ops without a complete run) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qnn_profile.h"

namespace {
volatile uint64_t g_sink = 0;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<etkit_qnn::QnnOpProfile> ops;
  uint64_t accelerator_us = 0;
  if (!etkit_qnn::parse_last_qnn_run(text, &ops, &accelerator_us)) return 0;
  for (const etkit_qnn::QnnOpProfile& op : ops) g_sink += op.cycles + op.name.size();
  g_sink += accelerator_us;
  return 0;
}
