#include "etkit/runtime/event_tracer.h"

#include <chrono>
#include <cstdio>

namespace etkit::runtime {

int64_t EventTracer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void EventTracer::record(ProfileEventKind kind, const char* name, const char* backend, int64_t start_ns,
                         int64_t end_ns, int32_t instruction) {
  if (size_ >= capacity_) {
    ++dropped_;
    return;
  }
  ProfileEvent& e = events_[size_++];
  std::snprintf(e.name, sizeof(e.name), "%s", name != nullptr ? name : "");
  std::snprintf(e.backend, sizeof(e.backend), "%s", backend != nullptr ? backend : "");
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.instruction = instruction;
  e.kind = kind;
}

}  // namespace etkit::runtime
