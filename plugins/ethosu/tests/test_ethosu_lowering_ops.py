"""Each op the Ethos-U lowering supports, quantized with EthosUQuantizer and lowered for two targets: every op
is delegated, Vela compiles the partition, and the TOSA graph run on Arm's TOSA reference model matches the
partition run in eager (the PT2E reference) on the same int8 inputs within 1 LSB (TOSA's RESCALE rounds ties up,
PyTorch's quantize rounds them to even; docs/design/ethosu-route.md, section 3.2). The program's float output
matches the PT2E model within that LSB too. Softmax and layer_norm are decomposed by EthosUQuantizer before
quantization (etkit_ethosu.decompositions), so their PT2E reference is the decomposed int8 computation."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ethosu_helpers import delegate_lsb_differences, lower, output_steps
from etkit_ethosu import run_on_tosa_reference

pytestmark = pytest.mark.device_sim

F = nn.functional


class Fn(nn.Module):
    def __init__(self, fn, **layers) -> None:
        super().__init__()
        self.fn = fn
        for name, layer in layers.items():
            setattr(self, name, layer)

    def forward(self, *xs):
        return self.fn(self, *xs)


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


CASES = {
    "conv": (Fn(lambda m, x: m.c(x), c=nn.Conv2d(3, 8, 3, padding=1)), (r(1, 3, 8, 8),)),
    "conv_stride2_odd": (Fn(lambda m, x: m.c(x), c=nn.Conv2d(3, 8, 3, stride=2, padding=1)), (r(1, 3, 9, 9),)),
    "conv_stride2_trim": (Fn(lambda m, x: m.c(x), c=nn.Conv2d(3, 4, 3, stride=2)), (r(1, 3, 8, 8),)),
    "conv_dilated_nobias": (Fn(lambda m, x: m.c(x), c=nn.Conv2d(4, 4, 3, dilation=2, bias=False)), (r(1, 4, 9, 9),)),
    "depthwise": (Fn(lambda m, x: m.c(x), c=nn.Conv2d(8, 8, 3, padding=1, groups=8)), (r(1, 8, 6, 6),)),
    "depthwise_multiplier2": (Fn(lambda m, x: m.c(x), c=nn.Conv2d(4, 8, 3, groups=4)), (r(1, 4, 6, 6),)),
    "conv_relu": (Fn(lambda m, x: torch.relu(m.c(x)), c=nn.Conv2d(3, 8, 1)), (r(1, 3, 5, 5),)),
    "conv_relu6": (Fn(lambda m, x: F.relu6(m.c(x)), c=nn.Conv2d(3, 8, 1)), (r(1, 3, 5, 5),)),
    "linear": (Fn(lambda m, x: m.fc(x), fc=nn.Linear(16, 8)), (r(4, 16),)),
    "linear_3d": (Fn(lambda m, x: m.fc(x), fc=nn.Linear(16, 8)), (r(2, 3, 16),)),
    "add": (Fn(lambda m, x, y: x + y), (r(2, 3, 8), r(2, 3, 8, seed=1))),
    "sub": (Fn(lambda m, x, y: x - y), (r(2, 3, 8), r(2, 3, 8, seed=1))),
    "mul": (Fn(lambda m, x, y: x * y), (r(2, 3, 8), r(2, 3, 8, seed=1))),
    "add_broadcast": (Fn(lambda m, x, y: x + y), (r(2, 3, 8), r(8, seed=1))),
    "conv_residual": (Fn(lambda m, x: x + m.c(x), c=nn.Conv2d(4, 4, 3, padding=1)), (r(1, 4, 6, 6),)),
    "relu": (Fn(lambda m, x: torch.relu(x)), (r(2, 3, 8),)),
    "hardtanh": (Fn(lambda m, x: F.hardtanh(x, -0.5, 0.5)), (r(2, 3, 8),)),
    "sigmoid": (Fn(lambda m, x: torch.sigmoid(x)), (r(2, 3, 8),)),
    "tanh": (Fn(lambda m, x: torch.tanh(x)), (r(2, 3, 8),)),
    "gelu": (Fn(lambda m, x: F.gelu(x)), (r(2, 3, 8),)),
    "hardswish": (Fn(lambda m, x: F.hardswish(x)), (r(2, 3, 8),)),
    "max_pool": (Fn(lambda m, x: F.max_pool2d(x, 2)), (r(1, 4, 8, 8),)),
    "max_pool_3x3_s2_pad": (Fn(lambda m, x: F.max_pool2d(x, 3, 2, 1)), (r(1, 4, 9, 9),)),
    "avg_pool": (Fn(lambda m, x: F.avg_pool2d(x, 2)), (r(1, 4, 8, 8),)),
    "global_avg_pool": (Fn(lambda m, x: F.adaptive_avg_pool2d(m.c(x), 1).flatten(1), c=nn.Conv2d(3, 8, 1)),
                        (r(1, 3, 7, 7),)),
    "mean_last": (Fn(lambda m, x: x.mean(dim=-1)), (r(2, 4, 10),)),
    "cat": (Fn(lambda m, x, y: torch.cat([x, y], dim=1)), (r(2, 3, 4), r(2, 5, 4, seed=1))),
    "view": (Fn(lambda m, x: x.view(4, 12) * 2.0), (r(2, 3, 8),)),
    "permute": (Fn(lambda m, x: x.permute(0, 2, 1) + 1.0), (r(2, 3, 8),)),
    "slice": (Fn(lambda m, x: x[:, 1:3] + x[:, :2]), (r(2, 5, 4),)),
    "matmul": (Fn(lambda m, x, y: torch.matmul(x, y)), (r(2, 4, 8), r(2, 8, 5, seed=1))),
    "softmax": (Fn(lambda m, x: torch.softmax(x, dim=-1)), (r(2, 4, 10),)),
    "layer_norm": (Fn(lambda m, x: m.norm(x), norm=nn.LayerNorm(16)), (r(2, 5, 16),)),
    "unsqueeze_squeeze": (Fn(lambda m, x: torch.sigmoid(x.unsqueeze(1)).squeeze(1)), (r(2, 6),)),
}


#: Cases chaining several rounding steps per element: layer_norm's row mean is sum/16 with the input's scale,
#: so exact ties are frequent there (TOSA rounds them up, PyTorch to even), and a 1-LSB different mean or
#: rsqrt shifts its whole row by up to 2 LSB at the output (measured: 25 of 160 elements, max 2, for one seed).
LSB_TOLERANCE = {"layer_norm": 2}


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_lowers_and_matches_the_pt2e_reference(name, target):
    model, inputs = CASES[name]
    lowered = lower(model, inputs, target)
    report = lowered.report
    assert report.num_partitions >= 1, report.format()
    assert not report.rejected, f"{name} on {target}: ops left outside:\n{report.format()}"
    diffs = delegate_lsb_differences(lowered, inputs)
    tolerance = LSB_TOLERANCE.get(name, 1)
    assert diffs and max(diffs) <= tolerance, f"TOSA reference vs eager partition differ by {diffs} LSB"
    outputs = run_on_tosa_reference(lowered.manager, list(inputs))
    with torch.no_grad():
        expected = lowered.reference(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    for out, ref, step in zip(outputs, expected, output_steps(lowered)):
        torch.testing.assert_close(out, ref, atol=step * tolerance * 1.001, rtol=0)  # output quantization steps
