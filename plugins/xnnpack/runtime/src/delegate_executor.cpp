#include "delegate_executor.h"

#include <cstdio>
#include <cstring>

#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"
#include "xnn_internals.h"
#include "xnn_types.h"

namespace etkit_xnnpack {

using etkit::runtime::DimOrderType;
using etkit::runtime::Error;
using etkit::runtime::EValue;
using etkit::runtime::EventTracer;
using etkit::runtime::ScalarType;
using etkit::runtime::set_error;
using etkit::runtime::SizesType;
using etkit::runtime::Span;
using etkit::runtime::Tensor;

namespace {

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4) return false;
  const auto order = t.dim_order();
  return order[0] == 0 && order[1] == 2 && order[2] == 3 && order[3] == 1;
}

/// The tensor bound to `binding`, checked against what the payload declared.
Error bound_tensor(const ExternalBinding& binding, Span<EValue*> args, Tensor** out) {
  const uint32_t index = binding.external_id;
  const char* role = binding.is_input ? "input" : "output";
  if (index >= args.size() || args[index] == nullptr) {
    return set_error(Error::InvalidArgument,
                     "XnnpackBackend: the payload binds %s external id %u but the delegate call has only %zu "
                     "arguments",
                     role, index, args.size());
  }
  if (!args[index]->is_tensor()) {
    return set_error(Error::InvalidArgument, "XnnpackBackend: argument %u (%s) is a %s, expected a Tensor", index,
                     role, etkit::runtime::tag_name(args[index]->tag()));
  }
  Tensor& t = args[index]->to_tensor();
  if (!scalar_type_matches(binding.datatype, t.scalar_type(), !binding.is_input)) {
    return set_error(Error::InvalidArgument,
                     "XnnpackBackend: argument %u (%s) has dtype %s but the XNNPACK graph expects %s", index, role,
                     etkit::runtime::scalar_type_name(t.scalar_type()), xnn_datatype_name(binding.datatype));
  }
  // The rank may differ from the payload's: ExecuTorch passes a lifted scalar constant as a rank-0
  // tensor for a value the graph declares as [1]. XNNPACK checks shape compatibility on reshape.
  if (t.dim() > XNN_MAX_TENSOR_DIMS) {
    return set_error(Error::InvalidArgument, "XnnpackBackend: argument %u (%s) has rank %zu; XNNPACK allows at most %d",
                     index, role, t.dim(), XNN_MAX_TENSOR_DIMS);
  }
  if (!t.is_contiguous_dim_order() && !is_channels_last(t)) {
    return set_error(Error::InvalidArgument,
                     "XnnpackBackend: argument %u (%s) has a dim order that is neither contiguous nor "
                     "channels-last; make it contiguous before calling the delegate",
                     index, role);
  }
  *out = &t;
  return Error::Ok;
}

/// XNNPACK-order dims of `t` (NHWC for a channels-last tensor).
void xnn_dims(const Tensor& t, size_t* dims) {
  if (is_channels_last(t)) {
    dims[0] = t.size(0);
    dims[1] = t.size(2);
    dims[2] = t.size(3);
    dims[3] = t.size(1);
  } else {
    for (size_t d = 0; d < t.dim(); ++d) dims[d] = static_cast<size_t>(t.size(d));
  }
}

/// "[2, 64, 32]" into `buf`.
const char* format_dims(const size_t* dims, size_t num_dims, char* buf, size_t size) {
  size_t n = static_cast<size_t>(std::snprintf(buf, size, "["));
  for (size_t d = 0; d < num_dims && n < size; ++d) {
    n += static_cast<size_t>(std::snprintf(buf + n, size - n, d == 0 ? "%zu" : ", %zu", dims[d]));
  }
  if (n < size) std::snprintf(buf + n, size - n, "]");
  return buf;
}

/// XNNPACK-order shape of `t` bound to `b`, into `dims`; returns the rank. A 0-dim tensor bound to a
/// value the payload declares as [1] (how etkit and ExecuTorch write a scalar) is given as [1].
size_t input_shape(const ExternalBinding& b, const Tensor& t, size_t* dims) {
  if (t.dim() == 0 && b.rank == 1 && b.bounds[0] == 1) {
    dims[0] = 1;
    return 1;
  }
  xnn_dims(t, dims);
  return t.dim();
}

/// The payload's dims of an input are its upper bounds (the shape it was exported with, or for a
/// dynamic dimension the torch.export.Dim max): XNNPACK would accept more, but the tensors the
/// program planned after the delegate would not hold the result.
Error check_bounds(const ExternalBinding& b, const size_t* dims, size_t num_dims) {
  if (num_dims != b.rank) return Error::Ok;  // another rank: XNNPACK checks it on reshape
  for (size_t d = 0; d < num_dims; ++d) {
    if (dims[d] > b.bounds[d]) {
      char got[160], bound[160];
      return set_error(Error::InvalidArgument,
                       "XnnpackBackend: input argument %u has shape %s but the delegate was built for at most "
                       "%s (dim %zu: %zu > %zu); export with a larger upper bound (torch.export.Dim max)",
                       b.external_id, format_dims(dims, num_dims, got, sizeof(got)),
                       format_dims(b.bounds, b.rank, bound, sizeof(bound)), d, dims[d], b.bounds[d]);
    }
  }
  return Error::Ok;
}

