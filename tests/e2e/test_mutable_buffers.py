"""Mutable buffers (a running sum, a KV cache): the buffer keeps its value from one execution to the
next, starts from the value it had at export, and is never folded as a constant or moved into a
delegate. Compared with the same module run eagerly step by step."""
from __future__ import annotations

import copy

import pytest
import torch

import etkit
from etkit.runtime import Runtime


class RunningMean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.full((4,), 0.5))
        self.register_buffer("steps", torch.tensor(0))
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.total.add_(x)
        self.steps.add_(1)
        return self.proj(self.total / self.steps)


class KVCache(torch.nn.Module):
    """Writes one position of a cache per call and attends over what is written so far."""

    def __init__(self, length=6, dim=8):
        super().__init__()
        self.register_buffer("keys", torch.zeros(length, dim))
        self.q = torch.nn.Linear(dim, dim)

    def forward(self, x, pos):
        self.keys.index_put_((pos,), x)
        scores = self.keys @ self.q(x).reshape(-1, 1)
        return torch.softmax(scores.reshape(-1), dim=0)


def _lower(model, example, partitioner):
    ep = torch.export.export(copy.deepcopy(model), example)
    edge = (etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner]) if partitioner else etkit.to_edge(ep))
    return Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")


@pytest.mark.parametrize("backend", ["portable", "xnnpack"])
def test_buffers_carry_state_across_executions(backend):
    partitioner = None
    if backend == "xnnpack":
        partitioner = pytest.importorskip("etkit_xnnpack").XnnpackPartitioner()
    torch.manual_seed(0)
    for model, make_inputs in [
        (RunningMean().eval(), lambda i: (torch.randn(4, generator=torch.Generator().manual_seed(i)),)),
        (KVCache().eval(), lambda i: (torch.randn(1, 8, generator=torch.Generator().manual_seed(i)), torch.tensor([i]))),
    ]:
        method = _lower(model, make_inputs(0), partitioner)
        eager = copy.deepcopy(model)
        for step in range(5):
            inputs = make_inputs(step + 1)
            (got,) = method.execute(list(inputs))
            with torch.no_grad():
                want = eager(*inputs)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)  # fp32 vs eager, same state


def test_a_fresh_method_starts_from_the_exported_state():
    model = RunningMean().eval()
    x = torch.ones(4)
    program = etkit.to_edge(torch.export.export(copy.deepcopy(model), (x,))).to_executorch().buffer
    first = Runtime.get().load_program(program).load_method("forward").execute([x])[0]
    again = Runtime.get().load_program(program).load_method("forward").execute([x])[0]
    torch.testing.assert_close(first, again, atol=0, rtol=0)


def test_only_nonzero_initial_states_are_stored():
    """A buffer that starts all zeros (a KV cache, a step counter) stores no initial state: the runtime zeroes
    planned memory before the first execute. RunningMean's total (0.5) is stored; its steps (0) and KVCache's
    keys are not, and both still match eager (test_buffers_carry_state_across_executions)."""
    from etkit.serialize.pte import deserialize_pte

    def stored(model, example):
        pte = etkit.to_edge(torch.export.export(copy.deepcopy(model), example)).to_executorch().buffer
        return [len(b) for b in deserialize_pte(pte).mutable_data if b]

    assert stored(RunningMean().eval(), (torch.ones(4),)) == [4 * 4]
    assert stored(KVCache(length=64).eval(), (torch.ones(1, 8), torch.tensor([0]))) == []
