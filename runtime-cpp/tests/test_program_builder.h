// Builds small .pte programs in memory for the C++ tests (flatbuffers builder over program.fbs).
//
// The sample program: forward(x[2,3], y[2,3]) -> view_copy((x + y) * w, [3, 2]) where w is an inline
// constant [2,3] of 0.5, the IntList [3, 2] is boxed (refers to two Int values), and every activation
// lives in planned buffer 1. Optionally adds a DelegateCall to a backend id.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "program_generated.h"

namespace etkit_test {

namespace fb = etkit::fb;

inline flatbuffers::Offset<fb::EValue> planned_tensor(flatbuffers::FlatBufferBuilder& b, std::vector<int32_t> sizes,
                                                       uint32_t offset) {
  std::vector<uint8_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint8_t(i);
  auto alloc = fb::CreateAllocationDetails(b, 1, offset, 0);
  auto t = fb::CreateTensorDirect(b, fb::ScalarType::FLOAT, 0, &sizes, &order, false, 0, alloc);
  return fb::CreateEValue(b, fb::KernelTypes::Tensor, t.Union());
}

inline flatbuffers::Offset<fb::EValue> int_value(flatbuffers::FlatBufferBuilder& b, int64_t v) {
  return fb::CreateEValue(b, fb::KernelTypes::Int, fb::CreateInt(b, v).Union());
}

/// Returns the serialized program (no extended header; constants inline in constant_buffer).
inline std::vector<uint8_t> build_sample_program(const char* delegate_backend = nullptr) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::EValue>> values;
  values.push_back(planned_tensor(b, {2, 3}, 0));    // 0 x
  values.push_back(planned_tensor(b, {2, 3}, 32));   // 1 y
  values.push_back(int_value(b, 1));                 // 2 alpha
  values.push_back(planned_tensor(b, {2, 3}, 64));   // 3 t = x + y
  values.push_back(planned_tensor(b, {2, 3}, 96));   // 4 z = t * w
  {
    std::vector<int32_t> sizes = {2, 3};
    std::vector<uint8_t> order = {0, 1};
    auto t = fb::CreateTensorDirect(b, fb::ScalarType::FLOAT, 0, &sizes, &order, false, /*data_buffer_idx=*/1);
    values.push_back(fb::CreateEValue(b, fb::KernelTypes::Tensor, t.Union()));  // 5 w (constant)
  }
  values.push_back(int_value(b, 3));  // 6
  values.push_back(int_value(b, 2));  // 7
  {
    std::vector<int64_t> items = {6, 7};
    values.push_back(fb::CreateEValue(b, fb::KernelTypes::IntList, fb::CreateIntListDirect(b, &items).Union()));  // 8
  }
  values.push_back(planned_tensor(b, {3, 2}, 128));  // 9 out

  std::vector<flatbuffers::Offset<fb::Instruction>> instrs;
  {
    std::vector<int32_t> a = {0, 1, 2, 3, 3};
    instrs.push_back(fb::CreateInstruction(b, fb::InstructionArguments::KernelCall,
                                           fb::CreateKernelCallDirect(b, 0, &a).Union()));
    std::vector<int32_t> m = {3, 5, 4, 4};
    instrs.push_back(fb::CreateInstruction(b, fb::InstructionArguments::KernelCall,
                                           fb::CreateKernelCallDirect(b, 1, &m).Union()));
    std::vector<int32_t> v = {4, 8, 9, 9};
    instrs.push_back(fb::CreateInstruction(b, fb::InstructionArguments::KernelCall,
                                           fb::CreateKernelCallDirect(b, 2, &v).Union()));
  }
  std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates;
  if (delegate_backend != nullptr) {
    std::vector<int32_t> d = {9, 9};
    instrs.push_back(fb::CreateInstruction(b, fb::InstructionArguments::DelegateCall,
                                           fb::CreateDelegateCallDirect(b, 0, &d).Union()));
    auto ref = fb::CreateBackendDelegateDataReference(b, fb::DataLocation::INLINE, 0);
    delegates.push_back(fb::CreateBackendDelegateDirect(b, delegate_backend, ref));
  }
  std::vector<flatbuffers::Offset<fb::Chain>> chains;
  std::vector<int32_t> chain_in = {0, 1}, chain_out = {9};
  chains.push_back(fb::CreateChainDirect(b, &chain_in, &chain_out, &instrs));
  std::vector<flatbuffers::Offset<fb::Operator>> ops = {
      fb::CreateOperatorDirect(b, "aten::add", "out"),
      fb::CreateOperatorDirect(b, "aten::mul", "out"),
      fb::CreateOperatorDirect(b, "aten::view_copy", "out"),
  };
  std::vector<int64_t> buffer_sizes = {0, 160};
  auto plan = fb::CreateExecutionPlanDirect(b, "forward", 0, &values, &chain_in, &chain_out, &chains, &ops,
                                            &delegates, &buffer_sizes);
  std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans = {plan};

  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  buffers.push_back(fb::CreateBufferDirect(b, nullptr));  // index 0: reserved
  std::vector<uint8_t> w(6 * sizeof(float));
  for (int i = 0; i < 6; ++i) reinterpret_cast<float*>(w.data())[i] = 0.5f;
  buffers.push_back(fb::CreateBufferDirect(b, &w));
  std::vector<flatbuffers::Offset<fb::BackendDelegateInlineData>> inline_data;
  std::vector<uint8_t> payload = {1, 2, 3, 4};
  inline_data.push_back(fb::CreateBackendDelegateInlineDataDirect(b, &payload));
  auto program = fb::CreateProgramDirect(b, 0, &plans, &buffers, &inline_data);
  fb::FinishProgramBuffer(b, program);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace etkit_test
