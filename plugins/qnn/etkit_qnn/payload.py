"""The QNN delegate payload: one QNN HTP context binary plus the metadata etkit's runtime needs.

The payload is a flatbuffer (``schema/qnn_payload.fbs``, file identifier ``EQNN``) holding:

=================  ============================================================================
field              meaning
=================  ============================================================================
``version``        payload format version (:data:`PAYLOAD_VERSION`)
``graph_name``     the QNN graph's name inside the context (``QnnGraph_retrieve``; ONNX Runtime's
                   EPContext ``partition_name``)
``soc_model``      ``QcomChipset`` id the context was compiled for; ``htp_arch`` its HTP generation
``precision``      ``"quantized"`` (QDQ graph, 8/16-bit integer arithmetic) or ``"fp16"``
``sdk_version``    QNN SDK build of the compiler (a context loads only on a QNN runtime at least as new)
``inputs``         per delegate input, in argument order: graph tensor name, static shape, and, for an
                   integer tensor of the context, its quantization (dtype, scale, zero point): the
                   delegate quantizes that float32 input before the run (round half to even, as PT2E)
``outputs``        the same for the outputs (an integer output is dequantized by the delegate)
``context_binary`` the serialized QNN context (``QnnContext_getBinary``), 64-byte aligned
``context_crc32``  CRC-32 (``zlib.crc32``) of ``context_binary``: the delegate checks it before it hands
                   the bytes to the QNN runtime, whose context loader is not built for damaged input
=================  ============================================================================

The delegate's inputs and outputs are float32 contiguous tensors of exactly these shapes. Version 2 moved
the boundary quantization from the context (where the HTP converts float32 through fp16) to the delegate;
version 3 added ``context_crc32``. Older payloads are refused with a request to re-lower. The context
binary is what a QNN runtime loads with ``QnnContext_createFromBinary`` on a phone; etkit's delegate here
hands it to ONNX Runtime's QNN execution provider (wrapped in a one-node EPContext model), which runs it on
the HTP simulator of ``libQnnHtp.so`` on x86.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Optional

import flatbuffers

PAYLOAD_VERSION = 3
FILE_IDENTIFIER = b"EQNN"


class PayloadError(ValueError):
    """Bytes that are not a QNN payload this version reads; the message says what is wrong."""


@dataclass(frozen=True)
class TensorQuantization:
    dtype: str
    scale: float
    zero_point: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple
    quantization: Optional[TensorQuantization] = None


@dataclass
class QnnPayload:
    graph_name: str
    soc_model: int
    htp_arch: int
    precision: str
    sdk_version: str
    context_binary: bytes
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    version: int = PAYLOAD_VERSION


def _fb():
    try:
        from . import fb  # noqa: F401  (generated at build time)
        from .fb import QnnPayload as QnnPayloadFb  # noqa: N814
        from .fb import Quantization, TensorInfo as TensorInfoFb  # noqa: N814
    except ImportError as exc:  # a source checkout without the build
        raise ImportError(f"etkit_qnn.fb (generated from schema/qnn_payload.fbs) is missing: reinstall etkit-qnn "
                          f"(pip install --no-build-isolation plugins/qnn): {exc}") from exc
    return QnnPayloadFb, TensorInfoFb, Quantization


def pack(payload: QnnPayload) -> bytes:
    """Serialize ``payload`` (deterministic: same fields, same bytes)."""
    QnnPayloadFb, TensorInfoFb, Quantization = _fb()

    def tensor(info: TensorInfo):
        t = TensorInfoFb.TensorInfoT()
        t.name, t.shape = info.name, [int(d) for d in info.shape]
        if info.quantization is not None:
            q = Quantization.QuantizationT()
            q.dtype, q.scale, q.zeroPoint = info.quantization.dtype, float(info.quantization.scale), \
                int(info.quantization.zero_point)
            t.quantization = q
        return t

    root = QnnPayloadFb.QnnPayloadT()
    root.version, root.graphName, root.socModel, root.htpArch = payload.version, payload.graph_name, \
        int(payload.soc_model), int(payload.htp_arch)
    root.precision, root.sdkVersion = payload.precision, payload.sdk_version
    root.inputs = [tensor(i) for i in payload.inputs]
    root.outputs = [tensor(o) for o in payload.outputs]
    root.contextBinary = memoryview(payload.context_binary)
    root.contextCrc32 = zlib.crc32(payload.context_binary)
    builder = flatbuffers.Builder(len(payload.context_binary) + 4096)
    builder.Finish(root.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def unpack(data: bytes) -> QnnPayload:
    """Read a payload written by :func:`pack`.

    Raises:
        PayloadError: not a QNN payload (wrong identifier, truncated) or another format version.
    """
    QnnPayloadFb, _, _ = _fb()
    data = bytes(data)
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise PayloadError(f"not a QNN payload: file identifier {data[4:8]!r}, expected {FILE_IDENTIFIER!r}")
    try:
        root = QnnPayloadFb.QnnPayload.GetRootAs(data, 0)
        version = root.Version()
        if version != PAYLOAD_VERSION:
            raise PayloadError(f"QNN payload version {version}; this etkit-qnn reads version {PAYLOAD_VERSION}")

        def tensors(count, get):
            out = []
            for i in range(count):
                t = get(i)
                q = t.Quantization()
                quant = None if q is None else TensorQuantization(q.Dtype().decode(), q.Scale(), q.ZeroPoint())
                out.append(TensorInfo(t.Name().decode(), tuple(int(t.Shape(j)) for j in range(t.ShapeLength())), quant))
            return out

        return QnnPayload(
            graph_name=root.GraphName().decode(), soc_model=root.SocModel(), htp_arch=root.HtpArch(),
            precision=(root.Precision() or b"").decode(), sdk_version=(root.SdkVersion() or b"").decode(),
            context_binary=root.ContextBinaryAsNumpy().tobytes() if root.ContextBinaryLength() else b"",
            inputs=tensors(root.InputsLength(), root.Inputs), outputs=tensors(root.OutputsLength(), root.Outputs),
            version=version)
    except PayloadError:
        raise
    except Exception as exc:  # flatbuffers raises struct/index errors on truncated data
        raise PayloadError(f"corrupt QNN payload ({len(data)} bytes): {type(exc).__name__}: {exc}") from None
