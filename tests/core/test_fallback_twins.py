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
