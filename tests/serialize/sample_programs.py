"""Small hand-built Programs that use every value and instruction kind the schema has."""

from __future__ import annotations

from etkit.fb.AllocationDetails import AllocationDetailsT
from etkit.fb.BackendDelegate import BackendDelegateT
from etkit.fb.BackendDelegateDataReference import BackendDelegateDataReferenceT
from etkit.fb.Bool import BoolT
from etkit.fb.Chain import ChainT
from etkit.fb.CompileSpec import CompileSpecT
from etkit.fb.ContainerMetadata import ContainerMetadataT
from etkit.fb.DelegateCall import DelegateCallT
from etkit.fb.Double import DoubleT
from etkit.fb.EValue import EValueT
from etkit.fb.ExecutionPlan import ExecutionPlanT
from etkit.fb.FreeCall import FreeCallT
from etkit.fb.Instruction import InstructionT
from etkit.fb.InstructionArguments import InstructionArguments
from etkit.fb.Int import IntT
from etkit.fb.IntList import IntListT
from etkit.fb.JumpFalseCall import JumpFalseCallT
from etkit.fb.KernelCall import KernelCallT
from etkit.fb.KernelTypes import KernelTypes
from etkit.fb.MoveCall import MoveCallT
from etkit.fb.Null import NullT
from etkit.fb.Operator import OperatorT
from etkit.fb.OptionalTensorList import OptionalTensorListT
from etkit.fb.Program import ProgramT
from etkit.fb.String import StringT
from etkit.fb.Tensor import TensorT
from etkit.fb.TensorList import TensorListT

from etkit.serialize import PteContents

FLOAT32, INT8 = 6, 1


def tensor(sizes, *, scalar_type=FLOAT32, data_buffer_idx=0, planned_at=None) -> EValueT:
    t = TensorT(scalarType=scalar_type, sizes=list(sizes), dimOrder=list(range(len(sizes))),
                dataBufferIdx=data_buffer_idx)
    if planned_at is not None:
        t.allocationInfo = AllocationDetailsT(memoryId=1, memoryOffsetLow=planned_at)
    return EValueT(valType=KernelTypes.Tensor, val=t)


def value(kind, val) -> EValueT:
    return EValueT(valType=kind, val=val)


def instruction(kind, args) -> InstructionT:
    return InstructionT(instrArgsType=kind, instrArgs=args)


def make_plan(name: str = "forward", delegate_index: int = 0) -> ExecutionPlanT:
    values = [
        tensor([2, 3]),                                           # 0 input x
        tensor([2, 3], data_buffer_idx=1),                        # 1 constant weight
        value(KernelTypes.Double, DoubleT(doubleVal=1.0)),        # 2 alpha
        tensor([2, 3], planned_at=0),                             # 3 add out
        tensor([7], scalar_type=INT8, data_buffer_idx=2),         # 4 constant int8
        tensor([2, 3], planned_at=32),                            # 5 delegate out
        value(KernelTypes.Int, IntT(intVal=-5)),                  # 6
        value(KernelTypes.Bool, BoolT(boolVal=True)),             # 7
        value(KernelTypes.IntList, IntListT(items=[1, 2, 3])),    # 8
        value(KernelTypes.TensorList, TensorListT(items=[0, 1])), # 9
        value(KernelTypes.OptionalTensorList, OptionalTensorListT(items=[0, -1])),  # 10
        value(KernelTypes.String, StringT(stringVal="hello")),   # 11
        value(KernelTypes.Null, NullT()),                         # 12
    ]
    instructions = [
        instruction(InstructionArguments.KernelCall, KernelCallT(opIndex=0, args=[0, 1, 2, 3])),
        instruction(InstructionArguments.DelegateCall,
                    DelegateCallT(delegateIndex=0, args=[3, 5])),
        instruction(InstructionArguments.MoveCall, MoveCallT(moveFrom=5, moveTo=3)),
        instruction(InstructionArguments.JumpFalseCall,
                    JumpFalseCallT(condValueIndex=7, destinationInstruction=4)),
        instruction(InstructionArguments.FreeCall, FreeCallT(valueIndex=3)),
    ]
    delegate = BackendDelegateT(
        id="TestBackend",
        processed=BackendDelegateDataReferenceT(location=0, index=delegate_index),
        compileSpecs=[CompileSpecT(key="threads", value=list(b"\x04"))],
    )
    return ExecutionPlanT(
        name=name,
        containerMetaType=ContainerMetadataT(encodedInpStr="in", encodedOutStr="out"),
        values=values,
        inputs=[0],
        outputs=[5],
        chains=[ChainT(inputs=[0], outputs=[5], instructions=instructions)],
        operators=[OperatorT(name="aten::add", overload="out")],
        delegates=[delegate],
        nonConstBufferSizes=[0, 64],
    )


def make_contents() -> PteContents:
    """Two methods sharing one delegate blob, two constants, one named-data entry."""
    return PteContents(
        program=ProgramT(version=0, executionPlan=[make_plan("forward", 0),
                                                  make_plan("other", 1)]),
        constant_data=[b"", bytes(range(24)), b"\x01\x02\x03\x04\x05\x06\x07"],
        delegate_data=[b"delegate-blob" * 10, b"second-blob"],
        named_data={"weights": bytes(range(256)) * 3, "same": bytes(range(256)) * 3,
                    "small": b"abc"},
    )
