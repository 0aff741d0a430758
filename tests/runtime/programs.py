"""Small programs built directly with the generated flatbuffers classes (etkit.fb, object API),
for runtime tests that need a specific structure (e.g. a delegate call to a given backend id)."""
from __future__ import annotations

import flatbuffers

from etkit.fb.AllocationDetails import AllocationDetailsT
from etkit.fb.BackendDelegate import BackendDelegateT
from etkit.fb.BackendDelegateDataReference import BackendDelegateDataReferenceT
from etkit.fb.BackendDelegateInlineData import BackendDelegateInlineDataT
from etkit.fb.Buffer import BufferT
from etkit.fb.Chain import ChainT
from etkit.fb.DataLocation import DataLocation
from etkit.fb.DelegateCall import DelegateCallT
from etkit.fb.EValue import EValueT
from etkit.fb.ExecutionPlan import ExecutionPlanT
from etkit.fb.Instruction import InstructionT
from etkit.fb.InstructionArguments import InstructionArguments
from etkit.fb.Int import IntT
from etkit.fb.KernelCall import KernelCallT
from etkit.fb.KernelTypes import KernelTypes
from etkit.fb.Operator import OperatorT
from etkit.fb.Program import ProgramT
from etkit.fb.ScalarType import ScalarType
from etkit.fb.Tensor import TensorT


def _tensor(sizes, offset, scalar_type=ScalarType.FLOAT):
    t = TensorT()
    t.scalarType = scalar_type
    t.sizes = list(sizes)
    t.dimOrder = list(range(len(sizes)))
    t.allocationInfo = AllocationDetailsT()
    t.allocationInfo.memoryId = 1
    t.allocationInfo.memoryOffsetLow = offset
    t.allocationInfo.memoryOffsetHigh = 0
    v = EValueT()
    v.valType = KernelTypes.Tensor
    v.val = t
    return v


def add_program(delegate_backend: str | None = None, scalar_type: int = ScalarType.FLOAT) -> bytes:
    """forward(a[2,3], b[2,3]) -> a + b with aten::add.out, all tensors of `scalar_type` (schema
    numbering); with `delegate_backend`, the result then goes through a DelegateCall to that backend
    id (inline payload b"payload")."""
    alpha = EValueT()
    alpha.valType = KernelTypes.Int
    alpha.val = IntT()
    alpha.val.intVal = 1
    values = [_tensor([2, 3], 0, scalar_type), _tensor([2, 3], 64, scalar_type), alpha,
              _tensor([2, 3], 128, scalar_type)]

    kc = KernelCallT()
    kc.opIndex = 0
    kc.args = [0, 1, 2, 3, 3]
    ins = InstructionT()
    ins.instrArgsType = InstructionArguments.KernelCall
    ins.instrArgs = kc
    instructions = [ins]
    plan = ExecutionPlanT()
    plan.delegates = []
    program = ProgramT()
    program.backendDelegateData = []
    if delegate_backend is not None:
        dc = DelegateCallT()
        dc.delegateIndex = 0
        dc.args = [3, 3]
        di = InstructionT()
        di.instrArgsType = InstructionArguments.DelegateCall
        di.instrArgs = dc
        instructions.append(di)
        ref = BackendDelegateDataReferenceT()
        ref.location = DataLocation.INLINE
        ref.index = 0
        d = BackendDelegateT()
        d.id = delegate_backend
        d.processed = ref
        d.compileSpecs = []
        plan.delegates.append(d)
        data = BackendDelegateInlineDataT()
        data.data = list(b"payload")
        program.backendDelegateData.append(data)

    chain = ChainT()
    chain.inputs = [0, 1]
    chain.outputs = [3]
    chain.instructions = instructions
    op = OperatorT()
    op.name = "aten::add"
    op.overload = "out"
    plan.name = "forward"
    plan.values = values
    plan.inputs = [0, 1]
    plan.outputs = [3]
    plan.chains = [chain]
    plan.operators = [op]
    plan.nonConstBufferSizes = [0, 192]
    program.version = 0
    program.executionPlan = [plan]
    empty = BufferT()
    empty.storage = []
    program.constantBuffer = [empty]
    builder = flatbuffers.Builder(1024)
    builder.Finish(program.Pack(builder), file_identifier=b"ET12")
    return bytes(builder.Output())


def jump_false_program() -> bytes:
    """forward(a[2,3], flag: bool) -> y where y = a + a when flag is true; when false the add is
    jumped over (JumpFalseCall) and y = a * a instead."""
    from etkit.fb.Bool import BoolT
    from etkit.fb.JumpFalseCall import JumpFalseCallT

    alpha = EValueT()
    alpha.valType = KernelTypes.Int
    alpha.val = IntT()
    alpha.val.intVal = 1
    flag = EValueT()
    flag.valType = KernelTypes.Bool
    flag.val = BoolT()
    flag.val.boolVal = True
    false_value = EValueT()
    false_value.valType = KernelTypes.Bool
    false_value.val = BoolT()
    false_value.val.boolVal = False
    # 0 a, 1 flag, 2 alpha, 3 y, 4 constant False (for an unconditional jump)
    values = [_tensor([2, 3], 0), flag, alpha, _tensor([2, 3], 64), false_value]

    def instr(kind, body):
        ins = InstructionT()
        ins.instrArgsType = kind
        ins.instrArgs = body
        return ins

    def jump(cond, dest):
        j = JumpFalseCallT()
        j.condValueIndex = cond
        j.destinationInstruction = dest
        return instr(InstructionArguments.JumpFalseCall, j)

    def kernel(op, args):
        k = KernelCallT()
        k.opIndex = op
        k.args = args
        return instr(InstructionArguments.KernelCall, k)

    chain = ChainT()
    chain.inputs = [0, 1]
    chain.outputs = [3]
    chain.instructions = [
        jump(1, 3),                    # 0: if not flag goto 3
        kernel(0, [0, 0, 2, 3, 3]),    # 1: y = a + a
        jump(4, 4),                    # 2: goto 4 (end)
        kernel(1, [0, 0, 3, 3]),       # 3: y = a * a
    ]
    ops = []
    for name in ("add", "mul"):
        op = OperatorT()
        op.name = f"aten::{name}"
        op.overload = "out"
        ops.append(op)
    plan = ExecutionPlanT()
    plan.name = "forward"
    plan.values = values
    plan.inputs = [0, 1]
    plan.outputs = [3]
    plan.chains = [chain]
    plan.operators = ops
    plan.delegates = []
    plan.nonConstBufferSizes = [0, 128]
    program = ProgramT()
    program.version = 0
    program.executionPlan = [plan]
    builder = flatbuffers.Builder(1024)
    builder.Finish(program.Pack(builder), file_identifier=b"ET12")
    return bytes(builder.Output())
