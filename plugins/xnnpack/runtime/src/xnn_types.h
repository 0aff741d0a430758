// Mappings between the payload schema, XNNPACK and the etkit runtime's element types.
#pragma once

#include <cstddef>
#include <cstdint>

#include <xnnpack.h>

#include "etkit/runtime/error.h"
#include "etkit/runtime/scalar_type.h"
#include "xnnpack_graph_generated.h"

namespace etkit_xnnpack {

/// XNNPACK's datatype for a schema datatype. The schema's numbering (ExecuTorch's) differs from
/// XNNPACK 2024-11-08's enum from qbint4 on, so this is an explicit table, never a cast.
/// Returns xnn_datatype_invalid for xnn_datatype_invalid or an unknown value.
xnn_datatype to_xnn_datatype(etkit_xnnpack::fb::XNNDatatype type);

/// "fp32", "qint8", ... for messages.
const char* xnn_datatype_name(xnn_datatype type);

/// "xnn_status_invalid_parameter", ... for messages.
const char* xnn_status_name(xnn_status status);

/// The error for an XNNPACK call that returned `status` (set_error'd, message "XnnpackBackend: <what> failed
/// with <status>"): MemoryAllocationFailed naming the bytes asked for when the bounded allocator refused a
/// request above the memory limit (bounded_allocator.h), Internal otherwise.
etkit::runtime::Error xnn_failed(const char* what, xnn_status status);

/// Bytes a dense tensor of `numel` elements of `type` occupies (4-bit types round up), or 0 when
/// the size is not fixed by the type alone (dynamically quantized, packed types).
size_t dense_nbytes(xnn_datatype type, uint64_t numel);

/// Whether a runtime tensor of `scalar` can be bound to an external value of `type`.
/// `is_output` also allows Long for int32 values (XNNPACK writes int32; the delegate widens).
bool scalar_type_matches(xnn_datatype type, etkit::runtime::ScalarType scalar, bool is_output);

}  // namespace etkit_xnnpack
