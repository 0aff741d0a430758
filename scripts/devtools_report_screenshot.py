"""Remake docs/devtools-report.png: `etkit devtools report` of a small CNN (XNNPACK plus a portable cumsum),
with an ETRecord and a debug buffer, rendered by headless Chromium.

    .venv/bin/python scripts/devtools_report_screenshot.py [OUT.png]
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import etkit
from etkit.cli import main as etkit_main
from etkit.runtime import Runtime
from etkit_xnnpack import XnnpackPartitioner

REPO = Path(__file__).resolve().parents[1]


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3),
                                            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4))
        self.classifier = torch.nn.Linear(32 * 16, 10)

    def forward(self, x):
        return torch.cumsum(self.classifier(self.features(x).flatten(1)), 1)


def main(out: Path) -> None:
    model, x = SmallCNN().eval(), torch.randn(1, 3, 64, 64)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()],
                                             generate_etrecord=True)
    program = edge.to_executorch()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        program.get_etrecord().save(d / "model.etrecord")
        loaded = Runtime.get().load_program(program.buffer, enable_etdump=True, debug_buffer_size=1 << 22)
        method = loaded.load_method("forward")
        for _ in range(5):
            method.execute([x])
        loaded.write_etdump_result_to_file(d / "model.etdp", d / "model.bin")
        etkit_main(["devtools", "report", "--etdump", str(d / "model.etdp"), "--etrecord", str(d / "model.etrecord"),
                    "--debug-buffer", str(d / "model.bin"), "-o", str(d / "report.html")])
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                        f"--screenshot={out}", (d / "report.html").as_uri()], check=True, capture_output=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "devtools-report.png")
