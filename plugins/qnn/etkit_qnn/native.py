"""Importing this module registers the C++ delegate ``QnnBackend`` with etkit's runtime.

It tells the delegate where ONNX Runtime and the QNN execution provider are (:mod:`etkit_qnn.libraries`);
the delegate loads them with ``dlopen`` when the first QNN method is loaded. ``etkit.runtime.Runtime`` imports
this module on first use, through ``BackendSpec.runtime_module``.

Raises (on import):
    ImportError: the native module is missing or the runtime refused the registration (ABI mismatch).
"""
from __future__ import annotations

import etkit.runtime  # noqa: F401  (loads libetkit_runtime.so before the delegate needs it)

from . import _delegate
from .libraries import find_libraries

BACKEND_ID = _delegate.BACKEND_ID
_found = find_libraries()
_delegate.set_library_paths(_found.onnxruntime or "", _found.qnn_ep or "", _found.htp_backend or "")
