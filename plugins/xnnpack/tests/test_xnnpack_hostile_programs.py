"""A program whose tensors and XNNPACK payload disagree (a corrupted or crafted file): the input tensor the
program declares static is [4, 32], the payload's graph was built for [4, 64]. XNNPACK would size its reads
from the graph's filter (64 floats per row) and read past the tensor; the delegate refuses at execute with
an error naming both shapes, from Python and from etkit_runner. The unmodified program matches eager.
And a payload whose weight claims a dim past the memory limit is refused when the method loads."""
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


def test_a_weight_with_one_huge_dim_and_no_elements_is_refused():
    """A linear weight of shape [2^30, 0] holds no elements, yet XNNPACK sizes per-channel data (the packed
    bias) from its first dim: 4 GiB. Each dim alone must fit the memory limit at 4 bytes per element (the class
    of the fuzz regression `linear-zero-k-huge-bias`, found in the Vulkan delegate)."""
    import flatbuffers
    from etkit.runtime import set_memory_limit
    from etkit_xnnpack.serialization import FLATBUFFER_IDENTIFIER, assemble_payload

    from helpers import parse_payload

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 16).eval()
    x = torch.randn(2, 8)
    contents = deserialize_pte(etkit.to_edge_transform_and_lower(
        torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    _, graph, constants = parse_payload(contents.delegate_data[0])
    weights = [v.xvalueUnion for v in graph.xvalues if list(v.xvalueUnion.dims) == [16, 8]]
    assert len(weights) == 1, [list(v.xvalueUnion.dims) for v in graph.xvalues]
    weights[0].dims = [1 << 30, 0]
    builder = flatbuffers.Builder(1024)
    builder.Finish(graph.Pack(builder), file_identifier=FLATBUFFER_IDENTIFIER)
    contents.delegate_data[0] = assemble_payload(bytes(builder.Output()), constants)
    crafted = serialize_pte(contents)
    set_memory_limit(1 << 30)
    try:
        with pytest.raises(EtkitRuntimeError, match=r"it has a dim of 1073741824: at 4 bytes per element, one row of it "
                                                    r"is more than the memory limit of 1073741824 bytes"):
            Runtime.get().load_program(crafted).load_method("forward")
    finally:
        set_memory_limit(None)
