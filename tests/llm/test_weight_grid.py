"""``weight_qparams="gguf"``: linears whose weights lie on a Q4_1 grid (``d * q + m`` per 32 columns, as
transformers dequantizes a GGUF file) keep that grid exactly (etkit.llm.weight_grid), and the output
projection is int8 sharing the 8-bit embedding table's bytes."""
from __future__ import annotations

import copy

import pytest
import torch

from etkit.llm import LlmConfig, LlmExportError, export_llm
from etkit.llm.model import StaticKVDecoder
from etkit.llm.weight_grid import GridError, GridLinear, quantize_on_grid, recover_grid

from .conftest import CPU_BACKEND, tiny_model

GROUP = 32


def _q4_1(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` rounded as ggml's Q4_1 does (per 32 columns: fp16 scale (max - min) / 15 and fp16 minimum,
    levels 0..15), then dequantized to float32 as transformers reads the file."""
    out, inn = weight.shape
    w = weight.reshape(out, inn // GROUP, GROUP)
    low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    d = ((high - low) / 15).half().float()
    m = low.half().float()
    q = torch.clamp(torch.round((w - m) / torch.where(d == 0, torch.ones_like(d), d)), 0, 15)
    return (d * q + m).reshape(out, inn)


def _on_grid(model: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        for sub in model.modules():
            if isinstance(sub, torch.nn.Linear) and sub.in_features % GROUP == 0:
                sub.weight.copy_(_q4_1(sub.weight))
    return model


def test_recover_grid_is_exact_on_q4_1_blocks_and_a_constant_block():
    torch.manual_seed(0)
    w = _q4_1(torch.randn(16, 4 * GROUP))
    w[3, GROUP:2 * GROUP] = 0.25  # a constant block: scale 0 in the file
    q, d, c = recover_grid(w, GROUP)
    assert q.dtype == torch.int8 and int(q.min()) >= -8 and int(q.max()) <= 7
    assert d.shape == c.shape == (16, 4) and bool((d > 0).all())
    rebuilt = (q.float().reshape(16, 4, GROUP) * d[..., None] + c[..., None]).reshape(16, 4 * GROUP)
    torch.testing.assert_close(rebuilt, w, atol=1e-6, rtol=0)


def test_weights_off_the_grid_are_refused_with_the_layer_named():
    torch.manual_seed(1)
    with pytest.raises(GridError, match=r"layers\.0\.mlp: block \d+ of row \d+ is not on a 4-bit grid"):
        recover_grid(torch.randn(8, 2 * GROUP), GROUP, "layers.0.mlp")
    model = tiny_model(vocab_size=320)  # random weights, no grid
    with pytest.raises(LlmExportError, match="is not on a 4-bit grid.*use 'hqq' otherwise"):
        export_llm(model, LlmConfig(max_seq_len=4, max_context_len=16, quantize="8da4w", weight_qparams="gguf"),
                   progress=lambda _: None)
    with pytest.raises(LlmExportError, match="weight_qparams 'gguf'.*needs quantize '8da4w' or '4w'"):
        LlmConfig(quantize="8da8w", weight_qparams="gguf").check()


def test_grid_linear_equals_the_float_layer():
    """Weight-only: the int4 part plus the block-offset matmul reproduce the float layer (fp32 sums)."""
    torch.manual_seed(2)
    layer = torch.nn.Linear(3 * GROUP, 24)
    with torch.no_grad():
        layer.weight.copy_(_q4_1(layer.weight))
    x = torch.randn(2, 5, 3 * GROUP)
    want = layer(x)
    model = torch.nn.Sequential(copy.deepcopy(layer))
    assert quantize_on_grid(model, GROUP, activations=False) == 1
    assert isinstance(model[0], GridLinear) and model[0].offsets is not None
    torch.testing.assert_close(model(x), want, atol=1e-5, rtol=1e-5)


def _max_logit_error(program, model, tokens) -> float:
    from etkit.runtime import Runtime
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    (logits,) = method.execute([tokens, torch.tensor([0])])
    with torch.no_grad():
        want = model(tokens).logits[0, -1]
    return float((logits[0] - want).abs().max() / (want.max() - want.min()))


def test_gguf_grid_program_is_closer_to_fp32_than_requantized_and_stores_the_table_once():
    """On a model whose linears lie on a Q4_1 grid, the 8da4w program keeping the grid is closer to fp32
    eager than one with new (HQQ) 4-bit scales: its error is only the int8 activations' (within 3% of the
    logits' spread here, against HQQ's larger one); and its int8 output projection is the 8-bit embedding
    table itself, stored once in the .pte."""
    model = _on_grid(tiny_model("llama", seed=4, vocab_size=512))
    tokens = torch.randint(0, 512, (1, 6), generator=torch.Generator().manual_seed(3))
    common = dict(max_seq_len=8, max_context_len=32, backend=CPU_BACKEND, quantize="8da4w", group_size=GROUP,
                  embedding_quantize="8w")
    grid = export_llm(model, LlmConfig(weight_qparams="gguf", **common), progress=lambda _: None)
    hqq = export_llm(model, LlmConfig(weight_qparams="hqq", **common), progress=lambda _: None)
    grid_error, hqq_error = _max_logit_error(grid, model, tokens), _max_logit_error(hqq, model, tokens)
    assert grid_error <= 0.03, grid_error
    assert grid_error < 0.5 * hqq_error, (grid_error, hqq_error)

    from etkit.dialects.quantized_embedding import QuantizedEmbedding
    table = QuantizedEmbedding(model.model.embed_tokens, bits=8).weight.numpy().tobytes()
    assert grid.buffer.count(table) == 1


def test_gguf_grid_program_matches_the_eager_module_quantized_the_same_way():
    """The lowered program equals the eager decoder with the same grid quantization (int8 activations on
    both sides, scales rounded differently by the delegate), within 2% of the logits' spread."""
    from etkit.llm.export import _quantize
    from etkit.runtime import Runtime
    model = _on_grid(tiny_model("llama", seed=6, vocab_size=320))
    config = LlmConfig(max_seq_len=8, max_context_len=32, backend=CPU_BACKEND, quantize="8da4w", group_size=GROUP,
                       weight_qparams="gguf")
    program = export_llm(model, config, progress=lambda _: None)
    reference = StaticKVDecoder(copy.deepcopy(model), 32, generate_full_logits=True).eval()
    _quantize(reference, config)
    tokens = torch.randint(0, 320, (1, 7), generator=torch.Generator().manual_seed(5))
    (logits,) = Runtime.get().load_program(program.buffer).load_method("forward").execute([tokens, torch.tensor([0])])
    with torch.no_grad():
        want = reference(tokens, torch.tensor([0]))[0, -1]
    spread = float(want.max() - want.min())
    torch.testing.assert_close(logits[0], want, atol=0.02 * spread, rtol=0)
