"""Entry point of the etkit-qnn plugin (group ``etkit.backends``; docs/plugins.md).

Light on purpose: no torch, onnx or onnxruntime import here.
"""
from __future__ import annotations

import importlib.util

from etkit.plugins import hookimpl
from etkit.plugins.spec import Availability, BackendSpec, distribution_version

#: Backend id stored in the .pte (ExecuTorch's id for the Qualcomm backend).
BACKEND_ID = "QnnBackend"
#: Python extension whose import registers the C++ delegate with etkit's runtime.
RUNTIME_MODULE = "etkit_qnn.native"
#: What to do when the vendor libraries are missing.
INSTALL_HINT = "install etkit-qnn's runtime extra: pip install 'etkit-qnn[runtime]' (onnxruntime-qnn==2.7.0)"


def availability() -> Availability:
    """Runs where the native delegate is built and ONNX Runtime with its QNN execution provider (which
    brings Qualcomm's x86 HTP simulator, or the HTP itself on a Snapdragon device) is installed."""
    if importlib.util.find_spec("etkit_qnn._delegate") is None:
        return Availability(False, "the native delegate module etkit_qnn._delegate is not built; reinstall etkit-qnn "
                                   "(pip install --no-build-isolation plugins/qnn)")
    from .libraries import find_libraries
    found = find_libraries()
    if found.missing:
        return Availability(False, f"{found.missing}; {INSTALL_HINT}")
    return Availability(True)


def conformance_prepare(module, example_inputs):
    """The default compile specs are quantized: each conformance case is quantized with ``QnnQuantizer``,
    calibrated on the case's inputs. 16-bit activations (16a8w), so that the comparison checks the lowering to
    within a 16-bit step; 8a8w models are checked against LSB-based tolerances in the plugin's own tests."""
    from .quantizer import QuantDtype, quantize_for_qnn
    return quantize_for_qnn(module, example_inputs, quant_dtype=QuantDtype.use_16a8w)


def conformance_tolerance(dtype):
    """Against the PT2E reference (16a8w, see :func:`conformance_prepare`): the suite's outputs reach |85|, whose
    16-bit step is 0.0026; the HTP is within 10 steps (measured 0.024 on the MLP case), so 0.05 absolute plus 1%."""
    return (0.05, 0.01)


@hookimpl
def etkit_register_backends(register) -> None:
    """Register ``QnnBackend``: preprocess, partitioner, quantizer, runtime module and native library."""
    register(BackendSpec(
        backend_id=BACKEND_ID,
        backend_details="etkit_qnn.preprocess:QnnBackend",
        partitioners={"QnnPartitioner": "etkit_qnn.partition:QnnPartitioner"},
        quantizers={"QnnQuantizer": "etkit_qnn.quantizer:QnnQuantizer"},
        runtime_module=RUNTIME_MODULE,
        cmake_package="etkit_qnn",
        register_function="etkit_qnn_register_backends",
        describe_payload="etkit_qnn.describe:describe_payload",
        dump_payload="etkit_qnn.describe:dump_payload",
        conformance_prepare=conformance_prepare,
        conformance_tolerance=conformance_tolerance,
        plugin_api="2.0",
        version=distribution_version("etkit-qnn"),
        availability=availability,
        runs_everywhere=False,
    ))
