"""Parse a .pte with ExecuTorch's own deserializer; print a JSON summary on stdout.

Runs in the ExecuTorch oracle (tests/interop/oracle.py):  et_parse_pte.py PTE
"""
import json
import sys

from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.exir.schema import DelegateCall, KernelCall, Tensor

pte = deserialize_pte_binary(open(sys.argv[1], "rb").read())
program = pte.program
summary = {
    "version": program.version,
    "methods": [],
    "constant_buffer": [bytes(b.storage).hex() for b in program.constant_buffer],
    "backend_delegate_data": [bytes(d.data).hex() for d in program.backend_delegate_data],
    "named_data": {},
}
if pte.named_data is not None:
    for key, entry in pte.named_data.pte_data.items():
        summary["named_data"][key] = bytes(pte.named_data.buffers[entry.buffer_index]).hex()
for plan in program.execution_plan:
    instructions = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if isinstance(args, KernelCall):
                op = plan.operators[args.op_index]
                instructions.append(f"KernelCall {op.name}.{op.overload} {list(args.args)}")
            elif isinstance(args, DelegateCall):
                delegate = plan.delegates[args.delegate_index]
                instructions.append(f"DelegateCall {delegate.id} {list(args.args)}")
            else:
                instructions.append(type(args).__name__)
    summary["methods"].append({
        "name": plan.name,
        "inputs": list(plan.inputs),
        "outputs": list(plan.outputs),
        "num_values": len(plan.values),
        "tensors": [[v.val.scalar_type.value if hasattr(v.val.scalar_type, "value")
                     else int(v.val.scalar_type), list(v.val.sizes), v.val.data_buffer_idx]
                    for v in plan.values if isinstance(v.val, Tensor)],
        "instructions": instructions,
        "delegates": [[d.id, d.processed.location.value if hasattr(d.processed.location, "value")
                       else int(d.processed.location), d.processed.index,
                       [[c.key, bytes(c.value).hex()] for c in d.compile_specs]]
                      for d in plan.delegates],
    })
print(json.dumps(summary))
