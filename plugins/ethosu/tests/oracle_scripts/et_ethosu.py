"""Runs inside the ExecuTorch 1.5.1 oracle (tests/interop/oracle.py): quantize a small CNN with ExecuTorch's
EthosUQuantizer, save the converted program, lower it with ExecuTorch's EthosUPartitioner (keeping its TOSA
graph), and write the .pte.

    argv: target, output directory
    writes: converted.pt2, inputs.pt, output_tag0_<tosa spec>.tosa (ExecuTorch's TOSA graph), program.pte
"""
import os
import sys

import torch
from torch import nn

from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
from executorch.exir import to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = nn.functional.max_pool2d(y + self.depthwise(y), 2)
        return self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


target, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
inputs = (torch.randn(1, 3, 16, 16),)
calibration = [(torch.randn(1, 3, 16, 16),) for _ in range(4)]
spec = EthosUCompileSpec(target)
quantizer = EthosUQuantizer(spec)
quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
# torch 2.14 adds a guard call_module to .module(); ExecuTorch 1.5.1's annotation passes refuse call_module
prepared = prepare_pt2e(torch.export.export(SmallCnn().eval(), inputs).module(check_guards=False), quantizer)
for batch in calibration:
    prepared(*batch)
converted = convert_pt2e(prepared)
ep = torch.export.export(converted, inputs)
torch.export.save(ep, os.path.join(out, "converted.pt2"))
torch.save([b[0] for b in calibration], os.path.join(out, "inputs.pt"))
spec.dump_intermediate_artifacts_to(out)
edge = to_edge_transform_and_lower(ep, partitioner=[EthosUPartitioner(spec)])
with open(os.path.join(out, "program.pte"), "wb") as f:
    f.write(edge.to_executorch().buffer)
