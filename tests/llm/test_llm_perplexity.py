"""SmolLM2-135M-Instruct quantized 8da4w (int4 weights per 32, int8 dynamic activations) with an int8
embedding table: the program's perplexity over a fixed 512-token passage (tests/llm/data/passage.txt, written
for this test) is within 2% of the eager model quantized the same way with torchao (HQQ scales, export_llm's
default), and the HQQ scales beat min/max ones. The test prints all of them and fp32 eager's.

Issue 20 asks for 10% of fp32 eager: not reachable by choosing new symmetric int4 scales on this model.
Measured here (torchao eager, same passage): fp32 28.2; 8da4w min/max 43.2, HQQ 36.7, asymmetric 35.5, group
16 38.9, output projection in 8 bits 38.4 (HQQ + 8-bit output 33.9); 8da8w +2.8%. The fp32 model is itself
the GGUF's Q4_1 weights dequantized, and re-quantizing them to another 4-bit grid compounds the two
roundings. ``weight_qparams="gguf"`` keeps the file's own grid instead (etkit.llm.weight_grid) and reaches it:
the second test."""
from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from etkit.llm import LlmConfig, Tokenizer, export_llm
from etkit.runtime import Runtime

from .conftest import CPU_BACKEND

PASSAGE = Path(__file__).parent / "data" / "passage.txt"
TOKENS = 512



def _eager_perplexity(model, ids: list) -> float:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return math.exp(torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).item())


def _torchao_reference(model, algorithm: str = "hqq_scale_only"):
    """The eager model quantized as export_llm does: linears 8da4w (group 32) by torchao, the embedding int8
    per row (torchao's IntxWeightOnlyConfig embedding fails in transformers' forward with torchao 0.18 --
    aten.view is not implemented for IntxUnpackedToInt8Tensor -- so the table is quantized by etkit's
    QuantizedEmbedding, symmetric per row, the same scheme)."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quantize_.workflows.intx.intx_choose_qparams_algorithm import (
        IntxChooseQParamsAlgorithm)

    from etkit.dialects.quantized_embedding import QuantizedEmbedding
    quantized = copy.deepcopy(model)
    quantized.lm_head.weight = torch.nn.Parameter(quantized.lm_head.weight.detach().clone())  # untie, as exported
    quantize_(quantized, Int8DynamicActivationIntxWeightConfig(
                  weight_dtype=torch.int4, weight_granularity=PerGroup(32),
                  intx_choose_qparams_algorithm=IntxChooseQParamsAlgorithm(algorithm)),
              filter_fn=lambda m, _: isinstance(m, torch.nn.Linear))
    quantized.model.embed_tokens = QuantizedEmbedding(quantized.model.embed_tokens, bits=8)
    return quantized


@pytest.mark.slow
def test_8da4w_perplexity(smollm2, tmp_path):
    model, tokenizer_path = smollm2
    ids = Tokenizer(tokenizer_path).encode(PASSAGE.read_text())[:TOKENS]
    assert len(ids) == TOKENS
    path = tmp_path / "smollm2_8da4w.pte"
    export_llm(model, LlmConfig(max_seq_len=64, max_context_len=TOKENS + 8, backend=CPU_BACKEND, quantize="8da4w",
                                group_size=32, embedding_quantize="8w", generate_full_logits=True),
               progress=lambda _: None).write_to_file(str(path))
    forward = Runtime.get().load_program(str(path)).load_method("forward")
    logits = np.concatenate([forward.execute([np.asarray([ids[i:i + 64]], dtype=np.int64),
                                              np.asarray([i], dtype=np.int64)])[0][0] for i in range(0, TOKENS, 64)])
    logits = torch.from_numpy(logits[:-1]).double()  # every position's logits (generate_full_logits), in chunks
    program = math.exp(torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).item())
    fp32 = _eager_perplexity(model, ids)
    torchao = _eager_perplexity(_torchao_reference(model), ids)
    minmax = _eager_perplexity(_torchao_reference(model, "affine"), ids)
    print(f"\nperplexity over {TOKENS} tokens: etkit 8da4w+8w program {program:.3f}, torchao eager 8da4w+8w "
          f"{torchao:.3f} ({program / torchao - 1:+.2%}), fp32 eager {fp32:.3f} ({program / fp32 - 1:+.2%}; torchao "
          f"eager {torchao / fp32 - 1:+.2%}), torchao eager with min/max scales {minmax:.3f}")
    assert abs(program / torchao - 1) <= 0.02
    assert program < minmax * 0.95, "HQQ scales should beat min/max ones by more than 5% on this passage"
    assert program / fp32 - 1 <= 0.40


def _grid_reference(model, config: LlmConfig):
    """The eager model quantized as ``weight_qparams="gguf"`` exports it: linears on their recovered grid
    (int4 + block offsets, int8 per-token activations), the output projection int8 per channel, the
    embedding int8 per row (the same bytes)."""
    from etkit.dialects.quantized_embedding import QuantizedEmbedding
    from etkit.llm.export import _quantize
    quantized = copy.deepcopy(model)
    quantized.lm_head.weight = torch.nn.Parameter(quantized.lm_head.weight.detach().clone())  # untie, as exported
    _quantize(quantized, config)
    quantized.model.embed_tokens = QuantizedEmbedding(quantized.model.embed_tokens, bits=8)
    return quantized


@pytest.mark.slow
def test_8da4w_gguf_grid_perplexity_is_within_10_percent_of_fp32(smollm2, tmp_path):
    """Issue 20's target: the 8da4w + 8-bit embedding program that keeps the GGUF file's Q4_1 grid is within
    10% of fp32 eager's perplexity and within 2% of the eager model quantized the same way."""
    model, tokenizer_path = smollm2
    ids = Tokenizer(tokenizer_path).encode(PASSAGE.read_text())[:TOKENS]
    config = LlmConfig(max_seq_len=64, max_context_len=TOKENS + 8, backend=CPU_BACKEND, quantize="8da4w",
                       group_size=32, embedding_quantize="8w", weight_qparams="gguf", generate_full_logits=True)
    path = tmp_path / "smollm2_8da4w_gguf.pte"
    export_llm(model, config, progress=lambda _: None).write_to_file(str(path))
    forward = Runtime.get().load_program(str(path)).load_method("forward")
    logits = np.concatenate([forward.execute([np.asarray([ids[i:i + 64]], dtype=np.int64),
                                              np.asarray([i], dtype=np.int64)])[0][0] for i in range(0, TOKENS, 64)])
    program = math.exp(torch.nn.functional.cross_entropy(torch.from_numpy(logits[:-1]).double(),
                                                         torch.tensor(ids[1:])).item())
    fp32 = _eager_perplexity(model, ids)
    same = _eager_perplexity(_grid_reference(model, config), ids)
    print(f"\nperplexity over {TOKENS} tokens, weight_qparams='gguf': etkit 8da4w+8w program {program:.3f}, eager "
          f"quantized the same way {same:.3f} ({program / same - 1:+.2%}), fp32 eager {fp32:.3f} "
          f"({program / fp32 - 1:+.2%})")
    assert abs(program / same - 1) <= 0.02
    assert program / fp32 - 1 <= 0.10
