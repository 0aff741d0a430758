"""``QnnBackend.preprocess``: partition -> ONNX (QDQ or fp16) -> QNN HTP context binary -> payload.

Seed page "Qualcomm AI Engine Backend". The route: :mod:`etkit_qnn.onnx_export` writes the partition as an
ONNX graph, :mod:`etkit_qnn.htp_compile` has ONNX Runtime's QNN execution provider compile it for the compile
spec's SoC (QNN's offline HTP prepare), and :mod:`etkit_qnn.payload` stores the context binary with its graph
name and I/O.
"""
from __future__ import annotations

import logging
import time

from torch.export import ExportedProgram

from etkit.backend import BackendDetails, CompileSpec, PreprocessResult

from .compile_spec import QnnCompileSpec
from .htp_compile import compile_onnx
from .onnx_export import export_partition
from .payload import QnnPayload, TensorInfo, TensorQuantization, pack

logger = logging.getLogger(__name__)


def _info(io) -> TensorInfo:
    quant = None
    if io.qparams is not None:
        quant = TensorQuantization(io.qparams.type_name, float(io.qparams.scale.reshape(-1)[0]),
                                   int(io.qparams.zero_point.reshape(-1)[0]))
    return TensorInfo(io.name, io.shape, quant)


class QnnBackend(BackendDetails):
    """The QNN backend's ahead-of-time half (backend id ``QnnBackend``)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Compile one partition to a QNN HTP context binary.

        Args:
            edge_program: the partition (float32 user inputs; in quantized precision its PT2E
                quantize/dequantize nodes, boundary ones included).
            compile_specs: from :func:`generate_qnn_executorch_compiler_spec`.

        Returns:
            ``PreprocessResult`` whose bytes are the payload of :mod:`etkit_qnn.payload`, and whose
            ``debug_handle_map`` is ``{ONNX node name: Edge debug handles}`` (QNN's op names).

        Raises:
            etkit_qnn.onnx_export.ExportError: a node that cannot be written for QNN (names it).
            etkit_qnn.htp_compile.HtpCompileError: QNN's HTP prepare refused the graph (names the ops).
            ImportError: onnxruntime-qnn is missing (says how to install it).
        """
        spec = QnnCompileSpec.from_list(compile_specs)
        exported = export_partition(edge_program, spec.use_fp16, "etkit_qnn_partition")
        start = time.perf_counter()
        context = compile_onnx(exported.model.SerializeToString(), spec.soc_model, spec.htp_arch, spec.use_fp16)
        logger.info("QNN HTP context for %s (v%d, %s): %d ONNX nodes -> %d bytes in %.2f s", spec.soc_model.name,
                    spec.htp_arch, spec.precision, len(exported.model.graph.node), len(context.binary),
                    time.perf_counter() - start)
        payload = QnnPayload(graph_name=context.graph_name, soc_model=int(spec.soc_model), htp_arch=int(spec.htp_arch),
                             precision=spec.precision, sdk_version=context.sdk_version, context_binary=context.binary,
                             inputs=[_info(i) for i in exported.inputs], outputs=[_info(o) for o in exported.outputs])
        # QNN names each op of the context after the ONNX node it came from; the delegate logs per-op
        # events under those names (runtime/src/qnn_profile.h), and this map leads them to the Edge nodes.
        return PreprocessResult(processed_bytes=pack(payload), debug_handle_map=exported.node_handles)
