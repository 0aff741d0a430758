#include "graph_nodes.h"

#include <cmath>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <unordered_set>
#include <vector>

#include "etkit/runtime/program.h"  // effective_memory_limit
#include "xnn_internals.h"
#include "xnn_types.h"

namespace etkit_xnnpack {

using etkit::runtime::Error;
using etkit::runtime::set_error;

namespace {

struct NodeKind;

/// What a node definition sees: the subgraph, the value table and the node (for messages).
struct NodeContext {
  xnn_subgraph_t subgraph;
  const ValueTable& values;
  const fb::XNode* node;
  size_t index;                          // position in XNNGraph.xnodes
  std::unordered_set<uint32_t>* written;  // serialized ids some node already writes
  std::unordered_set<uint32_t>* read_at_run_time;  // static values some node reads when it runs
  std::unordered_set<uint32_t>* read;     // serialized ids some node reads
  std::vector<uint32_t>* outputs;         // serialized ids this node writes

  const char* type_name() const { return fb::EnumNameXNodeUnion(node->xnode_union_type()); }

  Error fail(Error code, const char* format, ...) const
#if defined(__GNUC__)
      __attribute__((format(printf, 3, 4)))
#endif
  {
    char detail[768];
    va_list args;
    va_start(args, format);
    std::vsnprintf(detail, sizeof(detail), format, args);
    va_end(args);
    return set_error(code, "XnnpackBackend: node %zu (%s, debug_handle %u): %s", index, type_name(),
                     node->debug_handle(), detail);
  }

  Error check(xnn_status status, const char* function) const {
    if (status == xnn_status_success) return Error::Ok;
    return fail(Error::InvalidProgram, "%s failed with %s", function, xnn_status_name(status));
  }

  /// The defined value a serialized id refers to. `role` names the operand in the message.
  Error value(uint32_t serialized_id, const char* role, const ValueInfo** out) const {
    auto it = values.find(serialized_id);
    if (it == values.end()) {
      return fail(Error::InvalidProgram, "%s refers to value id %u, which no XValue defines", role, serialized_id);
    }
    *out = &it->second;
    return Error::Ok;
  }
  /// value() of an operand the node reads: a constant, an external input, or the output of an earlier node
  /// (XNNPACK's optimizer assumes the nodes come in that order and aborts on a graph that breaks it).
  Error input(uint32_t serialized_id, const char* role, const ValueInfo** out) const {
    ETKIT_CHECK_OK(value(serialized_id, role, out));
    if (!(*out)->is_static && !(*out)->is_external_input && written->count(serialized_id) == 0) {
      return fail(Error::InvalidProgram,
                  "%s refers to value id %u, which is neither a constant nor an external input and no earlier node "
                  "writes it", role, serialized_id);
    }
    read->insert(serialized_id);
    return Error::Ok;
  }
  Error id(uint32_t serialized_id, const char* role, uint32_t* out) const {
    const ValueInfo* info = nullptr;
    ETKIT_CHECK_OK(input(serialized_id, role, &info));
    if (info->is_static) read_at_run_time->insert(serialized_id);
    *out = info->xnn_id;
    return Error::Ok;
  }
  /// id() of an operand whose rank XNNPACK's reshape takes for granted: `want` exact (`at_least` false) or a
  /// minimum. XNNPACK 2024-11-08 only asserts these in debug builds; a release build indexes dim[rank - 1] or
  /// copies rank - 1 dims, so a rank-0 input to a fully-connected node would copy SIZE_MAX dims.
  Error ranked_id(uint32_t serialized_id, const char* role, uint32_t want, bool at_least, uint32_t* out) const {
    const ValueInfo* info = nullptr;
    ETKIT_CHECK_OK(value(serialized_id, role, &info));
    if (at_least ? info->rank < want : info->rank != want) {
      return fail(Error::InvalidProgram, "%s (value id %u) has rank %u, need %s%u", role, serialized_id, info->rank,
                  at_least ? "at least " : "", want);
    }
    return id(serialized_id, role, out);
  }
  /// id() of a filter or bias XNNPACK packs while the runtime is created (GEMM, convolution): its
  /// constant bytes are not read afterwards.
  Error packed_id(uint32_t serialized_id, const char* role, uint32_t* out) const {
    const ValueInfo* info = nullptr;
    ETKIT_CHECK_OK(input(serialized_id, role, &info));
    *out = info->xnn_id;
    return Error::Ok;
  }
  /// id() of a value the node writes: it must be neither constant nor an external input, nor written
  /// by another node (XNNPACK does not check this itself and aborts later on such a graph).
  Error output(uint32_t serialized_id, const char* role, uint32_t* out) const {
    const ValueInfo* info = nullptr;
    ETKIT_CHECK_OK(value(serialized_id, role, &info));
    if (info->is_static || info->is_external_input) {
      return fail(Error::InvalidProgram, "%s refers to value id %u, which is %s and cannot be written", role,
                  serialized_id, info->is_static ? "a constant" : "an external input");
    }
    if (!written->insert(serialized_id).second) {
      return fail(Error::InvalidProgram, "%s refers to value id %u, which an earlier node already writes", role,
                  serialized_id);
    }
    outputs->push_back(serialized_id);
    *out = info->xnn_id;
    return Error::Ok;
  }
  /// Like id(), but XNN_INVALID_VALUE_ID ("absent", e.g. no bias) passes through.
  Error optional_id(uint32_t serialized_id, const char* role, uint32_t* out) const {
    if (serialized_id == XNN_INVALID_VALUE_ID) {
      *out = XNN_INVALID_VALUE_ID;
      return Error::Ok;
    }
    return id(serialized_id, role, out);
  }
  /// packed_id() of an optional operand (a bias).
  Error optional_packed_id(uint32_t serialized_id, const char* role, uint32_t* out) const {
    if (serialized_id == XNN_INVALID_VALUE_ID) {
      *out = XNN_INVALID_VALUE_ID;
      return Error::Ok;
    }
    return packed_id(serialized_id, role, out);
  }

