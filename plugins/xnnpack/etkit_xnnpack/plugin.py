"""Entry point of the etkit-xnnpack plugin (group ``etkit.backends``, see docs/design/contracts.md §4).

Light on purpose: no torch import here; classes are named as ``"module:attribute"`` strings that
the core resolves when they are needed.
"""
from __future__ import annotations

import importlib.util

from etkit.plugins import hookimpl
from etkit.plugins.spec import Availability, BackendSpec, distribution_version

#: Backend id stored in the .pte (ExecuTorch's id for this backend).
BACKEND_ID = "XnnpackBackend"
#: Python extension whose import registers the C++ delegate with etkit's runtime.
RUNTIME_MODULE = "etkit_xnnpack._delegate"


def availability() -> Availability:
    """XNNPACK runs on any CPU this plugin was built for; it is unavailable only when the native
    delegate module was not built (a source checkout)."""
    if importlib.util.find_spec(RUNTIME_MODULE) is None:
        return Availability(False, f"the native delegate module {RUNTIME_MODULE} is not built; reinstall "
                                   f"etkit-xnnpack (pip install plugins/xnnpack)")
    return Availability(True)


@hookimpl
def etkit_register_backends(register) -> None:
    """Register ``XnnpackBackend``: preprocess, partitioner, runtime module and native library."""
    register(BackendSpec(
        backend_id=BACKEND_ID,
        backend_details="etkit_xnnpack.preprocess:XnnpackBackend",
        partitioners={"XnnpackPartitioner": "etkit_xnnpack.partition:XnnpackPartitioner"},
        quantizers={"XNNPACKQuantizer": "etkit_xnnpack.quantizer:XNNPACKQuantizer"},
        runtime_module=RUNTIME_MODULE,
        cmake_package="etkit_xnnpack",
        register_function="etkit_xnnpack_register_backends",
        plugin_api="2.0",
        version=distribution_version("etkit-xnnpack"),
        availability=availability,
    ))

