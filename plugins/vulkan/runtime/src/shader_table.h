// The compiled compute-shader library: SPIR-V modules embedded in the delegate at build time.
//
// Every runtime/shaders/<name>.comp is compiled by glslc twice, as "<name>_f32" (float32 tensors) and
// "<name>_f16" (float16 tensors, computed in float32); cmake/embed_spirv.cmake writes the table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace etkit_vulkan {

struct ShaderBinary {
  const char* name;       // "<shader>_<f32|f16>"
  const uint32_t* words;  // SPIR-V
  size_t word_count;
};

extern const ShaderBinary kShaderTable[];
extern const size_t kShaderTableSize;

/// The module called `name`, or null.
inline const ShaderBinary* find_shader(const char* name) {
  for (size_t i = 0; i < kShaderTableSize; ++i) {
    const char* a = kShaderTable[i].name;
    const char* b = name;
    while (*a != '\0' && *a == *b) ++a, ++b;
    if (*a == *b) return &kShaderTable[i];
  }
  return nullptr;
}

}  // namespace etkit_vulkan