  /// The node's fused output clamp; [-inf, +inf] when absent.
  float output_min() const {
    return node->output_min_max() ? node->output_min_max()->output_min() : -std::numeric_limits<float>::infinity();
  }
  float output_max() const {
    return node->output_min_max() ? node->output_min_max()->output_max() : std::numeric_limits<float>::infinity();
  }

  template <typename T>
  const T* table() const {
    return static_cast<const T*>(node->xnode_union());
  }
};

using DefineFn = Error (*)(const NodeContext&, const NodeKind&);

/// One row of the node table. `op` carries the XNNPACK operator (or concatenation arity) for families
/// that share one definition function.
struct NodeKind {
  fb::XNodeUnion type;
  DefineFn define;
  int op;
};

std::vector<size_t> to_sizes(const flatbuffers::Vector<uint32_t>* v) {
  std::vector<size_t> out;
  if (v != nullptr) out.assign(v->begin(), v->end());
  return out;
}

// ----------------------------------------------------------------------------- elementwise families

Error define_unary(const NodeContext& ctx, const NodeKind& kind) {
  const auto* n = ctx.table<fb::_XNNNode1x1>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_unary(ctx.subgraph, static_cast<xnn_unary_operator>(kind.op), nullptr, in, out,
                                    n->flags()),
                   "xnn_define_unary");
}

Error define_clamp(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNode1x1>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  xnn_unary_params params;
  params.clamp.min = ctx.output_min();
  params.clamp.max = ctx.output_max();
  return ctx.check(xnn_define_unary(ctx.subgraph, xnn_unary_clamp, &params, in, out, n->flags()),
                   "xnn_define_unary(clamp)");
}

Error define_leaky_relu(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNLeakyReLU>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  xnn_unary_params params;
  params.leaky_relu.negative_slope = n->negative_slope();
  return ctx.check(xnn_define_unary(ctx.subgraph, xnn_unary_leaky_relu, &params, in, out, n->flags()),
                   "xnn_define_unary(leaky_relu)");
}

Error define_elu(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNELU>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  xnn_unary_params params;
  params.elu.alpha = n->alpha();
  return ctx.check(xnn_define_unary(ctx.subgraph, xnn_unary_elu, &params, in, out, n->flags()),
                   "xnn_define_unary(elu)");
}

Error define_binary_impl(const NodeContext& ctx, const NodeKind& kind, bool clamped) {
  const auto* n = ctx.table<fb::_XNNNode2x1>();
  uint32_t a, b, out;
  ETKIT_CHECK_OK(ctx.id(n->input1_id(), "input1", &a));
  ETKIT_CHECK_OK(ctx.id(n->input2_id(), "input2", &b));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  xnn_binary_params params;
  params.output_min = ctx.output_min();
  params.output_max = ctx.output_max();
  return ctx.check(xnn_define_binary(ctx.subgraph, static_cast<xnn_binary_operator>(kind.op),
                                     clamped ? &params : nullptr, a, b, out, n->flags()),
                   "xnn_define_binary");
}
/// add, subtract, multiply, divide: the node's output_min_max is a fused clamp.
Error define_binary_clamped(const NodeContext& ctx, const NodeKind& kind) { return define_binary_impl(ctx, kind, true); }
/// minimum, maximum, prelu: no clamp.
Error define_binary(const NodeContext& ctx, const NodeKind& kind) { return define_binary_impl(ctx, kind, false); }

Error define_softmax(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNode1x1>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.ranked_id(n->input_id(), "input", 1, /*at_least=*/true, &in));  // softmax over the last dim
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_softmax(ctx.subgraph, in, out, n->flags()), "xnn_define_softmax");
}

Error define_copy(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNode1x1>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_copy(ctx.subgraph, in, out, n->flags()), "xnn_define_copy");
}

// ----------------------------------------------------------------------------- linear algebra

/// A value's dims as declared must be exactly `expected` (a filter or bias against its node's geometry).
Error check_dims(const NodeContext& ctx, const ValueInfo& v, const char* role, std::initializer_list<size_t> expected) {
  bool same = v.rank == expected.size();
  size_t d = 0;
  for (size_t e : expected) same = same && v.dims[d++] == e;
  if (same) return Error::Ok;
  char want[96] = "", have[96] = "";
  size_t n = 0;
  for (size_t e : expected) n += std::snprintf(want + n, sizeof(want) - n, n ? ", %zu" : "%zu", e);
  n = 0;
  for (uint32_t k = 0; k < v.rank && n < sizeof(have); ++k) {
    n += std::snprintf(have + n, sizeof(have) - n, k ? ", %zu" : "%zu", v.dims[k]);
  }
  return ctx.fail(Error::InvalidProgram, "%s has dims [%s]; the node's geometry needs [%s]", role, have, want);
}

