"""Each op the Ethos-U lowering supports, quantized with EthosUQuantizer and lowered for two targets: every op
is delegated, Vela compiles the partition, and the TOSA graph run on Arm's TOSA reference model matches the
partition run in eager (the PT2E reference) on the same int8 inputs within 1 LSB (TOSA's RESCALE rounds ties up,
PyTorch's quantize rounds them to even; docs/design/ethosu-route.md, section 3.2). The program's float output
matches the PT2E model within that LSB too."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ethosu_helpers import delegate_lsb_differences, lower, output_steps
from etkit_ethosu import run_on_tosa_reference

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
    "unsqueeze_squeeze": (Fn(lambda m, x: torch.sigmoid(x.unsqueeze(1)).squeeze(1)), (r(2, 6),)),
}


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_lowers_and_matches_the_pt2e_reference(name, target):
    model, inputs = CASES[name]
    lowered = lower(model, inputs, target)
    report = lowered.report
    assert report.num_partitions >= 1, report.format()
    assert not report.rejected, f"{name} on {target}: ops left outside:\n{report.format()}"
    diffs = delegate_lsb_differences(lowered, inputs)
    assert diffs and max(diffs) <= 1, f"TOSA reference vs eager partition differ by {diffs} LSB"
    outputs = run_on_tosa_reference(lowered.manager, list(inputs))
    with torch.no_grad():
        expected = lowered.reference(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    for out, ref, step in zip(outputs, expected, output_steps(lowered)):
        torch.testing.assert_close(out, ref, atol=step * 1.001, rtol=0)  # one output quantization step
