"""Backend registration and lookup through the runtime (docs/design/contracts.md section 3)."""
from __future__ import annotations

import pytest
import torch

from etkit import _runtime
from etkit.runtime import BACKEND_ABI_VERSION, EtkitRuntimeError, Runtime

from .programs import add_program


def test_abi_mismatch_is_refused_naming_both_versions():
    wrong = BACKEND_ABI_VERSION + 7
    code, message = _runtime._register_probe_backend(wrong, "EtkitAbiProbeBackend")
    assert code != 0
    assert str(wrong) in message and str(BACKEND_ABI_VERSION) in message, message
    assert "EtkitAbiProbeBackend" not in Runtime.get().backend_registry.registered_backend_names


def test_missing_backend_names_it_and_says_what_to_do():
    program = Runtime.get().load_program(add_program(delegate_backend="EtkitNoSuchBackend"))
    with pytest.raises(EtkitRuntimeError) as info:
        program.load_method("forward")
    assert ("program needs backend 'EtkitNoSuchBackend' which is not registered in this runtime; "
            "install/link its plugin") in str(info.value)
    # the same facts as attributes (no text to parse): the runtime's error code, the backend, where it failed
    error = info.value
    assert (error.code, error.backend_id, error.method, error.delegate_index) == \
        ("NotFound", "EtkitNoSuchBackend", "forward", 0)
    assert error.instruction is None and error.operator is None and "EtkitNoSuchBackend" in error.detail


def test_kernel_failure_at_execute_names_the_operator_and_instruction():
    """A kernel that fails while executing (an index out of range) raises with code, operator, instruction and
    method as attributes; a failure outside any instruction has them None."""
    import etkit

    class Gather(torch.nn.Module):
        def forward(self, x, i):
            return x[i] * 2

    program = etkit.to_edge(torch.export.export(Gather(), (torch.randn(4, 3), torch.tensor([1, 2])))).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    with pytest.raises(EtkitRuntimeError) as info:
        method.execute([torch.randn(4, 3), torch.tensor([1, 9])])
    error = info.value
    assert error.method == "forward" and error.operator.startswith("aten::index") and error.backend_id is None
    assert isinstance(error.instruction, int) and f"instruction {error.instruction} of method 'forward'" in str(error)
    assert error.code in ("InvalidArgument", "InvalidState") and error.code in str(error)
    with pytest.raises(EtkitRuntimeError) as info:
        Runtime.get().load_program(b"not a program at all")
    assert info.value.code == "InvalidProgram" and info.value.instruction is None and info.value.backend_id is None


def test_registered_backend_is_listed_and_used_by_load_method():
    code, message = _runtime._register_probe_backend(BACKEND_ABI_VERSION, "EtkitProbeBackend")
    assert code == 0, message
    runtime = Runtime.get()
    assert "EtkitProbeBackend" in runtime.backend_registry.registered_backend_names
    assert runtime.backend_registry.is_available("EtkitProbeBackend")
    # The probe's init() refuses every payload: load_method reports the backend's failure by name.
    with pytest.raises(EtkitRuntimeError, match="backend 'EtkitProbeBackend' failed to initialise") as info:
        runtime.load_program(add_program(delegate_backend="EtkitProbeBackend")).load_method("forward")
    assert (info.value.backend_id, info.value.method, info.value.delegate_index) == ("EtkitProbeBackend", "forward", 0)


def test_set_backend_option_unknown_backend_raises():
    with pytest.raises(EtkitRuntimeError, match="NoSuchBackend"):
        Runtime.get().set_backend_option("NoSuchBackend", "num_threads", 2)


def test_portable_kernels_are_registered_under_executorch_names():
    names = Runtime.get().operator_registry.operator_names
    for op in ("aten::add.out", "aten::mm.out", "aten::convolution.out", "aten::_softmax.out",
               "dim_order_ops::_to_dim_order_copy.out", "aten::native_layer_norm.out", "aten::view_copy.out"):
        assert op in names


def test_runtime_get_is_a_singleton():
    assert Runtime.get() is Runtime.get()


def test_the_docs_errors_example_runs(capsys):
    """docs/runtime.md "Errors": its example, as written, prints what its comment says."""
    from tests.docs_examples import run_docs_example

    source = run_docs_example("runtime.md", "## Errors")
    printed = capsys.readouterr().out.strip()
    assert printed == "InvalidArgument aten::index.Tensor_out 0" and f"# {printed}" in source