Error define_fully_connected(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNFullyConnected>();
  uint32_t in, filter, bias, out;
  ETKIT_CHECK_OK(ctx.ranked_id(n->input1_id(), "input", 1, /*at_least=*/true, &in));
  ETKIT_CHECK_OK(ctx.packed_id(n->filter_id(), "filter", &filter));
  ETKIT_CHECK_OK(ctx.optional_packed_id(n->bias_id(), "bias", &bias));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  // XNNPACK 2024-11-08 checks none of this geometry: it reads the filter's two dims, divides the input's element
  // count by the input channels, and packs output-channels bias values from the bias' data.
  const ValueInfo *input = nullptr, *weights = nullptr;
  ETKIT_CHECK_OK(ctx.value(n->input1_id(), "input", &input));
  ETKIT_CHECK_OK(ctx.value(n->filter_id(), "filter", &weights));
  if (weights->rank != 2) {
    return ctx.fail(Error::InvalidProgram, "filter (value id %u) has rank %u, need 2", n->filter_id(), weights->rank);
  }
  const bool transposed = (n->flags() & XNN_FLAG_TRANSPOSE_WEIGHTS) != 0;
  const size_t input_channels = weights->dims[transposed ? 0 : 1];
  const size_t output_channels = weights->dims[transposed ? 1 : 0];
  if (input_channels == 0) {
    return ctx.fail(Error::InvalidProgram, "filter has dims [%zu, %zu]: zero input channels", weights->dims[0],
                    weights->dims[1]);
  }
  if ((n->flags() & XNN_FLAG_TENSORFLOW_RESHAPE_2D) == 0 && input->dims[input->rank - 1] != input_channels) {
    return ctx.fail(Error::InvalidProgram, "input's last dim is %zu but the filter [%zu, %zu] has %zu input channels",
                    input->dims[input->rank - 1], weights->dims[0], weights->dims[1], input_channels);
  }
  if (n->bias_id() != XNN_INVALID_VALUE_ID) {
    const ValueInfo* b = nullptr;
    ETKIT_CHECK_OK(ctx.value(n->bias_id(), "bias", &b));
    ETKIT_CHECK_OK(check_dims(ctx, *b, "bias", {output_channels}));
  }
  return ctx.check(xnn_define_fully_connected(ctx.subgraph, ctx.output_min(), ctx.output_max(), in, filter, bias,
                                              out, n->flags()),
                   "xnn_define_fully_connected");
}

Error define_batch_matrix_multiply(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNode2x1>();
  uint32_t a, b, out;
  ETKIT_CHECK_OK(ctx.id(n->input1_id(), "input1", &a));
  ETKIT_CHECK_OK(ctx.id(n->input2_id(), "input2", &b));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_batch_matrix_multiply(ctx.subgraph, a, b, out, n->flags()),
                   "xnn_define_batch_matrix_multiply");
}

Error define_scaled_dot_product_attention(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNScaledDotProductAttention>();
  uint32_t q, k, v, scale, mask, out;
  ETKIT_CHECK_OK(ctx.id(n->query_id(), "query", &q));
  ETKIT_CHECK_OK(ctx.id(n->key_id(), "key", &k));
  ETKIT_CHECK_OK(ctx.id(n->value_id(), "value", &v));
  ETKIT_CHECK_OK(ctx.id(n->scale_id(), "scale", &scale));
  ETKIT_CHECK_OK(ctx.id(n->mask_id(), "mask", &mask));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_scaled_dot_product_attention(ctx.subgraph, xnn_attention_logits_cap_type_none,
                                                           nullptr, q, k, v, scale, mask, out, n->flags()),
                   "xnn_define_scaled_dot_product_attention");
}

// ----------------------------------------------------------------------------- 2-D windows (NHWC)

/// The geometry of a convolution or pooling node. Checked against the operands' declared dims before
/// XNNPACK sees it: XNNPACK sizes indirection buffers and packs weights from these numbers and trusts
/// them, so a payload whose kernel, padding or stride disagree with its tensors would make it allocate
/// without bound or read past a filter.
struct Window {
  uint32_t pad_top, pad_right, pad_bottom, pad_left;
  uint32_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
  bool transposed = false;  // a deconvolution: stride upsamples
  uint32_t adjustment_h = 0, adjustment_w = 0;
  uint32_t flags = 0;
};

