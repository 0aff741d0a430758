"""Constant methods (``to_edge(..., constant_methods=...)``) of an etkit program read by ExecuTorch 1.5.1's
runtime: it lists them, and running each with no inputs returns the values etkit's runtime returns."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils import _pytree as pytree

pytestmark = pytest.mark.oracle

runtime = pytest.importorskip("etkit.runtime")

SCRIPTS = Path(__file__).parent / "oracle_scripts"


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x * y + y)


CONSTANTS = {
    "get_max_seq_len": 128,
    "get_temperature": 0.75,
    "use_kv_cache": True,
    "get_eos_ids": [2, 3],
    "get_freqs": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7,
    "get_name": "tiny-llm",
    "config": {"layers": 2, "dims": (8, 16)},
}


@pytest.mark.parametrize("lowering", ["to_edge", "to_edge_transform_and_lower"])
def test_executorch_runtime_reads_etkit_constant_methods(et_oracle, tmp_path, lowering):
    import etkit

    inputs = [torch.randn(2, 5), torch.randn(2, 5)]
    ep = torch.export.export(AddMul(), tuple(inputs))
    edge = getattr(etkit, lowering)(ep, constant_methods=CONSTANTS)
    pte = tmp_path / "etkit_constant_methods.pte"
    edge.to_executorch().write_to_file(str(pte))
    torch.save({"forward": inputs, **{name: [] for name in CONSTANTS}}, tmp_path / "inputs.pt")

    et_oracle(SCRIPTS / "et_run_methods.py", pte, tmp_path / "inputs.pt", tmp_path / "result.pt")
    result = torch.load(tmp_path / "result.pt")
    assert not result["errors"], f"ExecuTorch 1.5.1 refused methods of etkit's program: {result['errors']}"
    assert result["method_names"] == sorted(["forward", *CONSTANTS])

    program = runtime.Runtime.get().load_program(pte.read_bytes())
    for name, value in CONSTANTS.items():
        theirs = result["outputs"][name]
        ours = program.load_method(name).execute([])
        expected = pytree.tree_leaves(value)
        assert len(theirs) == len(ours) == len(expected), name
        for t, o, e in zip(theirs, ours, expected):
            if isinstance(e, torch.Tensor):
                assert torch.equal(t, e) and torch.equal(o, e), name
            else:
                assert type(t) is type(e) and t == e, f"{name}: ExecuTorch returned {t!r}, expected {e!r}"
                assert type(o) is type(e) and o == e, f"{name}: etkit returned {o!r}, expected {e!r}"
    want = AddMul()(*inputs)
    torch.testing.assert_close(result["outputs"]["forward"][0], want, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(program.load_method("forward").execute(inputs)[0], want, atol=1e-6, rtol=1e-6)
