"""``Tensor.unfold`` (``aten::unfold_copy.out``, the portable kernel): windows along a dim as a new last
dim, compared exactly with torch eager, alone and after a delegate (XNNPACK when installed)."""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit.runtime import Runtime


class Unfold(torch.nn.Module):
    def __init__(self, dim, size, step):
        super().__init__()
        self.args = (dim, size, step)

    def forward(self, x):
        return (x * 2).unfold(*self.args)


CASES = [
    ((2, 9, 4), (1, 3, 2)),     # overlapping windows
    ((2, 9, 4), (-1, 2, 3)),    # last dim, windows further apart than their size
    ((5, 6), (0, 4, 1)),        # windows of 4 over 5 rows: two
    ((3, 4, 5), (2, 5, 5)),     # size == the dim: one window
    ((7,), (0, 1, 1)),          # size 1
    ((), (0, 1, 1)),            # 0-D: [1]
]


def _partitioners(delegate: bool) -> list:
    if not delegate:
        return []
    xnnpack = pytest.importorskip("etkit_xnnpack")
    return [xnnpack.XnnpackPartitioner()]


@pytest.mark.parametrize("delegate", [False, True], ids=["portable", "after-delegate"])
@pytest.mark.parametrize("shape,args", CASES)
def test_unfold_equals_eager(shape, args, delegate):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
    model = Unfold(*args)
    ep = torch.export.export(model, (x,))
    program = etkit.to_edge_transform_and_lower(ep, partitioner=_partitioners(delegate)).to_executorch()
    (out,) = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])
    assert torch.equal(out, model(x))
