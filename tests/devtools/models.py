"""Models the developer-tools tests share: a small CNN that XNNPACK partly takes."""
from __future__ import annotations

import torch


class Tail(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 1)  # no XNNPACK operator: stays on the portable kernels


class ConvHeadTail(torch.nn.Module):
    """Conv + relu + linear (XNNPACK takes them), then module ``tail`` (a cumsum on portable kernels) and a
    sum. Input: [1, 3, 8, 8] float32; outputs: [1, 5] and a scalar."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(144, 5)
        self.tail = Tail()

    def forward(self, x):
        y = self.conv(x).relu()
        return self.tail(self.head(y.flatten(1))), y.sum()


def readme_section(title: str) -> tuple[str, list]:
    """The README section under ``### title`` and its ```python blocks."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = text.index(f"### {title}")
    section = text[start:text.index("\n### ", start + 1)]
    return section, re.findall(r"```python\n(.*?)```", section, re.S)
