"""`pytest --etkit-backend NAME --etkit-write-bpte DIR`: the conformance suite writes its delegated cases as
.bpte files a vendor can replay on a device; each holds the case's inputs and torch eager's outputs and
verifies in etkit's runtime (XNNPACK here; tolerance 1e-4, the suite's float32 default)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from etkit.conformance.cases import CASES_BY_NAME
from etkit.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
from etkit.runtime import Runtime, load_bundled_input, verify_method_outputs

pytest.importorskip("etkit_xnnpack")

CASES = ("conv2d", "mlp")


def test_conformance_suite_writes_replayable_bptes(tmp_path):
    out = tmp_path / "bpte"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--etkit-backend", "xnnpack",
         "--etkit-write-bpte", str(out), "-k", "bundled_program_written and (" + " or ".join(CASES) + ")"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"bundled programs written to {out}: {len(CASES)}" in run.stdout
    for case in CASES:
        data = (out / f"XnnpackBackend_{case}.bpte").read_bytes()
        module, inputs = CASES_BY_NAME[case].build()
        with torch.no_grad():
            eager = module(*inputs)
        eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
        stored = deserialize_from_flatbuffer_to_bundled_program(data).method_test_suites[0].test_cases[0]
        assert all(torch.equal(a, b) for a, b in zip(stored.inputs, inputs))
        for got, want in zip(stored.expected_outputs, eager):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        method = Runtime.get().load_program(data).load_method()
        load_bundled_input(method, data, 0)
        method.execute()
        assert verify_method_outputs(method, data, 0, rtol=1e-4, atol=1e-4).max_abs_diff <= 1e-4
