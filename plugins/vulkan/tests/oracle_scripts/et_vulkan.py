"""Runs in the ExecuTorch 1.5.1 oracle: lowers small models with ExecuTorch's VulkanPartitioner and writes
`et_<name>.pte`, the inputs and the eager outputs (`<name>.io.pt`) into the directory argv[1].

    python et_vulkan.py OUT_DIR
"""
import sys
from pathlib import Path

import torch
import torchvision
from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.exir import to_edge_transform_and_lower

out = Path(sys.argv[1])


class LinearAddRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x, y):
        return torch.relu(self.fc(x) + y)


def small_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU6(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 8, 3, groups=8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 4), torch.nn.Softmax(-1))


def mobilenet_v2():
    model = torchvision.models.mobilenet_v2(weights=None)
    g = torch.Generator().manual_seed(100)
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, 64, 64, generator=g))
    return model


torch.manual_seed(0)
MODELS = {
    "linear_add_relu": (LinearAddRelu(), (torch.randn(4, 16), torch.randn(4, 8))),
    "small_cnn": (small_cnn(), (torch.randn(1, 3, 16, 16),)),
    "mobilenet_v2": (mobilenet_v2(), (torch.randn(1, 3, 64, 64),)),
}
for name, (model, inputs) in MODELS.items():
    model = model.eval()
    program = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                          partitioner=[VulkanPartitioner()]).to_executorch()
    (out / f"et_{name}.pte").write_bytes(program.buffer)
    with torch.no_grad():
        torch.save({"inputs": list(inputs), "reference": model(*inputs)}, out / f"{name}.io.pt")
print("lowered", ", ".join(MODELS))
