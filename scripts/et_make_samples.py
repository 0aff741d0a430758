"""Write sample .pte programs made by ExecuTorch 1.5.1, with eager reference inputs/outputs.

Runs INSIDE the ExecuTorch oracle environment (see scripts/et_oracle.sh), never with etkit:

    PYTHONPATH=$(scripts/et_oracle.sh | tail -n1) .venv/bin/python scripts/et_make_samples.py OUTDIR

For each sample NAME it writes into OUTDIR:
  NAME.pte   the program, made by executorch.exir (format: ExecuTorch's program.fbs, "ET12")
  NAME.pt    torch.save({"inputs": [Tensor...], "outputs": [Tensor...]}) from torch eager
  NAME.npz   the same arrays as input_0.., output_0.. (for readers without torch)
and manifest.json listing every sample with its method name, backends, shapes, dtypes and the
tolerance it was checked with. Then it loads each .pte with executorch.runtime, runs it on the
saved inputs and checks the outputs against eager (exit status 1 if any sample does not match).

Samples (fixed seeds, all float32):
  add_portable        a + b, a and b of shape [2, 3]; portable kernels only
  mlp_portable        Linear(8,16) -> ReLU -> Linear(16,4) on [2, 8]; portable kernels only
  mlp_xnnpack         the same module (same weights) lowered with XnnpackPartitioner
  mobilenet_v2_xnnpack  torchvision mobilenet_v2(weights=None) on [1, 3, 224, 224], BatchNorm
                        statistics estimated from random batches, .eval(), lowered with
                        XnnpackPartitioner
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch


class Add(torch.nn.Module):
    def forward(self, a, b):
        return a + b


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _mlp():
    torch.manual_seed(0)
    return MLP().eval()


def _mobilenet_v2():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from example_models import calibrated_mobilenet_v2

    return calibrated_mobilenet_v2()


def _inputs(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*s, generator=g) for s in shapes)


# name -> (module factory, input shapes, lowered with XNNPACK?, (rtol, atol))
SAMPLES = {
    "add_portable": (lambda: Add().eval(), [(2, 3), (2, 3)], False, (1e-6, 1e-6)),
    "mlp_portable": (_mlp, [(2, 8)], False, (1e-5, 1e-5)),
    "mlp_xnnpack": (_mlp, [(2, 8)], True, (1e-4, 1e-4)),
    "mobilenet_v2_xnnpack": (_mobilenet_v2, [(1, 3, 224, 224)], True, (1e-3, 1e-3)),
}


def build(module, example_inputs, use_xnnpack: bool) -> bytes:
    from executorch.exir import to_edge, to_edge_transform_and_lower

    ep = torch.export.export(module, example_inputs)
    if use_xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(ep)
    return edge.to_executorch().buffer


def run_with_executorch(pte: Path, inputs):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return list(program.load_method("forward").execute(list(inputs)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--only", nargs="*", choices=sorted(SAMPLES), help="make only these samples")
    args = ap.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)

    manifest, failures = {}, []
    for name, (factory, shapes, use_xnnpack, (rtol, atol)) in SAMPLES.items():
        if args.only and name not in args.only:
            continue
        module = factory()
        inputs = _inputs(shapes, seed=1234)
        with torch.no_grad():
            out = module(*inputs)
        outputs = list(out) if isinstance(out, (tuple, list)) else [out]

        pte = args.outdir / f"{name}.pte"
        pte.write_bytes(build(module, inputs, use_xnnpack))
        torch.save({"inputs": list(inputs), "outputs": outputs}, args.outdir / f"{name}.pt")
        np.savez(
            args.outdir / f"{name}.npz",
            **{f"input_{i}": t.numpy() for i, t in enumerate(inputs)},
            **{f"output_{i}": t.numpy() for i, t in enumerate(outputs)},
        )

        got = run_with_executorch(pte, inputs)
        ok = len(got) == len(outputs) and all(
            torch.allclose(g, e, rtol=rtol, atol=atol) for g, e in zip(got, outputs)
        )
        max_diff = max(float((g - e).abs().max()) for g, e in zip(got, outputs)) if got else float("nan")
        print(f"{name}: {pte.stat().st_size} bytes, executorch.runtime vs eager max |diff| = "
              f"{max_diff:.3g} (rtol={rtol}, atol={atol}) -> {'OK' if ok else 'MISMATCH'}")
        if not ok:
            failures.append(name)
        manifest[name] = {
            "pte": pte.name,
            "method": "forward",
            "backends": ["XnnpackBackend"] if use_xnnpack else [],
            "inputs": [{"shape": list(t.shape), "dtype": str(t.dtype)} for t in inputs],
            "outputs": [{"shape": list(t.shape), "dtype": str(t.dtype)} for t in outputs],
            "rtol": rtol,
            "atol": atol,
            "made_by": "executorch 1.5.1",
        }
    (args.outdir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if failures:
        print(f"executorch.runtime output did not match eager for: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
