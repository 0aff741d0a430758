"""A program whose tensors and XNNPACK payload disagree (a corrupted or crafted file): the input tensor the
program declares static is [4, 32], the payload's graph was built for [4, 64]. XNNPACK would size its reads
from the graph's filter (64 floats per row) and read past the tensor; the delegate refuses at execute with
an error naming both shapes, from Python and from etkit_runner. The unmodified program matches eager."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

import etkit
from etkit.runtime import EtkitRuntimeError, Runtime
from etkit.serialize.pte import deserialize_pte, serialize_pte

pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")
from etkit_xnnpack import XnnpackPartitioner  # noqa: E402

RUNNER = Path(__file__).resolve().parents[3] / "build" / "native" / "runner" / "etkit_runner"
MESSAGE = ("input argument 0 is a static tensor of shape [4, 32] but the delegate's payload declares [4, 64]; "
           "the program and its XNNPACK payload disagree")


@pytest.fixture(scope="module")
def programs():
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 16).eval()
    x = torch.randn(4, 64)
    good = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                             partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    contents = deserialize_pte(good)
    plan = contents.program.executionPlan[0]
    plan.values[plan.inputs[0]].val.sizes = [4, 32]
    return model, x, good, serialize_pte(contents)


def test_program_and_payload_that_disagree_are_refused(programs):
    model, x, good, bad = programs
    (y,) = Runtime.get().load_program(good).load_method("forward").execute([x])
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-5, rtol=1e-5)
    method = Runtime.get().load_program(bad).load_method("forward")
    with pytest.raises(EtkitRuntimeError, match=r"InvalidProgram: .*" + re.escape(MESSAGE)):
        method.execute([torch.randn(4, 32)])


def test_runner_refuses_it_too(programs, tmp_path):
    assert RUNNER.exists(), f"{RUNNER} is missing: run `make native` first"
    path = tmp_path / "bad.pte"
    path.write_bytes(programs[3])
    proc = subprocess.run([str(RUNNER), "--model_path", str(path), "--iterations", "1"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and MESSAGE in proc.stderr, (proc.returncode, proc.stderr)
