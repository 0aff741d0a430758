// fuzz_coreml_payload: the Core ML delegate's payload reader (src/payload_reader.cpp: ExecuTorch's
// in-memory file system and metadata.json) under libFuzzer (docs/fuzzing.md). Everything the delegate does
// after reading is Core ML's, which exists only on Apple platforms. Each input is a payload; the reader
// must answer (a Payload or a message), and every file it returns must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "etkit_coreml/payload_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  etkit_coreml::Payload payload;
  std::string error;
  if (!etkit_coreml::read_payload(data, size, &payload, &error)) {
    if (error.empty()) std::abort();  // a refusal must say why
    return 0;
  }
  for (const etkit_coreml::PayloadFile& f : payload.files) {
    if (f.size != 0 && (f.data < data || f.size > size || f.data > data + (size - f.size))) std::abort();
    volatile uint8_t sink = 0;
    if (f.size != 0) sink = f.data[f.size - 1];  // ASan checks the last byte is readable
    (void)sink;
  }
  return 0;
}
