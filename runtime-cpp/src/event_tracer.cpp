#include "etkit/runtime/event_tracer.h"

#include <cstdio>
#include <cstring>

#include "etkit/runtime/evalue.h"
#include "etkit/runtime/platform.h"
#include "etkit/runtime/tensor.h"

namespace etkit::runtime {

namespace {
constexpr size_t kDebugAlignment = 64;  // where each tensor starts in the debug buffer (as ExecuTorch's)
}  // namespace

int64_t EventTracer::now_ns() { return pal_current_time_ns(); }

ProfileEvent* EventTracer::next_event() {
  if (size_ >= capacity_) {
    ++dropped_;
    return nullptr;
  }
  return &events_[size_++];
}

ProfileEvent* EventTracer::put(ProfileEventKind kind, const char* name, const char* backend, int64_t start_ns,
                               int64_t end_ns, int32_t instruction) {
  ProfileEvent* e = next_event();
  if (e == nullptr) return nullptr;
  std::snprintf(e->name, sizeof(e->name), "%s", name != nullptr ? name : "");
  std::snprintf(e->backend, sizeof(e->backend), "%s", backend != nullptr ? backend : "");
  e->start_ns = start_ns;
  e->end_ns = end_ns;
  e->instruction = instruction;
  e->delegate_debug_id = -1;
  e->kind = kind;
  return e;
}

void EventTracer::record(ProfileEventKind kind, const char* name, const char* backend, int64_t start_ns,
                         int64_t end_ns, int32_t instruction) {
  put(kind, name, backend, start_ns, end_ns, instruction);
}

void EventTracer::log_delegate_event(int32_t debug_id, const char* label, int64_t start_ns, int64_t end_ns) {
  ProfileEvent* e = put(ProfileEventKind::DelegateInternal, label, current_backend_, start_ns, end_ns,
                        current_instruction_);
  if (e != nullptr) e->delegate_debug_id = debug_id;
}

void EventTracer::fill_tensor(DebugValue& v, const Tensor& t) {
  v.type = DebugValueType::Tensor;
  v.scalar_type = t.scalar_type();
  v.dim = static_cast<uint8_t>(t.dim() < kMaxDebugDims ? t.dim() : kMaxDebugDims);
  for (size_t d = 0; d < v.dim; ++d) {
    v.sizes[d] = t.size(d);
    v.dim_order[d] = t.dim_order()[d];
  }
  v.offset = -1;
  const size_t nbytes = t.nbytes();
  const size_t start = (debug_used_ + kDebugAlignment - 1) / kDebugAlignment * kDebugAlignment;
  if (t.dim() > kMaxDebugDims || (nbytes > 0 && t.const_data_ptr() == nullptr) || start > debug_buffer_.size() ||
      nbytes > debug_buffer_.size() - start) {
    ++dropped_values_;
    return;
  }
  if (nbytes > 0) std::memcpy(debug_buffer_.data() + start, t.const_data_ptr(), nbytes);
  v.offset = static_cast<int64_t>(start);
  debug_used_ = start + nbytes;
}

void EventTracer::log_value(const EValue& value, int32_t instruction, bool is_output) {
  if (!(value.is_tensor() || value.is_int() || value.is_double() || value.is_bool())) return;
  ProfileEvent* e = put(ProfileEventKind::Debug, "", "", 0, 0, instruction);
  if (e == nullptr) return;
  DebugValue& v = e->value;
  v = DebugValue{};
  v.offset = -1;
  v.is_output = is_output;
  if (value.is_tensor()) {
    fill_tensor(v, value.to_tensor());
  } else if (value.is_int()) {
    v.type = DebugValueType::Int;
    v.scalar = static_cast<double>(value.to_int());
  } else if (value.is_double()) {
    v.type = DebugValueType::Double;
    v.scalar = value.to_double();
  } else {
    v.type = DebugValueType::Bool;
    v.scalar = value.to_bool() ? 1.0 : 0.0;
  }
}

}  // namespace etkit::runtime
