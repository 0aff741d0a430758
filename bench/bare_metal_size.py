"""Code size and RAM of bare-metal images (``etkit runner build --target cortex-m55``), per model.

    .venv/bin/python bench/bare_metal_size.py

For each model, exports it with no partitioner (every op on the portable kernels), builds a Cortex-M55 image
with ``etkit.native.baremetal.build_baremetal_image`` (the runtime without exceptions, RTTI, threads or OS, and
only the kernels the program calls), runs it once on QEMU's mps3-an547 board, and prints:

* the image's sections as ``arm-none-eabi-size`` reports them (bytes): ``text`` (code, read-only data and the
  embedded program), ``data``, ``bss`` (the static pools), and ``text`` less the program (the runtime, the
  kernels and newlib);
* the RAM the method used (bytes): each planned arena, the method allocator, the temp allocator's peak, and
  their sum (the peak arena bytes); and the heap allocations after ``Program::load`` (0 expected);
* the largest difference from the reference on the same input (torch eager, or the PT2E reference model).

Models: examples/example_models.py's ``SmallCNN`` (float32, 1x3x16x16) and the ``DigitsCNN`` trained on
scikit-learn's digits, PT2E-quantized with ``etkit_ethosu.quantize_for_ethosu`` (int8 activations and weights,
1x1x8x8; skipped when the Ethos-U plugin is not installed).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

import etkit
from etkit.native.baremetal import build_baremetal_image, run_on_qemu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from example_models import DigitsCNN, SmallCNN, digits_data, train_digits_cnn  # noqa: E402


def models() -> dict:
    """{label: (reference module, input)}."""
    found = {"SmallCNN float32": (SmallCNN(), torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1)))}
    try:
        from etkit_ethosu import quantize_for_ethosu
    except ImportError:
        print("(etkit-ethosu is not installed: the PT2E digits row is skipped)")
        return found
    x_train, x_test, y_train, _ = digits_data()
    torch.manual_seed(0)
    model = train_digits_cnn(DigitsCNN(), x_train, y_train)
    x = x_test[:1]
    reference = quantize_for_ethosu(model, (x,), calibration=[(b,) for b in x_train.split(1)[:256]])
    found["DigitsCNN PT2E int8"] = (reference, x)
    return found


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="etkit-bare-metal-size-"))
    header = (f"{'model':<20} {'text':>8} {'program':>8} {'text-prog':>9} {'data':>6} {'bss':>8} {'kernels':>7} "
              f"{'arenas':>14} {'method':>7} {'temp':>6} {'peak RAM':>9} {'heap':>4} {'max |diff|':>10}")
    rows = []
    for i, (label, (module, x)) in enumerate(models().items()):
        program = etkit.to_edge(torch.export.export(module, (x,))).to_executorch()
        pte = work / f"model{i}.pte"
        pte.write_bytes(program.buffer)
        image = build_baremetal_image(work / f"image{i}", pte, inputs=[x.numpy()])
        run = run_on_qemu(image.elf)
        with torch.no_grad():
            expected = module(x).numpy()
        diff = float(abs(run.outputs[0] - expected).max())
        arenas = "+".join(str(n) for n in run.planned_arena_bytes) or "0"
        rows.append(f"{label:<20} {image.text:>8} {image.program_bytes:>8} {image.text - image.program_bytes:>9} "
                    f"{image.data:>6} {image.bss:>8} {len(image.kernels):>7} {arenas:>14} "
                    f"{run.method_allocator_bytes:>7} {run.temp_peak_bytes:>6} {run.peak_arena_bytes:>9} "
                    f"{run.heap_allocations_after_load:>4} {diff:>10.2e}")
    print("Cortex-M55 bare-metal images (bytes; QEMU mps3-an547):")
    print(header)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
