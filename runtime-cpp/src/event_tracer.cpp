#include "etkit/runtime/event_tracer.h"

#include <cstdio>

#include "etkit/runtime/platform.h"

namespace etkit::runtime {

int64_t EventTracer::now_ns() { return pal_current_time_ns(); }

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
