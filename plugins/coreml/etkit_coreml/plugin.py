"""Entry point of the etkit-coreml plugin (group ``etkit.backends``; docs/plugins.md).

Light on purpose: no torch or coremltools import here.
"""
from __future__ import annotations

import platform

from etkit.plugins import hookimpl
from etkit.plugins.spec import Availability, BackendSpec, distribution_version

#: Backend id stored in the .pte (ExecuTorch's id for Core ML).
BACKEND_ID = "CoreMLBackend"


def unavailable_reason(system: str | None = None) -> str:
    """Why Core ML cannot run here; the sentence users see when they load a Core ML method."""
    system = system or platform.system()
    if system == "Darwin":
        return ("the Core ML delegate is not built into this Python runtime; link etkit_coreml::delegate (the CMake "
                "package the etkit-coreml wheel installs on Apple platforms) into a native runner")
    return (f"Core ML delegate is not available on this platform ({system}); re-lower without CoreMLPartitioner "
            f"or run on macOS/iOS")


def availability() -> Availability:
    """Core ML exists only on Apple platforms; lowering works everywhere, running never does here."""
    return Availability(False, unavailable_reason())


def conformance_tolerance(dtype):
    """Core ML computes in fp16 by default (compute_precision=FLOAT16): (atol, rtol) = (0.05, 0.05)."""
    return (5e-2, 5e-2)


@hookimpl
def etkit_register_backends(register) -> None:
    """Register ``CoreMLBackend``: preprocess, partitioner and quantizer; no runtime off Apple platforms."""
    register(BackendSpec(
        backend_id=BACKEND_ID,
        backend_details="etkit_coreml.preprocess:CoreMLBackend",
        partitioners={"CoreMLPartitioner": "etkit_coreml.partition:CoreMLPartitioner"},
        quantizers={"CoreMLQuantizer": "etkit_coreml.quantizer:CoreMLQuantizer"},
        runtime_module=None,
        describe_payload="etkit_coreml.payload.describe:describe_payload",
        conformance_tolerance=conformance_tolerance,
        plugin_api="2.0",
        version=distribution_version("etkit-coreml"),
        availability=availability,
        runs_everywhere=False,
    ))
