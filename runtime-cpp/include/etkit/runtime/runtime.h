// Umbrella header: everything an application or a backend needs.
#pragma once

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/kernel.h"
#include "etkit/runtime/memory_allocator.h"
#include "etkit/runtime/method.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/program.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/span.h"
#include "etkit/runtime/tensor.h"
