"""etkit.dialects.quantized names the quantize / dequantize ops once: its predicates tell the nodes of an
exported graph apart, and no plugin keeps its own copy of them (issue 21: five copies went)."""
from __future__ import annotations

import pathlib
import re

import torch

from etkit.dialects import quantized as q

qd = torch.ops.quantized_decomposed
REPO = pathlib.Path(__file__).resolve().parents[2]


class _QDQ(torch.nn.Module):
    """A quantize/dequantize pair on the activation, a per-channel dequantized weight, a dynamic chain."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randint(-127, 127, (4, 3), dtype=torch.int8))
        self.register_buffer("scales", torch.rand(4) + 0.01)
        self.register_buffer("zeros", torch.zeros(4, dtype=torch.int64))

    def forward(self, x):
        a = qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.1, 0, -128, 127, torch.int8), 0.1, 0, -128, 127,
                                     torch.int8)
        w = qd.dequantize_per_channel(self.w, self.scales, self.zeros, 0, -127, 127, torch.int8)
        s, z = qd.choose_qparams(a, -128, 127, 1e-5, torch.int8)
        d = qd.dequantize_per_tensor(qd.quantize_per_tensor(a, s, z, -128, 127, torch.int8), s, z, -128, 127,
                                     torch.int8)
        return torch.nn.functional.linear(d, w)


def _nodes():
    ep = torch.export.export(_QDQ(), (torch.randn(2, 3),))
    return {n.target: n for n in ep.graph.nodes if n.op == "call_function"}, ep


def test_predicates_tell_the_quantized_nodes_apart():
    nodes, ep = _nodes()
    quant, dequant = nodes[qd.quantize_per_tensor.default], nodes[qd.dequantize_per_tensor.default]
    per_channel = nodes[qd.dequantize_per_channel.default]
    dyn_q, dyn_dq = nodes[qd.quantize_per_tensor.tensor], nodes[qd.dequantize_per_tensor.tensor]
    assert q.is_quantize(quant) and not q.is_quantize(dequant) and not q.is_quantize(dyn_q)
    assert q.is_dequantize(dequant) and not q.is_dequantize(per_channel) and not q.is_dequantize(dyn_dq)
    assert q.is_dequantize(per_channel, per_channel=True) and not q.is_dequantize(quant, per_channel=True)
    placeholder = next(n for n in ep.graph.nodes if n.op == "placeholder")
    assert not q.is_quantize(placeholder) and not q.is_dequantize(placeholder, per_channel=True, blockwise=True)
    assert not q.is_quantize("quantize_per_tensor") and not q.is_dequantize(None)
    assert q.is_op(dyn_q, q.dynamic_quantize_ops()) and q.is_op(dyn_dq, q.dynamic_dequantize_ops())
    assert q.is_op(nodes[qd.choose_qparams.tensor], q.choose_qparams_ops())
    assert q.is_op(per_channel, q.weight_dequantize_ops()) and not q.is_op(dyn_dq, q.weight_dequantize_ops())


def test_torchao_block_wise_ops_are_in_the_sets_when_torchao_defines_them():
    affine = q.torchao_op("dequantize_affine")
    assert q.torchao_op("no_such_op") is None
    if affine is None:  # torchao is a dev requirement; without it the sets hold the quantized_decomposed ops only
        assert q.weight_dequantize_ops() == (q.DEQUANTIZE_PER_TENSOR, q.DEQUANTIZE_PER_CHANNEL)
        return
    assert q.weight_dequantize_ops() == (q.DEQUANTIZE_PER_TENSOR, q.DEQUANTIZE_PER_CHANNEL, affine)
    assert q.dynamic_quantize_ops()[-1] is q.torchao_op("quantize_affine")
    assert q.choose_qparams_ops()[-1] is q.torchao_op("choose_qparams_affine")


def test_no_plugin_defines_its_own_quantize_predicates():
    own = re.compile(r"^def (is_quantize|is_dequantize|is_weight_dequantize|_torchao_op|_qd)\b|torch\.ops\.torchao\.",
                     re.M)
    found = []
    for path in sorted(REPO.glob("plugins/*/etkit_*/**/*.py")):
        if "/build/" in path.as_posix():
            continue
        found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in own.finditer(path.read_text())]
    assert not found, "use etkit.dialects.quantized instead:\n" + "\n".join(found)
