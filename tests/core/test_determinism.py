"""Lowering the same program twice gives identical bytes."""
import torch

import etkit


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3))).softmax(-1)


def _lower():
    torch.manual_seed(0)
    model = Small().eval()
    return etkit.to_edge(torch.export.export(model, (torch.randn(1, 3, 8, 8),))).to_executorch().buffer


def test_two_lowerings_give_identical_bytes():
    first, second = _lower(), _lower()
    assert first[4:8] == b"ET12"
    assert first == second
