"""``VulkanQuantizer``: PT2E quantization for the Vulkan delegate's quantized linear (seed page "Quantization",
Vulkan backend)::

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from etkit_vulkan.quantizer import VulkanQuantizer, get_symmetric_quantization_config

    quantizer = VulkanQuantizer().set_global(get_symmetric_quantization_config(is_dynamic=False, weight_bits=8))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)                      # calibration (weights only: observes the weights)
    quantized = convert_pt2e(prepared)

What it annotates: the weight of every ``linear`` (int8 storage, symmetric, one scale per output channel,
range ``[-2**(bits-1), 2**(bits-1) - 1]``: 8 or 4 bits); with ``is_dynamic=True`` also the linear's input,
quantized at run time per tensor (int8 affine, ``choose_qparams`` -> quantize -> dequantize). The Vulkan
partitioner turns ``dequantize_per_channel(int weight) -> linear`` into its quantized linear shader, which keeps
the integer weights on the device. Everything else stays float.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import PerChannelMinMaxObserver, PlaceholderObserver
from torchao.quantization.pt2e.quantizer import (QuantizationAnnotation, QuantizationConfig, QuantizationSpec,
                                                 Quantizer)

__all__ = ["VulkanQuantizer", "get_symmetric_quantization_config"]

_ANNOTATION = "quantization_annotation"
_LINEARS = (torch.ops.aten.linear.default,)


def bits_to_range(bits: int) -> tuple[int, int]:
    """``(qmin, qmax)`` of a signed ``bits``-bit integer."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


@functools.lru_cache
def get_symmetric_quantization_config(is_dynamic: bool = False, weight_bits: int = 8, act_bits: int = 8,
                                      act_qmin: Optional[int] = None, act_qmax: Optional[int] = None,
                                      weight_qmin: Optional[int] = None,
                                      weight_qmax: Optional[int] = None) -> QuantizationConfig:
    """Weights: int8 storage, symmetric per output channel (axis 0), ``weight_bits`` of range (8 or 4).
    Activations: none (``is_dynamic=False``, weight-only) or int8 affine per tensor quantized at run time.

    Raises:
        ValueError: ``weight_bits`` not 4 or 8, ``act_bits`` not 8.
    """
    if weight_bits not in (4, 8):
        raise ValueError(f"weight_bits must be 4 or 8, got {weight_bits}")
    if act_bits != 8:
        raise ValueError(f"act_bits must be 8, got {act_bits}")
    wmin, wmax = bits_to_range(weight_bits)
    weight = QuantizationSpec(dtype=torch.int8, quant_min=wmin if weight_qmin is None else weight_qmin,
                              quant_max=wmax if weight_qmax is None else weight_qmax,
                              qscheme=torch.per_channel_symmetric, ch_axis=0, is_dynamic=False,
                              observer_or_fake_quant_ctr=PerChannelMinMaxObserver)
    act = None
    if is_dynamic:
        amin, amax = bits_to_range(act_bits)
        act = QuantizationSpec(dtype=torch.int8, quant_min=amin if act_qmin is None else act_qmin,
                               quant_max=amax if act_qmax is None else act_qmax, qscheme=torch.per_tensor_affine,
                               is_dynamic=True, observer_or_fake_quant_ctr=PlaceholderObserver)
    return QuantizationConfig(input_activation=act, output_activation=None, weight=weight, bias=None, is_qat=False)


class VulkanQuantizer(Quantizer):
    """Annotates ``linear`` weights (and, for dynamic configs, inputs) for the Vulkan delegate."""

    def __init__(self) -> None:
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None
        self.filter_fn: Optional[Callable[[Node], bool]] = None

    def set_global(self, quantization_config: QuantizationConfig) -> "VulkanQuantizer":
        self.global_config = quantization_config
        return self

    def set_filter_function(self, filter_fn: Callable[[Node], bool]) -> "VulkanQuantizer":
        """Only nodes for which ``filter_fn(node)`` is true are quantized."""
        self.filter_fn = filter_fn
        return self

    def annotate(self, model: GraphModule) -> GraphModule:
        config = self.global_config
        if config is None:
            return model
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in _LINEARS:
                continue
            if self.filter_fn is not None and not self.filter_fn(node):
                continue
            annotation = node.meta.get(_ANNOTATION)
            if annotation is not None and annotation._annotated:
                continue
            x, w = node.args[0], node.args[1]
            if not isinstance(w, Node) or w.meta.get("val") is None or w.meta["val"].dim() != 2:
                continue
            inputs = {w: config.weight}
            if config.input_activation is not None and isinstance(x, Node):
                inputs[x] = config.input_activation
            node.meta[_ANNOTATION] = QuantizationAnnotation(input_qspec_map=inputs, _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        return None
