"""Interop with ExecuTorch 1.5.1 (the oracle): a model quantized with ExecuTorch's EthosUQuantizer lowers with
etkit's EthosUPartitioner, and etkit's TOSA graph gives the same int8 results as ExecuTorch's TOSA graph for the
same partition on Arm's TOSA reference model; etkit reads ExecuTorch's Ethos-U payloads and compile specs.
(The Vela step itself is compared byte for byte in test_ethosu_vela_compile.py.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import etkit
from etkit.backend import CompileSpec
from etkit.serialize.inspect import delegate_payloads
from etkit_ethosu import EthosUCompileSpec, EthosUPartitioner
from etkit_ethosu.describe import describe_payload
from etkit_ethosu.payload import unpack
from etkit_ethosu.reference import delegate_tosa, run_tosa

from tests.interop.oracle import run_in_oracle

pytestmark = pytest.mark.oracle

ORACLE_SCRIPT = Path(__file__).parent / "oracle_scripts" / "et_ethosu.py"
TARGET = "ethos-u55-128"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ethosu_interop")
    run_in_oracle(ORACLE_SCRIPT, TARGET, directory, timeout=600)
    return directory


def test_executorch_quantized_model_gives_the_same_int8_results(oracle):
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers the ops torch.export.load needs)

    ep = torch.export.load(oracle / "converted.pt2")
    partitioner = EthosUPartitioner(EthosUCompileSpec(TARGET))
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    report = partitioner.report()
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (ours,) = [m for _, m in manager.exported_program().graph_module.named_children()]
    (theirs,) = sorted(oracle.glob("output_tag0_*.tosa"))
    quantize = next(n for n in manager.exported_program().graph.nodes if "quantize_per_tensor" in str(n.target))
    compared = 0
    for x in torch.load(oracle / "inputs.pt"):
        xq = torch.ops.quantized_decomposed.quantize_per_tensor(x, *quantize.args[1:]).numpy()
        (a,) = run_tosa(delegate_tosa(ours), [xq])
        (b,) = run_tosa(theirs.read_bytes(), [xq])
        assert a.shape == b.shape and a.dtype == b.dtype == np.int8
        assert np.array_equal(a, b), f"etkit vs ExecuTorch TOSA: max diff {np.abs(a.astype(int) - b).max()} LSB"
        compared += 1
    assert compared == 4


def test_etkit_reads_executorchs_payload_and_compile_specs(oracle):
    (delegate,) = [d for d in delegate_payloads(oracle / "program.pte") if d[2] == "EthosUBackend"]
    _, _, _, payload, specs = delegate
    decoded = unpack(payload)
    assert decoded.cmd_data.startswith(b"COP1") and decoded.scratch_size > 0
    assert decoded.inputs[0].shape == (1, 1, 1, 3, 16, 16) and decoded.outputs[0].shape == (1, 1, 1, 1, 1, 5)
    ours = {s.key: s.value for s in EthosUCompileSpec(TARGET).to_list()}
    for key, value in ours.items():
        assert specs[key] == value, f"compile spec {key}: ExecuTorch {specs[key]!r}, etkit {value!r}"
    assert EthosUCompileSpec.from_list([CompileSpec(k, v) for k, v in specs.items()]).target == TARGET
    assert describe_payload(payload, specs)[0].startswith(f"Ethos-U target {TARGET}")
