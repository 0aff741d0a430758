"""Int8 accuracy on real data: a small CNN trained on scikit-learn's bundled digits (8x8 images),
quantized with etkit's XNNPACKQuantizer (PT2E, static, per-channel), lowered to XNNPACK and run by
etkit's runtime on the held-out split.

Criteria (issue 4): held-out accuracy within 1 point of the float model, and top-1 agreement with the
PT2E reference (the converted model run in eager) >= 95% on 100 held-out images.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")
datasets = pytest.importorskip("sklearn.datasets")


class DigitsCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.head(torch.flatten(x, 1))


@pytest.fixture(scope="module")
def trained():
    digits = datasets.load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(labels), generator=g)
    train, test = order[:1400], order[1400:]
    torch.manual_seed(0)
    model = DigitsCnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(12):
        for batch in torch.split(train[torch.randperm(len(train), generator=g)], 64):
            loss = nn.functional.cross_entropy(model(images[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval(), images[train], images[test], labels[test]


def _accuracy(logits, labels) -> float:
    return (logits.argmax(1) == labels).float().mean().item() * 100


def test_int8_digits_cnn_keeps_float_accuracy(trained):
    import etkit
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etkit_xnnpack import XnnpackPartitioner
    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    model, train_x, test_x, test_y = trained
    with torch.no_grad():
        float_acc = _accuracy(model(test_x), test_y)
    assert float_acc > 90, f"the float model did not train ({float_acc:.1f}%)"

    example = (test_x,)  # the whole held-out split as one static batch
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, example).module(), quantizer)
    with torch.no_grad():
        for start in range(0, len(train_x) - len(test_x) + 1, len(test_x)):  # static batch: the test size
            prepared(train_x[start:start + len(test_x)])
    converted = convert_pt2e(prepared)
    ep = torch.export.export(converted, example)
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    report = edge.partition_reports["forward"][0]
    assert report.rejected == [] and report.num_partitions == 1, report.format()
    method = runtime.Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    (logits,) = method.execute([test_x])
    with torch.no_grad():
        reference = converted(test_x)

    int8_acc = _accuracy(logits, test_y)
    agreement = (logits[:100].argmax(1) == reference[:100].argmax(1)).float().mean().item() * 100
    print(f"digits held-out accuracy: float {float_acc:.2f}%, int8 (etkit XNNPACK) {int8_acc:.2f}%, "
          f"top-1 agreement with the PT2E reference {agreement:.0f}%")
    assert int8_acc >= float_acc - 1.0, f"int8 accuracy {int8_acc:.1f}% vs float {float_acc:.1f}%"
    assert agreement >= 95.0, f"top-1 agreement with the PT2E reference {agreement:.0f}%"
