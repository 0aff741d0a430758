"""Small deterministic models shared by the etkit side and the ExecuTorch-oracle side of the payload
interop checks. Pure torch/torchvision: importable in both environments.

Each builder returns ``(module in eval mode, example inputs)``; weights come from a fixed seed, and
batch-norm statistics are made non-trivial so that folding them is actually exercised.
"""
from __future__ import annotations

import torch
import torch.nn as nn


def _randomize_bn(module: nn.Module) -> None:
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


class ConvBlock(nn.Module):
    """conv -> bn -> relu6 -> depthwise conv (stride 2) -> pointwise conv -> clamp + add -> global mean -> linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.bn(self.conv(x)))
        y = self.pw(self.dw(y))
        y = torch.clamp(y, -0.5, 0.5) + y
        return self.fc(y.mean([2, 3], keepdim=True).flatten(1))


class PoolCat(nn.Module):
    """max/avg pooling, concatenation, hardswish, sigmoid, slicing and permute."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)

    def forward(self, x):
        a = torch.nn.functional.max_pool2d(self.conv(x), 2)
        b = torch.nn.functional.avg_pool2d(x[:, :2], 2)
        y = torch.cat([a, b, torch.sigmoid(b)], dim=1)
        y = torch.nn.functional.hardswish(y)
        return y.permute(0, 2, 3, 1)


class AttentionBlock(nn.Module):
    """Linear projections, head split by view/permute, bmm attention with softmax, gelu MLP.

    No Python-scalar arithmetic and no split: ExecuTorch leaves those outside its XNNPACK partition,
    and the oracle check needs both sides to make the same single partition."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.d, self.h = d, heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.mlp1 = nn.Linear(d, 2 * d)
        self.mlp2 = nn.Linear(2 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.q(x), self.k(x), self.v(x)
        def heads(t):
            return t.reshape(b, s, self.h, d // self.h).permute(0, 2, 1, 3).reshape(b * self.h, s, d // self.h)
        q, k, v = heads(q), heads(k), heads(v)
        att = torch.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)  # (scale folded into q's weights)
        y = torch.bmm(att, v).reshape(b, self.h, s, d // self.h).permute(0, 2, 1, 3).reshape(b, s, d)
        y = x + self.out(y)
        return y + self.mlp2(torch.nn.functional.gelu(self.mlp1(y)))


class UpsampleBlock(nn.Module):
    """Grouped transposed convolution with output padding, relu, ceil-mode max pooling."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.relu(self.up(x)), 3, stride=2, ceil_mode=True)


def conv_block():
    torch.manual_seed(0)
    m = ConvBlock().eval()
    _randomize_bn(m)
    return m, (torch.randn(2, 3, 16, 16),)


def pool_cat():
    torch.manual_seed(0)
    return PoolCat().eval(), (torch.randn(1, 4, 8, 10),)


def attention_block():
    torch.manual_seed(0)
    return AttentionBlock().eval(), (torch.randn(2, 8, 32),)


def upsample_block():
    torch.manual_seed(0)
    return UpsampleBlock().eval(), (torch.randn(1, 4, 5, 7),)


def mobilenet_v2():
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.mobilenet_v2(weights=None).eval()
    _randomize_bn(m)
    return m, (torch.randn(1, 3, 224, 224),)


BUILDERS = {"conv_block": conv_block, "pool_cat": pool_cat, "attention_block": attention_block,
            "upsample_block": upsample_block, "mobilenet_v2": mobilenet_v2}
