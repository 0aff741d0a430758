"""Partition -> ONNX graph (opset 21) for ONNX Runtime's QNN execution provider to compile.

Quantized partitions are written as QDQ graphs: every PT2E ``quantize``/``dequantize`` becomes
``QuantizeLinear``/``DequantizeLinear`` with its scale and zero point (per channel with ``axis``), integer
weights stay integer initializers (INT4 when their range is within [-8, 7], UINT16 for 16-bit activations
that PT2E holds in int32), and the ops between them are the float ONNX ops. The HTP prepare turns each
``DequantizeLinear -> op -> QuantizeLinear`` group into one quantized QNN op. fp16 partitions are plain
float32 graphs that the compile runs in fp16 (``enable_htp_fp16_precision``). Shapes are always static.

The graph's inputs are the partition's user inputs and its outputs the partition's outputs, in
delegate-argument order. In QDQ graphs the boundary quantization is left to the delegate: an input read only by
one quantization is an integer graph input, an output that is a dequantized value an integer graph output
(``IOTensor.qparams`` says which; the delegate's own I/O stays float32).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch.export import ExportedProgram

from etkit.backend.utils import get_constant, is_constant, is_user_input

OPSET = 21


class ExportError(ValueError):
    """A node of the partition cannot be written as ONNX for QNN; the message names the node."""


@dataclass(frozen=True)
class QParams:
    """Quantization of one value: scales (one, or one per channel along ``axis``), zero points, ONNX type."""

    scale: np.ndarray
    zero_point: np.ndarray
    onnx_type: int
    axis: Optional[int] = None
    block_size: Optional[int] = None   # block-wise: ``scale`` has the weight's shape with ``axis`` divided by it

    @property
    def type_name(self) -> str:
        return TensorProto.DataType.Name(self.onnx_type).lower()


@dataclass
class IOTensor:
    """One graph input or output: name, shape, and its quantization when the graph's tensor is an integer one
    that the delegate quantizes or dequantizes (``None``: a float32 tensor of the graph)."""

    name: str
    shape: tuple
    qparams: Optional[QParams] = None


@dataclass
class ExportedGraph:
    model: onnx.ModelProto
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    #: ``{ONNX node name: (Edge debug handles)}``: the nodes each Edge node was written as. QNN names its ops
    #: after these, so this is the partition's ``debug_handle_map`` for the delegate's per-op events.
    node_handles: dict = field(default_factory=dict)


_TORCH_TO_ONNX = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16,
                  torch.int64: TensorProto.INT64, torch.int32: TensorProto.INT32, torch.bool: TensorProto.BOOL}


def quant_type(dtype: torch.dtype, qmin: int, qmax: int) -> int:
    """ONNX element type of a PT2E quantized tensor: its torch dtype and integer range.

    Raises:
        ExportError: a combination QNN has no type for.
    """
    if dtype == torch.uint8:
        return TensorProto.UINT8
    if dtype == torch.int8:
        return TensorProto.INT4 if (qmin >= -8 and qmax <= 7) else TensorProto.INT8
    if dtype == torch.uint16 or (dtype == torch.int32 and qmin >= 0 and qmax <= 65535):
        return TensorProto.UINT16
    if dtype == torch.int16:
        return TensorProto.INT16
    if dtype == torch.int32:
        return TensorProto.INT32
    raise ExportError(f"quantized dtype {dtype} over [{qmin}, {qmax}] has no QNN type")


_NUMPY_OF = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.INT4: np.int8,
             TensorProto.UINT16: np.uint16, TensorProto.INT16: np.int16, TensorProto.INT32: np.int32}


class GraphBuilder:
    """Accumulates ONNX nodes and initializers for one partition; emitters (``ops.py``) call it."""

    def __init__(self, ep: ExportedProgram, fp16: bool) -> None:
        self.ep = ep
        self.fp16 = fp16
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict = {}          # fx node -> ONNX value name (or tuple of names)
        self.qparams: dict = {}        # ONNX value name -> QParams of the DequantizeLinear producing it
        self._counter = 0

    # ---- names and constants -----------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}__{self._counter}"

    def constant(self, array: np.ndarray, hint: str = "const", onnx_type: Optional[int] = None) -> str:
        name = self.fresh(hint)
        array = np.asarray(array)
        if onnx_type == TensorProto.INT4:
            self.initializers.append(helper.make_tensor(name, TensorProto.INT4, array.shape,
                                                        array.astype(np.int8).flatten().tolist()))
        else:
            if onnx_type is not None:
                array = array.astype(_NUMPY_OF.get(onnx_type, helper.tensor_dtype_to_np_dtype(onnx_type)))
            self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def ints(self, values, hint: str = "shape") -> str:
        return self.constant(np.asarray(list(values), dtype=np.int64), hint)

    def node_constant(self, node: torch.fx.Node) -> Optional[torch.Tensor]:
        """The value of a constant placeholder, else ``None``."""
        if node.op == "placeholder" and is_constant(self.ep, node):
            return get_constant(self.ep, node)
        return None

    def value(self, node) -> str:
        """ONNX name of an fx value (constants become float initializers on first use)."""
        if not isinstance(node, torch.fx.Node):
            raise ExportError(f"expected a tensor, got {node!r}")
        if node in self.names:
            return self.names[node]
        tensor = self.node_constant(node)
        if tensor is None:
            raise ExportError(f"value {node.name} is used before it is computed")
        if tensor.dtype not in (torch.float32, torch.float16):
            raise ExportError(f"constant {node.name} is {tensor.dtype}; only float constants are used directly")
        name = self.constant(tensor.detach().float().numpy(), node.name)
        self.names[node] = name
        return name

    def add(self, op_type: str, inputs: list, hint: str, num_outputs: int = 1, domain: str = "", **attrs):
        outputs = [self.fresh(hint) for _ in range(num_outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=self.fresh(op_type), domain=domain, **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    # ---- quantization --------------------------------------------------------------------------------

    def qdq_params(self, scale, zero_point, onnx_type: int, hint: str, axis: Optional[int] = None,
                   block_size: Optional[int] = None) -> tuple:
        qp = QParams(np.asarray(scale, dtype=np.float32), np.asarray(zero_point), onnx_type, axis, block_size)
        return qp, self.constant(qp.scale, f"{hint}_scale"), self.constant(qp.zero_point, f"{hint}_zp", onnx_type)

    def dequantize(self, q_name: str, qp: QParams, s_name: str, zp_name: str, hint: str) -> str:
        attrs = {"axis": qp.axis} if qp.axis is not None else {}
        if qp.block_size is not None:
            attrs["block_size"] = qp.block_size
        out = self.add("DequantizeLinear", [q_name, s_name, zp_name], hint, **attrs)
        self.qparams[out] = qp
        return out

    def requantize_like(self, name: str, qp: Optional[QParams], hint: str) -> str:
        """After a value-preserving op inserted by an emitter (a reshape), repeat the quantization ``qp``
        of its input so the HTP sees a QDQ group (exact: the values are already on ``qp``'s grid)."""
        if self.fp16 or qp is None:
            return name
        _, s, zp = self.qdq_params(qp.scale, qp.zero_point, qp.onnx_type, hint, qp.axis)
        attrs = {"axis": qp.axis} if qp.axis is not None else {}
        q = self.add("QuantizeLinear", [name, s, zp], f"{hint}_q", **attrs)
        return self.dequantize(q, qp, s, zp, hint)

    def quantize_for_fused_activation(self, node, name: str) -> str:
        """A convolution, linear or add whose ReLU/clamp the HTP fuses has no quantize of its own in the
        program: quantize its result with the activation's output parameters (``Q -> DQ``), so the HTP sees
        ``DQ -> op -> Q -> DQ -> Clip -> Q`` with equal parameters and folds the clamp into the op. Exact: the
        activation's quantized range lies inside its clamp (``QnnQuantizer`` fuses only then)."""
        from ..partition.configs import fused_activation
        activation = fused_activation(node)
        if self.fp16 or activation is None:
            return name
        quantize = next(iter(activation.users))
        scale, zp, qmin, qmax, dtype = quantize.args[1:6]
        qp, s, z = self.qdq_params(scale, zp, quant_type(dtype, int(qmin), int(qmax)), f"{node.name}_fused")
        return self.dequantize(self.add("QuantizeLinear", [name, s, z], f"{node.name}_fusedq"), qp, s, z,
                               f"{node.name}_fused")

    def quantized_constant(self, value: float, like: Optional[QParams], hint: str) -> str:
        """A scalar operand: float in fp16 graphs; in QDQ graphs a ``DequantizeLinear`` of a one-element
        tensor of ``like``'s type whose scale makes the value exact."""
        if self.fp16 or like is None:
            return self.constant(np.asarray(value, dtype=np.float32), hint)
        qmax = {TensorProto.UINT8: 255, TensorProto.UINT16: 65535}.get(like.onnx_type, 255)
        qtype = like.onnx_type if like.onnx_type in (TensorProto.UINT8, TensorProto.UINT16) else TensorProto.UINT8
        scale = abs(float(value)) / qmax if value != 0 else 1.0
        q, zp = (qmax, 0) if value >= 0 else (0, qmax)
        qp, s, zp_name = self.qdq_params(scale, zp, qtype, hint)
        return self.dequantize(self.constant(np.asarray(q), f"{hint}_q", qtype), qp, s, zp_name, hint)


def export_partition(ep: ExportedProgram, fp16: bool, graph_name: str) -> ExportedGraph:
    """Write one partition as an ONNX model.

    Args:
        ep: the partition (placeholders: constants, then user inputs; outputs in order).
        fp16: fp16 precision (a float graph) instead of a QDQ graph.
        graph_name: the ONNX graph's name.

    Raises:
        ExportError: an op without an emitter, or a value the HTP cannot take (names the node).
    """
    from .ops import EMITTERS

    b = GraphBuilder(ep, fp16)
    inputs, outputs = [], []
    node_handles: dict = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if is_user_input(ep, node):
                meta = node.meta.get("val")
                if not isinstance(meta, torch.Tensor) or meta.dtype != torch.float32:
                    raise ExportError(f"input {node.name} is {getattr(meta, 'dtype', '?')}; QNN partitions take float32 inputs")
                name = f"input_{len(inputs)}"
                b.names[node] = name
                inputs.append(IOTensor(name, tuple(int(d) for d in meta.shape)))
        elif node.op == "call_function":
            emit = EMITTERS.get(node.target)
            if emit is None:
                raise ExportError(f"{node.target} (node {node.name}) has no ONNX emitter for QNN")
            first = len(b.nodes)
            try:
                b.names[node] = b.quantize_for_fused_activation(node, emit(b, node))
            except ExportError:
                raise
            except Exception as exc:  # an emitter bug: name the node
                raise ExportError(f"writing {node.target} (node {node.name}) failed: {type(exc).__name__}: {exc}") from exc
            handle = node.meta.get("debug_handle")
            if isinstance(handle, int) and handle > 0:
                for written in b.nodes[first:]:
                    node_handles.setdefault(written.name, []).append(handle)
        elif node.op == "output":
            for i, value in enumerate(node.args[0]):
                source = b.value(value)
                name = f"output_{i}"
                b.add("Identity", [source], "out")
                b.nodes[-1].output[0] = name
                meta = value.meta.get("val")
                outputs.append(IOTensor(name, tuple(int(d) for d in meta.shape)))
    if not fp16:
        _integer_boundary(b, inputs, outputs)

    def info(io):
        return helper.make_tensor_value_info(io.name, io.qparams.onnx_type if io.qparams else TensorProto.FLOAT, io.shape)

    graph = helper.make_graph(b.nodes, graph_name, [info(io) for io in inputs], [info(io) for io in outputs],
                              b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="etkit-qnn")
    model.ir_version = 10
    return ExportedGraph(model, inputs, outputs, {k: tuple(v) for k, v in node_handles.items()})


_BOUNDARY_TYPES = (TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16)
#: Ops whose 16-bit output encoding QNN fixes itself (ONNX Runtime's QNN EP overrides the graph's scale and zero
#: point): an integer output right after one would hold QNN's encoding, not the graph's, so it stays float32
#: (measured: sigmoid 4669 and tanh 487 steps off as integer outputs, within 4 as float ones).
_FIXED_ENCODING_OPS = ("Sigmoid", "Tanh", "Softmax")


def _integer_boundary(b: GraphBuilder, inputs: list, outputs: list) -> None:
    """Move a QDQ graph's boundary quantization out of the context, onto the delegate's CPU side.

    An input read only by ``QuantizeLinear`` nodes of one per-tensor quantization becomes an integer graph input
    (the delegate quantizes it, payload version 2), and an output that is a per-tensor ``DequantizeLinear``
    becomes that integer value (the delegate dequantizes it). The HTP converts float32 graph I/O through fp16,
    which moved 16-bit values by up to ~30 steps; the delegate's conversion is the reference's, in float32.
    Sets ``qparams`` of each converted tensor; the others keep ``None`` (they stay float32)."""
    inits = {t.name: t for t in b.initializers}
    producer = {o: n for n in b.nodes for o in n.output}

    def qparams(node) -> Optional[QParams]:
        if len(node.input) < 3 or node.input[1] not in inits or node.input[2] not in inits:
            return None
        scale, zp = numpy_helper.to_array(inits[node.input[1]]), inits[node.input[2]]
        if scale.size != 1 or zp.data_type not in _BOUNDARY_TYPES:
            return None
        return QParams(scale.reshape(()), numpy_helper.to_array(zp).reshape(()), zp.data_type)

    def same(a: QParams, c: QParams) -> bool:
        return a.onnx_type == c.onnx_type and float(a.scale) == float(c.scale) and int(a.zero_point) == int(c.zero_point)

    for io in inputs:
        readers = [n for n in b.nodes if io.name in n.input]
        params = [qparams(n) if n.op_type == "QuantizeLinear" and n.input[0] == io.name else None for n in readers]
        if not readers or any(p is None or not same(p, params[0]) for p in params):
            continue
        io.qparams = params[0]
        renamed = {n.output[0]: io.name for n in readers}
        for n in readers:
            b.nodes.remove(n)
        for n in b.nodes:
            for i, name in enumerate(n.input):
                if name in renamed:
                    n.input[i] = renamed[name]
    renamed_outputs = set()
    for io in outputs:
        identity = producer.get(io.name)
        source = producer.get(identity.input[0]) if identity is not None else None
        if source is None or source.op_type != "DequantizeLinear" or source.input[0] not in producer:
            continue  # a float output, or the dequantized value of a constant
        quantize = producer[source.input[0]]
        if quantize.op_type == "QuantizeLinear" and quantize.input[0] in producer and \
                producer[quantize.input[0]].op_type in _FIXED_ENCODING_OPS:
            continue
        qp = qparams(source)
        integer = source.input[0]
        if qp is None or integer in renamed_outputs:
            continue  # (the same integer value twice among the outputs: the second stays float)
        renamed_outputs.add(integer)
        # QNN takes no Identity on an integer tensor: the graph output is the integer value itself, renamed.
        io.qparams = qp
        b.nodes.remove(identity)
        producer[integer].output[0] = io.name
        for n in b.nodes:
            for i, name in enumerate(n.input):
                if name == integer:
                    n.input[i] = io.name
        if not any(source.output[0] in n.input for n in b.nodes):
            b.nodes.remove(source)
