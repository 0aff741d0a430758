"""Dynamic shapes end to end: export with `torch.export.Dim` ranges, memory planned for the upper
bounds, outputs resized at run time, an over-bound input refused with a message naming both shapes."""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit.emit.method_emitter import EmitError
from etkit.runtime import Runtime


class EmbedProject(torch.nn.Module):
    """Batch and sequence length both dynamic; size arithmetic (view with -1, slicing by a size)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, ids, x):
        h = self.embed(ids) + x
        y = torch.softmax(self.proj(h), dim=-1)
        return y.reshape(y.shape[0], -1)[:, 1:], y.sum(1)


def _lower(model, example, dynamic_shapes, partitioner=None):
    ep = torch.export.export(model, example, dynamic_shapes=dynamic_shapes)
    edge = (etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner]) if partitioner
            else etkit.to_edge(ep))
    return Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")


def test_batch_and_sequence_dims_run_at_every_size_in_range():
    torch.manual_seed(0)
    model = EmbedProject().eval()
    B, S = torch.export.Dim("B", max=4), torch.export.Dim("S", max=12)
    ids, x = torch.randint(0, 50, (2, 5)), torch.randn(2, 5, 16)
    method = _lower(model, (ids, x), ({0: B, 1: S}, {0: B, 1: S}))
    for b, s in [(2, 5), (1, 1), (4, 12), (3, 7), (2, 5)]:
        ids, x = torch.randint(0, 50, (b, s)), torch.randn(b, s, 16)
        got = method.execute([ids, x])
        with torch.no_grad():
            want = model(ids, x)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (b, s)
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)  # fp32 portable kernels vs eager


def test_an_input_over_the_bound_is_refused_with_both_shapes():
    model = EmbedProject().eval()
    B, S = torch.export.Dim("B", max=4), torch.export.Dim("S", max=12)
    method = _lower(model, (torch.randint(0, 50, (2, 5)), torch.randn(2, 5, 16)), ({0: B, 1: S}, {0: B, 1: S}))
    with pytest.raises(ValueError, match=r"input 0 expects shape at most \[4, 12\], got \[5, 3\]"):
        method.execute([torch.randint(0, 50, (5, 3)), torch.randn(5, 3, 16)])
    # the method still works after the refusal
    (y, _) = method.execute([torch.randint(0, 50, (1, 3)), torch.randn(1, 3, 16)])
    assert y.shape == (1, 23)


def test_an_unbounded_dim_is_refused_at_emit_time():
    model = EmbedProject().eval()
    B = torch.export.Dim("B")  # no max: memory cannot be planned
    ep = torch.export.export(model, (torch.randint(0, 50, (2, 5)), torch.randn(2, 5, 16)),
                             dynamic_shapes=({0: B}, {0: B}))
    with pytest.raises(EmitError, match="has no upper bound.*Dim"):
        etkit.to_edge(ep).to_executorch()


def test_transformer_layer_with_dynamic_sequence_and_a_partitioner():
    """A partitioner delegates the dynamic nodes it can run and names the others (here two dynamic dims, batch
    and sequence, which XNNPACK's reshapes cannot infer together); the portable kernels run those."""
    etkit_xnnpack = pytest.importorskip("etkit_xnnpack")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).eval()
    B, S = torch.export.Dim("B", max=3), torch.export.Dim("S", min=2, max=16)
    method = _lower(layer, (torch.randn(2, 6, 32),), ({0: B, 1: S},), etkit_xnnpack.XnnpackPartitioner())
    for b, s in [(2, 6), (1, 2), (3, 16)]:
        x = torch.randn(b, s, 32)
        (y,) = method.execute([x])
        with torch.no_grad():
            torch.testing.assert_close(y, layer(x), atol=1e-4, rtol=1e-4)
