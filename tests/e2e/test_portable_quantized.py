"""A PT2E-quantized program with nothing delegated runs on the portable kernels: the
quantized_decomposed quantize/dequantize ops have out variants (ExecuTorch's names) and kernels whose
arithmetic follows torch's reference step by step, so the program matches the quantized reference
model exactly."""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit.runtime import Runtime

pytest.importorskip("torchao")
quantizer_mod = pytest.importorskip("etkit_xnnpack.quantizer")
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402


@pytest.mark.parametrize("per_channel", [True, False])
def test_quantized_cnn_without_delegate_matches_the_reference_exactly(per_channel):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 4)).eval()
    x = torch.randn(2, 3, 8, 8)
    quantizer = quantizer_mod.XNNPACKQuantizer().set_global(
        quantizer_mod.get_symmetric_quantization_config(is_per_channel=per_channel))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    quantized = convert_pt2e(prepared)
    program = etkit.to_edge(torch.export.export(quantized, (x,))).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for seed in range(3):
        xi = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        (got,) = method.execute([xi])
        torch.testing.assert_close(got, quantized(xi), atol=0, rtol=0)  # same ops, same arithmetic


def test_dynamically_quantized_linears_without_delegate_match_the_reference():
    """choose_qparams (per tensor, at run time) + quantize/dequantize, all on the portable kernels."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    quantizer = quantizer_mod.XNNPACKQuantizer().set_global(
        quantizer_mod.get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    quantized = convert_pt2e(prepared)
    ep = torch.export.export(quantized, (x,))
    assert any("choose_qparams" in str(n.target) for n in ep.graph.nodes)
    method = Runtime.get().load_program(etkit.to_edge(ep).to_executorch().buffer).load_method("forward")
    for seed in range(3):
        xi = torch.randn(4, 16, generator=torch.Generator().manual_seed(seed)) * (seed + 1)
        (got,) = method.execute([xi])
        torch.testing.assert_close(got, quantized(xi), atol=1e-6, rtol=1e-6)  # same ops in float32


def test_per_token_choose_qparams_matches_torch():
    from etkit.dialects.quantized import define_out_variants
    define_out_variants()
    qd = torch.ops.quantized_decomposed

    class PerToken(torch.nn.Module):
        def forward(self, x):
            scale, zp = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
            q = qd.quantize_per_token(x, scale, zp, -128, 127, torch.int8)
            return scale, zp, qd.dequantize_per_token(q, scale, zp, -128, 127, torch.int8, torch.float32)

    x = torch.randn(3, 5, 17) * torch.linspace(0.1, 4, 17)
    method = Runtime.get().load_program(
        etkit.to_edge(torch.export.export(PerToken(), (x,))).to_executorch().buffer).load_method("forward")
    for got, want in zip(method.execute([x]), PerToken()(x)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)
