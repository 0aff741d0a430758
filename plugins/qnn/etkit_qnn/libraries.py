"""Where the vendor libraries the QNN delegate loads at run time are (no imports of them; no side effects).

* ONNX Runtime's shared library: ``onnxruntime/capi/libonnxruntime.so.<version>`` of the installed
  ``onnxruntime`` wheel, or ``ETKIT_QNN_ONNXRUNTIME_LIBRARY``.
* The QNN execution provider: ``onnxruntime_qnn/libonnxruntime_providers_qnn.so`` of ``onnxruntime-qnn``
  (which also ships ``libQnnHtp.so``, the HTP backend with its x86 simulator, and ``libQnnSystem.so``), or
  ``ETKIT_QNN_EP_LIBRARY``.
* With ``QNN_SDK_ROOT`` set (a Qualcomm AI Runtime SDK), the HTP backend library is taken from
  ``$QNN_SDK_ROOT/lib/x86_64-linux-clang/libQnnHtp.so`` instead (the EP's ``backend_path`` option); its
  version must be one the EP accepts.
"""
from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class QnnLibraries:
    onnxruntime: Optional[str]
    qnn_ep: Optional[str]
    htp_backend: Optional[str]   # None: the EP's own libQnnHtp.so
    missing: Optional[str]       # why the delegate cannot run, or None


def _package_dir(name: str) -> Optional[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def find_libraries() -> QnnLibraries:
    """Locate the libraries (environment overrides first, then the installed wheels)."""
    ort = os.environ.get("ETKIT_QNN_ONNXRUNTIME_LIBRARY")
    if not ort:
        folder = _package_dir("onnxruntime")
        found = sorted(p for p in glob.glob(os.path.join(folder, "capi", "libonnxruntime.so*")) if folder) \
            if folder else []
        ort = found[-1] if found else None
    ep = os.environ.get("ETKIT_QNN_EP_LIBRARY")
    if not ep:
        folder = _package_dir("onnxruntime_qnn")
        candidate = os.path.join(folder, "libonnxruntime_providers_qnn.so") if folder else None
        ep = candidate if candidate and os.path.isfile(candidate) else None
    htp = None
    sdk = os.environ.get("QNN_SDK_ROOT")
    missing = None
    if sdk:
        htp = os.path.join(sdk, "lib", "x86_64-linux-clang", "libQnnHtp.so")
        if not os.path.isfile(htp):
            missing = f"QNN_SDK_ROOT={sdk} has no lib/x86_64-linux-clang/libQnnHtp.so"
    if ort is None or not os.path.isfile(ort):
        missing = "ONNX Runtime's shared library (the onnxruntime wheel) is not installed"
    elif ep is None or not os.path.isfile(ep):
        missing = "onnxruntime-qnn (the QNN execution provider with Qualcomm's HTP libraries) is not installed"
    return QnnLibraries(ort, ep, htp, missing)
