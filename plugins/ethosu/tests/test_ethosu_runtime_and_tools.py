"""What a user sees around an Ethos-U program on a host: loading says why it cannot run, the fallback twin
runs on the portable kernels, ``etkit inspect`` describes the payload, the kept TOSA graph can be dumped and
run, and Vela's performance estimate is reported per layer."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from ethosu_helpers import lower, output_steps
from etkit import ExecutorchBackendConfig
from etkit_ethosu import partition_estimates, performance_report, run_on_tosa_reference
from etkit_ethosu.payload import unpack
from etkit_ethosu.plugin import UNAVAILABLE_REASON
from etkit_ethosu.reference import delegate_tosa, run_tosa


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


INPUTS = (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(3)),)


@pytest.fixture(scope="module")
def lowered():
    return lower(SmallCnn(), INPUTS, keep_tosa=True)


def test_loading_says_there_is_no_npu(lowered, tmp_path):
    from etkit.runtime import EtkitRuntimeError, Runtime
    path = tmp_path / "m.pte"
    path.write_bytes(lowered.manager.to_executorch().buffer)
    with pytest.raises(EtkitRuntimeError) as info:
        Runtime.get().load_program(path).load_method("forward")
    assert UNAVAILABLE_REASON in str(info.value)


def test_fallback_twin_runs_the_quantized_program_on_portable_kernels(lowered, tmp_path):
    from etkit.runtime import Runtime
    path = tmp_path / "m.pte"
    path.write_bytes(lowered.manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).buffer)
    method = Runtime.get().load_program(path).load_method("forward")
    assert "EthosUBackend" in method.fallback_reason
    (out,) = method.execute(list(INPUTS))
    with torch.no_grad():
        expected = lowered.reference(*INPUTS)
    (step,) = output_steps(lowered)
    torch.testing.assert_close(out, expected, atol=step * 1.001, rtol=0)
    (on_reference,) = run_on_tosa_reference(lowered.manager, list(INPUTS))
    torch.testing.assert_close(on_reference, expected, atol=step * 1.001, rtol=0)


def test_inspect_describes_the_payload(lowered, tmp_path):
    path = tmp_path / "m.pte"
    path.write_bytes(lowered.manager.to_executorch().buffer)
    text = subprocess.run([sys.executable, "-m", "etkit", "inspect", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert "Ethos-U target ethos-u55-128 (TOSA-1.0+INT+int16+int4+u55); command stream" in text
    assert "input 0: 1x1x1x3x8x8, 1-byte elements" in text and "output 0: 1x1x1x1x1x5" in text
    assert "TOSA graph kept" in text


def _inspect_dump(pte: bytes, tmp_path):
    path = tmp_path / "m.pte"
    path.write_bytes(pte)
    return subprocess.run([sys.executable, "-m", "etkit", "inspect", str(path), "--dump", str(tmp_path / "out")],
                          capture_output=True, text=True, check=True).stdout


def test_inspect_dump_writes_the_kept_tosa_graph(lowered, tmp_path):
    text = _inspect_dump(lowered.manager.to_executorch().buffer, tmp_path)
    assert "forward_0 (EthosUBackend): " in text
    (module,) = [m for _, m in lowered.manager.exported_program().graph_module.named_children()]
    payload = unpack(module.processed_bytes)
    assert (tmp_path / "out" / "forward_0.cmd_data.bin").read_bytes() == payload.cmd_data
    assert (tmp_path / "out" / "forward_0.weight_data.bin").read_bytes() == payload.weight_data
    dumped = (tmp_path / "out" / "forward_0.tosa").read_bytes()
    assert dumped == payload.tosa == delegate_tosa(module)
    x = torch.ops.quantized_decomposed.quantize_per_tensor(INPUTS[0], 0.05, 0, -128, 127, torch.int8)
    (a,) = run_tosa(dumped, [x.numpy()])
    assert a.shape == (1, 5) and str(a.dtype) == "int8"


def test_without_keep_tosa_no_graph_is_kept(tmp_path):
    plain = lower(SmallCnn(), INPUTS)
    _inspect_dump(plain.manager.to_executorch().buffer, tmp_path)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["forward_0.cmd_data.bin",
                                                                   "forward_0.weight_data.bin"]
    (module,) = [m for _, m in plain.manager.exported_program().graph_module.named_children()]
    assert unpack(module.processed_bytes).tosa is None


def test_performance_report_per_layer_and_per_target(lowered):
    text = performance_report(lowered.manager)
    assert "Vela estimate for ethos-u55-128" in text and "Conv2D" in text and "estimated cycles in total" in text
    (u55,) = partition_estimates(lowered.manager)
    (u85,) = partition_estimates(lowered.manager, "ethos-u85-256")
    assert u55.summary["cycles_total"] > 0 and u85.summary["cycles_total"] > 0
    assert u85.summary["accelerator_configuration"] != u55.summary["accelerator_configuration"]
    assert any(layer.mac_count > 0 for layer in u55.layers)


def test_reference_model_refuses_a_corrupt_graph_with_an_error():
    from etkit_ethosu.reference import TosaReferenceError
    with pytest.raises(TosaReferenceError, match="refused the graph"):
        run_tosa(b"\x00" * 64, [])