/// A tensor the program declares static must have exactly the payload's dims: XNNPACK takes the shape it is
/// given and sizes some reads from the graph (a fully-connected node reads the filter's input channels per
/// row), so a smaller tensor would be read past its end. Only a program whose tensors and payload were
/// written apart (a corrupted or crafted file) disagrees here.
Error check_static_shape(const ExternalBinding& b, const size_t* dims, size_t num_dims) {
  bool same = num_dims == b.rank;
  for (size_t d = 0; same && d < num_dims; ++d) same = dims[d] == b.bounds[d];
  if (same) return Error::Ok;
  char got[160], want[160];
  return set_error(Error::InvalidProgram,
                   "XnnpackBackend: input argument %u is a static tensor of shape %s but the delegate's payload "
                   "declares %s; the program and its XNNPACK payload disagree (the program is corrupted)",
                   b.external_id, format_dims(dims, num_dims, got, sizeof(got)),
                   format_dims(b.bounds, b.rank, want, sizeof(want)));
}

/// Reshapes inputs whose shape changed; returns whether the runtime must be re-planned.
Error bind_inputs(DelegateState& state, Span<EValue*> args, bool* changed) {
  for (size_t i = 0; i < state.inputs.size(); ++i) {
    ExternalBinding& b = state.inputs[i];
    Tensor* t = nullptr;
    ETKIT_CHECK_OK(bound_tensor(b, args, &t));
    size_t dims[XNN_MAX_TENSOR_DIMS];
    const size_t num_dims = input_shape(b, *t, dims);
    const bool same = b.shape_known && b.num_dims == num_dims &&
                      std::memcmp(dims, b.dims, num_dims * sizeof(size_t)) == 0;
    if (!same) {
      if (t->shape_dynamism() == etkit::runtime::TensorShapeDynamism::STATIC) {
        ETKIT_CHECK_OK(check_static_shape(b, dims, num_dims));
      }
      ETKIT_CHECK_OK(check_bounds(b, dims, num_dims));
      xnn_status status = xnn_reshape_external_value(state.runtime, b.external_id, num_dims, dims);
      if (status != xnn_status_success) return xnn_failed("xnn_reshape_external_value", status);
      std::memcpy(b.dims, dims, sizeof(dims));
      b.num_dims = num_dims;
      b.shape_known = true;
      *changed = true;
    }
    state.externals[i].data = t->mutable_data_ptr();
  }
  return Error::Ok;
}

/// Resizes each output tensor to the shape XNNPACK computed (only after a re-plan).
Error resize_outputs(DelegateState& state, Span<EValue*> args, bool replanned) {
  const size_t first = state.inputs.size();
  for (size_t i = 0; i < state.outputs.size(); ++i) {
    ExternalBinding& b = state.outputs[i];
    Tensor* t = nullptr;
    ETKIT_CHECK_OK(bound_tensor(b, args, &t));
    if (t->is_read_only()) {  // a constant's bytes may be a read-only mapping shared by every Method
      return set_error(Error::InvalidProgram, "XnnpackBackend: output argument %u is a constant of the program",
                       b.external_id);
    }
    if (replanned || !b.shape_known) {
      size_t num_dims = 0;
      size_t dims[XNN_MAX_TENSOR_DIMS];
      xnn_status status = xnn_get_external_value_shape(state.runtime, b.external_id, &num_dims, dims);
      if (status != xnn_status_success) return xnn_failed("xnn_get_external_value_shape", status);
      size_t numel = 1;
      for (size_t d = 0; d < num_dims; ++d) numel *= dims[d];
      char shape[160];
      if (num_dims != t->dim()) {
        // A 0-dim output (a reduction to a scalar, a mean loss): XNNPACK holds a scalar as [1].
        if (!(t->dim() == 0 && numel == 1)) {
          return set_error(Error::InvalidArgument,
                           "XnnpackBackend: output argument %u has rank %zu but XNNPACK produces shape %s",
                           b.external_id, t->dim(), format_dims(dims, num_dims, shape, sizeof(shape)));
        }
      } else {
        SizesType sizes[XNN_MAX_TENSOR_DIMS];
        if (is_channels_last(*t)) {  // XNNPACK reports NHWC; the tensor's sizes are NCHW
          sizes[0] = static_cast<SizesType>(dims[0]);
          sizes[1] = static_cast<SizesType>(dims[3]);
          sizes[2] = static_cast<SizesType>(dims[1]);
          sizes[3] = static_cast<SizesType>(dims[2]);
        } else {
          for (size_t d = 0; d < num_dims; ++d) sizes[d] = static_cast<SizesType>(dims[d]);
        }
        bool differs = false;
        for (size_t d = 0; d < num_dims; ++d) differs |= sizes[d] != t->size(d);
        if (differs) {
          Error err = t->resize(Span<const SizesType>(sizes, num_dims));
          if (err != Error::Ok) {
            return set_error(err,
                             "XnnpackBackend: output argument %u cannot take the shape %s XNNPACK computed for "
                             "the new input shapes (%s): its tensor is static or holds only %zu bytes",
                             b.external_id, format_dims(dims, num_dims, shape, sizeof(shape)),
                             etkit::runtime::error_name(err), t->capacity_nbytes());
          }
        }
      }
      std::memcpy(b.dims, dims, sizeof(dims));
      b.num_dims = num_dims;
      b.shape_known = true;
    }
    state.externals[first + i].data = t->mutable_data_ptr();
  }
  return Error::Ok;
}

