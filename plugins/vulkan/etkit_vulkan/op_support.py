"""Which edge ops the Vulkan delegate runs, one declarative entry per op family, each with the check that
decides a node and the reason the user sees when it does not (seed page "Operator Support", Vulkan).

A check returns ``None`` when the node can be delegated, else the reason. Shared rules, applied to every
op: float tensors are float32 or float16 (one of them per partition); tensors have at most 4 dimensions
(6 for view-like ops); only the positions listed per op may hold integer tensors (embedding indices, the
source of an integer-to-float ``_to_copy``). Elementwise ops take up to 6 dimensions (the shaders fold
leading dimensions; broadcasting over folded ones is refused).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch.export import ExportedProgram

from etkit.backend.utils import get_constant, is_constant
from etkit.dialects.quantized import (choose_qparams_ops, dynamic_dequantize_ops, dynamic_quantize_ops, torchao_op,
                                      weight_dequantize_ops)

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

FLOAT_DTYPES = (torch.float32, torch.float16)
MAX_DIMS = 4
MAX_VIEW_DIMS = 6

Check = Callable[[torch.fx.Node, ExportedProgram], Optional[str]]


TORCHAO_DEQUANTIZE = torchao_op("dequantize_affine")
TORCHAO_QUANTIZE = torchao_op("quantize_affine")
TORCHAO_CHOOSE_QPARAMS = torchao_op("choose_qparams_affine")
WEIGHT_DEQUANTIZE_OPS = weight_dequantize_ops()
CHOOSE_QPARAMS_OPS = choose_qparams_ops()
ACT_QUANTIZE_OPS = dynamic_quantize_ops()
ACT_DEQUANTIZE_OPS = dynamic_dequantize_ops()


@dataclass(frozen=True)
class OpFamily:
    """Ops the delegate implements the same way, and the check deciding each node.

    Attributes:
        name: shown in reports and docs.
        targets: the edge ops.
        check: extra constraints beyond the shared rules (``None`` when there are none).
        keep_undecomposed: composite ops ``to_edge_transform_and_lower`` must keep for this family.
        int_inputs: argument positions that may hold integer tensors.
        max_dims: the largest rank of any tensor the op touches.
    """

    name: str
    targets: tuple
    check: Optional[Check] = None
    keep_undecomposed: tuple = ()
    int_inputs: tuple = ()
    max_dims: int = MAX_DIMS
    #: the check alone decides (quantize/dequantize nodes carry integer tensors the shared rules refuse)
    quantization: bool = False


_ACCESS_INNER = getattr(getattr(torch.ops, "export", None), "access_subclass_inner_tensor", None)


def constant_value(node, ep) -> Optional[torch.Tensor]:
    """The value of a constant placeholder, or of an inner tensor of one read through
    ``export.access_subclass_inner_tensor`` (torchao's quantized weights before decomposition); else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "placeholder":
        return get_constant(ep, node) if is_constant(ep, node) else None
    if _ACCESS_INNER is not None and node.op == "call_function" and node.target is _ACCESS_INNER.default:
        outer = constant_value(node.args[0], ep)
        inner = getattr(outer, node.args[1], None) if outer is not None else None
        return inner if isinstance(inner, torch.Tensor) else None
    return None


def _val(x):
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else None


def tensor_outputs(node: torch.fx.Node) -> list:
    val = _val(node)
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return []


def _const(node, ep) -> bool:
    return constant_value(node, ep) is not None


def _check_conv(node, ep) -> Optional[str]:
    x, w, b = node.args[0], node.args[1], node.args[2]
    if node.args[6]:
        return "transposed convolution is not implemented"
    if _val(x).dim() != 4:
        return f"{_val(x).dim() - 2}-D convolution; only 2-D (N, C, H, W) is implemented"
    if not _const(w, ep):
        return "weight is not a constant"
    if b is not None and not _const(b, ep):
        return "bias is not a constant"
    return None


def _check_linear(node, ep) -> Optional[str]:
    w, b = node.args[1], node.args[2] if len(node.args) > 2 else None
    if not (_const(w, ep) or dequantized_weight(w, ep) is not None):
        return "weight is not a constant (nor a dequantized constant: symmetric int8/int4 weights)"
    if _val(w).dim() != 2:
        return "weight is not 2-D"
    if b is not None and not _const(b, ep):
        return "bias is not a constant"
    return None


def _check_matmul(node, ep) -> Optional[str]:
    a, b = _val(node.args[0]), _val(node.args[1])
    if a.dim() != b.dim():
        return f"operands of rank {a.dim()} and {b.dim()}; both must have the same rank"
    return None


def _check_layer_norm(node, ep) -> Optional[str]:
    shape = list(node.args[1])
    x = _val(node.args[0])
    if len(shape) != 1:
        return f"normalised over {len(shape)} dims; only the last dimension is implemented"
    for p in node.args[2:4]:
        if p is not None and not _const(p, ep):
            return "weight or bias is not a constant"
    if node.target is aten.native_layer_norm.default and any(
            u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        return "mean or rstd output is used"
    return None if x.dim() >= 1 else "0-D input"


def _check_folded_dim(dim_arg: int) -> Check:
    def check(node, ep):
        x = _val(node.args[0])
        dims = node.args[dim_arg] if len(node.args) > dim_arg else None
        if dims is None:
            return None if x.dim() <= MAX_DIMS else "reduction of every dim of a tensor of rank > 4"
        dims = [dims] if isinstance(dims, int) else list(dims)
        if x.dim() > MAX_DIMS and any((d % x.dim()) < x.dim() - 3 for d in dims):
            return "over a leading dimension of a tensor of rank > 4"
        return None
    return check


def _check_pool(node, ep) -> Optional[str]:
    if _val(node.args[0]).dim() != 4:
        return "only 4-D (N, C, H, W) inputs are implemented"
    if node.target is aten.max_pool2d_with_indices.default and any(
            u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        return "the indices output is used"
    return None


def _check_batch_norm(node, ep) -> Optional[str]:
    if not all(a is None or _const(a, ep) for a in node.args[1:5]):
        return "weight, bias, running mean or variance is not a constant"
    if not 2 <= _val(node.args[0]).dim() <= 4:
        return "input rank must be 2, 3 or 4"
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        return "the saved mean or invstd output is used"
    return None


def _check_embedding(node, ep) -> Optional[str]:
    if not _const(node.args[0], ep):
        return "the table is not a constant"
    if _val(node.args[1]).dtype not in (torch.int32, torch.int64):
        return "indices are not int32/int64"
    return None


def _check_to_copy(node, ep) -> Optional[str]:
    out = _val(node)
    if out.dtype not in FLOAT_DTYPES:
        return f"converts to {out.dtype}; only conversions to float are implemented"
    src = _val(node.args[0])
    if src.dtype in FLOAT_DTYPES and src.dtype != out.dtype:
        return f"{src.dtype} -> {out.dtype}: a Vulkan partition computes in one float type"
    if src.dtype not in FLOAT_DTYPES + (torch.int32, torch.int64):
        return f"converts from {src.dtype}"
    return None


def _check_cat(node, ep) -> Optional[str]:
    out = _val(node)
    dim = node.args[1] if len(node.args) > 1 else 0
    if out.dim() > MAX_DIMS and dim % out.dim() < out.dim() - 3:
        return "along a leading dimension of a tensor of rank > 4"
    return None


def _check_binary(node, ep) -> Optional[str]:
    out = _val(node)
    if out is None or out.dim() <= MAX_DIMS:
        return None
    lead = list(out.shape[:-3])
    for a in node.args[:2]:
        v = _val(a)
        if isinstance(v, torch.Tensor):
            mine = [1] * (out.dim() - v.dim()) + list(v.shape)
            if mine[:-3] != lead and any(s != 1 for s in mine[:-3]):
                return "broadcasts over the leading dimensions of a tensor of rank > 4"
    return None


def _check_clamp(node, ep) -> Optional[str]:
    if any(isinstance(a, torch.fx.Node) for a in node.args[1:]):
        return "bounds are tensors; only scalar bounds are implemented"
    return None


def _check_div_mode(node, ep) -> Optional[str]:
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    return None if mode in (None, "floor") else f"rounding_mode={mode!r} is not implemented"


def dequantized_weight(node, ep):
    """For a weight produced by dequantizing a constant with symmetric int8/int4 values (PT2E
    ``dequantize_per_channel`` / ``dequantize_per_tensor`` or torchao ``dequantize_affine``):
    ``(int values [N, K] as int8, scales [N, K // group] float32, group_size, bits)``; else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or node.target not in WEIGHT_DEQUANTIZE_OPS:
        return None
    q = constant_value(node.args[0], ep)
    if q is None or q.dim() != 2 or q.dtype not in (torch.int8,):
        return None
    n, k = q.shape
    args = list(node.args) + [None] * 8
    if node.target is qd.dequantize_per_channel.default:
        scales, zps, axis, qmin, qmax = args[1:6]
        if axis != 0 or not (_const(scales, ep) and _const(zps, ep)):
            return None
        s, z = constant_value(scales, ep), constant_value(zps, ep)
        if s.numel() != n or bool((z != 0).any()):
            return None
        scale = s.reshape(n, 1).to(torch.float32)
        group = k
    elif node.target is qd.dequantize_per_tensor.default:
        s, z, qmin, qmax = args[1:5]
        if isinstance(s, torch.fx.Node) or z != 0:
            return None
        scale = torch.full((n, 1), float(s))
        group = k
    else:
        block, scales, zps, _, qmin, qmax = args[1:7]
        if not (_const(scales, ep)) or (zps is not None and not _const(zps, ep)):
            return None
        block = list(block)
        if len(block) != 2 or block[0] != 1 or k % block[1]:
            return None
        group = block[1]
        s = constant_value(scales, ep).to(torch.float32)
        if zps is not None and bool((constant_value(zps, ep) != 0).any()):
            return None
        if s.numel() != n * (k // group):
            return None
        scale = s.reshape(n, k // group)
    if (qmin, qmax) in ((-8, 7),):
        bits = 4
    elif qmin is not None and qmin >= -128 and qmax <= 127:
        bits = 8
    else:
        return None
    return q, scale, group, bits


def _check_weight_dequantize(node, ep) -> Optional[str]:
    if dequantized_weight(node, ep) is None:
        return "not a symmetric int8/int4 weight dequantization of a constant [N, K] (zero points 0)"
    users = list(node.users)
    if not users or any(u.target is not aten.linear.default or u.args[1] is not node for u in users):
        return "the dequantized weight is read by something other than a linear's weight"
    return None


@dataclass(frozen=True)
class DynamicQuantChain:
    """An activation quantized with parameters computed at run time and dequantized again:
    ``choose_qparams(x) -> (scale, zero_point) -> quantize(x) -> dequantize`` (PT2E per tensor, or torchao
    ``ASYMMETRIC`` with per-row blocks ``[1, .., 1, K]`` or one block for the whole tensor)."""

    choose: torch.fx.Node
    getters: tuple
    quantize: torch.fx.Node
    dequantize: torch.fx.Node
    source: torch.fx.Node
    qmin: int
    qmax: int
    eps: float
    per_row: bool

    @property
    def nodes(self) -> tuple:
        return (self.choose, *self.getters, self.quantize, self.dequantize)


def _qparams(node: torch.fx.Node) -> tuple:
    """(scale, zero_point) arguments of a quantize / dequantize (PT2E: args 1, 2; torchao: args 2, 3)."""
    i = 2 if node.target in (TORCHAO_QUANTIZE, TORCHAO_DEQUANTIZE) else 1
    return tuple(node.args[i:i + 2])


def _chooser(node) -> Optional[torch.fx.Node]:
    scale = _qparams(node)[0] if isinstance(node, torch.fx.Node) and len(node.args) > 2 else None
    return scale.args[0] if isinstance(scale, torch.fx.Node) and scale.target is operator.getitem else None


def dynamic_chain(node: torch.fx.Node) -> tuple[Optional[DynamicQuantChain], str]:
    """The run-time quantization chain ``node`` belongs to, or ``(None, reason)``."""
    choose = node
    if node.target is operator.getitem:
        choose = node.args[0]
    elif node.target in ACT_QUANTIZE_OPS:
        choose = _chooser(node)
    elif node.target in ACT_DEQUANTIZE_OPS:
        q = node.args[0]
        choose = _chooser(q) if isinstance(q, torch.fx.Node) and q.target in ACT_QUANTIZE_OPS else None
    if not isinstance(choose, torch.fx.Node) or choose.target not in CHOOSE_QPARAMS_OPS:
        return None, "not part of a run-time activation quantization (choose_qparams -> quantize -> dequantize)"
    x = choose.args[0]
    xval = _val(x)
    if not isinstance(xval, torch.Tensor) or xval.dtype != torch.float32 or xval.dim() == 0:
        return None, "the quantized activation is not a float32 tensor"
    getters = sorted(choose.users, key=lambda u: u.args[1] if u.target is operator.getitem else -1)
    if [g.args[1] if g.target is operator.getitem else None for g in getters] != [0, 1]:
        return None, "choose_qparams' results are not read as (scale, zero_point)"
    scale, zp = getters
    quants = [u for u in x.users if u.target in ACT_QUANTIZE_OPS]
    q = next((u for u in quants if u.args[0] is x and _qparams(u) == (scale, zp)), None)
    if q is None or len(q.users) != 1:
        return None, "the quantized value is not read by exactly one dequantize"
    dq = next(iter(q.users))
    torchao = choose.target is TORCHAO_CHOOSE_QPARAMS
    if dq.target not in ACT_DEQUANTIZE_OPS or (dq.target is TORCHAO_DEQUANTIZE) != torchao:
        return None, "the quantized value is not dequantized"
    if set(scale.users) | set(zp.users) != {q, dq}:
        return None, "the scale or zero point is read outside the quantize -> dequantize pair"
    if torchao:
        mapping, block, dtype, qmin, qmax, eps = (list(choose.args) + [None] * 7)[1:7]
        if str(mapping) != "ASYMMETRIC":
            return None, f"torchao mapping {mapping}; only ASYMMETRIC activations are implemented"
        block = list(block)
        shape = list(xval.shape)
        per_row = block == [1] * (len(shape) - 1) + [shape[-1]]
        if not per_row and block != shape:
            return None, f"block size {block}: only per-row ([1, .., 1, K]) or per-tensor blocks are implemented"
        if list(q.args[1]) != block or list(dq.args[1]) != block or _qparams(dq) != (scale, zp):
            return None, "quantize and dequantize disagree with choose_qparams"
        eps = float(torch.finfo(torch.float32).eps) if eps is None else float(eps)
    else:
        qmin, qmax, eps, dtype = choose.args[1:5]
        if _qparams(dq) != (scale, zp):
            return None, "quantize and dequantize disagree with choose_qparams"
        per_row = False
    if dtype != torch.int8 or qmin is None or qmax is None or not -128 <= qmin < qmax <= 127:
        return None, f"{dtype} over [{qmin}, {qmax}]: only int8 activations are implemented"
    return DynamicQuantChain(choose, (scale, zp), q, dq, x, int(qmin), int(qmax), float(eps), per_row), ""


def _check_quantization(node, ep) -> Optional[str]:
    """Weight dequantizations read by linears, or whole run-time activation quantization chains."""
    if node.target in WEIGHT_DEQUANTIZE_OPS and node.target not in ACT_DEQUANTIZE_OPS:
        return _check_weight_dequantize(node, ep)
    if node.target is TORCHAO_DEQUANTIZE and dequantized_weight(node, ep) is not None:
        return _check_weight_dequantize(node, ep)
    chain, why = dynamic_chain(node)
    return None if chain is not None else why


BINARY = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.pow.Tensor_Tensor,
          aten.pow.Tensor_Scalar, aten.maximum.default, aten.minimum.default, aten.add.Scalar, aten.sub.Scalar,
          aten.mul.Scalar, aten.div.Scalar, aten.rsub.Scalar, aten.remainder.Scalar, aten.remainder.Tensor)
UNARY = (aten.relu.default, aten.sigmoid.default, aten.tanh.default, aten.gelu.default, aten.hardswish.default,
         aten.hardsigmoid.default, aten.silu.default, aten.exp.default, aten.log.default, aten.sqrt.default,
         aten.rsqrt.default, aten.abs.default, aten.neg.default, aten.leaky_relu.default, aten.elu.default,
         aten.sin.default, aten.cos.default, aten.reciprocal.default, aten.erf.default, aten.floor.default,
         aten.ceil.default, aten.round.default, aten.sign.default, aten.softplus.default, aten.clone.default,
         aten.alias_copy.default)
VIEWS = (aten.view_copy.default, aten.squeeze_copy.dims,
         aten.unsqueeze_copy.default, aten.permute_copy.default, aten.expand_copy.default, aten.slice_copy.Tensor,
         aten.select_copy.int)

FAMILIES: tuple[OpFamily, ...] = (
    OpFamily("binary arithmetic", BINARY, _check_binary, max_dims=MAX_VIEW_DIMS),
    OpFamily("division with rounding", (aten.div.Tensor_mode,), _check_div_mode, max_dims=MAX_VIEW_DIMS),
    OpFamily("unary functions", UNARY,
             keep_undecomposed=(aten.gelu.default, aten.hardswish.default, aten.hardsigmoid.default,
                                aten.silu.default, aten.leaky_relu.default, aten.elu.default, aten.softplus.default),
             max_dims=MAX_VIEW_DIMS),
    OpFamily("clamp", (aten.clamp.default, aten.hardtanh.default), _check_clamp,
             keep_undecomposed=(aten.hardtanh.default,), max_dims=MAX_VIEW_DIMS),
    OpFamily("convolution", (aten.convolution.default,), _check_conv),
    OpFamily("linear", (aten.linear.default,), _check_linear, keep_undecomposed=(aten.linear.default,)),
    OpFamily("quantization", tuple(dict.fromkeys(WEIGHT_DEQUANTIZE_OPS + CHOOSE_QPARAMS_OPS + ACT_QUANTIZE_OPS +
                                                 ACT_DEQUANTIZE_OPS)), _check_quantization,
             keep_undecomposed=tuple(op for op in (TORCHAO_DEQUANTIZE, TORCHAO_QUANTIZE, TORCHAO_CHOOSE_QPARAMS)
                                     if op is not None), quantization=True),
    OpFamily("matrix product", (aten.bmm.default, aten.mm.default), _check_matmul),
    OpFamily("views and copies", VIEWS, max_dims=MAX_VIEW_DIMS),
    OpFamily("concatenation", (aten.cat.default,), _check_cat),
    OpFamily("dtype conversion", (aten._to_copy.default,), _check_to_copy, int_inputs=(0,)),
    OpFamily("reduction", (aten.mean.dim, aten.sum.dim_IntList, aten.amax.default, aten.amin.default),
             _check_folded_dim(1)),
    OpFamily("softmax", (aten._softmax.default, aten._log_softmax.default, aten._safe_softmax.default),
             _check_folded_dim(1), keep_undecomposed=(aten._safe_softmax.default,)),
    OpFamily("layer norm", (aten.layer_norm.default, aten.native_layer_norm.default), _check_layer_norm,
             keep_undecomposed=(aten.layer_norm.default,)),
    OpFamily("pooling", (aten.max_pool2d_with_indices.default, aten.avg_pool2d.default,
                         aten._adaptive_avg_pool2d.default), _check_pool),
    OpFamily("batch norm", (aten._native_batch_norm_legit_no_training.default,), _check_batch_norm),
    OpFamily("embedding", (aten.embedding.default,), _check_embedding, int_inputs=(1,)),
)

#: edge op -> its family.
BY_TARGET = {t: f for f in FAMILIES for t in f.targets}
#: Python operators on SymInts the delegate evaluates on the host when shapes change.
SYM_OPS = {operator.add: "sym.add", operator.sub: "sym.sub", operator.mul: "sym.mul", operator.floordiv: "sym.floordiv"}


def supported_targets() -> list:
    """Every edge op some family accepts (for docs and coverage tests)."""
    return list(BY_TARGET)
