"""Fallback twins (core/etkit/fallback.py, docs/fallback.md) with the toy backend, which has no runtime:
the primary plan cannot load, the "#fallback" plan runs on the portable kernels and matches eager."""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit import ExecutorchBackendConfig
from etkit.fallback import FALLBACK_SUFFIX, FallbackError
from etkit.runtime import EtkitRuntimeError, Runtime
from etkit.serialize.pte import read_layout
from tests.core.toy_backend import TOY_ID, ToyPartitioner


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x * y + y)


INPUTS = (torch.randn(2, 5), torch.randn(2, 5))


def _lowered():
    return etkit.to_edge_transform_and_lower(torch.export.export(AddMul(), INPUTS), partitioner=[ToyPartitioner()])


def _plan_names(data: bytes) -> list:
    names = [p.name for p in read_layout(data).program.executionPlan]
    return [n.decode() if isinstance(n, bytes) else n for n in names]


def test_twin_runs_where_the_backend_is_missing(toy_plugin):
    data = _lowered().to_executorch(ExecutorchBackendConfig(delegate_fallback=[TOY_ID])).buffer
    assert _plan_names(data) == ["forward", "forward" + FALLBACK_SUFFIX]
    program = Runtime.get().load_program(data)
    assert program.method_names == {"forward"}
    method = program.load_method("forward")
    assert TOY_ID in method.fallback_reason and "not registered" in method.fallback_reason
    assert method.metadata.backends == ()  # the twin: portable kernels only
    (out,) = method.execute(list(INPUTS))
    torch.testing.assert_close(out, AddMul()(*INPUTS), atol=1e-6, rtol=1e-6)


def test_without_a_twin_the_missing_backend_is_an_error(toy_plugin):
    data = _lowered().to_executorch().buffer
    assert _plan_names(data) == ["forward"]
    with pytest.raises(EtkitRuntimeError, match=f"backend '{TOY_ID}' which is not registered"):
        Runtime.get().load_program(data).load_method("forward")


def test_true_selects_only_backends_that_do_not_run_everywhere(toy_plugin):
    # the toy backend keeps BackendSpec's default runs_everywhere=True: no twin
    data = _lowered().to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).buffer
    assert _plan_names(data) == ["forward"]


def test_a_transformed_program_cannot_get_a_twin(toy_plugin):
    manager = _lowered().transform([lambda gm: gm])
    with pytest.raises(FallbackError, match="to_edge_transform_and_lower"):
        manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=[TOY_ID]))


def test_a_fresh_process_registers_the_backends_of_the_twin(toy_plugin, tmp_path):
    """The twin delegates to an installed backend whose plugin no earlier load imported: ``load_method`` registers
    the twin's backends as well as the primary plan's, so the twin runs in a process that loads only this file."""
    import subprocess
    import sys

    from etkit.plugins import get_backend_specs
    runnable = [s for s in get_backend_specs() if s.runtime_module and s.is_available() and s.partitioners
                and s.backend_id != TOY_ID]
    if not runnable:
        pytest.skip("no installed backend with a runtime here")
    class MulAdd(torch.nn.Module):  # all toy ops: the primary plan delegates to the toy backend only
        def forward(self, x, y):
            return x * y + y

    path = tmp_path / "twin.pte"
    for spec in runnable:  # the first backend that takes part of this float program into its twin
        other = spec.load_partitioner(next(iter(spec.partitioners)))()
        manager = etkit.to_edge_transform_and_lower(torch.export.export(MulAdd(), INPUTS),
                                                    partitioner=[ToyPartitioner(), other])
        data = manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=[TOY_ID])).buffer
        twin = read_layout(data).program.executionPlan[1]
        if twin.delegates:
            path.write_bytes(data)
            break
    else:
        pytest.skip("no installed backend delegates this float program")
    torch.save(INPUTS, tmp_path / "inputs.pt")
    child = (
        "import sys, torch\n"
        "from etkit.runtime import Runtime\n"
        "method = Runtime.get().load_program(sys.argv[1]).load_method('forward')\n"
        "(out,) = method.execute(list(torch.load(sys.argv[2])))\n"
        "print('backends', method.metadata.backends)\n"
        "torch.save(out, sys.argv[3])\n")
    proc = subprocess.run([sys.executable, "-c", child, str(path), str(tmp_path / "inputs.pt"),
                           str(tmp_path / "out.pt")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"backends ('{spec.backend_id}',)" in proc.stdout, proc.stdout
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), MulAdd()(*INPUTS), atol=1e-5, rtol=1e-5)
