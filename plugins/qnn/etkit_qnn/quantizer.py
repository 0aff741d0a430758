"""``QnnQuantizer``: PT2E quantization annotated for the Qualcomm HTP (seed page "Qualcomm AI Engine Backend",
step 2)::

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    quantizer = QnnQuantizer()                              # 8a8w by default
    quantizer.set_default_quant_config(QuantDtype.use_16a8w, is_conv_per_channel=True, is_linear_per_channel=True)
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*calibration_inputs)
    quantized = convert_pt2e(prepared)                     # the PT2E reference model

Schemes (``QuantDtype``; the HTP's integer formats, as ExecuTorch's Qualcomm quantizer defines them):

==============  ==========================================  ============================================
scheme          activations                                 weights (convolution, linear, layer norm)
==============  ==========================================  ============================================
``use_8a8w``    uint8 ``[0, 255]`` per-tensor affine        int8 ``[-127, 127]`` symmetric
``use_16a8w``   uint16 ``[0, 65535]`` (held in int32)       int8 ``[-127, 127]`` symmetric
``use_16a4w``   uint16                                      int4 ``[-7, 7]`` symmetric (held in int8)
``use_16a16w``  uint16                                      int16 ``[-32767, 32767]`` symmetric
``use_8a4w``    uint8                                       int4 ``[-7, 7]`` symmetric
==============  ==========================================  ============================================

Weights are per output channel (axis 0) for convolutions with ``is_conv_per_channel`` and linears with
``is_linear_per_channel``, else per tensor; the HTP needs symmetric weights (an asymmetric weight's channels
come out wrong, docs/design/qnn-route.md section 3). Biases are int32 with scale ``input scale x weight scale``
per channel (``DerivedQuantizationSpec``). Every op the HTP takes (:data:`ANNOTATED`) has its inputs and its
output quantized; data-movement ops (reshape, permute, slice, max pooling, ...) keep their input's
quantization (``SharedQuantizationSpec``), and ``cat`` shares one quantization between its inputs and output.
A convolution, linear or add whose only user is a ReLU, ReLU6, hardtanh or clamp with a lower bound at most 0
has no output quantization of its own: the HTP fuses the pair and rounds once, at the activation's encoding,
and the PT2E reference then computes the same (docs/design/qnn-route.md section 5b).
Block-wise weights (``use_16a4w_block`` with :meth:`QnnQuantizer.set_block_size_map`) are symmetric int4 with one
scale per block of a linear weight's row (torchao's ``dequantize_affine`` in the PT2E graph, ONNX's blocked
``DequantizeLinear`` in the context); block-wise convolutions are refused (ONNX Runtime's QNN EP 2.7 rejects
them).
"""
from __future__ import annotations

import enum
import operator
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import (FakeQuantize, MinMaxObserver, MovingAverageMinMaxObserver,
                                       PerChannelMinMaxObserver)
from torchao.quantization.pt2e.quantizer import (DerivedQuantizationSpec, QuantizationAnnotation,
                                                 QuantizationSpec, Quantizer, SharedQuantizationSpec)

__all__ = ["QnnQuantizer", "QuantDtype", "ModuleQConfig", "quantize_for_qnn"]

aten = torch.ops.aten
ANNOTATION = "quantization_annotation"


class QuantDtype(enum.IntEnum):
    """Bits of activation and bits of weight (ExecuTorch's values)."""

    use_16a16w = 0
    use_16a8w = 1
    use_16a4w = 2
    use_16a4w_block = 3
    use_8a8w = 4
    use_8a4w = 5


#: (activation bits, weight qmin, weight qmax, weight dtype) per scheme.
_SCHEMES = {
    QuantDtype.use_8a8w: (8, -127, 127, torch.int8),
    QuantDtype.use_8a4w: (8, -7, 7, torch.int8),
    QuantDtype.use_16a8w: (16, -127, 127, torch.int8),
    QuantDtype.use_16a4w: (16, -7, 7, torch.int8),
    QuantDtype.use_16a16w: (16, -32767, 32767, torch.int16),
    QuantDtype.use_16a4w_block: (16, -7, 7, torch.int8),
}

