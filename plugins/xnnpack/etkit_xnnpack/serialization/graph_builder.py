"""Builds an ``XNNGraph`` (schema/xnnpack_graph.fbs) value by value and node by node.

Uses the flatc-generated object API (``etkit_xnnpack.fb``, generated at build time). Value ids follow
ExecuTorch's XNNPACK payload: a value's id (``id_out``) is its index in ``xvalues``; the delegate's
inputs and outputs also carry an ``external_id`` (inputs first, in argument order, then outputs) and
the ``XNN_VALUE_FLAG_EXTERNAL_INPUT``/``OUTPUT`` flag; every other value has
``external_id = XNN_INVALID_VALUE_ID``.
"""
from __future__ import annotations

import hashlib
from typing import Optional, Sequence

import flatbuffers
import numpy as np

from .payload import CONSTANT_ALIGNMENT, FLATBUFFER_IDENTIFIER, aligned, assemble_payload

# XNNPACK constants (include/xnnpack.h of XNNPACK 2024-11-08).
XNN_INVALID_VALUE_ID = 0xFFFFFFFF
#: ``ConstantDataOffset.offset`` of a constant stored in named data (ExecuTorch writes UINT64_MAX).
NAMED_DATA_OFFSET = 0xFFFFFFFFFFFFFFFF
XNN_VALUE_FLAG_EXTERNAL_INPUT = 0x1
XNN_VALUE_FLAG_EXTERNAL_OUTPUT = 0x2
XNN_FLAG_TRANSPOSE_WEIGHTS = 0x1
XNN_FLAG_KEEP_DIMS = 0x40
#: Most dimensions an XNNPACK tensor may have (XNN_MAX_TENSOR_DIMS).
XNN_MAX_TENSOR_DIMS = 6

#: Schema version string written to ``XNNGraph.version`` (ExecuTorch writes "0").
GRAPH_VERSION = "0"


def _fb():
    try:
        from .. import fb
    except ImportError as exc:  # pragma: no cover - depends on the build
        raise ImportError(
            "etkit_xnnpack.fb (the Python code generated from schema/xnnpack_graph.fbs) is missing; "
            "reinstall the etkit-xnnpack plugin, or for a source checkout run "
            "`flatc --python --gen-object-api -o OUT plugins/xnnpack/schema/xnnpack_graph.fbs` and put "
            "OUT/etkit_xnnpack/fb inside the package") from exc
    return fb


def _mod(name: str):
    import importlib
    return importlib.import_module(f"{_fb().__name__}.{name}")


#: XNNDatatype numbers of the float types.
FP32, FP16 = 1, 2


class PerTensor:
    """One scale and zero point for the whole tensor (XNNPACK qint8 / qint32 values)."""

    def __init__(self, scale: float, zero_point: int) -> None:
        self.scale, self.zero_point = float(scale), int(zero_point)

    def to_fb(self, builder: "XnnGraphBuilder"):
        q = _mod("PerTensorQuant").PerTensorQuantT()
        q.scale, q.zeroPoint = self.scale, self.zero_point
        return _mod("XNNQuantParams").XNNQuantParams.PerTensorQuant, q

    def __eq__(self, other) -> bool:
        return isinstance(other, PerTensor) and (self.scale, self.zero_point) == (other.scale, other.zero_point)

    def __repr__(self) -> str:
        return f"PerTensor(scale={self.scale!r}, zero_point={self.zero_point})"


class PerChannel:
    """One scale per index of ``channel_dim``, zero point 0 (XNNPACK qcint8 / qcint32 values)."""

    def __init__(self, scales: Sequence[float], channel_dim: int) -> None:
        self.scales, self.channel_dim = [float(s) for s in scales], int(channel_dim)

    def to_fb(self, builder: "XnnGraphBuilder"):
        # Scales go to the constant-data section, as ExecuTorch writes them (scale_buffer_idx).
        q = _mod("PerChannelQuant").PerChannelQuantT()
        q.scale, q.channelDim = [], self.channel_dim
        q.scaleBufferIdx = builder.add_constant_data(np.asarray(self.scales, dtype=np.float32).tobytes(),
                                                     prefix="scale_")
        q.numScales = len(self.scales)
        return _mod("XNNQuantParams").XNNQuantParams.PerChannelQuant, q


