"""Lowering to the Vulkan delegate and comparing with torch eager, for the tests of etkit-vulkan.

Tolerances (stated once, used everywhere): float32 outputs within ``FP32_TOL`` of the output's range,
float16 within ``FP16_TOL`` of it (float16 storage rounds every intermediate to 11 significant bits;
the shaders compute in float32).
"""
from __future__ import annotations

import torch

import etkit
from etkit.runtime import Runtime

FP32_TOL = 1e-4
FP16_TOL = 1e-2


def require_vulkan() -> None:
    """Fails with the plugin's reason when this machine has no usable Vulkan device."""
    from etkit_vulkan.plugin import availability

    a = availability()
    assert a.available, f"no Vulkan device for the tests: {a.reason}"


def lower(model, inputs, options=None, dynamic_shapes=None, **partitioner_kwargs):
    """``(edge program manager, .pte bytes)`` of ``model`` lowered with ``VulkanPartitioner(options)``."""
    from etkit_vulkan import VulkanPartitioner

    if isinstance(model, torch.nn.Module) and not isinstance(model, torch.fx.GraphModule):
        model = model.eval()
    ep = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes)
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner(options, **partitioner_kwargs)])
    return edge, edge.to_executorch().buffer


def load(pte: bytes):
    require_vulkan()
    return Runtime.get().load_program(pte).load_method("forward")


def delegated_ops(edge) -> dict:
    return edge.partition_reports["forward"][0].delegated


def assert_close(actual, expected, tol: float, what: str = "") -> None:
    """Every output within ``tol * max(1, range of the expected output)``, same shape."""
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, {len(expected)} expected"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert tuple(a.shape) == tuple(e.shape), f"{what} output {i}: shape {tuple(a.shape)}, {tuple(e.shape)} expected"
        e32, a32 = e.detach().float(), a.float()
        spread = (e32.max() - e32.min()).item() if e32.numel() else 1.0
        bound = tol * max(1.0, spread)
        err = (a32 - e32).abs().max().item() if e32.numel() else 0.0
        assert err <= bound, f"{what} output {i}: max abs error {err:.3g} > {bound:.3g} (range {spread:.3g})"


def run_and_compare(model, inputs, options=None, tol=FP32_TOL, expect_all_delegated=True, **kw):
    """Lowers, runs on the Vulkan delegate and compares with eager; returns the edge program manager."""
    edge, pte = lower(model, inputs, options, **kw)
    report = edge.partition_reports["forward"][0]
    assert report.num_delegated > 0, f"nothing delegated:\n{report.format()}"
    if expect_all_delegated:
        assert not report.rejected, f"not everything delegated:\n{report.format()}"
    method = load(pte)
    out = method.execute(list(inputs))
    with torch.no_grad():
        ref = model(*inputs)
    assert_close(out, ref, tol, type(model).__name__)
    return edge
