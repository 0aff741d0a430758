"""Builds an ``XNNGraph`` (schema/xnnpack_graph.fbs) value by value and node by node.

Uses the flatc-generated object API (``etkit_xnnpack.fb``, generated at build time). Value ids follow
ExecuTorch's XNNPACK payload: a value's id (``id_out``) is its index in ``xvalues``; the delegate's
inputs and outputs also carry an ``external_id`` (inputs first, in argument order, then outputs) and
the ``XNN_VALUE_FLAG_EXTERNAL_INPUT``/``OUTPUT`` flag; every other value has
``external_id = XNN_INVALID_VALUE_ID``.
"""
from __future__ import annotations

from typing import Optional, Sequence

import flatbuffers
import numpy as np

from .payload import CONSTANT_ALIGNMENT, FLATBUFFER_IDENTIFIER, aligned, assemble_payload

# XNNPACK constants (include/xnnpack.h of XNNPACK 2024-11-08).
XNN_INVALID_VALUE_ID = 0xFFFFFFFF
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
        self._constant_data = bytearray()

    # ---- values -------------------------------------------------------------------------------

    def add_value(self, dims: Sequence[int], *, datatype: int = 1, constant_idx: int = 0) -> int:
        """Define a tensor value; returns its id.

        Args:
            dims: shape (outermost first); a 0-d tensor is written as ``[1]`` (as ExecuTorch does).
            datatype: ``XNNDatatype`` number (1 = fp32).
            constant_idx: index returned by :meth:`add_constant_data`, 0 for non-constant values.
        Raises:
            ValueError: if the rank exceeds XNN_MAX_TENSOR_DIMS or a dim is not a non-negative int.
        """
        dims = [int(d) for d in dims] or [1]
        if len(dims) > XNN_MAX_TENSOR_DIMS:
            raise ValueError(f"XNNPACK tensors have at most {XNN_MAX_TENSOR_DIMS} dims, got shape {dims}")
        if any(d < 0 for d in dims):
            raise ValueError(f"XNNPACK tensor shape {dims} has a negative dim")
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
        xv.xvalueUnionType = _mod("XValueUnion").XValueUnion.XNNTensorValue
        xv.xvalueUnion = tv
        self.values.append(xv)
        return vid

    def tensor_value(self, vid: int):
        """The ``XNNTensorValueT`` of value ``vid`` (mutable until serialization)."""
        return self.values[vid].xvalueUnion

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

    # ---- constants ----------------------------------------------------------------------------

    def add_constant_data(self, data: bytes) -> int:
        """Append bytes to the constant-data section at a 16-byte aligned offset; returns the
        1-based ``constant_buffer_idx`` to store in the tensor value."""
        if len(data) == 0:
            raise ValueError("XNNPACK constant with no bytes; empty tensors cannot be delegate constants")
        offset = aligned(len(self._constant_data), CONSTANT_ALIGNMENT)
        self._constant_data.extend(b"\0" * (offset - len(self._constant_data)))
        self._constant_data.extend(data)
        entry = _mod("ConstantDataOffset").ConstantDataOffsetT(offset=offset, size=len(data))
        self._constant_offsets.append(entry)
        return len(self._constant_offsets) - 1

    def add_constant(self, array: np.ndarray) -> int:
        """Define a constant fp32 value holding ``array`` (C-contiguous); returns its value id."""
        array = np.ascontiguousarray(array, dtype=np.float32)
        idx = self.add_constant_data(array.tobytes())
        return self.add_value(list(array.shape), constant_idx=idx)

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