# Ops as torch.export shows them before decomposition: the ones with a weight (argument index of weight, bias),
# the ones computing a new range, and the ones moving values (sharing their input's quantization).
WEIGHTED = {aten.conv2d.default: (1, 2), aten.linear.default: (1, 2), aten.layer_norm.default: (2, None)}
COMPUTE = {aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.mul_.Tensor, aten.div.Tensor,
           aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default, aten.relu6.default,
           aten.sigmoid.default, aten.tanh.default, aten.hardswish.default, aten.hardswish_.default,
           aten.hardsigmoid.default, aten.gelu.default, aten.softmax.int, aten._softmax.default, aten.matmul.default,
           aten.bmm.default, aten.mm.default, aten.mean.dim, aten.adaptive_avg_pool2d.default,
           aten.avg_pool2d.default, aten.clamp.default}
SHARED = {aten.max_pool2d.default, aten.view.default, aten.reshape.default, aten.flatten.using_ints,
          aten.permute.default, aten.transpose.int, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
          aten.contiguous.default, aten.clone.default, aten.dropout.default, aten.expand.default,
          aten.slice.Tensor, aten.t.default}
CONCAT = {aten.cat.default, aten.concat.default}
#: Every op target the quantizer annotates.
ANNOTATED = frozenset(WEIGHTED) | COMPUTE | SHARED | CONCAT

#: An activation after one of these producers is fused into it on the HTP (``partition/configs.py``,
#: ``FUSED_ACTIVATIONS``): the pair gets one output quantization, the activation's.
_FUSING_PRODUCERS = {aten.conv2d.default, aten.linear.default, aten.add.Tensor, aten.add_.Tensor}
_FUSED_ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.relu6.default, aten.hardtanh.default,
                      aten.hardtanh_.default, aten.clamp.default}


def _lower_bound(activation: Node):
    if activation.target in (aten.hardtanh.default, aten.hardtanh_.default):
        return activation.args[1] if len(activation.args) > 1 else activation.kwargs.get("min_val", -1.0)
    if activation.target is aten.clamp.default:
        return activation.args[1] if len(activation.args) > 1 else activation.kwargs.get("min")
    return 0.0


def _fused_pairs(model: GraphModule, skipped) -> dict:
    """``{producer: activation}`` for each activation fused after a producer. Only when the activation's
    lower bound is at most 0: its output range then lies inside the clamp, so quantizing the producer's result
    with the activation's parameters saturates exactly as the clamp does (what the HTP's fused op computes)."""
    pairs = {}
    for node in model.graph.nodes:
        if node.op != "call_function" or node.target not in _FUSING_PRODUCERS or len(node.users) != 1:
            continue
        (user,) = node.users
        if user.target not in _FUSED_ACTIVATIONS or user.args[0] is not node or skipped(node) or skipped(user):
            continue
        low = _lower_bound(user)  # None: no lower bound
        if low is None or (isinstance(low, (int, float)) and low <= 0):
            pairs[node] = user
    return pairs


@dataclass(frozen=True)
class ModuleQConfig:
    """One quantization configuration (ExecuTorch's fields)."""

    quant_dtype: QuantDtype = QuantDtype.use_8a8w
    is_qat: bool = False
    is_conv_per_channel: bool = False
    is_linear_per_channel: bool = False
    act_symmetric: bool = False
    eps: Optional[float] = None

    def activation(self) -> QuantizationSpec:
        bits = _SCHEMES[self.quant_dtype][0]
        eps = self.eps or (2 ** -12 if bits == 8 else 2 ** -20)
        observer = (FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, eps=eps) if self.is_qat
                    else MinMaxObserver.with_args(eps=eps))
        dtype, qmax = (torch.uint8, 255) if bits == 8 else (torch.int32, 65535)
        return QuantizationSpec(dtype=dtype, quant_min=0, quant_max=qmax,
                                qscheme=torch.per_tensor_symmetric if self.act_symmetric else torch.per_tensor_affine,
                                is_dynamic=False, observer_or_fake_quant_ctr=observer)

    def block_weight(self, block_size: tuple) -> QuantizationSpec:
        """Block-wise symmetric int4 weights (``use_16a4w_block``): one scale per block of ``block_size``."""
        from torchao.quantization.granularity import PerBlock
        from torchao.quantization.pt2e._affine_quantization import AffineQuantizedMinMaxObserver
        from torchao.quantization.quant_primitives import MappingType

        _, qmin, qmax, dtype = _SCHEMES[self.quant_dtype]
        observer = AffineQuantizedMinMaxObserver.with_args(
            mapping_type=MappingType.SYMMETRIC, target_dtype=dtype, granularity=PerBlock(tuple(block_size)),
            quant_min=qmin, quant_max=qmax, eps=self.eps or 2 ** -12, scale_dtype=torch.float32,
            zero_point_dtype=torch.int8)
        return QuantizationSpec(dtype=dtype, quant_min=qmin, quant_max=qmax, is_dynamic=False,
                                observer_or_fake_quant_ctr=observer)

    def weight(self, per_channel: bool) -> QuantizationSpec:
        _, qmin, qmax, dtype = _SCHEMES[self.quant_dtype]
        eps = self.eps or 2 ** -12
        base = PerChannelMinMaxObserver if per_channel else MinMaxObserver
        observer = FakeQuantize.with_args(observer=base, eps=eps) if self.is_qat else base.with_args(eps=eps)
        return QuantizationSpec(dtype=dtype, quant_min=qmin, quant_max=qmax, ch_axis=0, is_dynamic=False,
                                qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
                                observer_or_fake_quant_ctr=observer)