/// Output extent of a window along one axis, or -1 when the window does not fit.
int64_t window_extent(uint64_t in, uint32_t pad_a, uint32_t pad_b, uint32_t kernel, uint32_t stride,
                      uint32_t dilation, bool transposed, uint32_t adjustment, bool same_padding) {
  const uint64_t effective = (static_cast<uint64_t>(kernel) - 1) * dilation + 1;
  if (transposed) {
    const int64_t out = static_cast<int64_t>(stride * (in == 0 ? 0 : in - 1) + adjustment + effective) -
                        static_cast<int64_t>(pad_a) - pad_b;
    return out > 0 ? out : -1;
  }
  if (same_padding) return static_cast<int64_t>((in + stride - 1) / stride);
  const uint64_t padded = in + pad_a + pad_b;
  if (padded < effective) return -1;
  return static_cast<int64_t>((padded - effective) / stride + 1);
}

Error check_window(const NodeContext& ctx, const ValueInfo& in, const ValueInfo& out, const Window& w) {
  if (in.rank != 4 || out.rank != 4) {
    return ctx.fail(Error::InvalidProgram, "input and output must be NHWC tensors (rank 4), not rank %u and %u",
                    in.rank, out.rank);
  }
  if (w.kernel_h == 0 || w.kernel_w == 0 || w.stride_h == 0 || w.stride_w == 0 || w.dilation_h == 0 ||
      w.dilation_w == 0 || w.kernel_h > (1u << 16) || w.kernel_w > (1u << 16) || w.dilation_h > (1u << 16) ||
      w.dilation_w > (1u << 16) || w.stride_h > (1u << 16) || w.stride_w > (1u << 16)) {
    return ctx.fail(Error::InvalidProgram,
                    "kernel %ux%u, stride %ux%u, dilation %ux%u: each must be in [1, 65536]", w.kernel_h, w.kernel_w,
                    w.stride_h, w.stride_w, w.dilation_h, w.dilation_w);
  }
  const bool same = (w.flags & XNN_FLAG_TENSORFLOW_SAME_PADDING) != 0;
  const int64_t oh = window_extent(in.dims[1], w.pad_top, w.pad_bottom, w.kernel_h, w.stride_h, w.dilation_h,
                                   w.transposed, w.adjustment_h, same);
  const int64_t ow = window_extent(in.dims[2], w.pad_left, w.pad_right, w.kernel_w, w.stride_w, w.dilation_w,
                                   w.transposed, w.adjustment_w, same);
  if (in.dims[0] != out.dims[0] || oh != static_cast<int64_t>(out.dims[1]) || ow != static_cast<int64_t>(out.dims[2])) {
    return ctx.fail(Error::InvalidProgram,
                    "a %ux%u window (stride %ux%u, dilation %ux%u, padding t%u r%u b%u l%u) over an input of "
                    "N=%zu H=%zu W=%zu gives N=%zu H=%lld W=%lld, but the output is declared N=%zu H=%zu W=%zu",
                    w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.dilation_h, w.dilation_w, w.pad_top,
                    w.pad_right, w.pad_bottom, w.pad_left, in.dims[0], in.dims[1], in.dims[2], in.dims[0],
                    static_cast<long long>(oh), static_cast<long long>(ow), out.dims[0], out.dims[1], out.dims[2]);
  }
  // XNNPACK's indirection buffer holds a pointer per output pixel and kernel tap.
  const uint64_t limit = etkit::runtime::effective_memory_limit();
  const double taps = static_cast<double>(out.dims[0]) * static_cast<double>(out.dims[1]) *
                      static_cast<double>(out.dims[2]) * w.kernel_h * w.kernel_w * sizeof(void*);
  if (taps > static_cast<double>(limit)) {
    return ctx.fail(Error::MemoryAllocationFailed,
                    "a %ux%u window over a %zux%zu output needs %.0f bytes of indirection, more than the memory "
                    "limit of %llu bytes (etkit::runtime::set_memory_limit)", w.kernel_h, w.kernel_w, out.dims[1],
                    out.dims[2], taps, static_cast<unsigned long long>(limit));
  }
  return Error::Ok;
}

// ----------------------------------------------------------------------------- convolutions (NHWC)

struct ConvIds {
  uint32_t input, filter, bias, output;
};

enum class ConvKind { Regular, Depthwise, Transposed };

