// The one-node ONNX model ("EPContext model") through which ONNX Runtime's QNN execution provider loads a
// QNN context binary: an EPContext node (domain com.microsoft) with embed_mode=1, the binary in
// ep_cache_context, source "QNNExecutionProvider" and the graph's name in partition_name, between float32
// graph inputs and outputs with static shapes. Written by hand in protobuf wire format from the public
// ONNX schema (onnx.proto: ModelProto, GraphProto, NodeProto, AttributeProto, ValueInfoProto), IR version 10,
// so a context compiled by any ONNX Runtime version loads on any other (docs/design/qnn-route.md section 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace etkit_qnn {

struct GraphTensor {
  const char* name;
  size_t name_size;
  const int64_t* shape;
  size_t rank;
  int elem_type;  // ONNX TensorProto.DataType (1 float, 2 uint8, 3 int8, 4 uint16, 5 int16)
};

/// Serializes the EPContext model. Returns the bytes (the context binary is copied into them).
std::string write_epcontext_model(const char* graph_name, size_t graph_name_size, const uint8_t* context,
                                  size_t context_size, const std::vector<GraphTensor>& inputs,
                                  const std::vector<GraphTensor>& outputs);

}  // namespace etkit_qnn
