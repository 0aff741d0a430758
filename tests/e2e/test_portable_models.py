"""Whole models with no partitioner: every op on the portable kernels, compared with torch eager.

Random-init torchvision models give degenerate outputs (batch norm at its (0, 1) statistics, ViT's head
at zero), so their batch-norm statistics are estimated from random batches and ViT's head is drawn at
random; all-MiniLM-L6-v2 has its real weights. The error bound is relative to the output's magnitude:
max |etkit - eager| <= 1e-4 * max|eager| (fp32, different accumulation order over up to ~100 layers).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torchvision

import etkit
from etkit.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from example_models import minilm  # noqa: E402


def _vision_model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    if bns:
        model.train()
        with torch.no_grad():
            model(torch.randn(4, 3, 224, 224, generator=torch.Generator().manual_seed(1)))
    if name == "vit_b_16":
        torch.nn.init.normal_(model.heads.head.weight, std=0.05)
    return model.eval()


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "minilm"])
def test_model_runs_on_portable_kernels(name):
    if name == "minilm":
        model, inputs = minilm(["portable kernels run every op", "a second, longer sentence to pad"])
    else:
        model, inputs = _vision_model(name), (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2)),)
    program = etkit.to_edge(torch.export.export(model, inputs)).to_executorch()
    (got,) = Runtime.get().load_program(program.buffer).load_method("forward").execute(list(inputs))
    with torch.no_grad():
        want = model(*inputs)
    scale = float(want.abs().max())
    err = float((got - want).abs().max())
    print(f"\n{name}: max abs error {err:.2e} (output max {scale:.2e})")
    assert scale > 1e-3, f"{name}: degenerate reference output (max {scale:.1e}); the comparison would mean nothing"
    assert err <= 1e-4 * scale, f"{name}: max abs error {err:.2e} against eager (output max {scale:.2e})"
