"""A weight both a delegate (named data) and a kernel (constant) read is stored once in the .pte (the
named-data segment covers the constant's bytes) and both runtimes run the program: a tied embedding /
output projection, the layout of SmolLM2 and most small LLMs. Compared with torch eager at 1e-5."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.oracle

runtime = pytest.importorskip("etkit.runtime")
etkit_xnnpack = pytest.importorskip("etkit_xnnpack")

SCRIPTS = Path(__file__).parent / "oracle_scripts"
VOCAB, DIM = 1000, 64


class TiedLM(torch.nn.Module):
    """Embedding (left to the portable kernel) whose table is also the output projection (delegated)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.head = torch.nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.relu(self.embed(tokens)))


def _program(tmp_path):
    import etkit
    torch.manual_seed(0)
    model = TiedLM().eval()
    tokens = torch.tensor([[1, 5, 7, 999]])
    ep = torch.export.export(model, (tokens,))
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[etkit_xnnpack.XnnpackPartitioner()])
    pte = tmp_path / "tied.pte"
    manager.to_executorch().write_to_file(str(pte))
    return model, tokens, pte


def test_tied_weight_is_stored_once_and_runs(tmp_path):
    from etkit.serialize.pte import read_layout
    model, tokens, pte = _program(tmp_path)
    table = VOCAB * DIM * 4
    layout = read_layout(pte.read_bytes())
    named = layout.program.namedData
    assert named, "the output projection should be delegated with its weight in named data"
    assert pte.stat().st_size < 1.5 * table, f"{pte.stat().st_size} bytes: the {table}-byte table is stored twice"
    start, size = layout.segment_ranges[named[0].segmentIndex]
    constants_start, constants_size = layout.segment_ranges[layout.program.constantSegment.segmentIndex]
    assert size == table and constants_start <= start and start + size <= constants_start + constants_size

    out = runtime.Runtime.get().load_program(pte).load_method("forward").execute([tokens])[0]
    torch.testing.assert_close(out, model(tokens), rtol=0, atol=1e-5)


def test_executorch_runs_the_shared_weight_program(et_oracle, tmp_path):
    model, tokens, pte = _program(tmp_path)
    torch.save({"forward": [tokens]}, tmp_path / "inputs.pt")
    et_oracle(SCRIPTS / "et_run_methods.py", pte, tmp_path / "inputs.pt", tmp_path / "result.pt")
    result = torch.load(tmp_path / "result.pt")
    assert not result["errors"], f"ExecuTorch 1.5.1 refused etkit's program: {result['errors']}"
    torch.testing.assert_close(result["outputs"]["forward"][0], model(tokens), rtol=0, atol=1e-5)
