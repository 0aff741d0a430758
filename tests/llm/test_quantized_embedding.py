"""quantized_decomposed::embedding_byte / embedding_4bit (ExecuTorch's names): the runtime's kernels give
exactly the Python reference's rows, per row and per group; an out-of-range index is a clear error; and
export_llm's embedding_quantize uses them."""
from __future__ import annotations

import pytest
import torch

import etkit
from etkit.dialects.quantized_embedding import QuantizedEmbedding
from etkit.llm import LlmConfig, LlmExportError, export_llm
from etkit.llm.model import StaticKVDecoder
from etkit.runtime import EtkitRuntimeError, Runtime

from .conftest import tiny_model


class _Lookup(torch.nn.Module):
    def __init__(self, bits, group):
        super().__init__()
        torch.manual_seed(0)
        self.table = QuantizedEmbedding(torch.nn.Embedding(100, 48), bits, group)

    def forward(self, ids):
        return self.table(ids)


@pytest.mark.parametrize("bits,group", [(8, 0), (8, 16), (4, 0), (4, 8)])
def test_kernel_matches_the_reference(bits, group):
    module = _Lookup(bits, group)
    ids = torch.tensor([[0, 99, 7, 7, 42]])
    program = etkit.to_edge(torch.export.export(module, (ids,))).to_executorch().buffer
    method = Runtime.get().load_program(program).load_method("forward")
    op = f"quantized_decomposed::embedding_{'4bit' if bits == 4 else 'byte'}"
    assert f"{op}.out" in Runtime.get().operator_registry.operator_names
    for trial in ([[0, 99, 7, 7, 42]], [[5, 1, 2, 3, 4]]):
        x = torch.tensor(trial)
        (got,) = method.execute([x])
        torch.testing.assert_close(got, module(x), atol=0, rtol=0)  # same arithmetic, float32
    # the table stays quantized in the program: int8 (or packed int4) bytes, not 100 x 48 floats
    assert len(program) < 100 * 48 * 4


def test_out_of_range_index_is_refused():
    module = _Lookup(8, 0)
    program = etkit.to_edge(torch.export.export(module, (torch.tensor([[1, 2]]),))).to_executorch().buffer
    method = Runtime.get().load_program(program).load_method("forward")
    with pytest.raises(EtkitRuntimeError, match=r"index 100 at position 1 is out of range for a table of 100 rows"):
        method.execute([torch.tensor([[3, 100]])])


@pytest.mark.parametrize("spec", ["8w", "4,32"])
def test_export_llm_embedding_quantize(spec):
    model = tiny_model(vocab_size=320)
    program = export_llm(model, LlmConfig(max_seq_len=4, max_context_len=16, backend="portable", embedding_quantize=spec),
                         progress=lambda _: None)
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    tokens = torch.tensor([[3, 17, 250, 9]])
    (logits,) = method.execute([tokens, torch.tensor([0])])
    bits, group = LlmConfig(embedding_quantize=spec).embedding_bits()
    eager = StaticKVDecoder(model, 16).eval()
    eager.embed_tokens = QuantizedEmbedding(eager.embed_tokens, bits, group)
    with torch.no_grad():
        reference = eager(tokens, torch.tensor([0]))
    torch.testing.assert_close(logits, reference, atol=1e-4, rtol=1e-4)  # same quantized table, fp32


def test_bad_embedding_quantize_is_named():
    with pytest.raises(LlmExportError, match="embedding_quantize '3w' is unknown"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(embedding_quantize="3w"))
    with pytest.raises(LlmExportError, match="group size 7 does not divide the embedding dimension 64"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(embedding_quantize="8,7"), progress=lambda _: None)