/// The operands of a convolution, checked against its geometry: input channels = groups x
/// group_input_channels, output channels = groups x group_output_channels, the filter's dims as XNNPACK
/// packs them ([OC, KH, KW, IC/groups]; depthwise [1, KH, KW, OC]) and the bias [OC].
Error conv_ids(const NodeContext& ctx, const fb::_XNNNodeConv* n, ConvKind kind, ConvIds* ids) {
  ETKIT_CHECK_OK(ctx.id(n->input1_id(), "input", &ids->input));
  ETKIT_CHECK_OK(ctx.packed_id(n->filter_id(), "filter", &ids->filter));
  ETKIT_CHECK_OK(ctx.optional_packed_id(n->bias_id(), "bias", &ids->bias));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &ids->output));
  const ValueInfo *in = nullptr, *filter = nullptr, *out = nullptr;
  ETKIT_CHECK_OK(ctx.value(n->input1_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.value(n->filter_id(), "filter", &filter));
  ETKIT_CHECK_OK(ctx.value(n->output_id(), "output", &out));
  Window w{n->padding_top(), n->padding_right(), n->padding_bottom(), n->padding_left(), n->kernel_height(),
           n->kernel_width(), n->subsampling_height(), n->subsampling_width(), n->dilation_height(),
           n->dilation_width()};
  w.transposed = kind == ConvKind::Transposed;
  w.adjustment_h = n->adjustment_height();
  w.adjustment_w = n->adjustment_width();
  w.flags = n->flags();
  ETKIT_CHECK_OK(check_window(ctx, *in, *out, w));
  const uint64_t groups = n->groups(), gic = n->group_input_channels(), goc = n->group_output_channels();
  const uint64_t in_channels = kind == ConvKind::Depthwise ? groups : groups * gic;
  const uint64_t out_channels = groups * goc;
  if (groups == 0 || in->dims[3] != in_channels || out->dims[3] != out_channels) {
    return ctx.fail(Error::InvalidProgram,
                    "groups %u x group_input_channels %u / group_output_channels %u disagree with the input's %zu "
                    "and the output's %zu channels", n->groups(), n->group_input_channels(),
                    n->group_output_channels(), in->dims[3], out->dims[3]);
  }
  if (kind == ConvKind::Depthwise) {
    ETKIT_CHECK_OK(check_dims(ctx, *filter, "filter", {1, n->kernel_height(), n->kernel_width(), out_channels}));
  } else {
    ETKIT_CHECK_OK(check_dims(ctx, *filter, "filter", {out_channels, n->kernel_height(), n->kernel_width(), gic}));
  }
  if (n->bias_id() != XNN_INVALID_VALUE_ID) {
    const ValueInfo* bias = nullptr;
    ETKIT_CHECK_OK(ctx.value(n->bias_id(), "bias", &bias));
    ETKIT_CHECK_OK(check_dims(ctx, *bias, "bias", {out_channels}));
  }
  return Error::Ok;
}

Error define_conv2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNodeConv>();
  ConvIds ids;
  ETKIT_CHECK_OK(conv_ids(ctx, n, ConvKind::Regular, &ids));
  return ctx.check(
      xnn_define_convolution_2d(ctx.subgraph, n->padding_top(), n->padding_right(), n->padding_bottom(),
                                n->padding_left(), n->kernel_height(), n->kernel_width(), n->subsampling_height(),
                                n->subsampling_width(), n->dilation_height(), n->dilation_width(), n->groups(),
                                n->group_input_channels(), n->group_output_channels(), ctx.output_min(),
                                ctx.output_max(), ids.input, ids.filter, ids.bias, ids.output, n->flags()),
      "xnn_define_convolution_2d");
}

/// The payload describes a depthwise convolution like a grouped one: groups = input channels,
/// group_output_channels / group_input_channels = depth multiplier.
Error define_depthwise_conv2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNodeConv>();
  if (n->group_input_channels() == 0 || n->group_output_channels() % n->group_input_channels() != 0) {
    return ctx.fail(Error::InvalidProgram,
                    "group_output_channels %u is not a multiple of group_input_channels %u",
                    n->group_output_channels(), n->group_input_channels());
  }
  ConvIds ids;
  ETKIT_CHECK_OK(conv_ids(ctx, n, ConvKind::Depthwise, &ids));
  const uint32_t depth_multiplier = n->group_output_channels() / n->group_input_channels();
  return ctx.check(xnn_define_depthwise_convolution_2d(
                       ctx.subgraph, n->padding_top(), n->padding_right(), n->padding_bottom(), n->padding_left(),
                       n->kernel_height(), n->kernel_width(), n->subsampling_height(), n->subsampling_width(),
                       n->dilation_height(), n->dilation_width(), depth_multiplier, n->groups(), ctx.output_min(),
                       ctx.output_max(), ids.input, ids.filter, ids.bias, ids.output, n->flags()),
                   "xnn_define_depthwise_convolution_2d");
}

/// subsampling_* carry the upsampling (stride) of the transposed convolution.
Error define_conv_transpose2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNodeConv>();
  ConvIds ids;
  ETKIT_CHECK_OK(conv_ids(ctx, n, ConvKind::Transposed, &ids));
  return ctx.check(xnn_define_deconvolution_2d(
                       ctx.subgraph, n->padding_top(), n->padding_right(), n->padding_bottom(), n->padding_left(),
                       n->adjustment_height(), n->adjustment_width(), n->kernel_height(), n->kernel_width(),
                       n->subsampling_height(), n->subsampling_width(), n->dilation_height(), n->dilation_width(),
                       n->groups(), n->group_input_channels(), n->group_output_channels(), ctx.output_min(),
                       ctx.output_max(), ids.input, ids.filter, ids.bias, ids.output, n->flags()),
                   "xnn_define_deconvolution_2d");
}

// ----------------------------------------------------------------------------- pooling (NHWC)

/// A pooling node's geometry against its input and output (check_window). Average pooling has no dilation.
Error check_pooling(const NodeContext& ctx, uint32_t input_id, uint32_t output_id, const Window& w) {
  const ValueInfo *in = nullptr, *out = nullptr;
  ETKIT_CHECK_OK(ctx.value(input_id, "input", &in));
  ETKIT_CHECK_OK(ctx.value(output_id, "output", &out));
  ETKIT_CHECK_OK(check_window(ctx, *in, *out, w));
  if (in->dims[3] != out->dims[3]) {
    return ctx.fail(Error::InvalidProgram, "input has %zu channels, output %zu", in->dims[3], out->dims[3]);
  }
  return Error::Ok;
}

