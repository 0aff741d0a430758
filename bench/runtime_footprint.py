"""What it costs to run a .pte from Python without torch (issue 23, item 1), beside ExecuTorch 1.5.1.

    .venv/bin/python bench/runtime_footprint.py [--repeats 30] [--rounds 3] [--in-place]

Lowers MobileNetV2 (torchvision, weights=None, seeded) to XNNPACK once with etkit, then runs that same
.pte in fresh processes of each runtime, alternating them over ``--rounds``:

- etkit: ``etkit.runtime`` with numpy input, in a fresh venv holding only the etkit-runtime and
  etkit-xnnpack wheels (built from this checkout) and what they declare (numpy, pluggy, flatbuffers,
  borrowed from this environment): torch is not installed there. A meta-path finder refuses ``import torch``
  as well, so ``--in-place`` (this environment, torch installed but refused) measures the same path;
- ExecuTorch 1.5.1: ``executorch.runtime`` from the oracle environment (scripts/et_oracle.sh) with a
  torch tensor input, as its Python API takes; it imports torch.

Each process prints import time (the runtime module), load time (program + method), first-execute and
median latency (1 thread), peak RSS (VmHWM) and whether torch got imported, and checks its output against
eager's (max |difference| <= 1e-4). The medians over the rounds are printed with the etkit/ExecuTorch ratios
and the issue's targets (import < 0.5 s, peak RSS < 150 MiB).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = r'''
import importlib.abc, json, statistics, sys, time
runtime, pte, data, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if runtime == "etkit":
    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is refused in this process (" + name + ")")
    sys.meta_path.insert(0, NoTorch())
import numpy as np
arrays = np.load(data)
x, want = arrays["x"], arrays["want"]
t0 = time.perf_counter()
if runtime == "etkit":
    from etkit.runtime import Runtime, set_num_threads
    set_num_threads(1)
    feed = x
else:
    from executorch.runtime import Runtime
    from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
    import torch
    _unsafe_reset_threadpool(1)  # ExecuTorch's XNNPACK threadpool (bench/pte_runner.py does the same)
    feed = torch.from_numpy(x)
t1 = time.perf_counter()
method = Runtime.get().load_program(pte).load_method("forward")
t2 = time.perf_counter()
out = method.execute([feed])[0]
t3 = time.perf_counter()
times = []
for _ in range(repeats):
    s = time.perf_counter()
    method.execute([feed])
    times.append(time.perf_counter() - s)
got = np.asarray(out)
diff = float(np.abs(got - want).max())
with open("/proc/self/status") as f:
    hwm = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
print(json.dumps({"import_s": t1 - t0, "load_ms": (t2 - t1) * 1e3, "first_ms": (t3 - t2) * 1e3,
                  "median_ms": statistics.median(times) * 1e3, "peak_rss_mib": hwm,
                  "torch_imported": "torch" in sys.modules, "max_abs_diff": diff}))
'''


def _deploy_venv(base: Path) -> Path:
    """A fresh venv with only the etkit-runtime and etkit-xnnpack wheels and numpy, pluggy, flatbuffers (no
    torch); returns its python."""
    from tests.packaging.venv_overlay import make_overlay, make_venv

    wheels = base / "wheels"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(wheels)]
    prefix = (Path(sys.prefix) / "xnnpack-prefix").read_text().strip()
    for source, env in ((REPO, {}), (REPO / "plugins" / "xnnpack", {"XNNPACK_ROOT": prefix})):
        subprocess.run(["flock", "/tmp/etkit-build.lock", *pip, str(source)], check=True,
                       env={**os.environ, **env})
    linked = make_overlay(base / "overlay", ["numpy", "pluggy", "flatbuffers"])
    assert not any(name.lower() == "torch" for name in linked), linked
    python = make_venv(base / "venv", base / "overlay")
    found = sorted(str(w) for w in wheels.glob("*.whl") if w.name.startswith(("etkit_runtime-", "etkit_xnnpack-")))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", *found], check=True)
    subprocess.run([str(python), "-m", "pip", "check"], check=True, capture_output=True)
    return python


def _run(runtime: str, pte: Path, data: Path, repeats: int, python: str = sys.executable) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if runtime == "executorch":
        from tests.interop.oracle import oracle_dir
        env["PYTHONPATH"] = str(oracle_dir())
        python = sys.executable
    proc = subprocess.run([str(python), "-c", CHILD, runtime, str(pte), str(data), str(repeats)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{runtime}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["max_abs_diff"] > 1e-4:
        raise SystemExit(f"{runtime}: output differs from eager by {result['max_abs_diff']}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--in-place", action="store_true",
                    help="run etkit in this environment (torch refused) instead of a fresh venv without torch")
    args = ap.parse_args()

    import numpy as np
    import torch
    import torchvision

    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        want = model(x)
    program = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                                partitioner=[XnnpackPartitioner()]).to_executorch()
    with tempfile.TemporaryDirectory(prefix="etkit-footprint-") as tmp:
        pte, data = Path(tmp) / "mobilenet_v2.pte", Path(tmp) / "io.npz"
        pte.write_bytes(program.buffer)
        np.savez(data, x=x.numpy(), want=want.numpy())
        python = sys.executable if args.in_place else _deploy_venv(Path(tmp) / "deploy")
        runs: dict = {"etkit": [], "executorch": []}
        for _ in range(args.rounds):
            for runtime in runs:
                runs[runtime].append(_run(runtime, pte, data, args.repeats, python))

    keys = [("import_s", "import (s)", "{:.3f}"), ("load_ms", "load (ms)", "{:.1f}"),
            ("first_ms", "first execute (ms)", "{:.2f}"), ("median_ms", "median execute (ms)", "{:.2f}"),
            ("peak_rss_mib", "peak RSS (MiB)", "{:.1f}")]
    where = "this environment, torch refused" if args.in_place else "a fresh venv without torch installed"
    print(f"MobileNetV2 fp32 on XNNPACK, 1 thread; median of {args.rounds} fresh processes each "
          f"({args.repeats} executes for the median); etkit in {where}")
    print(f"{'':22}{'etkit (no torch)':>18}{'ExecuTorch 1.5.1':>18}{'etkit/ET':>10}")
    for key, label, fmt in keys:
        ours = statistics.median(r[key] for r in runs["etkit"])
        theirs = statistics.median(r[key] for r in runs["executorch"])
        print(f"{label:22}{fmt.format(ours):>18}{fmt.format(theirs):>18}{ours / theirs:>9.2f}x")
    print(f"{'torch imported':22}{str(any(r['torch_imported'] for r in runs['etkit'])):>18}"
          f"{str(any(r['torch_imported'] for r in runs['executorch'])):>18}")
    imp = statistics.median(r["import_s"] for r in runs["etkit"])
    rss = statistics.median(r["peak_rss_mib"] for r in runs["etkit"])
    print(f"targets: import < 0.5 s: {'met' if imp < 0.5 else 'missed'} ({imp:.3f} s); "
          f"peak RSS < 150 MiB: {'met' if rss < 150 else 'missed'} ({rss:.1f} MiB)")


if __name__ == "__main__":
    main()
