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


def _lowered(model: torch.nn.Module, x: torch.Tensor) -> bytes:
    return etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                             partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _dims_are(dims):
    return lambda value: list(value.dims) == dims


def test_a_weight_with_one_huge_dim_and_no_elements_is_refused():
    """A linear weight of shape [2^30, 0] holds no elements, yet XNNPACK sizes per-channel data (the packed
    bias) from its first dim: 4 GiB. Each dim alone must fit the memory limit at 4 bytes per element (the class
    of the fuzz regression `linear-zero-k-huge-bias`, found in the Vulkan delegate)."""
    from etkit.runtime import set_memory_limit

    from helpers import redeclare_values

    torch.manual_seed(0)
    crafted = redeclare_values(_lowered(torch.nn.Linear(8, 16).eval(), torch.randn(2, 8)), _dims_are([16, 8]),
                               [1 << 30, 0])
    set_memory_limit(1 << 30)
    try:
        with pytest.raises(EtkitRuntimeError, match=r"it has a dim of 1073741824: at 4 bytes per element, one row of it "
                                                    r"is more than the memory limit of 1073741824 bytes"):
            Runtime.get().load_program(crafted).load_method("forward")
    finally:
        set_memory_limit(None)


@pytest.mark.parametrize("op", ["linear", "softmax"])
def test_a_rank0_operand_where_xnnpack_reads_the_last_dim_is_refused(op):
    """XNNPACK's fully-connected and softmax nodes take the input's last dim and, in a release build, never check
    the input has one: a fully-connected input of rank 0 made it copy SIZE_MAX dims (the fuzz regression
    `fully-connected-rank0-input`). The payload's external input is rewritten to rank 0; loading the method must
    fail with the node, the operand and its rank. The untouched program matches eager (atol 1e-5)."""
    from helpers import redeclare_values

    torch.manual_seed(0)
    model = (torch.nn.Linear(8, 16) if op == "linear" else torch.nn.Softmax(dim=-1)).eval()
    x = torch.randn(2, 8)
    good = _lowered(model, x)
    (y,) = Runtime.get().load_program(good).load_method("forward").execute([x])
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-5, rtol=1e-5)
    crafted = redeclare_values(good, lambda value: value.flags & 1, [])  # XNN_VALUE_FLAG_EXTERNAL_INPUT
    node = "XNNFullyConnected" if op == "linear" else "XNNSoftmax"
    with pytest.raises(EtkitRuntimeError, match=rf"\({node}, debug_handle \d+\): input \(value id \d+\) has rank 0, "
                                                r"need at least 1"):
        Runtime.get().load_program(crafted).load_method("forward")


@pytest.mark.parametrize("operand, dims, message", [
    ("bias", [3], r"bias has dims \[3\]; the node's geometry needs \[16\]"),
    ("filter", [16, 0], r"filter has dims \[16, 0\]: zero input channels"),
    ("filter", [16, 4], r"input's last dim is 8 but the filter \[16, 4\] has 4 input channels"),
    ("filter", [128], r"filter \(value id \d+\) has rank 1, need 2"),
])
def test_a_linear_whose_filter_or_bias_disagree_with_its_input_is_refused(operand, dims, message):
    """XNNPACK's fully-connected node packs `output channels` bias values and divides the input by the filter's
    input channels without checking either against the operands: a bias of 3 values read 16, a filter with no
    input channels divided by zero (the fuzz regression `fully-connected-zero-input-channels`). Each rewritten
    payload keeps its constant bytes, so only the node's geometry check can refuse it, at load."""
    from helpers import redeclare_values

    torch.manual_seed(0)
    good = _lowered(torch.nn.Linear(8, 16).eval(), torch.randn(2, 8))
    crafted = redeclare_values(good, _dims_are([16] if operand == "bias" else [16, 8]), dims)
    with pytest.raises(EtkitRuntimeError, match=r"\(XNNFullyConnected, debug_handle \d+\): " + message):
        Runtime.get().load_program(crafted).load_method("forward")


def test_an_internal_value_xnnpack_sizes_past_the_memory_limit_fails_with_the_size():
    """XNNPACK derives the shapes of a graph's internal values while it reshapes and sizes its workspace from
    them, whatever the payload declares. The hidden [64, 4096] fp32 value of a two-layer MLP (1 MiB) is declared
    [1, 4096] (16 KiB) and the memory limit set to 512 KiB: each declared value fits, so the method loads, and
    execute fails with MemoryAllocationFailed naming what XNNPACK asked for (fuzz regression
    `workspace-claims-48GB`, which asked for 48 GB). Without the limit the program matches eager (atol 1e-4)."""
    from etkit.runtime import set_memory_limit

    from helpers import redeclare_values

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 2)).eval()
    x = torch.randn(64, 8)
    crafted = redeclare_values(_lowered(model, x), _dims_are([64, 4096]), [1, 4096], count=None)
    (y,) = Runtime.get().load_program(crafted).load_method("forward").execute([x])
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)
    set_memory_limit(512 << 10)
    try:
        method = Runtime.get().load_program(crafted).load_method("forward")
        for _ in range(2):  # the failed plan is not taken for a plan the second time (xnnpack-plan-memory-failure)
            with pytest.raises(EtkitRuntimeError, match=r"MemoryAllocationFailed: .*xnn_reshape_runtime failed with "
                                                        r"xnn_status_out_of_memory: XNNPACK asked for \d+ bytes, more "
                                                        r"than the memory limit of 524288 bytes"):
                method.execute([x])
    finally:
        set_memory_limit(None)