Window pooling_window(const fb::_XNNPooling2D* n, bool dilated) {
  Window w{n->padding_top(), n->padding_right(), n->padding_bottom(), n->padding_left(), n->pooling_height(),
           n->pooling_width(), n->stride_height(), n->stride_width(), dilated ? n->dilation_height() : 1u,
           dilated ? n->dilation_width() : 1u};
  w.flags = n->flags();
  return w;
}

Error define_avg_pooling2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNPooling2D>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  ETKIT_CHECK_OK(check_pooling(ctx, n->input_id(), n->output_id(), pooling_window(n, false)));
  return ctx.check(xnn_define_average_pooling_2d(ctx.subgraph, n->padding_top(), n->padding_right(),
                                                 n->padding_bottom(), n->padding_left(), n->pooling_height(),
                                                 n->pooling_width(), n->stride_height(), n->stride_width(),
                                                 ctx.output_min(), ctx.output_max(), in, out, n->flags()),
                   "xnn_define_average_pooling_2d");
}

Error define_max_pooling2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNPooling2D>();
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  ETKIT_CHECK_OK(check_pooling(ctx, n->input_id(), n->output_id(), pooling_window(n, true)));
  return ctx.check(xnn_define_max_pooling_2d(ctx.subgraph, n->padding_top(), n->padding_right(), n->padding_bottom(),
                                             n->padding_left(), n->pooling_height(), n->pooling_width(),
                                             n->stride_height(), n->stride_width(), n->dilation_height(),
                                             n->dilation_width(), ctx.output_min(), ctx.output_max(), in, out,
                                             n->flags()),
                   "xnn_define_max_pooling_2d");
}

Error define_argmax_pooling2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNArgMaxPooling2d>();
  uint32_t in, values_out, index_out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_value_id(), "output_value", &values_out));
  ETKIT_CHECK_OK(ctx.output(n->output_index_id(), "output_index", &index_out));
  // Non-overlapping windows: the stride is the pooling size.
  Window w{n->padding_top(), n->padding_right(), n->padding_bottom(), n->padding_left(), n->pooling_height(),
           n->pooling_width(), n->pooling_height(), n->pooling_width(), 1, 1};
  w.flags = n->flags();
  ETKIT_CHECK_OK(check_pooling(ctx, n->input_id(), n->output_value_id(), w));
  return ctx.check(xnn_define_argmax_pooling_2d(ctx.subgraph, n->padding_top(), n->padding_right(),
                                                n->padding_bottom(), n->padding_left(), n->pooling_height(),
                                                n->pooling_width(), in, values_out, index_out, n->flags()),
                   "xnn_define_argmax_pooling_2d");
}

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
/// Mean over H and W of an NHWC tensor (+ the node's clamp). XNNPACK 2024-11-08 keeps this entry
/// point (deprecated in favour of xnn_define_static_reduce) because it also inserts the clamp.
Error define_global_avg_pooling2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::_XNNNode1x1>();
  const ValueInfo* input = nullptr;
  uint32_t out;
  ETKIT_CHECK_OK(ctx.input(n->input_id(), "input", &input));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  if (input->rank < 3) {
    return ctx.fail(Error::InvalidProgram, "input has rank %u, need at least 3 (N..., H, W, C)", input->rank);
  }
  return ctx.check(xnn_define_global_average_pooling_2d(ctx.subgraph, ctx.output_min(), ctx.output_max(),
                                                        input->xnn_id, out, n->flags()),
                   "xnn_define_global_average_pooling_2d");
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// ----------------------------------------------------------------------------- shape and layout

