"""Which edge ops the Ethos-U lowering handles, by role, and the constraints checked at partition time.

Roles in a PT2E-quantized edge graph:

* ``quantize`` / ``dequantize`` (per tensor, int8): the boundaries of every quantized value;
* *compute* ops produce a new value whose quantization comes from the ``quantize`` node after them
  (convolution, linear, add, sub, mul, bmm/mm, mean, avg_pool2d, and unary ops lowered as a TABLE);
* *pass-through* ops keep the quantization of their input (view, permute, squeeze/unsqueeze, slice, cat,
  max_pool2d, clone) and activations (relu, hardtanh, clamp), lowered as CLAMP in the quantized domain.

Sources: TOSA 1.0 specification; Vela's supported-operator report (``vela --supported-ops-report``) and the
probes of docs/design/ethosu-route.md section 4.3 for the NPU constraints.
"""
from __future__ import annotations

import functools
import operator
from typing import Optional

import torch
from etkit.dialects.quantized import is_dequantize, is_quantize  # noqa: F401  (lower.py and the partitioner use ops.*)

aten = torch.ops.aten


def target_name(node: torch.fx.Node) -> str:
    t = node.target
    if t is operator.getitem:
        return "getitem"
    return getattr(t, "__name__", str(t)) if not isinstance(t, torch._ops.OpOverload) else \
        f"{t.namespace}.{t._schema.name.split('::')[-1]}.{t._overloadname}"


#: A PT2E weight's dequantize: per tensor or per output channel.
is_weight_dequantize = functools.partial(is_dequantize, per_channel=True)


ACTIVATIONS = {"aten.relu.default", "aten.hardtanh.default", "aten.clamp.default"}

#: Unary elementwise ops lowered as an int8 TABLE (256 entries computed with the op itself).
TABLE_OPS = {"aten.sigmoid.default", "aten.tanh.default", "aten.gelu.default", "aten.hardswish.default",
             "aten.hardsigmoid.default", "aten.silu.default", "aten.exp.default", "aten.elu.default",
             "aten.leaky_relu.default", "aten.neg.default", "aten.abs.default", "aten.erf.default",
             "aten.log.default", "aten.sqrt.default", "aten.rsqrt.default", "aten.reciprocal.default"}

COMPUTE = {"aten.convolution.default", "aten.linear.default", "aten.add.Tensor", "aten.sub.Tensor",
           "aten.mul.Tensor", "aten.mean.dim", "aten.sum.dim_IntList", "aten.avg_pool2d.default", "aten.bmm.default",
           "aten.mm.default", *TABLE_OPS}

