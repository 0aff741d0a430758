"""Time inside a QNN context in the ETDump: the delegate turns on QNN's detailed profiler when the Method is
loaded with an event tracer and logs one event per QNN op, named after the ONNX node it came from; preprocess's
debug_handle_map (ONNX node name -> Edge debug handles) lets the Inspector name the Edge ops.

What QNN reports per op on the HTP simulator is cycles (runtime/src/qnn_profile.h); each op's event is its
share of the run's cycles of the accelerator's measured time, so the ops' events sum to the accelerator time,
which lies inside the delegate call. The outputs are compared with the PT2E reference model in eager (8a8w:
within 2 output quantization steps).
"""
from __future__ import annotations

import glob
import os

import pytest
import torch

import etkit
from etkit.devtools import Inspector
from etkit.runtime import Runtime
from etkit_qnn import QnnPartitioner
from qnn_helpers import output_step, reference, specs

pytestmark = pytest.mark.device_sim


class ConvLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.linear = torch.nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        return self.linear(torch.relu(self.conv(x)).flatten(1)).sigmoid()


def _profiles() -> set:
    return set(glob.glob(os.path.join(os.environ.get("TMPDIR") or "/tmp", "etkit-qnn-profile-*")))


def test_qnn_ops_are_timed_and_mapped_to_edge_ops(tmp_path):
    x = torch.randn(1, 3, 16, 16)
    program = reference(ConvLinear(), (x,), "8a8w")
    expected = program(x)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(program, (x,)),
                                             partitioner=[QnnPartitioner(specs(False))], generate_etrecord=True)
    executorch = edge.to_executorch()
    executorch.get_etrecord().save(tmp_path / "qnn.etrecord")
    (delegate,) = executorch.delegate_map["forward"].values()
    assert delegate["name"] == "QnnBackend" and "Gemm__59" in delegate["delegate_map"]

    before = _profiles()
    untraced = Runtime.get().load_program(executorch.buffer).load_method("forward")
    assert _profiles() == before  # no profiler without a tracer
    del untraced

    loaded = Runtime.get().load_program(executorch.buffer, enable_etdump=True)
    method = loaded.load_method("forward")
    for _ in range(3):
        out = method.execute([x])[0]
    assert (out - expected).abs().max() <= 2 * output_step(expected, "8a8w")
    loaded.write_etdump_result_to_file(tmp_path / "qnn.etdp")

    events = Inspector(etdump_path=tmp_path / "qnn.etdp", etrecord=tmp_path / "qnn.etrecord").event_blocks[-1].events
    (call,) = [e for e in events if e.name == "DELEGATE_CALL"]
    inside = [e for e in events if e.is_delegated_op]
    by_name = {e.name: e for e in inside}
    assert by_name["Gemm__59"].op_types == ["aten.linear.default"]
    assert by_name["Relu__38"].op_types == ["aten.relu.default"]
    assert by_name["Conv__30"].op_types == ["aten.convolution.default"]
    assert "Transpose" in by_name and by_name["Transpose"].debug_handles is None  # QNN's own layout op
    for run in range(3):
        total = sum(e.perf_data.raw[run] for e in inside)
        assert 0 < total <= call.perf_data.raw[run], (run, total, call.perf_data.raw[run])
    assert by_name["Gemm__59"].perf_data.raw[-1] > 0

    del method, loaded
    assert _profiles() == before  # the profile file goes with the delegate
