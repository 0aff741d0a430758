"""Numeric debugging: Inspector.calculate_numeric_gap compares every operator's runtime output (ETDump
intermediate outputs) with the same Edge node run in torch eager on the same inputs (the ETRecord's
reference program).

A PT2E-quantized (8-bit static, XNNPACK's quantizer) ResNet-18 runs on the portable kernels; the program's
output is compared with the quantized eager model (|d| <= 0.1 on outputs of magnitude ~1: one int8
rounding step apart at most where kernels round differently).
"""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit.devtools import Inspector
from etkit.runtime import Runtime

pytest.importorskip("etkit_xnnpack")


def _quantized_resnet18():
    import torchvision
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(),
                            XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    for _ in range(3):
        prepared(torch.randn(1, 3, 64, 64))
    quantized = convert_pt2e(prepared)
    return quantized, torch.export.export(quantized, (x,)), x


@pytest.fixture(scope="module")
def quantized():
    return _quantized_resnet18()


def _gap_table(edge, x, tmp_path, name):
    program = edge.to_executorch()
    program.get_etrecord().save(tmp_path / f"{name}.etrecord")
    loaded = Runtime.get().load_program(program.buffer, enable_etdump=True, debug_buffer_size=64 << 20)
    outputs = loaded.load_method("forward").execute([x])
    loaded.write_etdump_result_to_file(tmp_path / f"{name}.etdp", tmp_path / f"{name}.bin")
    inspector = Inspector(etdump_path=tmp_path / f"{name}.etdp", etrecord=tmp_path / f"{name}.etrecord",
                          debug_buffer_path=tmp_path / f"{name}.bin")
    table = inspector.calculate_numeric_gap("MSE")
    table["mse"] = table["gap"].map(lambda g: g[0])
    return table, outputs


def _op(row) -> str:
    return row["runtime_ops"][0]


def test_gap_table_covers_every_quantized_conv(quantized, tmp_path):
    model, ep, x = quantized
    edge = etkit.to_edge(ep, generate_etrecord=True)
    convs = [n.name for n in edge.exported_program().graph.nodes if "convolution" in str(n.target)]
    table, outputs = _gap_table(edge, x, tmp_path, "q")
    torch.testing.assert_close(outputs[0], model(x).detach(), atol=0.1, rtol=0)
    rows = table[table.apply(lambda r: "convolution" in _op(r), axis=1)]
    assert sorted(a for ops in rows["aot_ops"] for a in ops) == sorted(convs)
    assert len(convs) == 20
    # the largest gap sits where values are rounded to int8: a quantize/dequantize boundary
    worst = table.loc[table["mse"].idxmax()]
    assert "quantize_per_tensor" in _op(worst), _op(worst)
    with pytest.raises(ValueError, match="unknown distance"):
        Inspector(etdump_path=tmp_path / "q.etdp", etrecord=tmp_path / "q.etrecord").calculate_numeric_gap("cosine")


def test_a_perturbed_conv_is_where_the_gap_starts(quantized, tmp_path):
    """The ETRecord keeps the program as made; then one conv's int8 weight is changed in the program that
    runs. The first row (in execution order) whose gap passes 1e-6 is that conv's weight or the conv, and
    no convolution before it has a gap."""
    _, ep, x = quantized
    edge = etkit.to_edge(ep, generate_etrecord=True)
    graph_ep = edge.exported_program()
    convs = [n for n in graph_ep.graph.nodes if "convolution" in str(n.target)]
    target = convs[3]
    weight_dq = target.args[1]
    placeholder = weight_dq.args[0]
    spec = {s.arg.name: s for s in graph_ep.graph_signature.input_specs}[placeholder.name]
    store = graph_ep.constants if spec.target in graph_ep.constants else graph_ep.state_dict
    store[spec.target].copy_(-store[spec.target])  # flip every weight's sign
    table, _ = _gap_table(edge, x, tmp_path, "perturbed")
    diverged = table[table["mse"] > 1e-6]
    first = diverged.iloc[0]
    assert first["aot_ops"][0] in (target.name, weight_dq.name), (first["aot_ops"], target.name)
    conv_rows = table[table.apply(lambda r: "convolution" in _op(r), axis=1)]
    first_bad_conv = conv_rows[conv_rows["mse"] > 1e-6].iloc[0]
    assert first_bad_conv["aot_ops"] == [target.name]