PASS_THROUGH = {"aten.view_copy.default", "aten.permute_copy.default", "aten.squeeze_copy.dims",
                "aten.squeeze_copy.dim", "aten.unsqueeze_copy.default", "aten.slice_copy.Tensor", "aten.cat.default",
                "aten.max_pool2d_with_indices.default", "aten.max_pool2d.default", "aten.clone.default",
                "dim_order_ops._clone_dim_order.default", "aten.alias_copy.default", "aten.expand_copy.default",
                "aten.amax.default", "getitem", *ACTIVATIONS}


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _arg(node, index, name, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _rank(node) -> Optional[int]:
    v = _val(node)
    return v.dim() if isinstance(v, torch.Tensor) else None


def _pool_check(node, kernel, stride, padding, dilation, ceil_mode, u55: bool, avg: bool) -> Optional[str]:
    if _rank(node.args[0]) != 4:
        return "only 4-D (N, C, H, W) pooling is lowered"
    kernel = list(kernel) * (2 // len(kernel)) if kernel else kernel
    if dilation not in (None, 1, [1, 1], (1, 1), [1]):
        return "dilated pooling has no TOSA equivalent"
    if ceil_mode:
        return "ceil_mode=True is not lowered"
    if avg and any(padding or [0]) and u55 and max(kernel) > 8:
        return "average pooling with padding needs a kernel of at most 8x8 on Ethos-U55/U65"
    if max(kernel) > 256:
        return f"pooling kernel {kernel} is larger than the NPU supports (256)"
    return None


def constraint(node: torch.fx.Node, u55: bool) -> Optional[str]:
    """Why ``node`` (a compute or pass-through op) cannot be lowered for the target, or ``None``."""
    name = target_name(node)
    val = _val(node)
    if name == "aten.convolution.default":
        x, w = node.args[0], node.args[1]
        if _arg(node, 6, "transposed"):
            return "transposed convolution is not lowered"
        if _rank(x) != 4:
            return "only 2-D convolution (4-D input) is lowered"
        groups = _arg(node, 8, "groups", 1)
        c_in = _val(x).shape[1]
        if groups not in (1, c_in):
            return f"grouped convolution (groups={groups}, {c_in} input channels) is not lowered; only groups=1 or depthwise"
        stride = list(_arg(node, 3, "stride"))
        if max(stride) > 3 and u55 and groups != 1:
            return f"depthwise stride {stride} is above 3, which Ethos-U55/U65 do not support"
        wv = _val(w)
        if wv is not None and wv.shape[2] * wv.shape[3] > 4096:
            return "kernels of more than 4096 elements are not supported by the NPU"
        return None
    if name == "aten.linear.default":
        return None if _rank(node.args[0]) and _rank(node.args[0]) >= 1 else "linear input must be a tensor"
    if name in ("aten.add.Tensor", "aten.sub.Tensor"):
        if node.kwargs.get("alpha", 1) != 1 or (len(node.args) > 2 and node.args[2] != 1):
            return "alpha != 1 is not lowered"
        return None
    if name in ("aten.mean.dim", "aten.sum.dim_IntList"):
        if _arg(node, 3, "dtype") is not None:
            return f"{name.split('.')[1]} with a dtype argument is not lowered"
        return None
    if name == "aten.expand_copy.default":
        src = _val(node.args[0])
        if src is None or val is None or src.dim() != val.dim():
            return "expand that adds dimensions is not lowered (only size-1 dimensions repeated)"
        return None
    if name == "aten.avg_pool2d.default":
        kernel = list(node.args[1])
        stride = list(_arg(node, 2, "stride", None) or kernel)
        padding = list(_arg(node, 3, "padding", [0, 0]) or [0, 0])
        if _arg(node, 6, "divisor_override") is not None:
            return "divisor_override is not lowered"
        if any(padding) and _arg(node, 5, "count_include_pad", True):
            return "count_include_pad=True with padding: TOSA's AVG_POOL2D excludes padding from the count"
        return _pool_check(node, kernel, stride, padding, 1, _arg(node, 4, "ceil_mode", False), u55, True)
    if name in ("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default"):
        if name.startswith("aten.max_pool2d_with_indices") and any(
                u.target is operator.getitem and u.args[1] != 0 for u in node.users):
            return "the indices output of max_pool2d has no NPU equivalent"
        kernel = list(node.args[1])
        return _pool_check(node, kernel, list(_arg(node, 2, "stride", None) or kernel),
                           list(_arg(node, 3, "padding", [0, 0]) or [0, 0]), _arg(node, 4, "dilation", 1),
                           _arg(node, 5, "ceil_mode", False), u55, False)
    if name == "aten.slice_copy.Tensor":
        if _arg(node, 4, "step", 1) != 1:
            return "slices with step != 1 are not lowered"
        return None
    if name in ("aten.bmm.default", "aten.mm.default"):
        return None
    if name == "getitem":
        if not target_name(node.args[0]).startswith("aten.max_pool2d_with_indices"):
            return f"its producer {node.args[0].name} is not delegated"
        return None if node.args[1] == 0 else "the indices output of max_pool2d has no NPU equivalent"
    if name in COMPUTE or name in PASS_THROUGH:
        if isinstance(val, torch.Tensor) and val.dim() > 6:
            return "tensors of rank above 6 are not supported by TOSA's level 8K"
        return None
    return f"{name} has no Ethos-U lowering"


def is_compute(node) -> bool:
    return getattr(node, "op", None) == "call_function" and target_name(node) in COMPUTE


def is_pass_through(node) -> bool:
    return getattr(node, "op", None) == "call_function" and target_name(node) in PASS_THROUGH


#: Single-input ops that keep their input's quantization and may sit between a compute op and its quantize
#: node (``bmm -> view -> quantize``): the compute op is lowered into the quantize node's parameters first.
TAIL_OPS = {*ACTIVATIONS, "aten.view_copy.default", "aten.permute_copy.default", "aten.squeeze_copy.dims",
            "aten.squeeze_copy.dim", "aten.unsqueeze_copy.default", "aten.clone.default",
            "dim_order_ops._clone_dim_order.default", "aten.alias_copy.default"}


def is_tail(node) -> bool:
    return getattr(node, "op", None) == "call_function" and target_name(node) in TAIL_OPS


def is_activation(node) -> bool:
    return getattr(node, "op", None) == "call_function" and target_name(node) in ACTIVATIONS