Error define_static_transpose(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNStaticTranspose>();
  std::vector<size_t> perm = to_sizes(n->perm());
  if (perm.size() != n->num_dims()) {
    return ctx.fail(Error::InvalidProgram, "perm has %zu entries but num_dims is %u", perm.size(), n->num_dims());
  }
  uint32_t in, out;
  // XNNPACK permutes the input's dims with perm without checking they are as many.
  ETKIT_CHECK_OK(ctx.ranked_id(n->input_id(), "input", n->num_dims(), /*at_least=*/false, &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_static_transpose(ctx.subgraph, perm.size(), perm.data(), in, out, n->flags()),
                   "xnn_define_static_transpose");
}

Error define_static_reshape(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNStaticReshape>();
  std::vector<size_t> shape = to_sizes(n->new_shape());
  if (shape.size() != n->num_dims() || shape.size() > XNN_MAX_TENSOR_DIMS) {
    return ctx.fail(Error::InvalidProgram, "new_shape has %zu entries, num_dims is %u (limit %d)", shape.size(),
                    n->num_dims(), XNN_MAX_TENSOR_DIMS);
  }
  uint32_t in, out;
  ETKIT_CHECK_OK(ctx.id(n->input_id(), "input", &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_static_reshape(ctx.subgraph, shape.size(), shape.data(), in, out, n->flags()),
                   "xnn_define_static_reshape");
}

Error define_static_slice(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNStaticSlice>();
  std::vector<size_t> offsets = to_sizes(n->offsets());
  std::vector<size_t> sizes = to_sizes(n->sizes());
  if (offsets.size() != n->num_dims() || sizes.size() != n->num_dims()) {
    return ctx.fail(Error::InvalidProgram, "offsets (%zu) and sizes (%zu) must both have num_dims (%u) entries",
                    offsets.size(), sizes.size(), n->num_dims());
  }
  uint32_t in, out;
  // XNNPACK copies num_dims offsets into a node of XNN_MAX_TENSOR_DIMS and slices the input with them
  // without comparing num_dims with the input's rank; the input's rank is at most that limit.
  ETKIT_CHECK_OK(ctx.ranked_id(n->input_id(), "input", n->num_dims(), /*at_least=*/false, &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_static_slice(ctx.subgraph, offsets.size(), offsets.data(), sizes.data(), in, out,
                                           n->flags()),
                   "xnn_define_static_slice");
}

Error define_static_constant_pad(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNStaticConstantPad>();
  const ValueInfo* input = nullptr;
  uint32_t out;
  ETKIT_CHECK_OK(ctx.input(n->input_id(), "input", &input));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  std::vector<size_t> pre = to_sizes(n->pre_paddings());
  std::vector<size_t> post = to_sizes(n->post_paddings());
  // XNNPACK reads one padding per input dimension.
  if (pre.size() != input->rank || post.size() != input->rank) {
    return ctx.fail(Error::InvalidProgram,
                    "pre_paddings (%zu) and post_paddings (%zu) must have one entry per input dim (%u)",
                    pre.size(), post.size(), input->rank);
  }
  return ctx.check(xnn_define_static_constant_pad(ctx.subgraph, pre.data(), post.data(), n->padding_value(),
                                                  input->xnn_id, out, n->flags()),
                   "xnn_define_static_constant_pad");
}

Error define_static_resize_bilinear2d(const NodeContext& ctx, const NodeKind&) {
  const auto* n = ctx.table<fb::XNNStaticResizeBilinear2D>();
  uint32_t in, out;
  // XNNPACK reads dims 0..3 (N, H, W, C) of the input whatever its rank.
  ETKIT_CHECK_OK(ctx.ranked_id(n->input_id(), "input", 4, /*at_least=*/false, &in));
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  return ctx.check(xnn_define_static_resize_bilinear_2d(ctx.subgraph, n->new_height(), n->new_width(), in, out,
                                                        n->flags()),
                   "xnn_define_static_resize_bilinear_2d");
}

/// kind.op is the number of inputs (2..5); unused input ids in the table are ignored.
Error define_concatenate(const NodeContext& ctx, const NodeKind& kind) {
  const auto* n = ctx.table<fb::_XNNCat>();
  const uint32_t serialized[5] = {n->input1_id(), n->input2_id(), n->input3_id(), n->input4_id(), n->input5_id()};
  static const char* const roles[5] = {"input1", "input2", "input3", "input4", "input5"};
  uint32_t in[5] = {};
  for (int i = 0; i < kind.op; ++i) ETKIT_CHECK_OK(ctx.id(serialized[i], roles[i], &in[i]));
  uint32_t out;
  ETKIT_CHECK_OK(ctx.output(n->output_id(), "output", &out));
  const auto axis = static_cast<int32_t>(n->axis());
  switch (kind.op) {
    case 2:
      return ctx.check(xnn_define_concatenate2(ctx.subgraph, axis, in[0], in[1], out, n->flags()),
                       "xnn_define_concatenate2");
    case 3:
      return ctx.check(xnn_define_concatenate3(ctx.subgraph, axis, in[0], in[1], in[2], out, n->flags()),
                       "xnn_define_concatenate3");
    case 4:
      return ctx.check(xnn_define_concatenate4(ctx.subgraph, axis, in[0], in[1], in[2], in[3], out, n->flags()),
                       "xnn_define_concatenate4");
    default:
      return ctx.check(
          xnn_define_concatenate5(ctx.subgraph, axis, in[0], in[1], in[2], in[3], in[4], out, n->flags()),
          "xnn_define_concatenate5");
  }
}

// ----------------------------------------------------------------------------- the table

using U = fb::XNodeUnion;

const NodeKind kNodeKinds[] = {
    // binary elementwise (xnn_define_binary)
    {U::XNNAdd, define_binary_clamped, xnn_binary_add},
    {U::XNNSubtract, define_binary_clamped, xnn_binary_subtract},
    {U::XNNMultiply, define_binary_clamped, xnn_binary_multiply},
    {U::XNNDiv, define_binary_clamped, xnn_binary_divide},
    {U::XNNMinimum, define_binary, xnn_binary_minimum},
    {U::XNNMaximum, define_binary, xnn_binary_maximum},
    {U::XNNPReLU, define_binary, xnn_binary_prelu},
    // unary elementwise (xnn_define_unary)
    {U::XNNSigmoid, define_unary, xnn_unary_sigmoid},
    {U::XNNFloor, define_unary, xnn_unary_floor},
    {U::XNNCeiling, define_unary, xnn_unary_ceiling},
    {U::XNNConvert, define_unary, xnn_unary_convert},
    {U::XNNSquareRoot, define_unary, xnn_unary_square_root},
    {U::XNNReciprocalSquareRoot, define_unary, xnn_unary_reciprocal_square_root},
    {U::XNNHardswish, define_unary, xnn_unary_hardswish},
    {U::XNNNegate, define_unary, xnn_unary_negate},
    {U::XNNSquare, define_unary, xnn_unary_square},
    {U::XNNAbs, define_unary, xnn_unary_abs},
    {U::XNNLog, define_unary, xnn_unary_log},
    {U::XNNGelu, define_unary, xnn_unary_gelu},
    {U::XNNTanh, define_unary, xnn_unary_tanh},
    {U::XNNExp, define_unary, xnn_unary_exp},
    {U::XNNSin, define_unary, xnn_unary_sine},
    {U::XNNCos, define_unary, xnn_unary_cosine},
    {U::XNNClamp, define_clamp, 0},
    {U::XNNLeakyReLU, define_leaky_relu, 0},
    {U::XNNELU, define_elu, 0},
    {U::XNNSoftmax, define_softmax, 0},
    {U::XNNCopy, define_copy, 0},
    // linear algebra
    {U::XNNFullyConnected, define_fully_connected, 0},
    {U::XNNBatchMatrixMultiply, define_batch_matrix_multiply, 0},
    {U::XNNScaledDotProductAttention, define_scaled_dot_product_attention, 0},
    // convolution and pooling
    {U::XNNConv2d, define_conv2d, 0},
    {U::XNNDepthwiseConv2d, define_depthwise_conv2d, 0},
    {U::XNNConvTranspose2d, define_conv_transpose2d, 0},
    {U::XNNAvgPooling2d, define_avg_pooling2d, 0},
    {U::XNNMaxPooling2d, define_max_pooling2d, 0},
    {U::XNNArgMaxPooling2d, define_argmax_pooling2d, 0},
    {U::XNNGlobalAvgPooling2d, define_global_avg_pooling2d, 0},
    // shape and layout
    {U::XNNStaticTranspose, define_static_transpose, 0},
    {U::XNNStaticReshape, define_static_reshape, 0},
    {U::XNNStaticSlice, define_static_slice, 0},
    {U::XNNStaticConstantPad, define_static_constant_pad, 0},
    {U::XNNStaticResizeBilinear2D, define_static_resize_bilinear2d, 0},
    {U::XNNConcatenate2, define_concatenate, 2},
    {U::XNNConcatenate3, define_concatenate, 3},
    {U::XNNConcatenate4, define_concatenate, 4},
    {U::XNNConcatenate5, define_concatenate, 5},
};

const NodeKind* find_kind(U type) {
  for (const NodeKind& kind : kNodeKinds) {
    if (kind.type == type) return &kind;
  }
  return nullptr;
}

}  // namespace

Error define_nodes(xnn_subgraph_t subgraph, const fb::XNNGraph* graph, const ValueTable& values,
                   std::unordered_set<uint32_t>* read_at_run_time, std::vector<uint32_t>* xnode_of_node) {
  const auto* xnodes = graph->xnodes();
  xnode_of_node->clear();
  bool counted = etkit_xnn_subgraph_num_nodes(subgraph) == 0;
  std::unordered_set<uint32_t> written, read;
  std::vector<std::vector<uint32_t>> outputs(xnodes->size());
  for (uint32_t i = 0; i < xnodes->size(); ++i) {
    const fb::XNode* node = xnodes->Get(i);
    NodeContext ctx{subgraph, values, node, i, &written, read_at_run_time, &read, &outputs[i]};
    const NodeKind* kind = find_kind(node->xnode_union_type());
    if (kind == nullptr || node->xnode_union() == nullptr) {
      return ctx.fail(Error::NotImplemented,
                      "union type %d has no XNNPACK definition in this delegate; re-export without "
                      "delegating this operator",
                      static_cast<int>(node->xnode_union_type()));
    }
    ETKIT_CHECK_OK(kind->define(ctx, *kind));
    const size_t num_nodes = etkit_xnn_subgraph_num_nodes(subgraph);
    counted = counted && num_nodes != SIZE_MAX && num_nodes >= xnode_of_node->size();
    if (counted) xnode_of_node->resize(num_nodes, i);
  }
  if (!counted) xnode_of_node->clear();
  // A node whose outputs nobody reads and the caller does not bind: XNNPACK's optimizer deletes it but keeps
  // counting it as its inputs' consumer, then aborts the process. Such a graph is refused here.
  for (uint32_t i = 0; i < xnodes->size(); ++i) {
    bool used = false;
    for (uint32_t id : outputs[i]) used = used || read.count(id) != 0 || values.at(id).is_external_output;
    if (!used) {
      NodeContext ctx{subgraph, values, xnodes->Get(i), i, &written, read_at_run_time, &read, &outputs[i]};
      return ctx.fail(Error::InvalidProgram,
                      "no later node reads its output%s and none is an external output (a dead node)",
                      outputs[i].size() == 1 ? "" : "s");
    }
  }
  return Error::Ok;
}

}  // namespace etkit_xnnpack
