#include "xnn_types.h"

#include "bounded_allocator.h"
#include "etkit/runtime/program.h"  // effective_memory_limit

namespace etkit_xnnpack {

using etkit::runtime::ScalarType;
using FbType = etkit_xnnpack::fb::XNNDatatype;

xnn_datatype to_xnn_datatype(FbType type) {
  switch (type) {
    case FbType::xnn_datatype_fp32: return xnn_datatype_fp32;
    case FbType::xnn_datatype_fp16: return xnn_datatype_fp16;
    case FbType::xnn_datatype_qint8: return xnn_datatype_qint8;
    case FbType::xnn_datatype_quint8: return xnn_datatype_quint8;
    case FbType::xnn_datatype_qint32: return xnn_datatype_qint32;
    case FbType::xnn_datatype_qcint8: return xnn_datatype_qcint8;
    case FbType::xnn_datatype_qcint32: return xnn_datatype_qcint32;
    case FbType::xnn_datatype_qcint4: return xnn_datatype_qcint4;
    case FbType::xnn_datatype_qdint8: return xnn_datatype_qdint8;
    case FbType::xnn_datatype_qbint4: return xnn_datatype_qbint4;
    case FbType::xnn_datatype_qpint8: return xnn_datatype_qpint8;
    case FbType::xnn_datatype_int32: return xnn_datatype_int32;
    case FbType::xnn_datatype_pfp32: return xnn_datatype_pfp32;
    case FbType::xnn_datatype_bf16: return xnn_datatype_bf16;
    default: return xnn_datatype_invalid;
  }
}

const char* xnn_datatype_name(xnn_datatype type) {
  switch (type) {
    case xnn_datatype_fp32: return "fp32";
    case xnn_datatype_fp16: return "fp16";
    case xnn_datatype_qint8: return "qint8";
    case xnn_datatype_quint8: return "quint8";
    case xnn_datatype_qint32: return "qint32";
    case xnn_datatype_qcint8: return "qcint8";
    case xnn_datatype_qcint32: return "qcint32";
    case xnn_datatype_qcint4: return "qcint4";
    case xnn_datatype_qdint8: return "qdint8";
    case xnn_datatype_qpint8: return "qpint8";
    case xnn_datatype_int32: return "int32";
    case xnn_datatype_qbint4: return "qbint4";
    case xnn_datatype_pfp32: return "pfp32";
    case xnn_datatype_bf16: return "bf16";
    default: return "invalid";
  }
}

const char* xnn_status_name(xnn_status status) {
  switch (status) {
    case xnn_status_success: return "xnn_status_success";
    case xnn_status_uninitialized: return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter: return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state: return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter: return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware: return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory: return "xnn_status_out_of_memory";
    case xnn_status_reallocation_required: return "xnn_status_reallocation_required";
    case xnn_status_deprecated: return "xnn_status_deprecated";
    default: return "unknown xnn_status";
  }
}

etkit::runtime::Error xnn_failed(const char* what, xnn_status status) {
  using etkit::runtime::Error;
  const size_t refused = take_refused_allocation();
  if (status == xnn_status_out_of_memory && refused != 0) {
    return etkit::runtime::set_error(
        Error::MemoryAllocationFailed,
        "XnnpackBackend: %s failed with %s: XNNPACK asked for %zu bytes, more than the memory limit of %llu bytes "
        "(etkit::runtime::set_memory_limit); the payload's shapes need more memory than this process may use",
        what, xnn_status_name(status), refused,
        static_cast<unsigned long long>(etkit::runtime::effective_memory_limit()));
  }
  return etkit::runtime::set_error(Error::Internal, "XnnpackBackend: %s failed with %s", what, xnn_status_name(status));
}

size_t dense_nbytes(xnn_datatype type, uint64_t numel) {
  switch (type) {
    case xnn_datatype_fp32:
    case xnn_datatype_qint32:
    case xnn_datatype_qcint32:
    case xnn_datatype_int32:
      return static_cast<size_t>(numel * 4);
    case xnn_datatype_fp16:
    case xnn_datatype_bf16:
      return static_cast<size_t>(numel * 2);
    case xnn_datatype_qint8:
    case xnn_datatype_quint8:
    case xnn_datatype_qcint8:
      return static_cast<size_t>(numel);
    case xnn_datatype_qcint4:
    case xnn_datatype_qbint4:
      return static_cast<size_t>((numel + 1) / 2);
    default:
      return 0;
  }
}

bool scalar_type_matches(xnn_datatype type, ScalarType scalar, bool is_output) {
  switch (type) {
    case xnn_datatype_fp32: return scalar == ScalarType::Float;
    case xnn_datatype_fp16: return scalar == ScalarType::Half;
    case xnn_datatype_bf16: return scalar == ScalarType::BFloat16;
    case xnn_datatype_qint8:
    case xnn_datatype_qdint8:
      return scalar == ScalarType::Char || scalar == ScalarType::QInt8;
    case xnn_datatype_quint8: return scalar == ScalarType::Byte || scalar == ScalarType::QUInt8;
    case xnn_datatype_qint32:
    case xnn_datatype_int32:
      return scalar == ScalarType::Int || scalar == ScalarType::QInt32 || (is_output && scalar == ScalarType::Long);
    default: return false;
  }
}

}  // namespace etkit_xnnpack
