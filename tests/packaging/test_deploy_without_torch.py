"""The deployment install (issue 23, item 1): `pip install etkit-runtime etkit-xnnpack` resolves no torch.

A fresh venv gets the etkit-runtime and etkit-xnnpack wheels and, borrowed from this environment, only the
distributions those two declare (numpy, pluggy, flatbuffers): `pip check` passes, so nothing they need is
missing and torch is not among it. The README's deployment example then runs MobileNetV2 (lowered to XNNPACK
here) from numpy input and matches the eager output saved with it (fp32 XNNPACK: within 1e-4); the compiler
side says to install etkit.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from .test_wheels import FreshVenv, wheels  # noqa: F401  (the module-scoped wheels fixture)
from .venv_overlay import make_overlay

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_BORROWED = ["numpy", "pluggy", "flatbuffers"]


@pytest.fixture(scope="module")
def deploy_venv(tmp_path_factory, wheels):  # noqa: F811
    base = tmp_path_factory.mktemp("deploy")
    linked = make_overlay(base / "overlay", DEPLOY_BORROWED)
    assert not any(name.lower() == "torch" for name in linked), linked
    (base / "work").mkdir()
    fresh = FreshVenv(base / "venv", base / "overlay", base / "work")
    fresh.install(wheels["etkit_runtime"], wheels["etkit_xnnpack"])   # `pip check` inside
    return fresh


def test_runtime_and_plugin_install_without_torch_and_run_mobilenet_v2(deploy_venv):
    import torch
    import torchvision

    import etkit
    from etkit_xnnpack import XnnpackPartitioner
    from tests.docs_examples import readme_example

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        want = model(x).numpy()
    program = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()])
    program.to_executorch().write_to_file(str(deploy_venv.work / "mobilenet_v2.pte"))
    np.save(deploy_venv.work / "input.npy", x.numpy())
    np.save(deploy_venv.work / "reference.npy", want)

    assert deploy_venv.script("import importlib.util; print(importlib.util.find_spec('torch'))").strip() == "None"
    out = deploy_venv.script(readme_example("### Deploying without torch") + """
import sys
assert "torch" not in sys.modules
print("torch imported:", "torch" in sys.modules)
""")
    assert "matches the reference: True" in out and "torch imported: False" in out, out

    refused = deploy_venv.script("""
    for ask in ("import etkit; etkit.to_edge", "from etkit_xnnpack import XnnpackPartitioner"):
        try:
            exec(ask)
        except ModuleNotFoundError as exc:
            print("refused:", exc)
    """)
    assert refused.count("is part of etkit's compiler, which needs torch: `pip install etkit`") == 2, refused
