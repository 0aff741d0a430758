"""Which ops XnnpackPartitioner delegates, against ExecuTorch 1.5's XNNPACK partitioner configs, and
eager comparisons for the ops added to close that gap.

``EXECUTORCH_1_5_TARGETS`` is the ``target_name`` of every config class in the ``executorch==1.5.1``
wheel's ``backends/xnnpack/partition/config/`` (a fact of that release, copied as data). Every one of
them is either delegated by etkit or listed below with the reason it is not (yet).
"""
from __future__ import annotations

import pytest
import torch

from helpers import requires_fb
from helpers import lower

EXECUTORCH_1_5_TARGETS = {
    "_clone_dim_order.default", "_native_batch_norm_legit_no_training.default", "_softmax.default",
    "_to_dim_order_copy.default", "abs.default", "add.Tensor", "addmm.default", "avg_pool2d.default", "bmm.default",
    "cat.default", "ceil.default", "choose_qparams_affine.default", "clamp.default", "clone.default",
    "constant_pad_nd.default", "convolution.default", "cos.default", "dequantize_affine.default",
    "dequantize_per_tensor.default", "div.Tensor", "elu.default", "exp.default", "floor.default", "gelu.default",
    "hardswish.default", "hardtanh.default", "leaky_relu.default", "linear.default", "log.default", "max.dim",
    "max_pool2d.default", "maximum.default", "mean.dim", "minimum.default", "mm.default", "mul.Tensor",
    "neg.default", "permute_copy.default", "pow.Tensor_Scalar", "prelu.default", "quantize_affine.default",
    "quantize_per_tensor.default", "relu.default", "rsqrt.default", "sigmoid.default", "sin.default",
    "slice_copy.Tensor", "sqrt.default", "sub.Tensor", "tanh.default", "unsqueeze_copy.default",
    "upsample_bilinear2d.vec", "view_copy.default",
}

#: ExecuTorch's dim-order edge ops: etkit's Edge dialect keeps aten.clone / aten._to_copy instead, which
#: ToCopyConfig and the clone lowering delegate.
NOT_APPLICABLE = {
    "_clone_dim_order.default": "etkit's Edge dialect emits aten.clone (delegated), not dim_order_ops",
    "_to_dim_order_copy.default": "etkit's Edge dialect emits aten._to_copy (delegated), not dim_order_ops",
}
#: Not implemented yet (issue 4), with the reason.
NOT_YET = {
    "max.dim": "argmax pooling (XNNArgMaxPooling2d) is not lowered yet",
}


def _etkit_targets() -> set[str]:
    from etkit_xnnpack.partition.configs import ALL_CONFIGS

    names = set()
    for config in ALL_CONFIGS:
        for target in config.targets:
            if isinstance(target, torch._ops.OpOverload):
                names.add(f"{target._schema.name.split('::')[-1]}.{target._overloadname}")
    return names


def test_partitioner_covers_executorch_configs_or_says_why_not():
    covered = _etkit_targets()
    unexplained = EXECUTORCH_1_5_TARGETS - covered - set(NOT_APPLICABLE) - set(NOT_YET)
    assert not unexplained, f"ExecuTorch 1.5 delegates these and etkit neither does nor says why: {sorted(unexplained)}"
    stale = (set(NOT_YET) | set(NOT_APPLICABLE)) & covered
    assert not stale, f"now delegated, remove from the exclusion lists: {sorted(stale)}"


class _PReLU(torch.nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.act = torch.nn.PReLU(channels)
        with torch.no_grad():
            self.act.weight.copy_(torch.linspace(0.05, 0.5, channels))

    def forward(self, x):
        return self.act(self.conv(x))


class _Upsample(torch.nn.Module):
    def __init__(self, align_corners: bool) -> None:
        super().__init__()
        self.align_corners = align_corners

    def forward(self, x):
        return torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=self.align_corners)


@requires_fb
@pytest.mark.parametrize("name,model", [
    ("prelu_per_channel", _PReLU(8)), ("prelu_shared", _PReLU(1)),
    ("upsample_bilinear", _Upsample(False)), ("upsample_bilinear_align_corners", _Upsample(True)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_added_op_is_delegated_and_matches_eager(name, model):
    runtime = pytest.importorskip("etkit.runtime")
    pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")
    torch.manual_seed(0)
    x = torch.randn(1, 3, 10, 12)
    manager, partitioner = lower(model.eval(), (x,))
    report = partitioner.report()
    assert report.rejected == [] and report.num_partitions == 1, report.format()
    (actual,) = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward").execute([x])
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)  # fp32; XNNPACK reorders sums
