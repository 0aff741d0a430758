"""etkit-qnn: the Qualcomm AI Engine Direct (QNN) backend (backend id ``QnnBackend``).

Partitions become real QNN HTP context binaries, compiled ahead of time by Qualcomm's HTP prepare through ONNX
Runtime's QNN execution provider (``onnxruntime-qnn``), and run by etkit's C++ delegate: on x86 on the HTP
simulator in ``libQnnHtp.so``, on a Snapdragon device on the HTP. Seed pages: "Qualcomm AI Engine Backend",
"Run Llama 3 3B Instruct on Android (with Qualcomm AI Engine Direct Backend)".
"""
from __future__ import annotations

__all__ = ["QnnPartitioner", "QnnQuantizer", "QuantDtype", "QnnBackend", "QcomChipset", "HtpArch",
           "generate_htp_compiler_spec", "generate_qnn_executorch_compiler_spec", "get_soc_to_htp_arch_map",
           "quantize_for_qnn", "BACKEND_ID"]

from .plugin import BACKEND_ID

_LAZY = {
    "QnnPartitioner": ".partition",
    "QnnQuantizer": ".quantizer",
    "QuantDtype": ".quantizer",
    "quantize_for_qnn": ".quantizer",
    "QnnBackend": ".preprocess",
    "QcomChipset": ".compile_spec",
    "HtpArch": ".compile_spec",
    "generate_htp_compiler_spec": ".compile_spec",
    "generate_qnn_executorch_compiler_spec": ".compile_spec",
    "get_soc_to_htp_arch_map": ".compile_spec",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
