"""What the QNN HTP takes, one declarative config per op family.

Each config names the Edge-dialect ops it covers (``targets``), the precisions it runs in, and a ``check(node)`` returning ``None``
when the HTP can run the node or the reason, shown to the user, why not. The ONNX emitter
(:mod:`etkit_qnn.onnx_export.ops`) has one emitter per target listed here (a test checks it); what QNN
accepts was measured through ONNX Runtime's QNN execution provider (QNN 2.51, docs/design/qnn-route.md).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
from etkit.dialects.quantized import torchao_op

aten = torch.ops.aten

#: torchao's block-wise dequantize (QnnQuantizer's use_16a4w_block weights); None without torchao.
DEQUANTIZE_AFFINE = torchao_op("dequantize_affine")

#: Most dimensions a QNN HTP tensor may have (QNN's HTP op definitions are up to 5-D).
MAX_RANK = 5


def tensor_meta(value) -> Optional[torch.Tensor]:
    val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def arg(node: torch.fx.Node, index: int, name: str, default=None):
    """Positional-or-keyword argument ``index``/``name`` of ``node``."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


@dataclass(frozen=True)
class OpConfig:
    """One op family.

    Attributes:
        name: shown in tests and docs.
        targets: the OpOverloads covered.
        check: ``node -> reason or None``, the op's own constraints (ranks and dtypes are checked for all).
        fp16: also runs in fp16 precision (float programs).
        quantized: also runs in quantized precision (QDQ programs).
    """

    name: str
    targets: Sequence
    check: Callable[[torch.fx.Node], Optional[str]] = lambda node: None
    fp16: bool = True
    quantized: bool = True


# ------------------------------------------------------------------------------------------ checks

def _conv(node) -> Optional[str]:
    weight = tensor_meta(node.args[1])
    if arg(node, 6, "transposed", False):
        return "transposed convolution is not lowered to QNN here (TransposeConv2d); it runs on the CPU"
    if weight is None or weight.dim() != 4:
        return f"{weight.dim() - 2 if weight is not None else '?'}-D convolution: only 2-D convolutions are lowered"
    if any(p != 0 for p in arg(node, 7, "output_padding", [0, 0])):
        return "output_padding is not supported"
    w = node.args[1]
    if DEQUANTIZE_AFFINE is not None and isinstance(w, torch.fx.Node) and w.target is DEQUANTIZE_AFFINE:
        return ("block-wise convolution weights are not lowered (ONNX Runtime's QNN EP 2.7 rejects them); quantize "
                "this convolution per channel")
    return None


def _linear(node) -> Optional[str]:
    weight = tensor_meta(node.args[1])
    if weight is None or weight.dim() != 2:
        return "the weight must be a 2-D tensor"
    return None


def _matmul(node) -> Optional[str]:
    """Two 16-bit activations: the HTP's product came out 130-200 output steps off on the simulator (QNN 2.51)."""
    wide = 0
    for a in node.args[:2]:
        if isinstance(a, torch.fx.Node) and a.op == "call_function" and "dequantize" in str(a.target):
            if int(a.args[4]) > 255:
                wide += 1
    if wide == 2:
        return ("a product of two 16-bit activations is not delegated: the HTP simulator's result was 130-200 steps "
                "off (QNN 2.51); quantize this op with 8-bit activations or compile with use_fp16=True")
    return None


def _binary(node) -> Optional[str]:
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        return f"alpha={alpha} is not supported (only 1)"
    if node.target in (aten.div.Tensor, aten.div.Scalar) and node.kwargs.get("rounding_mode") is not None:
        return f"rounding_mode={node.kwargs['rounding_mode']!r} is not supported"
    for a in node.args[:2]:
        if isinstance(a, bool) or not isinstance(a, (int, float, torch.fx.Node)):
            return f"operand {a!r} is neither a tensor nor a number"
    return None


def _gelu(node) -> Optional[str]:
    approximate = node.kwargs.get("approximate", "none")
    return None if approximate in ("none", "tanh") else f"approximate={approximate!r} is not supported"


def _layer_norm(node) -> Optional[str]:
    users = list(node.users)
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in users):
        return "its mean or rstd output is used; QNN LayerNorm returns only the normalized tensor"
    if node.args[2] is None:
        return "layer_norm without a weight is not lowered (elementwise_affine=False)"
    return None


def _batch_norm(node) -> Optional[str]:
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        return "its saved mean or variance output is used; QNN BatchNorm returns only the normalized tensor"
    if tensor_meta(node.args[0]) is None or tensor_meta(node.args[0]).dim() != 4:
        return "only 4-D (N, C, H, W) batch norm is lowered"
    if any(node.args[i] is None for i in (1, 2)):
        return "batch norm without weight and bias (affine=False) is not lowered"
    return None


def _pool(node) -> Optional[str]:
    if node.target is aten.max_pool2d_with_indices.default:
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            return "its indices output is used; QNN PoolMax2d returns only the values"
        if any(d != 1 for d in arg(node, 4, "dilation", [1, 1])):
            return "dilated max pooling is not supported"
    x = tensor_meta(node.args[0])
    if x is None or x.dim() != 4:
        return "only 4-D (N, C, H, W) pooling is lowered"
    if node.target is aten.avg_pool2d.default and arg(node, 6, "divisor_override") is not None:
        return "divisor_override is not supported"
    return None


def _adaptive_pool(node) -> Optional[str]:
    if list(node.args[1]) != [1, 1]:
        return f"adaptive average pooling to {list(node.args[1])}: only a 1x1 output (global pooling) is lowered"
    return None


