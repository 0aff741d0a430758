"""Portable-only programs (no partitioner): etkit's emitter + C++ runtime + portable kernels vs torch eager."""
import pytest
import torch

import etkit

runtime = pytest.importorskip("etkit.runtime")


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.softmax(self.l2(torch.relu(self.l1(x))), dim=-1)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.hardtanh(self.bn(self.conv(x)), 0.0, 6.0)
        y = torch.nn.functional.max_pool2d(y, 2)
        return self.fc(y.mean((2, 3)))


class Encoderish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, ids, mask):
        h = self.norm(self.emb(ids))
        scores = (h @ h.transpose(1, 2)) / 4.0
        scores = scores + (1.0 - mask[:, None, :].to(h.dtype)) * -1e4
        h = torch.nn.functional.gelu(self.proj(scores.softmax(-1) @ h))
        m = mask.unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)


class ReturnsSum(torch.nn.Module):
    def forward(self, input):
        return torch.sum(input * 2.0, dim=0)


def _cases():
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    return [
        ("mlp", Mlp(), (torch.randn(3, 8),)),
        ("convnet", ConvNet(), (torch.randn(2, 3, 12, 12),)),
        ("encoderish", Encoderish(), (ids, mask)),
        # Node names that shadow Python builtins ("input", "sum") are renamed when a graph is copied;
        # the program's signature must follow.
        ("sequential", torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), (torch.randn(2, 4),)),
        ("builtin_names", ReturnsSum(), (torch.randn(3, 5),)),
    ]


@pytest.mark.parametrize("name,model,inputs", _cases(), ids=[c[0] for c in _cases()])
def test_portable_program_matches_eager(name, model, inputs, tmp_path):
    model.eval()
    path = tmp_path / f"{name}.pte"
    etkit.to_edge(torch.export.export(model, inputs)).to_executorch().write_to_file(path)
    method = runtime.Runtime.get().load_program(path).load_method("forward")
    with torch.no_grad():
        expected = model(*inputs)
    (actual,) = method.execute(list(inputs))
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    # fp32 reference kernels: differences come only from summation order
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
