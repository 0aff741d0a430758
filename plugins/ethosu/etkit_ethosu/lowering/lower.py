"""Lower one Ethos-U partition (a PT2E-quantized edge subgraph) to a TOSA 1.0 INT flatbuffer.

Every float tensor of the partition is represented by an integer tensor and its quantization
(``real = scale * (q - zero_point)``). A compute op is lowered where the ``quantize`` node after it is
met, so it writes int8 directly in that node's quantization (with the activations between them folded in
as CLAMP); pass-through ops work on their input's integers. The arithmetic follows ExecuTorch's Arm
lowering, so results match the PT2E reference model within 1 LSB (each RESCALE rounds once, half up):

* CONV2D / DEPTHWISE_CONV2D with an int32 bias at scale ``s_x * s_w[o]``, then a per-channel RESCALE;
  ``linear`` is a 1x1 CONV2D on ``[N, 1, 1, IC]`` (TOSA 1.0 has no fully connected operator);
* ADD / SUB in int32 after rescaling both operands to a shared scale ``2 * max(s_a, s_b) / 2**20``;
* MUL in int32 (zero points removed), output scale ``s_a * s_b``; MATMUL likewise;
* mean as REDUCE_SUM in int32 followed by one RESCALE by ``s_in / (count * s_out)``;
* unary ops (sigmoid, tanh, gelu, ...) as a 256-entry int8 TABLE computed with the op itself on every
  input value, i.e. exactly the PT2E reference's ``quantize(op(dequantize(q)))``.

Layout: the delegate's inputs and outputs keep PyTorch's layout (NCHW); convolutions and pooling run in
NHWC, and a value stays NHWC as long as only layout-agnostic ops use it (TRANSPOSEs are inserted lazily).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import torch
from torch.export import ExportedProgram

from etkit.backend.utils import get_constant, is_constant, is_user_input

from . import ops
from .errors import LoweringError
from .tosa_writer import TosaWriter

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)
_INT32_SHARED_SHIFT = 20  # ExecuTorch's InsertRescaleInt32Pass: operands are shifted left by about 20 bits


@dataclass(frozen=True)
class QValue:
    """A quantized tensor of the TOSA graph.

    Attributes:
        name: TOSA tensor name.
        shape: PyTorch shape (logical, NCHW for images).
        dtype: ``"INT8"`` or ``"INT32"``.
        scale, zp: ``real = scale * (q - zp)``; ``scale`` is ``None`` for a raw partition input whose
            quantization comes from the ``dequantize`` that reads it.
        layout: ``"nchw"`` (PyTorch order) or ``"nhwc"`` (4-D only: the TOSA tensor is ``shape`` permuted).
    """

    name: str
    shape: tuple
    dtype: str = "INT8"
    scale: Optional[float] = None
    zp: int = 0
    layout: str = "nchw"

    @property
    def physical_shape(self) -> list:
        if self.layout == "nhwc":
            return [self.shape[p] for p in NCHW_TO_NHWC]
        return list(self.shape)


@dataclass
class LoweredTosa:
    """A partition's TOSA graph.

    Attributes:
        flatbuffer: the TOSA 1.0 flatbuffer bytes.
        input_shapes, output_shapes: delegate I/O in argument order (int8, PyTorch layout).
        operators: TOSA operator names in emission order (CONST tensors excluded).
        owners: ``{TOSA tensor name: Edge debug handles}`` for each tensor an operator wrote, and each constant
            made for one: the Edge nodes (a quantize node, the op it quantizes, the activations and views folded
            between them, the dequantize nodes feeding the op) whose lowering wrote it. Vela names its
            per-layer rows after these tensors.
    """

    flatbuffer: bytes
    input_shapes: list
    output_shapes: list
    operators: list
    owners: dict = field(default_factory=dict)


def _handles(nodes) -> tuple:
    """The Edge debug handles of ``nodes`` (fx nodes; others and nodes without a handle are skipped)."""
    found = {n.meta.get("debug_handle") for n in nodes if isinstance(n, torch.fx.Node)}
    return tuple(sorted(h for h in found if isinstance(h, int) and h > 0))


def _shape(node) -> tuple:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise LoweringError(f"node {node.name} has no tensor shape (meta['val'])")
    return tuple(int(d) for d in val.shape)


def _arg(node, index, name, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _pair(v) -> list:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


def _quantize_scalar(value: float, scale: float, zp: int) -> int:
    """``quantize_per_tensor`` of one value, int8, with PyTorch's rounding (the PT2E reference's)."""
    q = torch.ops.quantized_decomposed.quantize_per_tensor(torch.tensor([float(value)]), scale, zp, -128, 127,
                                                            torch.int8)
    return int(q[0])


class _Lowerer:
    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        self.w = TosaWriter()
        self.values: dict = {}        # node -> QValue (dequantize and pass-through nodes)
        self.quantized: dict = {}     # quantize node -> QValue
        self._layouts: dict = {}      # (tensor name, layout) -> QValue

    # ---- values --------------------------------------------------------------------------------------

    def constant(self, node) -> torch.Tensor:
        value = get_constant(self.ep, node) if isinstance(node, torch.fx.Node) else None
        if value is None:
            raise LoweringError(f"{getattr(node, 'name', node)} must be a constant of the program")
        return value.detach()

    def q(self, node) -> QValue:
        """The int8 value of a ``quantize`` node (lowering its producer on first use)."""
        if node not in self.quantized:
            self.quantized[node] = self._lower_quantize(node)
        return self.quantized[node]

    def real(self, node) -> QValue:
        """The quantized value standing for float node ``node``."""
        if node in self.values:
            return self.values[node]
        if ops.is_dequantize(node):
            src = node.args[0]
            scale, zp = float(node.args[1]), int(node.args[2])
            if node.args[5] != torch.int8 or (node.args[3], node.args[4]) != (-128, 127):
                raise LoweringError(f"{node.name}: only int8 [-128, 127] activations are lowered")
            if ops.is_quantize(src):
                base = self.q(src)
            elif src in self.values:
                base = self.values[src]
            elif src.op == "placeholder" and is_constant(self.ep, src):
                data = self.constant(src)
                if data.dtype != torch.int8:
                    raise LoweringError(f"{node.name} dequantizes {src.name}, which is {data.dtype}, not int8")
                base = QValue(self.w.const(src.name, data.numpy(), "INT8"), tuple(data.shape))
            else:
                raise LoweringError(f"{node.name} dequantizes {src.name}, which is not an int8 partition input")
            value = replace(base, scale=scale, zp=zp)
        elif ops.is_pass_through(node):
            value = self._pass_through(node)
        elif ops.is_compute(node):
            raise LoweringError(f"{node.name} ({ops.target_name(node)}) is not followed by a quantize node; the "
                                f"Ethos-U lowering needs every computed value quantized (use EthosUQuantizer)")
        else:
            raise LoweringError(f"{node.name} ({ops.target_name(node)}) has no Ethos-U lowering")
        self.values[node] = value
        return value

    def layout(self, v: QValue, layout: str) -> QValue:
        if v.layout == layout or len(v.shape) != 4:
            return v
        key = (v.name, layout)
        if key not in self._layouts:
            perms = NCHW_TO_NHWC if layout == "nhwc" else NHWC_TO_NCHW
            target = replace(v, layout=layout)
            if v.shape[2] == 1 and v.shape[3] == 1:  # H = W = 1: the same bytes in both orders
                name = self.w.reshape(v.name, target.physical_shape, v.dtype)
            else:
                name = self.w.transpose(v.name, v.physical_shape, perms, v.dtype)
            self._layouts[key] = replace(target, name=name)
            self._layouts[(name, v.layout)] = v
        return self._layouts[key]

    def rescale_to(self, v: QValue, scale: float, zp: int, dtype: str = "INT8") -> QValue:
        if v.dtype == dtype and v.scale == scale and v.zp == zp:
            return v
        name = self.w.rescale(v.name, v.dtype, v.zp, [v.scale / scale], v.physical_shape, dtype, zp)
        return replace(v, name=name, dtype=dtype, scale=scale, zp=zp)

    def to_int32(self, v: QValue, scale: float) -> QValue:
        """``v`` as int32 at ``scale`` with zero point 0."""
        return self.rescale_to(v, scale, 0, "INT32")

    # ---- quantize nodes: compute ops and activation tails -----------------------------------------------

    def _lower_quantize(self, qnode) -> QValue:
        scale, zp = float(qnode.args[1]), int(qnode.args[2])
        if qnode.args[5] != torch.int8 or (qnode.args[3], qnode.args[4]) != (-128, 127):
            raise LoweringError(f"{qnode.name}: only int8 [-128, 127] activations are lowered")
        src, tail = qnode.args[0], []
        while ops.is_tail(src) and len(src.users) == 1 and src not in self.values:
            tail.insert(0, src)
            src = src.args[0]
        outer = self.w.owner
        self.w.owner = _handles([qnode, *tail, src] + [a for a in src.args if ops.is_dequantize(a)])
        try:
            if not ops.is_compute(src):  # no compute op under the tail: lower the chain on its input's integers
                return self.rescale_to(self.real(qnode.args[0]), scale, zp)
            value = self._compute(src, scale, zp)
            for op in tail:
                value = self._pass_through(op, value)
            return value
        finally:
            self.w.owner = outer

    def _clamp(self, act, v: QValue) -> QValue:
        name = ops.target_name(act)
        if name == "aten.relu.default":
            low, high = 0.0, None
        elif name == "aten.hardtanh.default":
            low, high = float(_arg(act, 1, "min_val", -1.0)), float(_arg(act, 2, "max_val", 1.0))
        else:
            low, high = _arg(act, 1, "min"), _arg(act, 2, "max")
            if isinstance(low, torch.fx.Node) or isinstance(high, torch.fx.Node):
                raise LoweringError(f"{act.name}: clamp bounds must be numbers")
        qlow = -128 if low is None else _quantize_scalar(low, v.scale, v.zp)
        qhigh = 127 if high is None else _quantize_scalar(high, v.scale, v.zp)
        if v.dtype != "INT8":
            raise LoweringError(f"{act.name}: activation on a non-int8 value")
        return replace(v, name=self.w.clamp(v.name, v.physical_shape, "INT8", qlow, qhigh))

    def _compute(self, node, scale: float, zp: int) -> QValue:
        name = ops.target_name(node)
        if name == "aten.convolution.default":
            return self._conv(node, scale, zp)
        if name == "aten.linear.default":
            return self._linear(node, scale, zp)
        if name in ("aten.add.Tensor", "aten.sub.Tensor"):
            return self._add_sub(node, scale, zp, "ADD" if name == "aten.add.Tensor" else "SUB")
        if name == "aten.mul.Tensor":
            return self._mul(node, scale, zp)
        if name == "aten.mean.dim":
            return self._mean(node, scale, zp)
        if name == "aten.sum.dim_IntList":
            return self._mean(node, scale, zp, average=False)
        if name == "aten.avg_pool2d.default":
            return self._avg_pool(node, scale, zp)
        if name in ("aten.bmm.default", "aten.mm.default"):
            return self._matmul(node, scale, zp)
        if name in ops.TABLE_OPS:
            return self._table(node, scale, zp)
        raise LoweringError(f"{node.name}: {name} has no Ethos-U lowering")

    # ---- convolution and linear --------------------------------------------------------------------------

    def _weight(self, node) -> tuple[np.ndarray, np.ndarray]:
        """``(int8 weights, per-output-channel scales)`` of a quantized constant weight."""
        if not ops.is_weight_dequantize(node):
            raise LoweringError(f"{node.name}: weights must be quantized constants (dequantize of an int8 constant)")
        q = self.constant(node.args[0])
        if q.dtype != torch.int8:
            raise LoweringError(f"{node.name}: weights must be int8, not {q.dtype}")
        if node.target == torch.ops.quantized_decomposed.dequantize_per_channel.default:
            scales = self.constant(node.args[1]).double().numpy()
            zps = node.args[2]
            zps = self.constant(zps).numpy() if isinstance(zps, torch.fx.Node) else np.zeros_like(scales)
            if node.args[3] != 0:
                raise LoweringError(f"{node.name}: per-channel weights must be quantized along axis 0")
        else:
            scales = np.full(q.shape[0], float(node.args[1]))
            zps = np.full(q.shape[0], int(node.args[2]))
        if np.any(zps != 0):
            raise LoweringError(f"{node.name}: weights must be symmetric (zero point 0); use EthosUQuantizer")
        return q.numpy(), scales

    def _bias(self, node, acc_scales: np.ndarray, channels: int) -> np.ndarray:
        if node is None:
            return np.zeros(channels, dtype=np.int32)
        if ops.is_weight_dequantize(node):  # a quantized bias (ExecuTorch's quantizer makes int32 ones)
            qd = torch.ops.quantized_decomposed
            args = [self.constant(a) if isinstance(a, torch.fx.Node) else a for a in node.args]
            bias = (qd.dequantize_per_channel(*args) if node.target == qd.dequantize_per_channel.default
                    else qd.dequantize_per_tensor(*args)).double().numpy()
        else:
            bias = self.constant(node).double().numpy()
        q = np.round(bias / acc_scales)
        if np.any(np.abs(q) >= 2 ** 31):
            raise LoweringError(f"{node.name}: the bias does not fit int32 at the accumulator's scale")
        return q.astype(np.int32)

    def _conv_core(self, x: QValue, wq: np.ndarray, w_scales: np.ndarray, bias, stride, padding, dilation,
                   depthwise: bool, out_shape_nchw: tuple, scale: float, zp: int, name: str) -> QValue:
        """CONV2D/DEPTHWISE_CONV2D of NHWC ``x`` + per-channel RESCALE to int8 at ``(scale, zp)``."""
        x = self.layout(x, "nhwc")
        n, c_out, oh, ow = out_shape_nchw
        kh, kw = wq.shape[2], wq.shape[3]
        pads = []
        in_hw = [x.shape[2], x.shape[3]]
        for axis in range(2):
            size = in_hw[axis] - 1 + 2 * padding[axis] - dilation[axis] * ((kh, kw)[axis] - 1)
            extra = size % stride[axis]  # TOSA needs the output size to divide exactly
            pads.append([padding[axis], padding[axis] - extra])
        if pads[0][1] < 0 or pads[1][1] < 0:  # trim input rows/columns the window never reaches
            trim_h, trim_w = max(0, -pads[0][1]), max(0, -pads[1][1])
            sliced = [x.physical_shape[0], in_hw[0] - trim_h, in_hw[1] - trim_w, x.physical_shape[3]]
            out = self.w.tensor("trimmed", sliced, "INT8")
            self.w.op("SLICE", [x.name, self.w.shape_const([0, 0, 0, 0]), self.w.shape_const(sliced)], [out],
                      "SliceAttribute")
            x = replace(x, name=out, shape=(sliced[0], sliced[3], sliced[1], sliced[2]))
            pads = [[pads[0][0], max(0, pads[0][1])], [pads[1][0], max(0, pads[1][1])]]
        acc_scales = x.scale * w_scales
        bias_q = self._bias(bias, acc_scales, c_out)
        if depthwise:
            c_in = x.shape[1]
            multiplier = c_out // c_in
            # torch [C*M, 1, KH, KW] -> TOSA [KH, KW, C, M]
            weights = wq.reshape(c_in, multiplier, kh, kw).transpose(2, 3, 0, 1)
            op, attribute = "DEPTHWISE_CONV2D", "DepthwiseConv2dAttribute"
        else:
            weights = wq.transpose(0, 2, 3, 1)  # OIHW -> OHWI
            op, attribute = "CONV2D", "Conv2dAttribute"
        acc = self.w.tensor(f"{name}_acc", [n, oh, ow, c_out], "INT32")
        inputs = [x.name, self.w.const(f"{name}_weight", weights, "INT8"), self.w.const(f"{name}_bias", bias_q, "INT32"),
                  self.w.const("input_zp", [x.zp], "INT8"), self.w.const("weight_zp", [0], "INT8")]
        self.w.op(op, inputs, [acc], attribute, [pads[0][0], pads[0][1], pads[1][0], pads[1][1]], list(stride),
                  list(dilation), False, self.w.dtype("INT32"))
        out = self.w.rescale(acc, "INT32", 0, list(acc_scales / scale), [n, oh, ow, c_out], "INT8", zp)
        return QValue(out, out_shape_nchw, "INT8", scale, zp, "nhwc")

    def _conv(self, node, scale, zp) -> QValue:
        x = self.real(node.args[0])
        wq, w_scales = self._weight(node.args[1])
        bias = node.args[2]
        groups = _arg(node, 8, "groups", 1)
        depthwise = groups != 1
        if depthwise and groups != x.shape[1]:
            raise LoweringError(f"{node.name}: grouped convolution is not lowered")
        return self._conv_core(x, wq, w_scales, bias, _pair(node.args[3]), _pair(node.args[4]), _pair(node.args[5]),
                               depthwise, _shape(node), scale, zp, node.name)

    def _linear(self, node, scale, zp) -> QValue:
        x = self.layout(self.real(node.args[0]), "nchw")
        wq, w_scales = self._weight(node.args[1])
        bias = _arg(node, 2, "bias")
        out_shape = _shape(node)
        k = x.shape[-1]
        rows = int(np.prod(x.shape[:-1])) if len(x.shape) > 1 else 1
        flat = replace(x, name=self.w.reshape(x.name, [rows, 1, 1, k], "INT8"), shape=(rows, k, 1, 1), layout="nhwc")
        y = self._conv_core(flat, wq.reshape(wq.shape[0], k, 1, 1), w_scales, bias, [1, 1], [0, 0], [1, 1], False,
                            (rows, wq.shape[0], 1, 1), scale, zp, node.name)
        return QValue(self.w.reshape(y.name, list(out_shape), "INT8"), out_shape, "INT8", scale, zp, "nchw")

    # ---- elementwise --------------------------------------------------------------------------------------

    def _broadcast_operands(self, node, a: QValue, b: QValue) -> tuple[QValue, QValue, str, list]:
        """Both operands in one layout and the output's rank (TOSA broadcasts size-1 dims of equal ranks)."""
        out_shape = _shape(node)
        if a.shape == b.shape == out_shape and a.layout == b.layout:
            return a, b, a.layout, replace(a, shape=out_shape).physical_shape
        a, b = self.layout(a, "nchw"), self.layout(b, "nchw")
        rank = len(out_shape)
        fixed = []
        for v in (a, b):
            if len(v.shape) < rank:
                shape = (1,) * (rank - len(v.shape)) + tuple(v.shape)
                v = replace(v, name=self.w.reshape(v.name, list(shape), v.dtype), shape=shape)
            fixed.append(v)
        return fixed[0], fixed[1], "nchw", list(out_shape)

    def _operand(self, node, arg, like: QValue) -> QValue:
        """A second operand: a quantized value, or a Python number / float constant made a quantized const."""
        if isinstance(arg, torch.fx.Node) and not (arg.op == "placeholder" and is_constant(self.ep, arg)):
            return self.real(arg)
        if isinstance(arg, torch.fx.Node):
            tensor = self.constant(arg).double()
        else:
            tensor = torch.tensor(float(arg), dtype=torch.float64)
        peak = float(tensor.abs().max()) if tensor.numel() else 0.0
        scale = peak / 127.0 if peak > 0 else 1.0
        q = torch.clamp(torch.round(tensor / scale), -127, 127).to(torch.int8).numpy()
        shape = tuple(q.shape)
        if not shape:
            shape, q = (1,) * len(like.shape), q.reshape((1,) * len(like.shape))
        name = self.w.const(f"{node.name}_operand", q, "INT8")
        return QValue(name, shape, "INT8", scale, 0, "nchw")

    def _add_sub(self, node, scale, zp, op: str) -> QValue:
        a = self.real(node.args[0])
        b = self._operand(node, node.args[1], a)
        shared = 2 * max(a.scale, b.scale) / (1 << _INT32_SHARED_SHIFT)
        ai, bi = self.to_int32(a, shared), self.to_int32(b, shared)
        ai, bi, layout, shape = self._broadcast_operands(node, ai, bi)
        out = self.w.tensor(f"{node.name}_i32", shape, "INT32")
        self.w.op(op, [ai.name, bi.name], [out], "AddAttribute" if op == "ADD" else "SubAttribute")
        acc = QValue(out, _shape(node), "INT32", shared, 0, layout)
        return self.rescale_to(acc, scale, zp)

    def _mul(self, node, scale, zp) -> QValue:
        a = self.real(node.args[0])
        b = self._operand(node, node.args[1], a)
        ai, bi = self.to_int32(a, a.scale), self.to_int32(b, b.scale)
        ai, bi, layout, shape = self._broadcast_operands(node, ai, bi)
        out = self.w.tensor(f"{node.name}_i32", shape, "INT32")
        self.w.op("MUL", [ai.name, bi.name, self.w.const("mul_shift", [0], "INT8")], [out], "MulAttribute")
        acc = QValue(out, _shape(node), "INT32", a.scale * b.scale, 0, layout)
        return self.rescale_to(acc, scale, zp)

    def _matmul(self, node, scale, zp) -> QValue:
        a = self.layout(self.real(node.args[0]), "nchw")
        b = self.layout(self._operand(node, node.args[1], a), "nchw")
        out_shape = _shape(node)
        if len(a.shape) == 2:
            a = replace(a, name=self.w.reshape(a.name, [1, *a.shape], "INT8"), shape=(1, *a.shape))
            b = replace(b, name=self.w.reshape(b.name, [1, *b.shape], "INT8"), shape=(1, *b.shape))
        acc_shape = [a.shape[0], a.shape[1], b.shape[2]]
        out = self.w.tensor(f"{node.name}_i32", acc_shape, "INT32")
        self.w.op("MATMUL", [a.name, b.name, self.w.const("a_zp", [a.zp], "INT8"), self.w.const("b_zp", [b.zp], "INT8")],
                  [out], "MatMulAttribute")
        acc = QValue(out, tuple(acc_shape), "INT32", a.scale * b.scale, 0, "nchw")
        y = self.rescale_to(acc, scale, zp)
        if tuple(acc_shape) != out_shape:
            y = replace(y, name=self.w.reshape(y.name, list(out_shape), "INT8"), shape=out_shape)
        return y

    def _table(self, node, scale, zp) -> QValue:
        x = self.real(node.args[0])
        if x.dtype != "INT8":
            raise LoweringError(f"{node.name}: TABLE needs an int8 input")
        qd = torch.ops.quantized_decomposed
        levels = torch.arange(-128, 128, dtype=torch.int8)
        real = qd.dequantize_per_tensor(levels, x.scale, x.zp, -128, 127, torch.int8)
        args = [a for a in node.args[1:]]
        with torch.no_grad():
            y = node.target(real, *args, **node.kwargs)
        table = qd.quantize_per_tensor(y.float(), scale, zp, -128, 127, torch.int8).numpy()
        out = self.w.tensor(f"{node.name}_table", x.physical_shape, "INT8")
        self.w.op("TABLE", [x.name, self.w.const(f"{node.name}_values", table, "INT8")], [out], "TableAttribute")
        return replace(x, name=out, scale=scale, zp=zp)

    # ---- reductions and pooling -----------------------------------------------------------------------------

    def _mean(self, node, scale, zp, average: bool = True) -> QValue:
        x = self.real(node.args[0])
        rank = len(x.shape)
        dims = sorted({d % rank for d in (_arg(node, 1, "dim") or range(rank))})
        keepdim = bool(_arg(node, 2, "keepdim", False))
        count = int(np.prod([x.shape[d] for d in dims]))
        acc = self.to_int32(x, x.scale)
        order = NCHW_TO_NHWC if acc.layout == "nhwc" else tuple(range(rank))
        shape = list(acc.physical_shape)
        name = acc.name
        for d in dims:
            axis = order.index(d)
            shape[axis] = 1
            out = self.w.tensor(f"{node.name}_sum", shape, "INT32")
            self.w.op("REDUCE_SUM", [name], [out], "ReduceSumAttribute", axis)
            name = out
        kept = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
        summed = QValue(name, kept, "INT32", x.scale / count if average else x.scale, 0, acc.layout)
        y = self.rescale_to(summed, scale, zp)
        if not keepdim:
            y = self.layout(y, "nchw")
            out_shape = _shape(node)
            y = replace(y, name=self.w.reshape(y.name, list(out_shape), "INT8"), shape=out_shape)
        return y

    def _pool_pads(self, in_hw, kernel, stride, padding) -> list:
        pads = []
        for axis in range(2):
            size = in_hw[axis] + 2 * padding[axis] - kernel[axis]
            extra = size % stride[axis]
            if padding[axis] - extra < 0:
                raise LoweringError("pooling windows that leave input rows unread are not lowered")
            pads += [padding[axis], padding[axis] - extra]
        return pads

    def _avg_pool(self, node, scale, zp) -> QValue:
        x = self.layout(self.real(node.args[0]), "nhwc")
        kernel = _pair(node.args[1])
        stride = _pair(_arg(node, 2, "stride", None) or kernel)
        padding = _pair(_arg(node, 3, "padding", [0, 0]) or [0, 0])
        out_shape = _shape(node)
        pads = self._pool_pads([x.shape[2], x.shape[3]], kernel, stride, padding)
        out = self.w.tensor(f"{node.name}_pool", [out_shape[0], out_shape[2], out_shape[3], out_shape[1]], "INT8")
        self.w.op("AVG_POOL2D", [x.name, self.w.const("input_zp", [x.zp], "INT8"),
                                 self.w.const("output_zp", [x.zp], "INT8")], [out], "AvgPool2dAttribute", kernel,
                  stride, pads, self.w.dtype("INT32"))
        pooled = QValue(out, out_shape, "INT8", x.scale, x.zp, "nhwc")
        return self.rescale_to(pooled, scale, zp)

    def _max_pool(self, node) -> QValue:
        x = self.layout(self.real(node.args[0]), "nhwc")
        kernel = _pair(node.args[1])
        stride = _pair(_arg(node, 2, "stride", None) or kernel)
        padding = _pair(_arg(node, 3, "padding", [0, 0]) or [0, 0])
        out_val = node.meta["val"]
        out_shape = tuple(int(d) for d in (out_val[0] if isinstance(out_val, (tuple, list)) else out_val).shape)
        pads = self._pool_pads([x.shape[2], x.shape[3]], kernel, stride, padding)
        out = self.w.tensor(f"{node.name}_pool", [out_shape[0], out_shape[2], out_shape[3], out_shape[1]], "INT8")
        self.w.op("MAX_POOL2D", [x.name], [out], "MaxPool2dAttribute", kernel, stride, pads,
                  self.w.ts.NanPropagationMode.PROPAGATE)
        return QValue(out, out_shape, "INT8", x.scale, x.zp, "nhwc")

    # ---- pass-through -------------------------------------------------------------------------------------

    def _pass_through(self, node, given: Optional[QValue] = None) -> QValue:
        """Lower a pass-through op; ``given`` is the value of its (single) input when already lowered."""
        name = ops.target_name(node)
        first = (lambda: given) if given is not None else (lambda: self.real(node.args[0]))
        if name in ops.ACTIVATIONS:
            return self._clamp(node, first())
        if name == "getitem":
            return self.real(node.args[0])
        if name in ("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default"):
            return self._max_pool(node)
        if name in ("aten.clone.default", "dim_order_ops._clone_dim_order.default", "aten.alias_copy.default"):
            return first()
        out_shape = _shape(node)
        if name == "aten.cat.default":
            inputs = [self.layout(self.real(a), "nchw") for a in node.args[0]]
            first = inputs[0]
            inputs = [self.rescale_to(v, first.scale, first.zp) for v in inputs]
            axis = _arg(node, 1, "dim", 0) % len(out_shape)
            out = self.w.tensor(f"{node.name}_cat", list(out_shape), "INT8")
            self.w.op("CONCAT", [v.name for v in inputs], [out], "ConcatAttribute", axis)
            return replace(first, name=out, shape=out_shape)
        x = self.layout(first(), "nchw")
        if name == "aten.amax.default":
            rank = len(x.shape)
            dims = sorted({d % rank for d in (_arg(node, 1, "dim") or range(rank))})
            shape, name_ = list(x.shape), x.name
            for d in dims:
                shape[d] = 1
                out = self.w.tensor(f"{node.name}_max", shape, x.dtype)
                self.w.op("REDUCE_MAX", [name_], [out], "ReduceMaxAttribute", d, self.w.ts.NanPropagationMode.PROPAGATE)
                name_ = out
            if not _arg(node, 2, "keepdim", False):
                name_ = self.w.reshape(name_, list(out_shape), x.dtype)
            return replace(x, name=name_, shape=out_shape)
        if name == "aten.expand_copy.default":
            if tuple(x.shape) == tuple(out_shape):
                return x
            multiples = [o // i for o, i in zip(out_shape, x.shape)]
            out = self.w.tensor(f"{node.name}_tile", list(out_shape), x.dtype)
            self.w.op("TILE", [x.name, self.w.shape_const(multiples)], [out], "TileAttribute")
            return replace(x, name=out, shape=out_shape)
        if name == "aten.permute_copy.default":
            perms = [d % len(x.shape) for d in node.args[1]]
            return replace(x, name=self.w.transpose(x.name, list(x.shape), perms, x.dtype), shape=out_shape)
        if name == "aten.slice_copy.Tensor":
            dim = _arg(node, 1, "dim", 0) % len(x.shape)
            start = _arg(node, 2, "start", None) or 0
            size = x.shape[dim]
            start = max(0, min(size, start + size if start < 0 else start))
            starts = [0] * len(x.shape)
            starts[dim] = start
            out = self.w.tensor(f"{node.name}_slice", list(out_shape), x.dtype)
            self.w.op("SLICE", [x.name, self.w.shape_const(starts), self.w.shape_const(list(out_shape))], [out],
                      "SliceAttribute")
            return replace(x, name=out, shape=out_shape)
        # view, reshape, squeeze, unsqueeze: the same bytes in another shape
        return replace(x, name=self.w.reshape(x.name, list(out_shape), x.dtype), shape=out_shape)

    # ---- the graph ----------------------------------------------------------------------------------------

    def run(self) -> LoweredTosa:
        graph = self.ep.graph
        input_shapes = []
        for node in graph.nodes:
            if node.op != "placeholder" or not is_user_input(self.ep, node):
                continue
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.dtype != torch.int8:
                raise LoweringError(f"partition input {node.name} is {getattr(val, 'dtype', val)}, not int8: the "
                                    f"Ethos-U partition must start at quantize nodes")
            shape = _shape(node)
            self.values[node] = QValue(self.w.input(node.name, list(shape), "INT8"), shape)
            input_shapes.append(shape)
        (output_node,) = [n for n in graph.nodes if n.op == "output"]
        outputs = output_node.args[0]
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        used, output_shapes = {v.name for v in self.values.values()}, []
        for out in outputs:
            if not ops.is_quantize(out):
                raise LoweringError(f"partition output {getattr(out, 'name', out)} is not a quantize node: Ethos-U "
                                    f"partitions return int8")
            v = self.q(out)
            self.w.owner = _handles([out])
            v = self.layout(v, "nchw")
            if v.name in used:  # an input or an earlier output: TOSA needs a distinct tensor
                v = replace(v, name=self.w.rescale(v.name, "INT8", v.zp, [1.0], list(v.shape), "INT8", v.zp))
            used.add(v.name)
            self.w.output(v.name)
            output_shapes.append(tuple(v.shape))
        return LoweredTosa(self.w.serialize(), input_shapes, output_shapes, list(self.w.operators), dict(self.w.owners))


def lower_to_tosa(ep: ExportedProgram) -> LoweredTosa:
    """The TOSA 1.0 INT graph of one Ethos-U partition.

    Args:
        ep: the partition's program (int8 user inputs; ``quantize`` nodes as outputs), as ``preprocess``
            receives it.

    Raises:
        LoweringError: a node the lowering cannot express (message names it).
        ImportError: tosa-tools is not installed (message says how to install it).
    """
    return _Lowerer(ep).run()