def _derive_bias_qparams(observers) -> tuple:
    act, weight = observers
    act_scale, _ = act.calculate_qparams()
    weight_scale, _ = weight.calculate_qparams()
    scale = (act_scale.reshape(-1)[0] * weight_scale).to(torch.float32).reshape(-1)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


def _is_float_tensor(value) -> bool:
    val = value.meta.get("val") if isinstance(value, Node) else None
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32


class QnnQuantizer(Quantizer):
    """PT2E quantizer for the Qualcomm HTP (8a8w by default, per-tensor weights as in ExecuTorch).

    Methods follow ExecuTorch's: :meth:`set_default_quant_config`, :meth:`add_discard_nodes`,
    :meth:`add_discard_ops`, :meth:`get_supported_ops`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.default_quant_config = ModuleQConfig()
        self.discard_nodes: set = set()
        self.discard_ops: set = set()
        self.block_size_map: dict = {}

    def set_default_quant_config(self, quant_dtype: QuantDtype, is_qat: bool = False, is_conv_per_channel: bool = False,
                                 is_linear_per_channel: bool = False, is_embedding_per_channel: bool = False,
                                 act_observer=None, act_symmetric: bool = False, eps: Optional[float] = None) -> None:
        """Choose the scheme (:class:`QuantDtype`), QAT, and per-channel weights for convolutions / linears.

        Raises:
            NotImplementedError: a custom ``act_observer`` (not supported here).
        """
        if act_observer is not None:
            raise NotImplementedError("a custom act_observer is not supported by etkit's QnnQuantizer")
        self.default_quant_config = ModuleQConfig(QuantDtype(quant_dtype), is_qat, is_conv_per_channel,
                                                  is_linear_per_channel, act_symmetric, eps)

    def set_block_size_map(self, block_size_map: dict) -> None:
        """Block-wise weights for these linear nodes (``{node name: block size}``, e.g. ``{"linear": (1, 64)}``:
        one scale per 64 input features of each output row; the block's second size divides in_features). Used
        with ``QuantDtype.use_16a4w_block``; the other weights of that scheme are per channel (convolutions
        too: ONNX Runtime's QNN EP refuses block-wise convolution weights).

        Raises (at annotation): ValueError for a node that is not a linear, a block that does not fit its
        weight, or another scheme than ``use_16a4w_block``."""
        self.block_size_map = {str(k): tuple(int(d) for d in v) for k, v in block_size_map.items()}

    def add_discard_nodes(self, nodes: Sequence[str]) -> None:
        """Leave the nodes with these names unquantized (they then run on the CPU)."""
        self.discard_nodes.update(nodes)

    def add_discard_ops(self, ops: Sequence) -> None:
        """Leave every node of these ops unquantized."""
        self.discard_ops.update(ops)

    def get_supported_ops(self) -> set:
        return set(ANNOTATED)

    # ---- annotation ----------------------------------------------------------------------------------

    def annotate(self, model: GraphModule) -> GraphModule:
        config = self.default_quant_config
        act = config.activation()
        skipped = lambda n: n.name in self.discard_nodes or n.target in self.discard_ops  # noqa: E731
        fused = _fused_pairs(model, skipped)
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in ANNOTATED or ANNOTATION in node.meta:
                continue
            if skipped(node) or not _is_float_tensor(node):
                continue
            # A fused producer's result stays float (no observer between it and its activation).
            out = None if node in fused else act
            inputs = [a for a in node.args if _is_float_tensor(a) and a not in fused]
            if node.target in WEIGHTED:
                self._annotate_weighted(node, config, act, out)
            elif node.target in CONCAT:
                tensors = [a for a in node.args[0] if _is_float_tensor(a)]
                if not tensors:
                    continue
                shared = SharedQuantizationSpec((tensors[0], node))
                node.meta[ANNOTATION] = QuantizationAnnotation(
                    input_qspec_map={a: act if i == 0 else shared for i, a in enumerate(tensors)},
                    output_qspec=shared, _annotated=True)
            elif node.target in SHARED:
                if not inputs:
                    continue
                node.meta[ANNOTATION] = QuantizationAnnotation(
                    input_qspec_map={inputs[0]: act}, output_qspec=SharedQuantizationSpec((inputs[0], node)),
                    _annotated=True)
            else:
                node.meta[ANNOTATION] = QuantizationAnnotation(input_qspec_map={a: act for a in inputs},
                                                               output_qspec=out, _annotated=True)
        return model

    def _annotate_weighted(self, node: Node, config: ModuleQConfig, act: QuantizationSpec,
                           out: Optional[QuantizationSpec]) -> None:
        weight_index, bias_index = WEIGHTED[node.target]
        x = node.args[0]
        weight = node.args[weight_index] if len(node.args) > weight_index else None
        per_channel = (node.target is aten.conv2d.default and config.is_conv_per_channel) or \
            (node.target is aten.linear.default and config.is_linear_per_channel)
        qmap = {x: act} if _is_float_tensor(x) else {}
        block = self.block_size_map.get(node.name)
        if block is not None:
            self._check_block(node, weight, block, config)
        if isinstance(weight, Node):
            qmap[weight] = config.block_weight(block) if block is not None else config.weight(per_channel)
            bias = node.args[bias_index] if bias_index is not None and len(node.args) > bias_index else None
            # (a block-wise weight has no per-channel scale to derive an int32 bias from: the bias stays float,
            # and the exporter quantizes it to int32 at a finer scale than any block's)
            if isinstance(bias, Node) and x in qmap and block is None:
                qmap[bias] = DerivedQuantizationSpec(
                    derived_from=[(x, node), (weight, node)], derive_qparams_fn=_derive_bias_qparams,
                    dtype=torch.int32, quant_min=-2 ** 31, quant_max=2 ** 31 - 1, ch_axis=0,
                    qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric)
        node.meta[ANNOTATION] = QuantizationAnnotation(input_qspec_map=qmap, output_qspec=out, _annotated=True)

    @staticmethod
    def _check_block(node: Node, weight, block: tuple, config: ModuleQConfig) -> None:
        if config.quant_dtype != QuantDtype.use_16a4w_block:
            raise ValueError(f"block_size_map names {node.name}, but the scheme is {config.quant_dtype.name}: "
                             f"block-wise weights need QuantDtype.use_16a4w_block")
        shape = tuple(weight.meta["val"].shape) if isinstance(weight, Node) and "val" in weight.meta else None
        if node.target is not aten.linear.default or shape is None:
            raise ValueError(f"block_size_map names {node.name} ({node.target}): only linear weights are quantized "
                             f"block-wise (ONNX Runtime's QNN EP 2.7 refuses a block-wise convolution); quantize "
                             f"this node per channel")
        if len(block) != len(shape) or block[0] != 1 or any(s % b for s, b in zip(shape, block)) or \
                any(b != 1 for b in block[2:]):
            raise ValueError(f"block size {block} for {node.name}'s weight of shape {list(shape)}: a block is one "
                             f"output channel by a divisor of the input size ({(1, shape[1]) + (1,) * (len(shape) - 2)} "
                             f"or smaller)")

    def validate(self, model: GraphModule) -> None:
        return None


def quantize_for_qnn(module: torch.nn.Module, example_inputs: tuple, calibration: Optional[list] = None,
                     quant_dtype: QuantDtype = QuantDtype.use_8a8w, block_size_map: Optional[dict] = None
                     ) -> torch.nn.Module:
    """Export, annotate with :class:`QnnQuantizer` (per-channel weights; ``block_size_map`` for
    ``use_16a4w_block``), calibrate and convert: the PT2E reference model. ``calibration``: input tuples
    (default: ``[example_inputs]``)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = QnnQuantizer()
    quantizer.set_default_quant_config(quant_dtype, is_conv_per_channel=True, is_linear_per_channel=True)
    quantizer.set_block_size_map(block_size_map or {})
    prepared = prepare_pt2e(torch.export.export(module, tuple(example_inputs)).module(), quantizer)
    for sample in calibration or [example_inputs]:
        prepared(*sample)
    return convert_pt2e(prepared)
