"""Consistency checks of a decoded Program, so corrupt files fail with a precise message.

Python's flatbuffers decoder does no verification; these checks catch what a corrupt or foreign
file gets wrong before anything indexes with it: every index a Program holds (values, operators,
delegates, segments, constant buffers) must point at something that exists.
"""

from __future__ import annotations

from etkit.fb.DataLocation import DataLocation
from etkit.fb.InstructionArguments import InstructionArguments
from etkit.fb.KernelTypes import KernelTypes
from etkit.fb.Program import ProgramT

from etkit.serialize.errors import PteFormatError
from etkit.scalar_types import is_known

SUPPORTED_PROGRAM_VERSION = 0


def _name(value) -> str:
    if value is None:
        return "<none>"
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _indices(values) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _check_range(where: str, field: str, indices, limit: int, what: str, allow=()) -> None:
    for position, index in enumerate(_indices(indices)):
        if index in allow:
            continue
        if not 0 <= index < limit:
            raise PteFormatError(
                f"{where}: {field}[{position}] = {index} is out of range; the {what} has "
                f"{limit} entries"
            )


def _check_one(where: str, field: str, index: int, limit: int, what: str) -> None:
    if not 0 <= index < limit:
        raise PteFormatError(
            f"{where}: {field} = {index} is out of range; the {what} has {limit} entries"
        )


def check_program(program: ProgramT, *, num_segments: int) -> None:
    """Raise PteFormatError at the first index in ``program`` that points at nothing.

    ``num_segments`` is the number of entries of ``Program.segments`` whose bytes are present
    in the file.
    """
    if program.version != SUPPORTED_PROGRAM_VERSION:
        raise PteFormatError(
            f"Program.version is {program.version}; this etkit reads version "
            f"{SUPPORTED_PROGRAM_VERSION} (file written by a newer or different tool)"
        )
    if not program.executionPlan:
        raise PteFormatError("Program.execution_plan is empty: the program has no methods")
    num_inline = len(program.backendDelegateData or [])
    for plan_index, plan in enumerate(program.executionPlan):
        _check_plan(plan_index, plan, num_inline=num_inline, num_segments=num_segments)
    for i, entry in enumerate(program.namedData or []):
        if entry.key is None:
            raise PteFormatError(f"Program.named_data[{i}] has no key")
        if not entry.segmentIndex < num_segments:
            raise PteFormatError(
                f"Program.named_data[{i}] ({_name(entry.key)!r}): segment_index "
                f"{entry.segmentIndex} >= number of segments {num_segments}"
            )
    subsegments = [("constant_segment", program.constantSegment)] + [
        (f"mutable_data_segments[{i}]", s) for i, s in enumerate(program.mutableDataSegments or [])
    ]
    for field, subsegment in subsegments:
        if subsegment is None or subsegment.offsets is None or len(subsegment.offsets) == 0:
            continue
        if not subsegment.segmentIndex < num_segments:
            raise PteFormatError(
                f"Program.{field}.segment_index {subsegment.segmentIndex} >= number of "
                f"segments {num_segments}"
            )
        offsets = _indices(subsegment.offsets)
        if any(b < a for a, b in zip(offsets, offsets[1:])):
            raise PteFormatError(f"Program.{field}.offsets are not ascending: {offsets[:16]}")


def _check_plan(plan_index: int, plan, *, num_inline: int, num_segments: int) -> None:
    where = f"execution_plan[{plan_index}] ({_name(plan.name)!r})"
    if plan.name is None:
        raise PteFormatError(f"execution_plan[{plan_index}] has no name")
    values = plan.values or []
    num_values = len(values)
    _check_range(where, "inputs", plan.inputs, num_values, "values table")
    _check_range(where, "outputs", plan.outputs, num_values, "values table")
    for i, evalue in enumerate(values):
        kind = evalue.valType
        if not KernelTypes.NONE <= kind <= KernelTypes.OptionalTensorList:
            raise PteFormatError(f"{where}: values[{i}] has unknown type tag {kind}")
        if kind == KernelTypes.Tensor and evalue.val is not None:
            if not is_known(evalue.val.scalarType):
                raise PteFormatError(
                    f"{where}: values[{i}] Tensor.scalar_type {evalue.val.scalarType} is not a "
                    "ScalarType this etkit knows"
                )
        if kind == KernelTypes.TensorList and evalue.val is not None:
            _check_range(f"{where} values[{i}]", "TensorList.items", evalue.val.items,
                         num_values, "values table")
        if kind == KernelTypes.OptionalTensorList and evalue.val is not None:
            _check_range(f"{where} values[{i}]", "OptionalTensorList.items", evalue.val.items,
                         num_values, "values table", allow=(-1,))
    num_operators = len(plan.operators or [])
    delegates = plan.delegates or []
    for d, delegate in enumerate(delegates):
        processed = delegate.processed
        if processed is None:
            raise PteFormatError(f"{where}: delegates[{d}] ({_name(delegate.id)!r}) has no "
                                 "processed data reference")
        if processed.location == DataLocation.INLINE:
            limit, what = num_inline, "Program.backend_delegate_data"
        elif processed.location == DataLocation.SEGMENT:
            limit, what = num_segments, "Program.segments"
        else:
            raise PteFormatError(
                f"{where}: delegates[{d}].processed.location {processed.location} is neither "
                "INLINE (0) nor SEGMENT (1)"
            )
        if not processed.index < limit:
            raise PteFormatError(
                f"{where}: delegates[{d}] ({_name(delegate.id)!r}) processed.index "
                f"{processed.index} >= len({what}) {limit}"
            )
    for c, chain in enumerate(plan.chains or []):
        _check_chain(f"{where} chains[{c}]", chain, num_values, num_operators, len(delegates))


def _check_chain(where: str, chain, num_values: int, num_operators: int, num_delegates: int):
    _check_range(where, "inputs", chain.inputs, num_values, "values table")
    _check_range(where, "outputs", chain.outputs, num_values, "values table")
    instructions = chain.instructions or []
    for i, instruction in enumerate(instructions):
        at = f"{where} instructions[{i}]"
        kind, args = instruction.instrArgsType, instruction.instrArgs
        if args is None:
            raise PteFormatError(f"{at}: instruction has no arguments (type tag {kind})")
        if kind == InstructionArguments.KernelCall:
            _check_one(at, "KernelCall.op_index", args.opIndex, num_operators, "operators table")
            _check_range(at, "KernelCall.args", args.args, num_values, "values table")
        elif kind == InstructionArguments.DelegateCall:
            _check_one(at, "DelegateCall.delegate_index", args.delegateIndex, num_delegates,
                       "delegates table")
            _check_range(at, "DelegateCall.args", args.args, num_values, "values table")
        elif kind == InstructionArguments.MoveCall:
            _check_one(at, "MoveCall.move_from", args.moveFrom, num_values, "values table")
            _check_one(at, "MoveCall.move_to", args.moveTo, num_values, "values table")
        elif kind == InstructionArguments.JumpFalseCall:
            _check_one(at, "JumpFalseCall.cond_value_index", args.condValueIndex, num_values,
                       "values table")
            _check_one(at, "JumpFalseCall.destination_instruction",
                       args.destinationInstruction, len(instructions) + 1, "chain (+1)")
        elif kind == InstructionArguments.FreeCall:
            _check_one(at, "FreeCall.value_index", args.valueIndex, num_values, "values table")
        else:
            raise PteFormatError(f"{at}: unknown instruction type tag {kind}")
