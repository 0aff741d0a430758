"""EthosUPartitioner's decisions and reasons, EthosUCompileSpec's stored form (ExecuTorch's keys), and the
target constraints checked at partition time (Vela has no CPU fallback for TOSA input)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import etkit
from ethosu_helpers import lower
from etkit.backend import CompileSpec
from etkit_ethosu import EthosUCompileSpec, EthosUPartitioner
from etkit_ethosu.compile_spec import TARGETS

F = nn.functional


def test_compile_spec_uses_executorchs_keys_and_defaults():
    spec = EthosUCompileSpec("ethos-u55-128")
    stored = {s.key: s.value.decode() for s in spec.to_list()}
    assert stored == {
        "tosa_spec": "TOSA-1.0+INT+int16+int4+u55",
        "compile_flags": "--accelerator-config=ethos-u55-128 --config=Arm/vela.ini --output-format=raw "
                         "--system-config=Ethos_U55_High_End_Embedded --memory-mode=Shared_Sram",
        "output_format": "vela", "preserve_io_quantization": "False", "target": "ethos-u55-128"}
    u85 = EthosUCompileSpec("ethos-u85-256", extra_flags=["--optimise=Size"])
    assert (u85.system_config, u85.memory_mode, u85.tosa_spec) == ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only",
                                                                   "TOSA-1.0+INT+int16+int4+cf")
    assert u85.vela_flags()[0] == "--optimise=Size"
    back = EthosUCompileSpec.from_list(u85.to_list())
    assert back == u85 and back.vela_flags() == u85.vela_flags()


def test_compile_spec_refuses_bad_targets_and_flags():
    with pytest.raises(ValueError, match="unknown Ethos-U target 'ethos-u99'.*ethos-u55-128"):
        EthosUCompileSpec("ethos-u99")
    with pytest.raises(ValueError, match="contains a space"):
        EthosUCompileSpec("ethos-u55-128", extra_flags=["--output-dir=/a b"])
    with pytest.raises(ValueError, match="not an Ethos-U compile spec"):
        EthosUCompileSpec.from_list([CompileSpec("compute_unit", b"ALL")])
    assert len(TARGETS) == 11


def test_float_model_is_not_delegated_and_says_quantize():
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval()
    partitioner = EthosUPartitioner()
    etkit.to_edge_transform_and_lower(torch.export.export(model, (torch.randn(2, 8),)), partitioner=[partitioner])
    report = partitioner.report()
    assert report.num_partitions == 0
    assert report.rejected and all("not quantized" in r.reason and "EthosUQuantizer" in r.reason
                                   for r in report.rejected), report.format()


def test_unsupported_op_stays_outside_with_reason_and_splits_the_graph():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

        def forward(self, x):
            return self.b(self.a(x) / (x.abs() + 1.0))

    lowered = lower(M(), (torch.randn(2, 8),))
    report = lowered.report
    assert report.num_partitions == 2, report.format()
    assert any(r.target == "aten.div.Tensor" and "no Ethos-U lowering" in r.reason
               for r in report.rejected), report.format()


def test_u55_constraint_is_checked_at_partition_time():
    """Average pooling with padding and a kernel above 8x8 compiles for U85 but Vela refuses it on U55: the
    partitioner keeps it outside for U55 (with the reason) instead of failing the compile."""
    model = nn.Sequential(nn.Conv2d(2, 2, 1), nn.AvgPool2d(9, stride=3, padding=2, count_include_pad=False))
    x = (torch.randn(1, 2, 16, 16),)
    u55 = lower(model, x, "ethos-u55-128").report
    assert any("at most 8x8" in r.reason for r in u55.rejected), u55.format()
    u85 = lower(model, x, "ethos-u85-256").report
    assert not u85.rejected and u85.delegated.get("aten.avg_pool2d.default") == 1, u85.format()


def test_grouped_convolution_is_refused_with_reason():
    lowered = lower(nn.Conv2d(4, 8, 3, groups=2), (torch.randn(1, 4, 6, 6),))
    assert any("grouped convolution" in r.reason for r in lowered.report.rejected), lowered.report.format()


def test_additional_checks_veto_nodes():
    """ExecuTorch's ``additional_checks``: an OperatorSupportBase (or a callable) that refuses a node keeps it
    outside, reported."""
    from torch.fx.passes.operator_support import OperatorSupportBase

    class NoAdd(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return "add" not in str(node.target)

    x = (torch.randn(2, 8),)

    class Res(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return self.fc(x) + x

    from etkit_ethosu import quantize_for_ethosu
    graph = quantize_for_ethosu(Res().eval(), x)
    partitioner = EthosUPartitioner(additional_checks=[NoAdd()])
    etkit.to_edge_transform_and_lower(torch.export.export(graph, x), partitioner=[partitioner])
    report = partitioner.report()
    assert any(r.target == "aten.add.Tensor" and "NoAdd" in r.reason for r in report.rejected), report.format()
    assert report.delegated.get("aten.linear.default") == 1