class PerToken:
    """Quantized at run time, one scale and zero point per row (XNNPACK ``qdint8``): the last
    ``num_nonbatch_dims`` dims form a row."""

    def __init__(self, num_nonbatch_dims: int = 1) -> None:
        self.num_nonbatch_dims = int(num_nonbatch_dims)

    def to_fb(self, builder: "XnnGraphBuilder"):
        q = _mod("PerTokenDynamicQuant").PerTokenDynamicQuantT()
        q.numNonbatchDims = self.num_nonbatch_dims
        return _mod("XNNQuantParams").XNNQuantParams.PerTokenDynamicQuant, q

    def __eq__(self, other) -> bool:
        return isinstance(other, PerToken) and other.num_nonbatch_dims == self.num_nonbatch_dims


class PerChannelGroup:
    """One scale per group of ``group_size`` consecutive elements of each row of a 2-D [out, in]
    weight, zero point 8 (XNNPACK ``qbint4``). ``scales`` [out, in / group_size] are stored as bf16
    in the constant data, as ExecuTorch writes them."""

    def __init__(self, scales: np.ndarray, group_size: int) -> None:
        self.scales = np.ascontiguousarray(scales, dtype=np.float32)
        self.group_size = int(group_size)

    def to_fb(self, builder: "XnnGraphBuilder"):
        import torch  # bf16 rounding (round to nearest even) without writing it by hand

        bf16 = torch.from_numpy(self.scales.reshape(-1).copy()).to(torch.bfloat16).view(torch.int16).numpy()
        q = _mod("PerChannelGroupQuant").PerChannelGroupQuantT()
        q.scale, q.channelDim, q.groupSize = [], 0, self.group_size
        q.scaleBufferIdx = builder.add_constant_data(bf16.tobytes(), prefix="scale_")
        q.numScales = int(self.scales.size)
        return _mod("XNNQuantParams").XNNQuantParams.PerChannelGroupQuant, q