/// XNNPACK writes int32 indices; an int64 output tensor gets them widened in place (back to front).
void widen_int32_outputs(DelegateState& state, Span<EValue*> args) {
  for (const ExternalBinding& b : state.outputs) {
    Tensor& t = args[b.external_id]->to_tensor();
    if (t.scalar_type() != ScalarType::Long) continue;
    const auto* narrow = t.const_data_ptr<int32_t>();
    auto* wide = t.mutable_data_ptr<int64_t>();
    for (size_t j = t.numel(); j-- > 0;) wide[j] = narrow[j];
  }
}

/// One event per XNNPACK operator of the last invoke, laid end to end from `start_ns` (XNNPACK reports
/// each operator's time in whole microseconds, as ExecuTorch's XNNPACK delegate logs them). An event
/// carries its XNode index as delegate debug id (the Inspector maps it through the debug_handle_map to
/// Edge nodes) and XNNPACK's operator name as label.
void log_operator_events(DelegateState& state, EventTracer& tracer, int64_t start_ns) {
  if (state.operator_names.empty()) return;
  size_t needed = 0;
  if (xnn_get_runtime_profiling_info(state.runtime, xnn_profile_info_operator_timing,
                                     state.operator_times_us.size() * sizeof(uint64_t),
                                     state.operator_times_us.data(), &needed) != xnn_status_success) {
    return;
  }
  int64_t t = start_ns;
  for (size_t i = 0; i < state.operator_names.size(); ++i) {
    const int64_t end = t + static_cast<int64_t>(state.operator_times_us[i]) * 1000;
    if (state.operator_xnodes[i] >= 0) {
      tracer.log_delegate_event(state.operator_xnodes[i], state.operator_names[i].c_str(), t, end);
    } else {
      tracer.log_delegate_event(state.operator_names[i].c_str(), t, end);
    }
    t = end;
  }
}

/// Whether every external value's data pointer equals the one of the last successful setup.
bool same_pointers_as_last_setup(const DelegateState& state) {
  if (state.setup_pointers.size() != state.externals.size()) return false;
  for (size_t i = 0; i < state.externals.size(); ++i) {
    if (state.setup_pointers[i] != state.externals[i].data) return false;
  }
  return true;
}

}  // namespace

Error execute_delegate(DelegateState& state, Span<EValue*> args, EventTracer* tracer) {
  bool changed = false;
  ETKIT_CHECK_OK(bind_inputs(state, args, &changed));
  if (changed) {
    xnn_status status = xnn_reshape_runtime(state.runtime);
    if (status != xnn_status_success) {
      // Nothing is planned for these shapes: the next execute must reshape again, even with the same inputs.
      for (ExternalBinding& b : state.inputs) b.shape_known = false;
      return xnn_failed("xnn_reshape_runtime", status);
    }
  }
  ETKIT_CHECK_OK(resize_outputs(state, args, changed));
  if (changed || !same_pointers_as_last_setup(state)) {
    state.setup_pointers.clear();  // a failed setup leaves no valid record
    const xnn_status status = xnn_setup_runtime_v2(state.runtime, state.externals.size(), state.externals.data());
    if (status != xnn_status_success) return xnn_failed("xnn_setup_runtime_v2", status);
    for (const xnn_external_value& external : state.externals) state.setup_pointers.push_back(external.data);
  }
  if (state.profiling != (tracer != nullptr) && etkit_xnn_runtime_set_profiling(state.runtime, tracer != nullptr)) {
    state.profiling = tracer != nullptr;
  }
  const int64_t invoke_start = tracer != nullptr ? EventTracer::now_ns() : 0;
  const xnn_status status = xnn_invoke_runtime(state.runtime);
  if (status != xnn_status_success) return xnn_failed("xnn_invoke_runtime", status);
  if (tracer != nullptr) log_operator_events(state, *tracer, invoke_start);
  widen_int32_outputs(state, args);
  return Error::Ok;
}

}  // namespace etkit_xnnpack
