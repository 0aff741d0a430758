"""etkit side of the ExecuTorch-oracle checks: hand payloads to tests/oracle/et_run_payload.py, which runs
them with ExecuTorch 1.5.1's own runtime and XNNPACK delegate in a separate process.

The oracle environment comes from ``scripts/et_oracle.sh`` (the repository's; cached per user). When it
cannot be created, :func:`oracle_pythonpath` returns None and the tests fail, saying why.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "oracle" / "et_run_payload.py"
REPO = HERE.parents[2]


@functools.lru_cache(maxsize=1)
def oracle_pythonpath() -> str | None:
    script = REPO / "scripts" / "et_oracle.sh"
    if not script.exists():
        return None
    try:
        out = subprocess.run([str(script)], capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[-1] if out.returncode == 0 and lines else None


def _run(args: list[str], outdir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=oracle_pythonpath() or "")
    proc = subprocess.run([sys.executable, str(RUNNER), *args], env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"ExecuTorch oracle failed ({' '.join(args[:2])}):\n{proc.stderr[-4000:]}")
    return torch.load(os.path.join(outdir, "result.pt"), weights_only=False)


def run_model_with_payload(model_name: str, payload: bytes, named_data: dict) -> dict:
    """ExecuTorch lowers oracle_models.MODEL itself but runs ``payload`` (whose constants are in
    ``named_data``) as its XNNPACK delegate."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "payload.pt")
        torch.save({"payload": payload, "named_data": dict(named_data)}, path)
        return _run(["model", model_name, path, d], d)


def run_payloads(cases: list) -> list:
    """For each ``(payload, named_data, inputs, output_shapes)``: the outputs of ``payload`` executed by
    ExecuTorch's XNNPACK delegate on ``inputs`` (one oracle process for all cases)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "io.pt")
        torch.save([{"payload": p, "named_data": dict(nd), "inputs": list(i),
                     "output_shapes": [list(s) for s in shapes]} for p, nd, i, shapes in cases], path)
        return [r["outputs"] for r in _run(["stub", path, d], d)]
