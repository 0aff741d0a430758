"""The four models of the Vulkan issue run entirely in Vulkan and match torch eager: MobileNetV2 and ResNet-18
(torchvision, weights=None, batch-norm statistics calibrated so activations have realistic ranges), a 4-layer
nn.TransformerEncoder (d_model 256, 4 heads) and all-MiniLM-L6-v2 (real weights and tokenizer).

Tolerances: float32 within FP32_TOL of the output range; float16 (force_fp16) within FP16_TOL; the MiniLM
embedding also by cosine similarity. The CNNs run at 96 x 96 in CI (lavapipe executes shaders on the CPU);
ETKIT_VULKAN_FULL=1 runs them at 224 x 224.
"""
from __future__ import annotations

import os

import pytest
import torch
import torchvision

from vulkan_helpers import FP16_TOL, FP32_TOL, assert_close, load, lower

pytestmark = pytest.mark.device_sim

FULL = os.environ.get("ETKIT_VULKAN_FULL") == "1"
SIDE = 224 if FULL else 96


def _calibrated(model: torch.nn.Module) -> torch.nn.Module:
    """Batch-norm running statistics from a few random batches (as example_models does for MobileNetV2)."""
    g = torch.Generator().manual_seed(100)
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, SIDE, SIDE, generator=g))
    return model.eval()


def _image():
    return torch.randn(1, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(7))


def _assert_all_in_vulkan(edge):
    report = edge.partition_reports["forward"][0]
    assert report.num_partitions == 1 and not report.rejected, report.format()


@pytest.mark.parametrize("storage", ["buffer", "texture3d"])
def test_mobilenet_v2(storage):
    torch.manual_seed(0)
    model = _calibrated(torchvision.models.mobilenet_v2(weights=None))
    x = _image()
    edge, pte = lower(model, (x,), {"storage_type_override": storage})
    _assert_all_in_vulkan(edge)
    with torch.no_grad():
        ref = model(x)
    out = load(pte).execute([x])
    assert_close(out, ref, FP32_TOL, f"MobileNetV2 ({storage})")
    assert torch.equal(out[0].argmax(-1), ref.argmax(-1))


def test_mobilenet_v2_force_fp16():
    torch.manual_seed(0)
    model = _calibrated(torchvision.models.mobilenet_v2(weights=None))
    x = _image()
    edge, pte = lower(model, (x,), {"force_fp16": True})
    _assert_all_in_vulkan(edge)
    out = load(pte).execute([x])
    assert out[0].dtype == torch.float32  # the boundary stays float32
    with torch.no_grad():
        ref = model(x)
    assert_close(out, ref, FP16_TOL * 5, "MobileNetV2 force_fp16 (52 layers of float16 storage)")


def test_resnet18():
    torch.manual_seed(0)
    model = _calibrated(torchvision.models.resnet18(weights=None))
    x = _image()
    edge, pte = lower(model, (x,))
    _assert_all_in_vulkan(edge)
    with torch.no_grad():
        ref = model(x)
    assert_close(load(pte).execute([x]), ref, FP32_TOL, "ResNet-18")


def _encoder():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()


def test_transformer_encoder_with_dynamic_sequence_length():
    """One delegate for the whole encoder (attention's _safe_softmax included); the sequence length varies
    between executes within the exported bounds, and a longer one is refused with both shapes."""
    model = _encoder()
    seq = torch.export.Dim("seq", min=2, max=128)
    edge, pte = lower(model, (torch.randn(1, 128, 256),), dynamic_shapes=({1: seq},))
    _assert_all_in_vulkan(edge)
    method = load(pte)
    for length in (128, 7, 64, 2, 128):
        x = torch.randn(1, length, 256, generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            ref = model(x)
        assert_close(method.execute([x]), ref, FP32_TOL, f"encoder, sequence {length}")
    with pytest.raises(ValueError, match=r"at most \[1, 128, 256\], got \[1, 129, 256\]"):
        method.execute([torch.randn(1, 129, 256)])


def test_transformer_encoder_texture_storage():
    model = _encoder()
    x = torch.randn(1, 32, 256, generator=torch.Generator().manual_seed(3))
    edge, pte = lower(model, (x,), {"storage_type_override": "texture3d"})
    _assert_all_in_vulkan(edge)
    with torch.no_grad():
        ref = model(x)
    assert_close(load(pte).execute([x]), ref, FP32_TOL, "encoder (texture)")


@pytest.fixture(scope="module")
def minilm():
    import example_models

    return example_models.minilm(["Vulkan runs MiniLM on lavapipe.", "A second, longer sentence to embed here."],
                                 max_length=32)


@pytest.mark.parametrize("options", [None, {"force_fp16": True}], ids=["fp32", "force_fp16"])
def test_minilm_embeddings(minilm, options):
    """The transformer (embeddings, 6 layers, mean pooling) runs in one Vulkan delegate; the attention-mask
    preparation on int64/bool tensors (arange, comparisons, where) stays on the portable kernels."""
    model, inputs = minilm
    edge, pte = lower(model, inputs, options)
    report = edge.partition_reports["forward"][0]
    assert report.delegated.get("aten.linear.default") == 36 and report.delegated.get("aten.embedding.default") == 3
    for r in report.rejected:
        assert "int64" in r.reason or "bool" in r.reason or "not implemented" in r.reason, r
    out = load(pte).execute(list(inputs))
    with torch.no_grad():
        ref = model(*inputs)
    tol = FP32_TOL if options is None else FP16_TOL
    assert_close(out, ref, tol, f"MiniLM {options}")
    cosine = torch.nn.functional.cosine_similarity(out[0], ref, dim=-1).min().item()
    assert cosine > (0.99999 if options is None else 0.999), cosine
