"""Load a .pte with ExecuTorch's runtime, run "forward" on saved inputs, save the outputs.

Runs in the ExecuTorch oracle (tests/interop/oracle.py):  et_run_pte.py PTE INPUTS_PT OUTPUTS_PT
INPUTS_PT holds torch.save({"inputs": [Tensor, ...]}); OUTPUTS_PT gets {"outputs": [Tensor, ...]}.
"""
import sys

import torch
from executorch.runtime import Runtime

pte, inputs_path, outputs_path = sys.argv[1:4]
inputs = torch.load(inputs_path)["inputs"]
program = Runtime.get().load_program(pte)
outputs = program.load_method("forward").execute(list(inputs))
torch.save({"outputs": [t.clone() for t in outputs]}, outputs_path)
print(f"ran {pte}: {len(outputs)} outputs")
