"""dim_order: a model exported with a channels-last input keeps that layout in the program (its
tensors' dim_order is [0, 2, 3, 1]); the portable kernels compute on it correctly, the Python runtime
feeds a tensor of either layout, and XNNPACK (whose lowering takes contiguous tensors) refuses those
nodes with the reason, so they run on the portable kernels instead."""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit.runtime import Runtime


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 4, 1), torch.nn.Hardtanh()).eval()


@pytest.mark.parametrize("backend", ["portable", "xnnpack"])
def test_channels_last_program_matches_eager(backend):
    model = _model()
    x = torch.randn(2, 3, 10, 10).to(memory_format=torch.channels_last)
    ep = torch.export.export(model, (x,))
    if backend == "xnnpack":
        etkit_xnnpack = pytest.importorskip("etkit_xnnpack")
        edge = etkit.to_edge_transform_and_lower(ep, partitioner=[etkit_xnnpack.XnnpackPartitioner()])
        report = edge.partition_reports["forward"][0].format()
        assert "not contiguous" in report, report
    else:
        edge = etkit.to_edge(ep)
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    assert method.metadata.inputs[0].dim_order == (0, 2, 3, 1)
    with torch.no_grad():
        want = model(x)
    for given in (x, x.contiguous()):  # the runtime re-lays a contiguous tensor out as channels-last
        (got,) = method.execute([given])
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)  # fp32 vs eager
