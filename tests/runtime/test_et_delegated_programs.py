"""ExecuTorch-made programs with delegated subgraphs run in etkit's runtime through the installed
backend plugin and match torch eager (tolerance: the one scripts/et_make_samples.py checked
ExecuTorch's own runtime with, from its manifest). Skipped when the backend's runtime is not
registered in this process (plugin not installed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from etkit.runtime import Runtime

pytestmark = pytest.mark.oracle

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKEND = "XnnpackBackend"
SAMPLES = ["mlp_xnnpack", "mobilenet_v2_xnnpack"]


@pytest.fixture(scope="module")
def delegated_programs(tmp_path_factory) -> Path:
    if BACKEND not in Runtime.get().backend_registry.registered_backend_names:
        pytest.skip(f"backend {BACKEND} is not registered in this runtime (plugin not installed)")
    from tests.interop.oracle import OracleError, run_in_oracle

    out = tmp_path_factory.mktemp("et_delegated")
    try:
        run_in_oracle(REPO_ROOT / "scripts" / "et_make_samples.py", out, "--only", *SAMPLES)
    except OracleError as exc:
        pytest.fail(f"ExecuTorch oracle unavailable (run make oracle to see why): {exc}")
    return out


@pytest.mark.parametrize("name", SAMPLES)
def test_delegated_executorch_program_matches_eager(delegated_programs, name):
    manifest = json.loads((delegated_programs / "manifest.json").read_text())[name]
    ref = torch.load(delegated_programs / f"{name}.pt")
    program = Runtime.get().load_program(delegated_programs / f"{name}.pte")
    method = program.load_method("forward")
    assert BACKEND in method.metadata.backends
    outputs = method.execute(ref["inputs"])
    assert len(outputs) == len(ref["outputs"])
    for got, want in zip(outputs, ref["outputs"]):
        torch.testing.assert_close(got, want, rtol=manifest["rtol"], atol=manifest["atol"])
