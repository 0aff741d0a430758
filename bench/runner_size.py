"""Size of the native ``etkit_runner`` with and without selective build.

    .venv/bin/python bench/runner_size.py

Builds stripped runners with ``etkit.native.runner_build.build_runner`` (what ``etkit runner build``
runs) for two programs: MobileNetV2 with no partitioner (every op on the portable kernels) and
MobileNetV2 lowered to XNNPACK. For each, prints the binary size linking every portable kernel, the
size of the selective build (only the kernels the program calls), and the ratio selective / full.
Each selective runner runs its program once to show it works.
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import torch
import torchvision

import etkit
from etkit.native.kernels import portable_kernels, program_kernels
from etkit.native.runner_build import build_runner


def main() -> None:
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    ep = torch.export.export(model, (torch.randn(1, 3, 224, 224),))
    work = Path(tempfile.mkdtemp(prefix="etkit-runner-size-"))
    programs = {"portable only": (etkit.to_edge(ep), [])}
    try:
        from etkit_xnnpack import XnnpackPartitioner
        programs["XNNPACK"] = (etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]), ["xnnpack"])
    except ImportError:
        print("(etkit-xnnpack is not installed: XNNPACK row skipped)")
    print(f"portable kernel library: {len(portable_kernels())} kernels")
    print(f"{'MobileNetV2 program':<16} {'kernels':>8} {'full (bytes)':>14} {'selective (bytes)':>18} {'ratio':>6}")
    for i, (label, (edge, backends)) in enumerate(programs.items()):
        pte = work / f"model{i}.pte"
        edge.to_executorch().write_to_file(str(pte))
        full = build_runner(work / f"full{i}", backends=backends, strip=True)
        selective = build_runner(work / f"sel{i}", backends=backends, model=pte, strip=True)
        subprocess.run([str(selective.binary), "--model_path", str(pte), "--iterations", "1"], check=True,
                       capture_output=True)
        kernels = len(program_kernels(pte.read_bytes()))
        print(f"{label:<16} {kernels:>8} {full.size_bytes:>14} {selective.size_bytes:>18} "
              f"{selective.size_bytes / full.size_bytes:>6.2f}")


if __name__ == "__main__":
    main()
