// Defining the payload's XValues as XNNPACK subgraph values (xnn_define_*tensor_value).
#pragma once

#include <cstdint>
#include <unordered_map>

#include <xnnpack.h>

#include "delegate_state.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/named_data_map.h"
#include "payload.h"

namespace etkit_xnnpack {

/// ValueInfo::storage of a value without constant data, and of one whose bytes lie in the payload's
/// own constant-data section; values >= 0 index DelegateState::named_data.
constexpr int32_t kNoStorage = -1;
constexpr int32_t kPayloadStorage = -2;

/// What the node definitions need to know about a defined value.
struct ValueInfo {
  uint32_t xnn_id = XNN_INVALID_VALUE_ID;  // id XNNPACK returned (equals the external id for externals)
  uint32_t rank = 0;
  xnn_datatype datatype = xnn_datatype_invalid;
  bool is_static = false;          // has constant data
  bool is_external_input = false;  // bound by the caller as an input
  int32_t storage = kNoStorage;    // where its constant bytes live (kNoStorage, kPayloadStorage, or an index)
  int32_t owned = -1;              // index of its copy in DelegateState::owned_constants (small constants)
  size_t dims[XNN_MAX_TENSOR_DIMS] = {};  // declared dims (the first `rank`; upper bounds of dynamic ones)
  bool is_external_output = false;        // bound by the caller as an output
};

/// Serialized value id (XNNTensorValue.id_out) -> defined value.
using ValueTable = std::unordered_map<uint32_t, ValueInfo>;

/// Defines every XValue of `payload.graph` in `subgraph`, in order, filling `values` and the
/// external bindings of `state` (inputs/outputs, sorted by external id). Constant data comes from the
/// payload's constant-data section (ConstantDataOffset.offset/size) or, when named_key is set, from
/// `named_data_map`; buffers fetched from the map are kept in `state.named_data` (ValueInfo::storage
/// says which holds a value's bytes) until the builder releases the ones no node reads at run time.
/// Quantization scales are copied into the state.
/// Errors (message names the value index and id_out): InvalidProgram for a malformed value (unknown
/// datatype, rank > XNN_MAX_TENSOR_DIMS, constant out of range or too small, bad external id or
/// flags, duplicate id_out), NotFound for a named_key missing from the named data, NotImplemented
/// for quantization XNNPACK 2024-11-08 cannot express.
etkit::runtime::Error define_values(xnn_subgraph_t subgraph, const PayloadView& payload,
                                    const etkit::runtime::NamedDataMap* named_data_map,
                                    DelegateState& state, ValueTable& values);

}  // namespace etkit_xnnpack
