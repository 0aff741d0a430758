"""Importing etkit_xnnpack._delegate registers XnnpackBackend with etkit's (shared) runtime, and the
backend takes the "num_threads" option. No ExecuTorch oracle needed."""
from __future__ import annotations

import pytest

runtime = pytest.importorskip("etkit.runtime")
delegate = pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")


def test_import_registers_xnnpack_backend_in_the_python_runtime():
    registry = runtime.Runtime.get().backend_registry
    assert "XnnpackBackend" in registry.registered_backend_names
    assert registry.is_available("XnnpackBackend")


def test_module_reports_backend_id_and_matching_abi_version():
    assert delegate.BACKEND_ID == "XnnpackBackend"
    assert delegate.ABI_VERSION == runtime.BACKEND_ABI_VERSION


def test_num_threads_option_is_accepted_and_bad_values_are_refused():
    rt = runtime.Runtime.get()
    rt.set_backend_option("XnnpackBackend", "num_threads", 2)
    rt.set_backend_option("XnnpackBackend", "num_threads", 1)
    with pytest.raises(runtime.EtkitRuntimeError):
        rt.set_backend_option("XnnpackBackend", "num_threads", 0)
    with pytest.raises(runtime.EtkitRuntimeError):
        rt.set_backend_option("XnnpackBackend", "no_such_option", 1)