class XnnGraphBuilder:
    """Accumulates values, nodes and constant data, then serializes the payload.

    Typical use::

        b = XnnGraphBuilder()
        x = b.add_value([1, 3, 8, 8], external="input")
        w = b.add_constant(weight_bytes, [8, 3, 3, 3])
        ...
        b.add_node("XNNConv2d", "_XNNNodeConv", input1Id=x, ...)
        payload = b.to_payload()
    """

    def __init__(self) -> None:
        fb = _fb()
        self._fb = fb
        self.values: list = []           # XValueT
        self.nodes: list = []            # XNodeT
        self.input_ids: list[int] = []
        self.output_ids: list[int] = []
        self.num_externs = 0
        ConstantDataOffsetT = _mod("ConstantDataOffset").ConstantDataOffsetT
        self._constant_offsets = [ConstantDataOffsetT(offset=0, size=0)]  # index 0 = "not a constant"
        self._constant_data = bytearray()  # stays empty: constants go to named_data
        #: ``{key: bytes}`` for the program's named data (PreprocessResult.named_data).
        self.named_data: dict[str, bytes] = {}
        self._quant: dict[int, PerTensor | PerChannel] = {}
        #: Datatype of float values and constants defined without one: 1 (fp32) or 2 (fp16, for
        #: partitions of a ``model.half()`` program).
        self.float_datatype = FP32

    # ---- values -------------------------------------------------------------------------------

    def add_value(self, dims: Sequence[int], *, datatype: Optional[int] = None, constant_idx: int = 0,
                  quant: Optional["PerTensor | PerChannel"] = None) -> int:
        """Define a tensor value; returns its id.

        Args:
            dims: shape (outermost first); a 0-d tensor is written as ``[1]`` (as ExecuTorch does).
            datatype: ``XNNDatatype`` number (1 = fp32, 2 = fp16, 3 = qint8, 6 = qcint8, 7 = qcint32);
                default :attr:`float_datatype`.
            constant_idx: index returned by :meth:`add_constant_data`, 0 for non-constant values.
            quant: quantization parameters; the value is then written as an ``XNNQuantizedTensorValue``.
        Raises:
            ValueError: if the rank exceeds XNN_MAX_TENSOR_DIMS or a dim is not a non-negative int.
        """
        dims = [int(d) for d in dims] or [1]
        if len(dims) > XNN_MAX_TENSOR_DIMS:
            raise ValueError(f"XNNPACK tensors have at most {XNN_MAX_TENSOR_DIMS} dims, got shape {dims}")
        if any(d < 0 for d in dims):
            raise ValueError(f"XNNPACK tensor shape {dims} has a negative dim")
        if datatype is None:
            datatype = self.float_datatype
        tv = _mod("XNNTensorValue").XNNTensorValueT()
        vid = len(self.values)
        tv.datatype = datatype
        tv.numDims = len(dims)
        tv.dims = dims
        tv.constantBufferIdx = constant_idx
        tv.externalId = XNN_INVALID_VALUE_ID
        tv.flags = 0
        tv.idOut = vid
        xv = _mod("XValue").XValueT()
        if quant is None:
            xv.xvalueUnionType = _mod("XValueUnion").XValueUnion.XNNTensorValue
            xv.xvalueUnion = tv
        else:
            qv = _mod("XNNQuantizedTensorValue").XNNQuantizedTensorValueT()
            qv.tensorValue = tv
            qv.quantParamsType, qv.quantParams = quant.to_fb(self)
            xv.xvalueUnionType = _mod("XValueUnion").XValueUnion.XNNQuantizedTensorValue
            xv.xvalueUnion = qv
            self._quant[vid] = quant
        self.values.append(xv)
        return vid

    def add_value_like(self, src: int, dims: Sequence[int]) -> int:
        """A new (non-constant, internal) value with the datatype and quantization of ``src``."""
        return self.add_value(dims, datatype=self.tensor_value(src).datatype, quant=self._quant.get(src))

    def tensor_value(self, vid: int):
        """The ``XNNTensorValueT`` of value ``vid`` (mutable until serialization)."""
        union = self.values[vid].xvalueUnion
        return union.tensorValue if vid in self._quant else union

    def quant(self, vid: int) -> Optional["PerTensor | PerChannel"]:
        """The quantization parameters of value ``vid`` (None for a float value)."""
        return self._quant.get(vid)

    def dims(self, vid: int) -> list[int]:
        return list(self.tensor_value(vid).dims)

    def mark_external(self, vid: int, is_input: bool) -> None:
        """Make ``vid`` the next extern: a delegate input (call for all inputs first) or output."""
        tv = self.tensor_value(vid)
        if tv.externalId != XNN_INVALID_VALUE_ID:
            raise ValueError(f"XNNPACK value {vid} is already extern {tv.externalId}; a delegate input cannot also "
                             f"be an output, nor an output appear twice")
        tv.externalId = self.num_externs
        tv.flags |= XNN_VALUE_FLAG_EXTERNAL_INPUT if is_input else XNN_VALUE_FLAG_EXTERNAL_OUTPUT
        self.num_externs += 1
        (self.input_ids if is_input else self.output_ids).append(vid)

    def reserve_external(self) -> None:
        """Skip one extern id: a delegate argument that is not a tensor (a size the program passes along
        for a view with a dynamic shape). No value is bound to it, so the ids of the following
        externs stay their argument positions (as ExecuTorch's XNNPACK backend numbers them)."""
        self.num_externs += 1

    # ---- constants ----------------------------------------------------------------------------

    def add_constant_data(self, data: bytes, *, prefix: str = "") -> int:
        """Store constant bytes as program named data, keyed like ExecuTorch's XNNPACK backend
        (``prefix`` + sha256 hex of the bytes, so identical weights are stored once per program);
        returns the 1-based ``constant_buffer_idx`` to store in the tensor value.

        Named data, not the payload's own constant section, because ExecuTorch's XNNPACK runtime
        frees the payload after ``init`` while XNNPACK keeps pointing at unpacked static values
        (e.g. the scalar operand of an add): those must live in the program's named data."""
        if len(data) == 0:
            raise ValueError("XNNPACK constant with no bytes; empty tensors cannot be delegate constants")
        key = prefix + hashlib.sha256(data).hexdigest()
        self.named_data.setdefault(key, bytes(data))
        entry = _mod("ConstantDataOffset").ConstantDataOffsetT(offset=NAMED_DATA_OFFSET, size=len(data))
        entry.namedKey = key
        self._constant_offsets.append(entry)
        return len(self._constant_offsets) - 1

    def add_constant(self, array: np.ndarray, *, datatype: Optional[int] = None,
                     quant: Optional["PerTensor | PerChannel"] = None) -> int:
        """Define a constant value holding ``array`` (C-contiguous); returns its value id.

        ``array`` is stored as float32 for datatype 1, float16 for datatype 2 (default:
        :attr:`float_datatype`), else with its own dtype (int8 for qint8/qcint8, int32 for
        qcint32/qint32) and ``quant`` gives its quantization parameters."""
        if datatype is None:
            datatype = self.float_datatype
        if datatype == FP32:
            array = np.ascontiguousarray(array, dtype=np.float32)
        elif datatype == FP16:
            array = np.ascontiguousarray(array, dtype=np.float16)
        else:
            array = np.ascontiguousarray(array)
        idx = self.add_constant_data(array.tobytes())
        return self.add_value(list(array.shape), datatype=datatype, constant_idx=idx, quant=quant)

    def add_packed_constant(self, data: bytes, dims: Sequence[int], *, datatype: int, quant) -> int:
        """Define a constant whose bytes are already in XNNPACK's layout (packed int4 weights) and
        whose logical shape is ``dims``; returns its value id."""
        return self.add_value(list(dims), datatype=datatype, constant_idx=self.add_constant_data(data), quant=quant)

    # ---- nodes --------------------------------------------------------------------------------

    def add_node(self, union_name: str, table: str, *, output_min_max: Optional[tuple[float, float]] = None,
                 debug_handle: int = 0, **fields) -> None:
        """Append a node.

        Args:
            union_name: member of ``XNodeUnion`` (e.g. ``"XNNConv2d"``).
            table: the generated table class module for that member (e.g. ``"_XNNNodeConv"``).
            output_min_max: fused output clamp ``(min, max)``; None = unbounded.
            fields: the table's fields in the object API's camelCase (e.g. ``inputId=3``).
        """
        mod = _mod(table)
        node_obj = getattr(mod, f"{table}T")()
        for name, value in fields.items():
            if not hasattr(node_obj, name):
                raise AttributeError(f"XNNPACK table {table} has no field {name!r}")
            setattr(node_obj, name, value)
        xn = _mod("XNode").XNodeT()
        xn.xnodeUnionType = getattr(_mod("XNodeUnion").XNodeUnion, union_name)
        xn.xnodeUnion = node_obj
        xn.debugHandle = debug_handle
        if output_min_max is not None:
            omm = _mod("OutputMinMax").OutputMinMaxT()
            omm.outputMin, omm.outputMax = float(output_min_max[0]), float(output_min_max[1])
            xn.outputMinMax = omm
        self.nodes.append(xn)

    # ---- output -------------------------------------------------------------------------------

    def to_flatbuffer(self) -> bytes:
        g = _mod("XNNGraph").XNNGraphT()
        g.version = GRAPH_VERSION
        g.xnodes = self.nodes
        g.xvalues = self.values
        g.numExterns = self.num_externs
        g.inputIds = list(self.input_ids)
        g.outputIds = list(self.output_ids)
        g.constantData = self._constant_offsets
        builder = flatbuffers.Builder(1024)
        builder.Finish(g.Pack(builder), file_identifier=FLATBUFFER_IDENTIFIER)
        return bytes(builder.Output())

    def to_payload(self) -> bytes:
        """Header + flatbuffer + constant data (see :mod:`.payload`)."""
        return assemble_payload(self.to_flatbuffer(), bytes(self._constant_data))


# flatc 25.12's Python generator names each union's creator function with different casing from
# the name its callers use (``XnodeUnionCreator`` vs ``XNodeUnionCreator``); alias the expected names
# so the object API can unpack unions.
_UNION_CREATORS = {"XNodeUnion": "XnodeUnionCreator", "XValueUnion": "XvalueUnionCreator",
                   "XNNQuantParams": "XnnquantParamsCreator"}


def _patch_union_creators() -> None:
    for module_name, generated in _UNION_CREATORS.items():
        mod = _mod(module_name)
        expected = f"{module_name}Creator"
        if not hasattr(mod, expected) and hasattr(mod, generated):
            setattr(mod, expected, getattr(mod, generated))


def parse_graph(flatbuffer: bytes):
    """Read a serialized ``XNNGraph`` back into the object API (``XNNGraphT``)."""
    _patch_union_creators()
    mod = _mod("XNNGraph")
    return mod.XNNGraphT.InitFromObj(mod.XNNGraph.GetRootAs(flatbuffer, 0))

