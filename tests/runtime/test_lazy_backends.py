"""The Python runtime registers a plugin's backend when a method that uses it is loaded, not at
``Runtime.get()``: a process running a CPU program does not load a GPU driver (checking the Vulkan
backend's availability alone maps ~60 MB of LLVM/lavapipe). Options set for every backend before
(``set_num_threads``) reach backends registered later. Run in a fresh interpreter, since this test
process has registered backends already."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    from etkit import _runtime
    from etkit.runtime import Runtime, set_num_threads
    runtime = Runtime.get()
    report = {"at_get": list(_runtime.registered_backend_names())}
    set_num_threads(2)  # before any backend is registered: kept and given to each later
    method = runtime.load_program(sys.argv[1]).load_method("forward")
    report["after_load"] = list(_runtime.registered_backend_names())
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    report["out"] = method.execute([x])[0].tolist()
    report["listed"] = runtime.backend_registry.registered_backend_names
    print("REPORT " + json.dumps(report))
""")


def test_backends_register_when_a_method_needs_them(tmp_path):
    etkit_xnnpack = pytest.importorskip("etkit_xnnpack")
    import torch
    import etkit

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x * 2 - 5)

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    ep = torch.export.export(Model(), (x,))
    pte = tmp_path / "m.pte"
    etkit.to_edge_transform_and_lower(ep, partitioner=[etkit_xnnpack.XnnpackPartitioner()]) \
        .to_executorch().write_to_file(str(pte))
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(pte)], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    report = json.loads(lines[-1][len("REPORT "):])
    assert report["at_get"] == [], report
    assert report["after_load"] == ["XnnpackBackend"], report
    assert report["out"] == torch.relu(x * 2 - 5).tolist()
    assert "XnnpackBackend" in report["listed"]  # asking for the list registers every installed plugin
