#include "delegate_executor.h"

#include <cstring>

#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"
#include "xnn_types.h"

namespace etkit_xnnpack {

using etkit::runtime::DimOrderType;
using etkit::runtime::Error;
using etkit::runtime::EValue;
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

Error xnn_failed(const char* what, xnn_status status) {
  return set_error(Error::Internal, "XnnpackBackend: %s failed with %s", what, xnn_status_name(status));
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

/// Reshapes inputs whose shape changed; returns whether the runtime must be re-planned.
Error bind_inputs(DelegateState& state, Span<EValue*> args, bool* changed) {
  for (size_t i = 0; i < state.inputs.size(); ++i) {
    ExternalBinding& b = state.inputs[i];
    Tensor* t = nullptr;
    ETKIT_CHECK_OK(bound_tensor(b, args, &t));
    size_t dims[XNN_MAX_TENSOR_DIMS];
    xnn_dims(*t, dims);
    const bool same = b.shape_known && b.num_dims == t->dim() &&
                      std::memcmp(dims, b.dims, t->dim() * sizeof(size_t)) == 0;
    if (!same) {
      xnn_status status = xnn_reshape_external_value(state.runtime, b.external_id, t->dim(), dims);
      if (status != xnn_status_success) return xnn_failed("xnn_reshape_external_value", status);
      std::memcpy(b.dims, dims, sizeof(dims));
      b.num_dims = t->dim();
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
    if (replanned || !b.shape_known) {
      size_t num_dims = 0;
      size_t dims[XNN_MAX_TENSOR_DIMS];
      xnn_status status = xnn_get_external_value_shape(state.runtime, b.external_id, &num_dims, dims);
      if (status != xnn_status_success) return xnn_failed("xnn_get_external_value_shape", status);
      if (num_dims != t->dim()) {
        return set_error(Error::InvalidArgument,
                         "XnnpackBackend: output argument %u has rank %zu but XNNPACK produces rank %zu",
                         b.external_id, t->dim(), num_dims);
      }
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
                           "XnnpackBackend: output argument %u cannot take the shape XNNPACK computed for the "
                           "new input shapes (%s); its tensor is static or too small",
                           b.external_id, etkit::runtime::error_name(err));
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

}  // namespace

Error execute_delegate(DelegateState& state, Span<EValue*> args) {
  bool changed = false;
  ETKIT_CHECK_OK(bind_inputs(state, args, &changed));
  if (changed) {
    xnn_status status = xnn_reshape_runtime(state.runtime);
    if (status != xnn_status_success) return xnn_failed("xnn_reshape_runtime", status);
  }
  ETKIT_CHECK_OK(resize_outputs(state, args, changed));
  xnn_status status = xnn_setup_runtime_v2(state.runtime, state.externals.size(), state.externals.data());
  if (status != xnn_status_success) return xnn_failed("xnn_setup_runtime_v2", status);
  status = xnn_invoke_runtime(state.runtime);
  if (status != xnn_status_success) return xnn_failed("xnn_invoke_runtime", status);
  widen_int32_outputs(state, args);
  return Error::Ok;
}

}  // namespace etkit_xnnpack
