"""etkit-ethosu: the Arm Ethos-U backend (backend id ``EthosUBackend``).

Quantized (int8) subgraphs are lowered to TOSA 1.0 (INT profile), compiled by Vela for the compile spec's
accelerator, and stored as the payload ExecuTorch's Arm backend writes. The TOSA graphs can be run on the
TOSA reference model on any host (:func:`run_on_tosa_reference`); the command stream needs an NPU.

Seed pages: "Arm Ethos-U Backend", "Partitioner API" (Ethos-U), "Quantization" (Ethos-U).
"""
from __future__ import annotations

__all__ = ["EthosUCompileSpec", "EthosUPartitioner", "EthosUQuantizer", "EthosUBackend",
           "get_symmetric_quantization_config", "run_on_tosa_reference", "quantize_for_ethosu",
           "performance_report", "partition_estimates", "BACKEND_ID"]

from .plugin import BACKEND_ID

_LAZY = {
    "EthosUCompileSpec": ".compile_spec",
    "EthosUPartitioner": ".partition",
    "EthosUQuantizer": ".quantizer",
    "get_symmetric_quantization_config": ".quantizer",
    "EthosUBackend": ".preprocess",
    "run_on_tosa_reference": ".reference",
    "quantize_for_ethosu": ".pt2e",
    "performance_report": ".estimate",
    "partition_estimates": ".estimate",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
