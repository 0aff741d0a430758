"""Every op the Vulkan partitioner delegates, lowered alone and run on the Vulkan device (lavapipe here),
compared with torch eager: float32 buffers within FP32_TOL of the output range, textures the same, float16
within FP16_TOL (vulkan_helpers). A meta-test checks every op of etkit_vulkan.op_support has a case here."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from etkit_vulkan.op_support import BY_TARGET
from vulkan_helpers import FP16_TOL, FP32_TOL, run_and_compare

pytestmark = pytest.mark.device_sim

aten = torch.ops.aten
F = nn.functional


class Fn(nn.Module):
    def __init__(self, fn, **mods):
        super().__init__()
        self.fn = fn
        for k, v in mods.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def r(*shape, seed=0, positive=False):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return t.abs() + 0.1 if positive else t


def seeded(module: nn.Module, seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
        for name, b in module.named_buffers():
            if b.is_floating_point():
                b.copy_(torch.rand(b.shape, generator=g) + 0.5 if "var" in name else torch.randn(b.shape, generator=g) * 0.1)
    return module.eval()


def conv_bn(*args, **kw):
    return nn.Sequential(nn.Conv2d(*args, **kw), nn.BatchNorm2d(args[1]))


#: name -> (module, inputs, edge ops the case exercises)
CASES = {
    # binary arithmetic (broadcasting, scalars, alpha)
    "add_alpha": (Fn(lambda m, x, y: torch.add(x, y, alpha=0.5)), (r(2, 3, 4, 5), r(3, 1, 5, seed=1)), {aten.add.Tensor}),
    "sub_alpha": (Fn(lambda m, x, y: torch.sub(x, y, alpha=2.0)), (r(4, 7), r(7, seed=1)), {aten.sub.Tensor}),
    "mul_broadcast": (Fn(lambda m, x, y: x * y), (r(2, 1, 6), r(3, 1, seed=1)), {aten.mul.Tensor}),
    "div": (Fn(lambda m, x, y: x / y), (r(3, 9), r(3, 9, seed=1, positive=True)), {aten.div.Tensor}),
    "div_floor": (Fn(lambda m, x, y: torch.div(x, y, rounding_mode="floor")), (r(3, 9) * 5, r(3, 9, seed=1, positive=True)),
                  {aten.div.Tensor_mode}),
    "pow_tensor": (Fn(lambda m, x, y: torch.pow(x, y)), (r(5, 6, positive=True), r(5, 6, seed=1)), {aten.pow.Tensor_Tensor}),
    "pow_scalar": (Fn(lambda m, x: x ** 3), (r(5, 6),), {aten.pow.Tensor_Scalar}),
    "maximum": (Fn(lambda m, x, y: torch.maximum(x, y)), (r(4, 5), r(5, seed=1)), {aten.maximum.default}),
    "minimum": (Fn(lambda m, x, y: torch.minimum(x, y)), (r(4, 5), r(4, 1, seed=1)), {aten.minimum.default}),
    "add_scalar": (Fn(lambda m, x: aten.add.Scalar(x, 2.5, alpha=2)), (r(3, 5),), {aten.add.Scalar}),
    "sub_scalar": (Fn(lambda m, x: aten.sub.Scalar(x, 1.5)), (r(3, 5),), {aten.sub.Scalar}),
    "mul_scalar": (Fn(lambda m, x: aten.mul.Scalar(x, -3.0)), (r(3, 5),), {aten.mul.Scalar}),
    "div_scalar": (Fn(lambda m, x: aten.div.Scalar(x, 4.0)), (r(3, 5),), {aten.div.Scalar}),
    "rsub_scalar": (Fn(lambda m, x: 2.0 - x), (r(3, 5),), {aten.rsub.Scalar}),
    "remainder_scalar": (Fn(lambda m, x: torch.remainder(x * 4, 1.5)), (r(3, 5),), {aten.remainder.Scalar}),
    "remainder_tensor": (Fn(lambda m, x, y: torch.remainder(x * 4, y)), (r(3, 5), r(3, 5, seed=1, positive=True)),
                         {aten.remainder.Tensor}),
    # unary
    **{f"unary_{n}": (Fn(lambda m, x, f=f: f(x)), (r(2, 3, 7, positive=pos) * scale,), {op}) for n, f, op, pos, scale in [
        ("relu", torch.relu, aten.relu.default, False, 1), ("sigmoid", torch.sigmoid, aten.sigmoid.default, False, 4),
        ("tanh", torch.tanh, aten.tanh.default, False, 4), ("gelu", F.gelu, aten.gelu.default, False, 3),
        ("hardswish", F.hardswish, aten.hardswish.default, False, 4),
        ("hardsigmoid", F.hardsigmoid, aten.hardsigmoid.default, False, 4), ("silu", F.silu, aten.silu.default, False, 3),
        ("exp", torch.exp, aten.exp.default, False, 1), ("log", torch.log, aten.log.default, True, 1),
        ("sqrt", torch.sqrt, aten.sqrt.default, True, 1), ("rsqrt", torch.rsqrt, aten.rsqrt.default, True, 1),
        ("abs", torch.abs, aten.abs.default, False, 1), ("neg", torch.neg, aten.neg.default, False, 1),
        ("sin", torch.sin, aten.sin.default, False, 3), ("cos", torch.cos, aten.cos.default, False, 3),
        ("reciprocal", torch.reciprocal, aten.reciprocal.default, True, 1), ("erf", torch.erf, aten.erf.default, False, 2),
        ("floor", torch.floor, aten.floor.default, False, 3), ("ceil", torch.ceil, aten.ceil.default, False, 3),
        ("round", torch.round, aten.round.default, False, 3), ("sign", torch.sign, aten.sign.default, False, 1)]},
    "gelu_tanh": (Fn(lambda m, x: F.gelu(x, approximate="tanh")), (r(4, 9) * 3,), {aten.gelu.default}),
    "leaky_relu": (Fn(lambda m, x: F.leaky_relu(x, 0.2)), (r(4, 9),), {aten.leaky_relu.default}),
    "elu": (Fn(lambda m, x: F.elu(x, 0.7)), (r(4, 9),), {aten.elu.default}),
    "softplus": (Fn(lambda m, x: F.softplus(x, beta=2.0, threshold=3.0)), (r(4, 9) * 3,), {aten.softplus.default}),
    "clamp": (Fn(lambda m, x: torch.clamp(x, -0.5, 0.25)), (r(4, 9),), {aten.clamp.default}),
    "clamp_min_only": (Fn(lambda m, x: torch.clamp(x, min=0.1)), (r(4, 9),), {aten.clamp.default}),
    "hardtanh": (Fn(lambda m, x: F.hardtanh(x, -2.0, 1.0)), (r(4, 9) * 2,), {aten.hardtanh.default}),
    "clone": (Fn(lambda m, x: x.clone() + 1), (r(4, 9),), {aten.clone.default}),
    "alias_copy": (Fn(lambda m, x: aten.alias_copy.default(x) * 2), (r(4, 9),), {aten.alias_copy.default}),
    # convolution (fused batch norm / clamp, groups, stride, dilation, no bias)
    "conv": (seeded(nn.Conv2d(3, 8, 3, padding=1)), (r(1, 3, 9, 11),), {aten.convolution.default}),
    "conv_stride_dilation": (seeded(nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, bias=False)), (r(2, 4, 13, 10),),
                             {aten.convolution.default}),
    "conv_depthwise": (seeded(nn.Conv2d(8, 8, 3, padding=1, groups=8)), (r(1, 8, 10, 10),), {aten.convolution.default}),
    "conv_grouped": (seeded(nn.Conv2d(8, 16, (1, 3), groups=2)), (r(1, 8, 5, 9),), {aten.convolution.default}),
    "conv_grouped_odd": (seeded(nn.Conv2d(6, 6, 3, groups=3)), (r(1, 6, 7, 7),), {aten.convolution.default}),
    "conv_bn_relu6": (nn.Sequential(seeded(conv_bn(3, 5, 3)), nn.ReLU6()), (r(1, 3, 8, 8),),
                      {aten.convolution.default, aten._native_batch_norm_legit_no_training.default, aten.hardtanh.default}),
    "batch_norm_alone": (Fn(lambda m, x: m.bn(x + 1), bn=seeded(nn.BatchNorm2d(5))), (r(2, 5, 4, 6),),
                         {aten._native_batch_norm_legit_no_training.default}),
    "batch_norm_1d": (Fn(lambda m, x: m.bn(x * 2), bn=seeded(nn.BatchNorm1d(5))), (r(3, 5, 7),),
                      {aten._native_batch_norm_legit_no_training.default}),
    # linear and matrix products
    "linear": (seeded(nn.Linear(13, 7)), (r(5, 13),), {aten.linear.default}),
    "linear_3d_relu": (nn.Sequential(seeded(nn.Linear(16, 10, bias=False)), nn.ReLU()), (r(2, 3, 16),), {aten.linear.default}),
    "bmm": (Fn(lambda m, x, y: torch.bmm(x, y)), (r(3, 5, 6), r(3, 6, 7, seed=1)), {aten.bmm.default}),
    "mm": (Fn(lambda m, x, y: torch.mm(x, y)), (r(5, 9), r(9, 3, seed=1)), {aten.mm.default}),
    "matmul_4d": (Fn(lambda m, x, y: x @ y), (r(2, 3, 5, 8), r(2, 3, 8, 4, seed=1)), {aten.bmm.default}),
    # views and data movement
    "view": (Fn(lambda m, x: x.reshape(4, -1) + 1), (r(2, 3, 4, 5),), {aten.view_copy.default}),
    "squeeze_unsqueeze": (Fn(lambda m, x: x.squeeze(1).unsqueeze(0) * 2), (r(3, 1, 5),),
                          {aten.squeeze_copy.dims, aten.unsqueeze_copy.default}),
    "permute": (Fn(lambda m, x: x.permute(0, 3, 1, 2) + 0), (r(2, 3, 5, 7),), {aten.permute_copy.default}),
    "permute_5d": (Fn(lambda m, x: x.permute(4, 2, 0, 3, 1) * 1.5), (r(2, 3, 4, 5, 6),), {aten.permute_copy.default}),
    "expand": (Fn(lambda m, x: x.expand(3, 4, 5) * 1), (r(4, 1),), {aten.expand_copy.default}),
    "slice_step": (Fn(lambda m, x: x[:, 1:-1:2] * 2), (r(3, 11),), {aten.slice_copy.Tensor}),
    "select": (Fn(lambda m, x: x[:, 2] + 1), (r(3, 5, 7),), {aten.select_copy.int}),
    "cat_last_dim": (Fn(lambda m, x, y: torch.cat([x, y, x], -1) + 0), (r(2, 3, 5), r(2, 3, 6, seed=1)), {aten.cat.default}),
    "cat_dim1": (Fn(lambda m, x, y: torch.cat([x, y], 1) * 1), (r(2, 3, 5), r(2, 4, 5, seed=1)), {aten.cat.default}),
    "int_to_float": (Fn(lambda m, x: x.to(torch.float32) * 0.5), (torch.arange(12).reshape(3, 4),), {aten._to_copy.default}),
    # reductions and normalisations
    "mean_hw": (Fn(lambda m, x: x.mean((-1, -2), keepdim=True)), (r(2, 3, 5, 6),), {aten.mean.dim}),
    "sum_dim1": (Fn(lambda m, x: x.sum(1)), (r(2, 3, 5, 6),), {aten.sum.dim_IntList}),
    "amax": (Fn(lambda m, x: x.amax(-1)), (r(4, 7),), {aten.amax.default}),
    "amin": (Fn(lambda m, x: x.amin(0, keepdim=True)), (r(4, 7),), {aten.amin.default}),
    "softmax_last": (Fn(lambda m, x: torch.softmax(x, -1)), (r(3, 4, 9) * 3,), {aten._softmax.default}),
    "softmax_dim1": (Fn(lambda m, x: torch.softmax(x, 1)), (r(2, 5, 3, 4),), {aten._softmax.default}),
    "log_softmax": (Fn(lambda m, x: torch.log_softmax(x, -1)), (r(3, 9),), {aten._log_softmax.default}),
    "safe_softmax": (Fn(lambda m, x: aten._safe_softmax.default(x, -1)),
                     (torch.where(torch.tensor([[0, 0, 1, 1, 1, 1]] * 3 + [[1] * 6]).bool(), float("-inf"), r(4, 6)),),
                     {aten._safe_softmax.default}),
    "layer_norm": (seeded(nn.LayerNorm(12)), (r(2, 5, 12),), {aten.layer_norm.default}),
    "layer_norm_no_affine": (nn.LayerNorm(10, elementwise_affine=False), (r(3, 10) * 4,), {aten.layer_norm.default}),
    "max_pool": (nn.MaxPool2d(3, 2, padding=1), (r(1, 3, 9, 10),), {aten.max_pool2d_with_indices.default}),
    "max_pool_ceil_dilation": (nn.MaxPool2d(2, 2, dilation=2, ceil_mode=True), (r(1, 2, 9, 9),),
                               {aten.max_pool2d_with_indices.default}),
    "avg_pool": (nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), (r(1, 3, 9, 10),), {aten.avg_pool2d.default}),
    "avg_pool_divisor": (nn.AvgPool2d(2, ceil_mode=True, divisor_override=3), (r(1, 2, 7, 7),), {aten.avg_pool2d.default}),
    "adaptive_avg_pool": (nn.AdaptiveAvgPool2d((3, 2)), (r(1, 4, 7, 5),), {aten._adaptive_avg_pool2d.default}),
    "embedding": (seeded(nn.Embedding(20, 6)), (torch.tensor([[1, 5, 19], [0, 3, 3]]),), {aten.embedding.default}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_eager(name):
    model, inputs, _ = CASES[name]
    run_and_compare(model, inputs)


TEXTURE_CASES = ["add_alpha", "mul_broadcast", "conv", "conv_depthwise", "conv_bn_relu6", "linear_3d_relu", "bmm",
                 "matmul_4d", "permute", "cat_last_dim", "slice_step", "mean_hw", "softmax_dim1", "layer_norm",
                 "max_pool", "adaptive_avg_pool", "embedding", "int_to_float", "unary_gelu"]


@pytest.mark.parametrize("name", TEXTURE_CASES)
def test_op_matches_eager_with_texture_storage(name):
    model, inputs, _ = CASES[name]
    run_and_compare(model, inputs, {"storage_type_override": "texture3d"})


FP16_CASES = ["add_alpha", "conv", "conv_bn_relu6", "linear", "bmm", "softmax_last", "layer_norm", "avg_pool",
              "permute", "embedding", "unary_silu"]


@pytest.mark.parametrize("name", FP16_CASES)
def test_op_force_fp16_matches_eager_within_fp16_error(name):
    model, inputs, _ = CASES[name]
    run_and_compare(model, inputs, {"force_fp16": True}, tol=FP16_TOL)


@pytest.mark.parametrize("name", FP16_CASES)
def test_half_model_matches_float_eager_within_fp16_error(name):
    model, inputs, _ = CASES[name]
    half = [x.half() if x.is_floating_point() else x for x in inputs]
    run_and_compare_half(model, half)


def run_and_compare_half(model, inputs):
    """A ``model.half()`` program runs in float16 end to end; compared with the float32 model."""
    import copy

    from vulkan_helpers import assert_close, load, lower

    half_model = copy.deepcopy(model).half()
    edge, pte = lower(half_model, inputs)
    report = edge.partition_reports["forward"][0]
    assert not report.rejected, report.format()
    out = load(pte).execute(list(inputs))
    assert all(o.dtype == torch.float16 for o in out)
    with torch.no_grad():
        ref = model(*[x.float() if x.is_floating_point() else x for x in inputs])
    assert_close(out, ref, FP16_TOL, f"{type(model).__name__}.half()")


def test_every_supported_op_has_a_case():
    covered = set().union(*(ops for _, _, ops in CASES.values()))
    missing = sorted(str(t) for t in BY_TARGET if t not in covered and "quantized_decomposed" not in str(t)
                     and "torchao" not in str(t))
    # native_layer_norm is reached through an explicit aten call below; quantized weights have their own tests
    assert missing == ["aten.native_layer_norm.default"], missing


def test_native_layer_norm_with_only_its_output_used():
    edge = run_and_compare(Fn(lambda m, x: aten.native_layer_norm.default(x, [5], None, None, 1e-5)[0] * 2),
                           (r(2, 3, 5),))
    assert "aten.native_layer_norm.default" in edge.partition_reports["forward"][0].delegated
