// libFuzzer target of the ETDump reader (docs/fuzzing.md): each input is an ETDump file.
//
// etkit::etdump::verify (size prefix, identifier, flatbuffers verifier), then, for a file it accepts, a walk
// over every field of every event through the generated accessors, as a reader does after verification
// (etkit.devtools.etdump reads files the same way: verify first, then read). A refusal is a normal
// outcome; a sanitizer report, a crash, a hang or a leak is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "etdump_generated.h"
#include "etkit/extension/devtools/etdump.h"
#include "etkit/runtime/error.h"

namespace efb = etkit::fb::etdump;

namespace {
volatile uint64_t g_sink = 0;  // keeps the walk from being optimised away

void touch_string(const flatbuffers::String* s) {
  if (s != nullptr && s->size() > 0) g_sink += static_cast<uint8_t>(s->c_str()[s->size() - 1]);
}

void touch_tensor(const efb::Tensor* t) {
  if (t == nullptr) return;
  g_sink += static_cast<uint64_t>(t->scalar_type()) + static_cast<uint64_t>(t->offset());
  if (t->sizes() != nullptr) for (int64_t s : *t->sizes()) g_sink += static_cast<uint64_t>(s);
  if (t->strides() != nullptr) for (int64_t s : *t->strides()) g_sink += static_cast<uint64_t>(s);
}

void touch_value(const efb::Value* v) {
  if (v == nullptr) return;
  g_sink += static_cast<uint64_t>(v->val());
  touch_tensor(v->tensor());
  if (v->tensor_list() != nullptr && v->tensor_list()->tensors() != nullptr) {
    for (const efb::Tensor* t : *v->tensor_list()->tensors()) touch_tensor(t);
  }
  if (v->int_value() != nullptr) g_sink += static_cast<uint64_t>(v->int_value()->int_val());
  if (v->bool_value() != nullptr) g_sink += v->bool_value()->bool_val();
  if (v->float_value() != nullptr) g_sink += static_cast<uint64_t>(v->float_value()->float_val() != 0.0f);
  if (v->double_value() != nullptr) g_sink += static_cast<uint64_t>(v->double_value()->double_val() != 0.0);
  if (v->output() != nullptr) g_sink += v->output()->bool_val();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An aligned copy of exactly the input's size: flatbuffers reads scalars in place.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  if (etkit::etdump::verify(copy.get(), size) != etkit::runtime::Error::Ok) return 0;
  const efb::ETDump* dump = efb::GetSizePrefixedETDump(copy.get());
  g_sink += dump->version();
  if (dump->run_data() == nullptr) return 0;
  for (const efb::RunData* run : *dump->run_data()) {
    if (run == nullptr) continue;
    touch_string(run->name());
    g_sink += static_cast<uint64_t>(run->bundled_input_index());
    if (run->allocators() != nullptr) {
      for (const efb::Allocator* a : *run->allocators()) if (a != nullptr) touch_string(a->name());
    }
    if (run->events() == nullptr) continue;
    for (const efb::Event* e : *run->events()) {
      if (e == nullptr) continue;
      if (const efb::ProfileEvent* p = e->profile_event()) {
        touch_string(p->name());
        touch_string(p->delegate_debug_id_str());
        g_sink += p->end_time() - p->start_time() + static_cast<uint64_t>(p->instruction_id());
        if (p->delegate_debug_metadata() != nullptr) for (uint8_t b : *p->delegate_debug_metadata()) g_sink += b;
      }
      if (const efb::AllocationEvent* a = e->allocation_event()) g_sink += a->allocation_size();
      if (const efb::DebugEvent* d = e->debug_event()) {
        touch_string(d->name());
        touch_string(d->delegate_debug_id_str());
        touch_value(d->debug_entry());
      }
    }
  }
  return 0;
}