def _reduce(node) -> Optional[str]:
    if node.kwargs.get("dtype") is not None:
        return "a dtype argument is not supported"
    dims = arg(node, 1, "dim")
    if not dims:
        return "a reduction over all dims without dims listed is not lowered"
    return None


def _getitem(node) -> Optional[str]:
    source = node.args[0]
    if not isinstance(source, torch.fx.Node) or node.args[1] != 0 or source.target not in (
            aten.native_layer_norm.default, aten.max_pool2d_with_indices.default,
            aten._native_batch_norm_legit_no_training.default):
        return "only the first output of layer_norm, batch_norm or max_pool2d is lowered"
    return None


def _slice(node) -> Optional[str]:
    step = arg(node, 4, "step", 1)
    return None if step >= 1 else f"step {step} is not supported"


# ------------------------------------------------------------------------------------------ configs

CONFIGS: tuple[OpConfig, ...] = (
    OpConfig("conv2d", (aten.convolution.default,), check=_conv),
    OpConfig("linear", (aten.linear.default,), check=_linear),
    OpConfig("matmul", (aten.bmm.default, aten.mm.default, aten.matmul.default), check=_matmul),
    OpConfig("binary", (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor,
                        aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar), check=_binary),
    OpConfig("activation", (aten.relu.default, aten.sigmoid.default, aten.tanh.default, aten.hardswish.default,
                            aten.hardsigmoid.default, aten.hardtanh.default, aten.clamp.default)),
    OpConfig("gelu", (aten.gelu.default,), check=_gelu),
    OpConfig("softmax", (aten._softmax.default,)),
    OpConfig("batch_norm", (aten._native_batch_norm_legit_no_training.default,), check=_batch_norm, quantized=False),
    OpConfig("layer_norm", (aten.native_layer_norm.default,), check=_layer_norm),
    OpConfig("pooling", (aten.max_pool2d_with_indices.default, aten.avg_pool2d.default),
             check=_pool),
    OpConfig("global_pooling", (aten.adaptive_avg_pool2d.default,), check=_adaptive_pool),
    OpConfig("mean", (aten.mean.dim,), check=_reduce),
    OpConfig("shape", (aten.view_copy.default, aten._unsafe_view.default, aten.squeeze_copy.dims,
                       aten.squeeze_copy.dim, aten.unsqueeze_copy.default, aten.permute_copy.default,
                       aten.clone.default, aten.alias_copy.default, aten.expand_copy.default)),
    OpConfig("slice", (aten.slice_copy.Tensor,), check=_slice),
    OpConfig("concat", (aten.cat.default,)),
    OpConfig("getitem", (operator.getitem,), check=_getitem),
)

#: ``{target: OpConfig}``.
BY_TARGET = {target: config for config in CONFIGS for target in config.targets}

#: Ops whose composite form the partitioner asks ``to_edge_transform_and_lower`` to keep (QNN has them whole).
KEEP_UNDECOMPOSED = (aten.linear.default, aten.matmul.default, aten.gelu.default, aten.hardswish.default, aten.hardsigmoid.default,
                     aten.adaptive_avg_pool2d.default)

#: Activations the HTP folds into the op before them (QNN's convolutions, FullyConnected and ElementWiseAdd
#: take a ReluMinMax): the producer's own result is not quantized, only the activation's
#: (``QnnQuantizer`` annotates the pair so, and the PT2E reference computes it the same way).
FUSED_ACTIVATIONS = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)
FUSING_PRODUCERS = (aten.convolution.default, aten.linear.default, aten.add.Tensor)


def fused_activation(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    """In a quantized Edge graph: the activation fused after ``node`` (its only user, an activation of
    :data:`FUSED_ACTIVATIONS` whose only users are ``quantize`` nodes), or ``None``."""
    if node.target not in FUSING_PRODUCERS or len(node.users) != 1:
        return None
    (user,) = node.users
    if user.target not in FUSED_ACTIVATIONS or user.args[0] is not node:
        return None
    quantize = torch.ops.quantized_decomposed.quantize_per_tensor.default
    return user if user.users and all(u.target is quantize for u in user.users) else None


#: Float dtypes the HTP takes in each precision (fp16 precision compiles float32 graphs to run in fp16).
FLOAT_DTYPES = (torch.float32,)


def check_node(node: torch.fx.Node, fp16: bool) -> Optional[str]:
    """``None`` if the HTP can run ``node`` in the given precision (ignoring its neighbours), else why not."""
    config = BY_TARGET.get(node.target)
    name = getattr(node.target, "__name__", str(node.target))
    if config is None:
        return f"{name} has no QNN HTP lowering in etkit (it runs on the CPU)"
    if fp16 and not config.fp16:
        return f"{config.name} is not lowered in fp16 precision"
    if not fp16 and not config.quantized:
        return f"{config.name} is not lowered in quantized precision"
    for value in [node, *node.all_input_nodes]:
        meta = tensor_meta(value)
        if meta is None:
            continue
        if any(not isinstance(d, int) for d in meta.shape):
            return f"dynamic shape {list(meta.shape)}: QNN graphs have static shapes (export without Dim ranges)"
        if meta.dim() > MAX_RANK:
            return f"{meta.dim()}-D tensor; the QNN HTP takes at most {MAX_RANK} dims"
    out = tensor_meta(node)
    if out is not None and out.dtype not in FLOAT_DTYPES:
        return f"its result is {out.dtype}; the QNN delegate computes on float32 values (quantized through QDQ)"
    return config.check(node)
