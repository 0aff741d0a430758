"""``XNNPACKQuantizer``: 8-bit PT2E quantization annotated for what XNNPACK runs on int8.

Used exactly like ExecuTorch's (seed 001, "Quantization" in the XNNPACK backend pages)::

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*calibration_inputs)                      # observers record ranges
    quantized = convert_pt2e(prepared)                 # float graph with quantize/dequantize nodes
    ep = torch.export.export(quantized, inputs)
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])

What is annotated (so that the partitioner lowers it to XNNPACK's int8 operators):

- activations: int8 per-tensor affine over [-128, 127] (``HistogramObserver``; QAT: fused
  moving-average fake quantize);
- convolutions and linears: int8 symmetric weights over [-127, 127], per output channel when
  ``is_per_channel`` (axis 0) else per tensor; the bias stays float (the partitioner quantizes it to
  int32 with scale ``input_scale * weight_scale``); a following ReLU / hardtanh / clamp is fused into
  the op's output (one quantize after the activation);
- add, sub, mul of two tensors (with a fused ReLU);
- cat (every input and the output share one scale), and the data-movement / pooling ops that keep
  their input's scale (max_pool2d, adaptive_avg_pool2d, mean, flatten, view, reshape, permute,
  dropout, clone, standalone ReLU / hardtanh) when their input is quantized; an op reading such a
  value shares that scale too, so no requantization is inserted.

With ``is_dynamic=True`` only linears are annotated: their input is quantized to int8 at run time
(``PlaceholderObserver``: ``choose_qparams`` + quantize + dequantize in the converted graph), weights
as above, outputs stay float; the partitioner lowers them to XNNPACK's qd8 fully connected, which
quantizes each row with its own scale (see ``operators/dynamic_quant.py``).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import (FusedMovingAvgObsFakeQuantize, HistogramObserver, MinMaxObserver,
                                       MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver,
                                       PerChannelMinMaxObserver, PlaceholderObserver)
from torchao.quantization.pt2e.quantizer import (QuantizationAnnotation, QuantizationSpec, Quantizer,
                                                 SharedQuantizationSpec)

aten = torch.ops.aten
ANNOTATION = "quantization_annotation"

__all__ = ["XNNPACKQuantizer", "QuantizationConfig", "get_symmetric_quantization_config"]


@dataclass(frozen=True)
class QuantizationConfig:
    """How activations and weights are quantized (ExecuTorch's ``QuantizationConfig`` fields)."""

    input_activation: Optional[QuantizationSpec]
    output_activation: Optional[QuantizationSpec]
    weight: Optional[QuantizationSpec]
    bias: Optional[QuantizationSpec] = None
    is_qat: bool = False


def get_symmetric_quantization_config(is_per_channel: bool = False, is_qat: bool = False,
                                      is_dynamic: bool = False, act_qmin: int = -128, act_qmax: int = 127,
                                      weight_qmin: int = -127, weight_qmax: int = 127) -> QuantizationConfig:
    """The 8-bit configuration of seed 001: int8 affine activations, int8 symmetric weights.

    Args:
        is_per_channel: one weight scale per output channel (XNNPACK ``qcint8``) instead of one per tensor.
        is_qat: fake-quantize modules for ``prepare_qat_pt2e`` instead of observers.
        is_dynamic: activation ranges computed at run time from each input (linears only; no
            calibration needed, outputs stay float).
        act_qmin, act_qmax, weight_qmin, weight_qmax: integer ranges (XNNPACK's defaults).
    """
    if is_qat:
        act_observer = FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver)
        weight_observer = FusedMovingAvgObsFakeQuantize.with_args(
            observer=MovingAveragePerChannelMinMaxObserver if is_per_channel else MovingAverageMinMaxObserver)
    else:
        act_observer = HistogramObserver.with_args(eps=2 ** -12)
        weight_observer = PerChannelMinMaxObserver if is_per_channel else MinMaxObserver
    if is_dynamic:
        act_observer = PlaceholderObserver.with_args(eps=2 ** -12)
    activation = QuantizationSpec(dtype=torch.int8, quant_min=act_qmin, quant_max=act_qmax,
                                  qscheme=torch.per_tensor_affine, is_dynamic=is_dynamic,
                                  observer_or_fake_quant_ctr=act_observer)
    weight = QuantizationSpec(dtype=torch.int8, quant_min=weight_qmin, quant_max=weight_qmax,
                              qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric,
                              ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=weight_observer)
    if is_dynamic:
        return QuantizationConfig(activation, None, weight, None, is_qat)
    return QuantizationConfig(activation, activation, weight, None, is_qat)


# --------------------------------------------------------------------------------- annotation

_CONV = {aten.conv1d.default, aten.conv2d.default}
_LINEAR = {aten.linear.default}
_BINARY = {aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.sub_.Tensor, aten.mul.Tensor, aten.mul_.Tensor}
_ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
                aten.clamp.default}
_SHARE_INPUT = {aten.max_pool2d.default, aten.adaptive_avg_pool2d.default, aten.mean.dim,
                aten.flatten.using_ints, aten.view.default, aten.reshape.default, aten.permute.default,
                aten.dropout.default, aten.clone.default, *_ACTIVATIONS}


def _annotated(node: Node) -> bool:
    annotation = node.meta.get(ANNOTATION)
    return annotation is not None and annotation._annotated


