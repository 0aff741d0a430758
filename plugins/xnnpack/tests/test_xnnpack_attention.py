"""Attention stays in one XNNPACK delegate: ``_safe_softmax`` (what ``scaled_dot_product_attention``
decomposes to) is lowered with XNNPACK arithmetic instead of leaving its boolean guard ops
(eq / logical_not / any / where) to the portable kernels. Compared with torch eager; fully masked
rows must be exactly 0, as PyTorch defines ``_safe_softmax``.
"""
from __future__ import annotations

import pytest
import torch

from helpers import requires_fb
from helpers import lower

pytestmark = requires_fb

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")


def _run(manager, inputs):
    program = manager.to_executorch()
    return runtime.Runtime.get().load_program(program.buffer).load_method("forward").execute(list(inputs))


class _Sdpa(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_sdpa_with_masked_rows_is_one_delegate_and_matches_eager():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 16) for _ in range(3))
    mask = torch.zeros(1, 1, 7, 7)
    mask[..., 1, :] = float("-inf")                       # fully masked: _safe_softmax gives 0
    mask[..., 2, :5] = float("-inf")                      # partly masked
    mask[..., 3, :] = torch.finfo(torch.float32).min      # large negative but finite: plain softmax
    mask[..., 4, 3] = float("inf")                        # one +inf entry
    inputs = (q, k, v, mask)
    manager, partitioner = lower(_Sdpa(), inputs)
    report = partitioner.report()
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (y,) = _run(manager, inputs)
    expected = _Sdpa()(*inputs)
    assert torch.equal(y[:, :, 1], torch.zeros_like(y[:, :, 1])), "a fully masked row must give exactly 0"
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5, equal_nan=True)


def test_transformer_encoder_is_one_delegate_and_matches_eager():
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(1, 20, 64)
    manager, partitioner = lower(model, (x,))
    report = partitioner.report()
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (y,) = _run(manager, (x,))
    expected = model(x)
    torch.testing.assert_close(y, expected, atol=1e-4 * float(expected.abs().max()), rtol=0)
