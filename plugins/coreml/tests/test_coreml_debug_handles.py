"""Core ML's debug handle map: coremltools records which MIL operations each Edge node became, and the delegate's
``debug_handle_map`` (ExecuTorch's ``debugSymbolToHandles``: ``"<output>:<operator>"`` -> Edge debug handles)
reaches the program's delegate map, so an ETDump event named by a Core ML debug symbol finds its Edge op.
(Core ML runs only on Apple platforms: here the map is checked against the Edge program, not a run.)"""
from __future__ import annotations

import torch

import etkit
from etkit_coreml import CoreMLPartitioner


class LinearReluScale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2


def test_debug_symbols_map_to_their_edge_ops():
    x = torch.randn(2, 8)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(LinearReluScale().eval(), (x,)),
                                             partitioner=[CoreMLPartitioner()], generate_etrecord=True)
    program = edge.to_executorch()
    (delegate,) = program.delegate_map["forward"].values()
    assert delegate["name"] == "CoreMLBackend"
    targets = {n.meta["debug_handle"]: str(n.target) for n in program.get_etrecord().edge_dialect_program["forward"]
               .graph.nodes if isinstance(n.meta.get("debug_handle"), int)}
    by_operator = {}
    for symbol, handles in delegate["delegate_map"].items():
        operator = symbol.rsplit(":", 1)[1]
        by_operator.setdefault(operator, set()).update(targets[h] for h in handles)
    assert by_operator["linear"] == {"aten.linear.default"}
    assert by_operator["relu"] == {"aten.relu.default"}
    assert by_operator["mul"] == {"aten.mul.Tensor"}