def test_custom_comparator_sees_every_pair_and_scores_it(tmp_path):
    """A NumericalComparatorBase subclass (ExecuTorch's extension point): its preprocessing gets every
    (reference, runtime) pair keyed by debug handles and may transform them, its element_compare scores each.
    On portable kernels the runtime equals eager within 1e-5; after preprocessing adds 1.0 to every runtime
    output, the max-abs gap is 1.0 for each operator (within 1e-5), and the built-in names still work."""
    from etkit.devtools import NumericalComparatorBase

    class MaxAbsAfterShift(NumericalComparatorBase):
        seen = 0

        def preprocessing(self, mapping):
            type(self).seen = len(mapping)
            assert self.inspector is not None
            return {aot: (handles, runtime + 1.0) for aot, (handles, runtime) in mapping.items()}

        def element_compare(self, a, b) -> float:
            return float((a.double() - b.double()).abs().max())

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    edge = etkit.to_edge(torch.export.export(model, (x,)), generate_etrecord=True)
    table, outputs = _gap_table(edge, x, tmp_path, "small")
    torch.testing.assert_close(outputs[0], model(x).detach(), atol=1e-5, rtol=1e-5)
    assert (table["mse"] < 1e-10).all() and len(table) >= 3
    inspector = Inspector(etdump_path=tmp_path / "small.etdp", etrecord=tmp_path / "small.etrecord",
                          debug_buffer_path=tmp_path / "small.bin")
    shifted = inspector.calculate_numeric_gap(MaxAbsAfterShift())
    assert MaxAbsAfterShift.seen == len(table) == len(shifted)
    assert all(abs(g[0] - 1.0) <= 1e-5 for g in shifted["gap"])
    assert list(shifted["aot_ops"]) == list(table["aot_ops"])
    with pytest.raises(ValueError, match=r"unknown distance 'cosine'; use one of \['L1', 'MSE', 'SNR'\] or a "
                                         r"NumericalComparatorBase"):
        inspector.calculate_numeric_gap("cosine")


def test_exported_program_as_the_reference(tmp_path):
    """reference_graph="exported_program": each compared row is an ATen node of the program as exported (the
    decomposed linear is compared at its addmm, with linear's output), with a gap within float32 rounding
    (portable kernels: MSE <= 1e-10); the Edge reference compares the Edge nodes; an unknown graph is refused."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(8, 8)
            self.norm = torch.nn.LayerNorm(8)

        def forward(self, x):
            return torch.nn.functional.gelu(self.norm(self.linear(x))).softmax(-1)

    x = torch.randn(2, 8)
    edge = etkit.to_edge(torch.export.export(Block().eval(), (x,)), generate_etrecord=True)
    edge_table, _ = _gap_table(edge, x, tmp_path, "block")
    inspector = Inspector(etdump_path=tmp_path / "block.etdp", etrecord=tmp_path / "block.etrecord",
                          debug_buffer_path=tmp_path / "block.bin")
    aten_table = inspector.calculate_numeric_gap("MSE", reference_graph="exported_program")
    assert [ops[0] for ops in aten_table["aot_ops"]] == ["linear", "gelu", "softmax"]
    assert all(g[0] <= 1e-10 for g in aten_table["gap"])
    assert "addmm" in [ops[0] for ops in edge_table["aot_ops"]]
    with pytest.raises(ValueError, match="unknown reference_graph 'aten'"):
        inspector.calculate_numeric_gap("MSE", reference_graph="aten")
