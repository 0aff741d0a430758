// What a bare-metal image's generated model source (model_image.cpp, written by
// `etkit runner build --target cortex-m55`, etkit/native/baremetal.py) defines for main.cpp: the program
// embedded as a C array, the inputs to run it on, the portable kernels it calls (selective build) and the
// static memory it runs in. Every buffer is a static array: the image uses no heap after start-up.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/kernel.h"

/// One input of the method: its bytes in the layout the program plans (dtype, sizes and dim_order of
/// MethodMeta::input_tensor_meta), or a scalar.
struct EtkitEmbeddedInput {
  uint8_t* data;   // tensor bytes (in RAM: a kernel may read an input through a mutable pointer)
  size_t nbytes;
};

extern const uint8_t etkit_model_pte[];  // the .pte, 16-byte aligned
extern const size_t etkit_model_pte_size;
extern const char etkit_model_method[];  // the method to run, e.g. "forward"
extern const EtkitEmbeddedInput etkit_model_inputs[];
extern const size_t etkit_model_num_inputs;
extern const etkit::runtime::Kernel etkit_model_kernels[];  // the kernels the program calls
extern const size_t etkit_model_kernel_count;

// Caller-owned memory (seed page "Managing Tensor Memory in C++"): the planned arenas (one per mem_id,
// carved from one pool in MethodMeta's order, each 16-byte aligned), the method allocator (the Method's own
// lists) and the temp allocator (kernels' scratch).
extern uint8_t etkit_planned_pool[];
extern const size_t etkit_planned_pool_size;
extern uint8_t etkit_method_pool[];
extern const size_t etkit_method_pool_size;
extern uint8_t etkit_temp_pool[];
extern const size_t etkit_temp_pool_size;