def _is_float_tensor(arg) -> bool:
    val = arg.meta.get("val") if isinstance(arg, Node) else None
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32


def _mark(node: Node, inputs: dict, output) -> None:
    node.meta[ANNOTATION] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output, _annotated=True)


def _fusable_activation(node: Node) -> Optional[Node]:
    """The single ReLU / hardtanh / clamp user of ``node``, if it is its only user."""
    users = list(node.users)
    if len(users) == 1 and users[0].target in _ACTIVATIONS and not _annotated(users[0]):
        return users[0]
    return None


def _input_spec(x: Node, config: QuantizationConfig):
    """The activation spec for input ``x``: shared with ``x``'s own output quantization when ``x``
    passes its input's scale through (flatten, view, pooling...), so no requantization is needed."""
    annotation = x.meta.get(ANNOTATION)
    if annotation is not None and isinstance(annotation.output_qspec, SharedQuantizationSpec):
        return SharedQuantizationSpec(x)
    return config.input_activation


def _annotate_weighted(node: Node, config: QuantizationConfig) -> None:
    x, weight = node.args[0], node.args[1]
    if not (_is_float_tensor(x) and _is_float_tensor(weight)):
        return
    inputs = {x: _input_spec(x, config), weight: config.weight}
    bias = node.args[2] if len(node.args) > 2 else None
    if isinstance(bias, Node) and config.bias is not None:
        inputs[bias] = config.bias
    _mark_output(node, inputs, _fusable_activation(node), config)


def _mark_output(node: Node, inputs: dict, activation: Optional[Node], config: QuantizationConfig) -> None:
    """Annotate ``node``; its output is quantized after ``activation`` (fused) when there is one."""
    if activation is not None:
        _mark(node, inputs, None)
        _mark(activation, {}, config.output_activation)
    else:
        _mark(node, inputs, config.output_activation)


def _annotate_dynamic_linear(node: Node, config: QuantizationConfig) -> None:
    """Input quantized at run time, weight ahead of time, output float (no output quantization)."""
    x, weight = node.args[0], node.args[1]
    if _is_float_tensor(x) and _is_float_tensor(weight):
        _mark(node, {x: config.input_activation, weight: config.weight}, None)


def _annotate_binary(node: Node, config: QuantizationConfig) -> None:
    a, b = node.args[0], node.args[1]
    if not (_is_float_tensor(a) and _is_float_tensor(b)) or node.kwargs.get("alpha", 1) != 1:
        return
    inputs = {a: _input_spec(a, config), b: _input_spec(b, config)}
    activation = _fusable_activation(node) if node.target in (aten.add.Tensor, aten.add_.Tensor) else None
    _mark_output(node, inputs, activation, config)


def _annotate_cat(node: Node, config: QuantizationConfig) -> None:
    tensors = list(node.args[0])
    if not tensors or not all(_is_float_tensor(t) for t in tensors):
        return
    first = tensors[0]
    shared = SharedQuantizationSpec((first, node))
    inputs = {first: config.input_activation}
    inputs.update({t: shared for t in tensors[1:] if t is not first})
    _mark(node, inputs, shared)


def _produces_quantized(node) -> bool:
    """True if ``node``'s output is quantized by its annotation (so a follower can share it)."""
    if not isinstance(node, Node):
        return False
    annotation = node.meta.get(ANNOTATION)
    if annotation is not None and annotation.output_qspec is not None:
        return True
    if node.target is operator.getitem:
        return _produces_quantized(node.args[0])
    return False


def _annotate_share_input(node: Node, config: QuantizationConfig) -> None:
    x = node.args[0]
    if not _is_float_tensor(x) or not _produces_quantized(x):
        return
    _mark(node, {x: config.input_activation}, SharedQuantizationSpec((x, node)))


_HANDLERS: dict[object, Callable[[Node, QuantizationConfig], None]] = {
    **{op: _annotate_weighted for op in _CONV | _LINEAR},
    **{op: _annotate_binary for op in _BINARY},
    aten.cat.default: _annotate_cat,
    **{op: _annotate_share_input for op in _SHARE_INPUT},
}


class XNNPACKQuantizer(Quantizer):
    """PT2E quantizer for the XNNPACK backend (ExecuTorch's class name and ``set_global`` API)."""

    def __init__(self) -> None:
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None

    def set_global(self, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        """Use ``quantization_config`` for every supported op; returns self (chainable)."""
        self.global_config = quantization_config
        return self

    def annotate(self, model: GraphModule) -> GraphModule:
        """Attach ``quantization_annotation`` metadata to the ops listed in the module docstring.

        Ops are visited in graph order, so an op that shares its input's scale sees whether that
        input was quantized."""
        config = self.global_config
        if config is None:
            return model
        dynamic = config.input_activation is not None and config.input_activation.is_dynamic
        for node in model.graph.nodes:
            if node.op != "call_function" or _annotated(node):
                continue
            if dynamic:
                if node.target in _LINEAR:
                    _annotate_dynamic_linear(node, config)
                continue
            handler = _HANDLERS.get(node.target)
            if handler is not None:
                handler(node, config)
        return model

    def validate(self, model: GraphModule) -> None:
        """Nothing to check beyond what ``prepare_pt2e`` checks."""
