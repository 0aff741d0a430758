// Protobuf wire format (varints, length-delimited fields) for the EPContext model; field numbers from onnx.proto.
#include "epcontext_model.h"

namespace etkit_qnn {
namespace {

// onnx.proto field numbers used here.
enum : uint32_t {
  kModelIrVersion = 1, kModelProducerName = 2, kModelGraph = 7, kModelOpsetImport = 8,
  kOpsetDomain = 1, kOpsetVersion = 2,
  kGraphNode = 1, kGraphName = 2, kGraphInput = 11, kGraphOutput = 12,
  kNodeInput = 1, kNodeOutput = 2, kNodeName = 3, kNodeOpType = 4, kNodeAttribute = 5, kNodeDomain = 7,
  kAttrName = 1, kAttrI = 3, kAttrS = 4, kAttrType = 20,
  kValueInfoName = 1, kValueInfoType = 2,
  kTypeTensorType = 1, kTensorElemType = 1, kTensorShape = 2, kShapeDim = 1, kDimValue = 1,
};
constexpr int kAttributeInt = 2;
constexpr int kAttributeString = 3;
constexpr int kIrVersion = 10;
constexpr int kOpset = 17;

void varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void key(std::string& out, uint32_t field, uint32_t wire_type) { varint(out, (uint64_t{field} << 3) | wire_type); }

void int_field(std::string& out, uint32_t field, int64_t value) {
  key(out, field, 0);
  varint(out, static_cast<uint64_t>(value));
}

void bytes_field(std::string& out, uint32_t field, const void* data, size_t size) {
  key(out, field, 2);
  varint(out, size);
  out.append(static_cast<const char*>(data), size);
}

void str_field(std::string& out, uint32_t field, const std::string& s) { bytes_field(out, field, s.data(), s.size()); }

std::string int_attribute(const char* name, int64_t value) {
  std::string a;
  str_field(a, kAttrName, name);
  int_field(a, kAttrI, value);
  int_field(a, kAttrType, kAttributeInt);
  return a;
}

std::string bytes_attribute(const char* name, const void* data, size_t size) {
  std::string a;
  str_field(a, kAttrName, name);
  bytes_field(a, kAttrS, data, size);
  int_field(a, kAttrType, kAttributeString);
  return a;
}

std::string value_info(const GraphTensor& t) {
  std::string shape;
  for (size_t i = 0; i < t.rank; ++i) {
    std::string dim;
    int_field(dim, kDimValue, t.shape[i]);
    str_field(shape, kShapeDim, dim);
  }
  std::string tensor;
  int_field(tensor, kTensorElemType, t.elem_type);
  str_field(tensor, kTensorShape, shape);
  std::string type;
  str_field(type, kTypeTensorType, tensor);
  std::string info;
  bytes_field(info, kValueInfoName, t.name, t.name_size);
  str_field(info, kValueInfoType, type);
  return info;
}

}  // namespace

std::string write_epcontext_model(const char* graph_name, size_t graph_name_size, const uint8_t* context,
                                  size_t context_size, const std::vector<GraphTensor>& inputs,
                                  const std::vector<GraphTensor>& outputs) {
  std::string node;
  for (const GraphTensor& t : inputs) bytes_field(node, kNodeInput, t.name, t.name_size);
  for (const GraphTensor& t : outputs) bytes_field(node, kNodeOutput, t.name, t.name_size);
  bytes_field(node, kNodeName, graph_name, graph_name_size);
  str_field(node, kNodeOpType, "EPContext");
  str_field(node, kNodeAttribute, int_attribute("main_context", 1));
  str_field(node, kNodeAttribute, int_attribute("embed_mode", 1));
  str_field(node, kNodeAttribute, bytes_attribute("ep_cache_context", context, context_size));
  str_field(node, kNodeAttribute, bytes_attribute("source", "QNNExecutionProvider", 20));
  str_field(node, kNodeAttribute, bytes_attribute("partition_name", graph_name, graph_name_size));
  str_field(node, kNodeDomain, "com.microsoft");

  std::string graph;
  str_field(graph, kGraphNode, node);
  str_field(graph, kGraphName, "etkit_qnn");
  for (const GraphTensor& t : inputs) str_field(graph, kGraphInput, value_info(t));
  for (const GraphTensor& t : outputs) str_field(graph, kGraphOutput, value_info(t));

  std::string model;
  model.reserve(graph.size() + 64);
  int_field(model, kModelIrVersion, kIrVersion);
  str_field(model, kModelProducerName, "etkit-qnn");
  str_field(model, kModelGraph, graph);
  std::string opset;
  str_field(opset, kOpsetDomain, "");
  int_field(opset, kOpsetVersion, kOpset);
  str_field(model, kModelOpsetImport, opset);
  std::string ms_opset;
  str_field(ms_opset, kOpsetDomain, "com.microsoft");
  int_field(ms_opset, kOpsetVersion, 1);
  str_field(model, kModelOpsetImport, ms_opset);
  return model;
}

}  // namespace etkit_qnn
