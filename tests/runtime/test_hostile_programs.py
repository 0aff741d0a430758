"""Crafted or corrupted programs: a constant or planned tensor at an offset that misaligns its elements, sizes
whose int32 strides overflow although the tensor is empty, a memory plan larger than the machine or than
``set_memory_limit``, and op arguments out of range (a view size past 2^31, a negative or overflowing
as_strided stride). Each is refused with a precise ``EtkitRuntimeError`` (at ``load_method``, or at
``execute`` for op arguments), from Python and from ``etkit_runner``, while the same program written
correctly runs and matches eager exactly (so the checks cannot pass by refusing everything)."""
from __future__ import annotations

import dataclasses
import subprocess

import flatbuffers
import pytest
import torch

import etkit
from etkit.fb.Program import Program, ProgramT
from etkit.runtime import EtkitRuntimeError, Runtime, set_loop_limit, set_memory_limit
from etkit.serialize.pte import deserialize_pte, serialize_pte

from .programs import _tensor, add_program


class AddWeight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(8, dtype=torch.float32) / 7)

    def forward(self, x):
        return x + self.w


def _with_constant_at(alignment: int) -> bytes:
    """AddWeight's program with a 1-byte constant placed before the weight, the constants packed to
    ``alignment`` bytes: with 1 the weight starts at offset 1 of the constant segment."""
    model = AddWeight()
    contents = deserialize_pte(etkit.to_edge(torch.export.export(model, (torch.ones(8),))).to_executorch().buffer)
    for value in contents.program.executionPlan[0].values:
        t = value.val
        if hasattr(t, "dataBufferIdx") and t.dataBufferIdx > 0 and t.allocationInfo is None:
            t.dataBufferIdx += 1
    constants = [contents.constant_data[0], b"\x01", *contents.constant_data[1:]]
    return serialize_pte(dataclasses.replace(contents, constant_data=constants), constant_tensor_alignment=alignment)


def _load(program: bytes):
    return Runtime.get().load_program(program).load_method("forward")


def test_aligned_constant_runs_and_misaligned_constant_is_refused():
    x = torch.randn(8)
    (out,) = _load(_with_constant_at(4)).execute([x])
    torch.testing.assert_close(out, AddWeight()(x), rtol=0, atol=0)
    with pytest.raises(EtkitRuntimeError, match="not aligned to its 4-byte elements"):
        _load(_with_constant_at(1))


def _plan(mutate, base=add_program) -> bytes:
    """``base()``'s Program (add_program's by default) with ``mutate(plan)`` applied to its forward ExecutionPlan."""
    program = ProgramT.InitFromObj(Program.GetRootAs(base(), 0))
    mutate(program.executionPlan[0])
    builder = flatbuffers.Builder(1024)
    builder.Finish(program.Pack(builder), file_identifier=b"ET12")
    return bytes(builder.Output())


def test_planned_tensor_at_a_misaligned_offset_is_refused():
    def misalign(plan):
        plan.values[3].val.allocationInfo.memoryOffsetLow = 130   # float32 output at byte 130

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    (out,) = _load(_plan(lambda plan: None)).execute([a, b])
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)
    with pytest.raises(EtkitRuntimeError, match="value 3: tensor data is not aligned to its 4-byte elements"):
        _load(_plan(misalign))


def test_empty_tensor_whose_strides_overflow_int32_is_refused():
    def huge_empty(plan):
        plan.values.append(_tensor([0, 65536, 65536], 0))

    with pytest.raises(EtkitRuntimeError,
                       match="value 4: tensor has 2\\^31 or more elements, or strides that reach 2\\^31"):
        _load(_plan(huge_empty))
    _load(_plan(lambda plan: plan.values.append(_tensor([0, 1024, 1024], 0))))   # strides 2^20: fine


def test_memory_plan_larger_than_the_machine_is_refused_before_allocating():
    def terabyte(plan):
        plan.nonConstBufferSizes = [0, 1 << 40]

    with pytest.raises(EtkitRuntimeError, match=r"plus 1099511627776 bytes of planned buffers \(the largest, buffer 1, "
                                                r"1099511627776 bytes\), more than this machine's RAM of \d+ bytes"):
        _load(_plan(terabyte))


@pytest.fixture
def memory_limit():
    yield set_memory_limit
    set_memory_limit(None)


def test_memory_limit_counts_the_file_and_the_planned_buffers(memory_limit):
    program = _plan(lambda plan: None)           # one planned buffer of 192 bytes
    need = len(program) + 192
    memory_limit(need)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    (out,) = _load(program).execute([a, b])
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)
    memory_limit(need - 1)
    with pytest.raises(EtkitRuntimeError, match=rf"needs {need} bytes: the {len(program)}-byte program file plus 192 "
                                                rf"bytes .* more than the memory limit \(set_memory_limit\) of "
                                                rf"{need - 1} bytes"):
        _load(program)
    memory_limit(None)
    _load(program)
    with pytest.raises(ValueError, match="num_bytes must be >= 1"):
        memory_limit(0)



@pytest.mark.parametrize("name,mutate,message", [
    ("terabyte_plan", lambda plan: setattr(plan, "nonConstBufferSizes", [0, 1 << 40]), "more than this machine's"),
    ("limited", lambda plan: None, "more than the memory limit (set_memory_limit) of 100 bytes"),
    ("misaligned_output", lambda plan: setattr(plan.values[3].val.allocationInfo, "memoryOffsetLow", 130),
     "not aligned to its 4-byte elements"),
])
def test_runner_refuses_the_same_programs(etkit_runner, tmp_path, name, mutate, message):
    path = tmp_path / f"{name}.pte"
    path.write_bytes(_plan(mutate))
    limit = ["--memory_limit", "100"] if name == "limited" else []
    proc = subprocess.run([str(etkit_runner), "--model_path", str(path), "--iterations", "1", *limit],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and message in proc.stderr, (proc.returncode, proc.stderr)
    if limit:   # the same program with no limit runs
        ok = subprocess.run([str(etkit_runner), "--model_path", str(path), "--iterations", "1"], capture_output=True,
                            text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr


class Reshape(torch.nn.Module):
    def forward(self, x):
        return x.reshape(3, 2) * 2


class AsStrided(torch.nn.Module):
    def forward(self, x):
        return torch.as_strided(x, (2, 2), (1, 2)) * 2


def _with_int(model, index: int | None = None, value: int = 0) -> bytes:
    """``model``'s program, with the Int value at ``index`` (an entry of an op's size or stride list) set to
    ``value`` as a corrupted or crafted file would have it (``index`` None: unchanged)."""
    contents = deserialize_pte(etkit.to_edge(torch.export.export(model, (torch.randn(2, 3),))).to_executorch().buffer)
    if index is not None:
        contents.program.executionPlan[0].values[index].val.intVal = value
    return serialize_pte(contents)


@pytest.mark.parametrize("model,index,value,message", [
    (Reshape(), 4, 1 << 40,
     r"aten::view_copy.out: 'size'\[0\] is 1099511627776; a size must be in \[0, 2\^31\) or -1"),
    (Reshape(), 4, -7, r"'size'\[0\] is -7"),
    (Reshape(), 4, 1 << 30, r"aten::view_copy.out: "),    # in range, but not 6 elements
    (AsStrided(), 7, -100, r"aten::as_strided_copy.out: stride\[0\] is -100; negative strides are not supported"),
    (AsStrided(), 8, 1 << 62, r"aten::as_strided_copy.out: the view reaches element"),
])
def test_op_arguments_out_of_range_are_refused_at_execute(model, index, value, message):
    x = torch.randn(2, 3)
    (good,) = _load(_with_int(model)).execute([x])
    torch.testing.assert_close(good, model(x), rtol=0, atol=0)
    with pytest.raises(EtkitRuntimeError, match=message):
        _load(_with_int(model, index, value)).execute([x])


class SumRows(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def _sum_over(dim: int) -> bytes:
    """SumRows exported with a dynamic batch (at most 10), its reduction dim set to ``dim``."""
    x = torch.randn(3, 5)
    ep = torch.export.export(SumRows(), (x,), dynamic_shapes=({0: torch.export.Dim("batch", max=10)},))
    contents = deserialize_pte(etkit.to_edge(ep).to_executorch().buffer)
    plan = contents.program.executionPlan[0]
    (dims,) = [v.val for v in plan.values if type(v.val).__name__ == "IntListT"]
    plan.values[dims.items[0]].val.intVal = dim
    return serialize_pte(contents)


def _with_argument_index(index: int) -> bytes:
    """add_program with its kernel call's ``out`` argument pointing at value ``index``."""
    def point(plan):
        call = plan.chains[0].instructions[0].instrArgs
        call.args = [*call.args[:4], index]
    return _plan(point)


def test_reduction_over_a_dimension_that_does_not_exist_is_refused_at_run_time():
    x = torch.randn(7, 5)                  # a batch the export did not see
    (y,) = _load(_sum_over(1)).execute([x])
    torch.testing.assert_close(y, x.sum(dim=1), rtol=1e-6, atol=1e-6)
    with pytest.raises(EtkitRuntimeError,
                       match=r"aten::sum.IntList_out: dim 5 is out of range for a tensor of rank 2"):
        _load(_sum_over(5)).execute([x])


def test_value_index_out_of_range_is_refused_at_load():
    with pytest.raises(EtkitRuntimeError,
                       match=r"InvalidProgram: instruction 0 argument 4 refers to value 99 out of range"):
        _load(_with_argument_index(99))


@pytest.mark.parametrize("name,program,message", [
    ("sum_dim5", lambda: _sum_over(5), "dim 5 is out of range for a tensor of rank 2"),
    ("value99", lambda: _with_argument_index(99), "instruction 0 argument 4 refers to value 99 out of range"),
])
def test_runner_refuses_out_of_range_arguments(etkit_runner, tmp_path, name, program, message):
    path = tmp_path / f"{name}.pte"
    path.write_bytes(program())
    proc = subprocess.run([str(etkit_runner), "--model_path", str(path), "--iterations", "1"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and message in proc.stderr and "etkit_runner:" in proc.stderr, \
        (proc.returncode, proc.stderr)


class CastToIntegers(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.int64), x.to(torch.int32), x.to(torch.int16), x.to(torch.int8), x.to(torch.uint8)


def test_float_to_integer_casts_of_nan_infinity_and_out_of_range_values_match_eager():
    """C++ leaves a float -> integer cast of NaN or of a value outside the type undefined (UndefinedBehaviorSanitizer
    stops there; fuzz regression nan-to-int16-cast); the portable kernels give what eager gives on x86."""
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1e20, 2.7, -2.7, 300.5, -129.0, 70000.0])
    program = etkit.to_edge(torch.export.export(CastToIntegers(), (x,))).to_executorch().buffer
    for got, want in zip(_load(program).execute([x]), CastToIntegers()(x)):
        assert got.dtype == want.dtype and torch.equal(got, want), (got.dtype, got.tolist(), want.tolist())


class Cat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y])


def _cat_with_none_in_its_tensor_list() -> bytes:
    """Cat's program with the first element of its TensorList pointing at a None value (fuzz regression
    none-in-tensor-list: kernels took it as a tensor)."""
    from etkit.fb.EValue import EValueT
    from etkit.fb.KernelTypes import KernelTypes
    from etkit.fb.Null import NullT

    contents = deserialize_pte(etkit.to_edge(torch.export.export(Cat(), (torch.ones(2), torch.ones(3))))
                               .to_executorch().buffer)
    plan = contents.program.executionPlan[0]
    none = EValueT()
    none.valType, none.val = KernelTypes.Null, NullT()
    plan.values = [*plan.values, none]
    (tensor_list,) = [v.val for v in plan.values if v.valType == KernelTypes.TensorList]
    tensor_list.items = [len(plan.values) - 1, *list(tensor_list.items)[1:]]
    return serialize_pte(contents)


def test_none_in_a_tensor_list_is_refused_at_load():
    x, y = torch.randn(2), torch.randn(3)
    program = etkit.to_edge(torch.export.export(Cat(), (x, y))).to_executorch().buffer
    (out,) = _load(program).execute([x, y])
    assert torch.equal(out, torch.cat([x, y]))
    with pytest.raises(EtkitRuntimeError, match=r"value \d+: tensor list element is not a Tensor"):
        _load(_cat_with_none_in_its_tensor_list())



def _with_op_arguments(model, x: torch.Tensor, op: str, patches=()) -> bytes:
    """``model``'s program with arguments of its ``op`` kernel call set as a crafted file would have them: each
    patch is (argument position, list entry or None for an Int, value)."""
    from etkit.fb.InstructionArguments import InstructionArguments

    contents = deserialize_pte(etkit.to_edge(torch.export.export(model, (x,))).to_executorch().buffer)
    plan = contents.program.executionPlan[0]
    names = [o.name.decode() if isinstance(o.name, bytes) else o.name for o in plan.operators]
    (call,) = [i.instrArgs for i in plan.chains[0].instructions
               if i.instrArgsType == InstructionArguments.KernelCall and names[i.instrArgs.opIndex] == op]
    for position, entry, value in patches:
        index = call.args[position] if entry is None else plan.values[call.args[position]].val.items[entry]
        plan.values[index].val.intVal = value
    return serialize_pte(contents)


def _conv_groups(groups):  # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
    return [(8, None, groups)]  # groups, out)


@pytest.mark.parametrize("model,shape", [
    (torch.nn.ConvTranspose2d(4, 6, 3, groups=2), (1, 4, 5, 5)),
    (torch.nn.Conv3d(4, 6, 2, groups=2), (1, 4, 3, 3, 3)),
    (torch.nn.Conv2d(4, 6, 3, groups=2), (1, 4, 5, 5)),
], ids=["transposed", "3d", "2d"])
@pytest.mark.parametrize("groups", [-8718968878589280255, 1 << 62, 0, -2, 3])
def test_convolution_groups_out_of_range_are_refused_at_execute(model, shape, groups):
    """Fuzz regression conv-groups-overflow: the generic path multiplied a weight dim by groups before checking it."""
    x = torch.randn(shape)
    (good,) = _load(_with_op_arguments(model, x, "aten::convolution")).execute([x])
    torch.testing.assert_close(good, model(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(EtkitRuntimeError, match=r"aten::convolution.out: .*groups"):
        _load(_with_op_arguments(model, x, "aten::convolution", _conv_groups(groups))).execute([x])


class Op(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


F = torch.nn.functional
# (name, fn, input shape, op, patches, message): each patch puts a value no exporter writes into an Int argument
# the kernel multiplies, adds, negates or allocates with; under the sanitized lane (scripts/sanitized_python.py) a
# missing range check is undefined behaviour or a heap overrun, here a missing or imprecise error
HOSTILE_ARGUMENTS = [
    ("pad-huge", lambda x: F.pad(x, (1, 2)), (2, 3), "aten::constant_pad_nd", [(1, 0, 1 << 62)],
     r"aten::constant_pad_nd.out: 'pad' is 4611686018427387904; it must be in \[-2147483647, 2147483647\]"),
    ("pad-crops-past-zero", lambda x: F.pad(x, (1, 2)), (2, 3), "aten::constant_pad_nd", [(1, 0, -9)],
     r"'padded size' is -4"),
    ("repeat-huge", lambda x: x.repeat(2, 3), (2, 3), "aten::repeat", [(1, 0, 1 << 62)], r"'repeats entry' is 46"),
    ("repeat-product", lambda x: x.repeat(2, 3), (2, 3), "aten::repeat", [(1, 1, 1 << 30)], r"'repeated size' is 32"),
    ("split-sizes-past-dim", lambda x: x.split([1, 2], dim=1), (2, 3), "aten::split_with_sizes_copy",
     [(1, 0, 4), (1, 1, -1)], r"'split_sizes entry' is 4; it must be in \[0, 3\]"),
    ("max-pool3d-kernel", lambda x: F.max_pool3d(x, 2, padding=1), (1, 1, 3, 3, 3), "aten::max_pool3d_with_indices",
     [(1, 0, 1 << 40)], r"'kernel_size' is 1099511627776; it must be in \[1, 1048576\]"),
    ("avg-pool3d-padding", lambda x: F.avg_pool3d(x, 2), (1, 1, 4, 4, 4), "aten::avg_pool3d",
     [(3, 0, 1 << 62)], r"'padding' is 4611686018427387904"),
    ("group-norm-n", lambda x: F.group_norm(x, 2), (2, 4, 3), "aten::native_group_norm", [(3, None, (1 << 62) + 1)],
     r"aten::native_group_norm.out: 'N' is 4611686018427387905"),
]


@pytest.mark.parametrize("name,fn,shape,op,patches,message", HOSTILE_ARGUMENTS, ids=[c[0] for c in HOSTILE_ARGUMENTS])
def test_int_arguments_out_of_range_are_refused_at_execute(name, fn, shape, op, patches, message):
    x, model = torch.randn(shape), Op(fn)
    for got, want in zip(_load(_with_op_arguments(model, x, op)).execute([x]), torch.utils._pytree.tree_leaves(model(x))):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(EtkitRuntimeError, match=message):
        _load(_with_op_arguments(model, x, op, patches)).execute([x])


@pytest.mark.parametrize("fn,op,position,same_as", [
    (lambda x: x[:, ::4] * 1, "aten::slice_copy", 4, lambda x: x[:, :1]),
    (lambda x: x.unfold(1, 2, 3) * 1, "aten::unfold_copy", 3, lambda x: x[:, None, :2]),
], ids=["slice", "unfold"])
def test_a_step_of_int64_max_takes_one_window(fn, op, position, same_as):
    """A step past the dim's size selects the first element (window) only, the shape the program planned (a step
    of 4 or 3 on a dim of 4); the kernels clamp the step before ``end - start + step`` and ``stride * step``
    could overflow."""
    x = torch.randn(2, 4)
    (got,) = _load(_with_op_arguments(Op(fn), x, op, [(position, None, (1 << 63) - 1)])).execute([x])
    torch.testing.assert_close(got, same_as(x), rtol=0, atol=0)


def test_arguments_whose_planned_memory_partly_overlaps_are_refused_at_load():
    """Fuzz regression index-put-overlapping-planned-args: a memory plan that overlaps two tensors of one call made
    a kernel memcpy between overlapping ranges. Partial overlaps are refused; an exact alias (out planned on a's
    bytes, as an in-place op) still runs."""
    def out_at(offset):
        def move(plan):
            plan.values[3].val.allocationInfo.memoryOffsetLow = offset
        return move

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    (out,) = _load(_plan(out_at(0))).execute([a.clone(), b])
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)
    with pytest.raises(EtkitRuntimeError, match=r"InvalidProgram: instruction 0: arguments 0 and 3 are planned tensors "
                                                r"whose memory partly overlaps \(24 and 24 bytes, 16 bytes apart\)"):
        _load(_plan(out_at(16)))


class ReshapeBatch(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0] * 5) * 2


def test_a_scalar_result_cannot_change_a_values_type():
    """sym_size's Int result written over a Tensor value (a crafted `out` index) would leave the tensor lists and
    kernels that name that value reading an Int as a Tensor; the value keeps its type and the call fails."""
    x = torch.randn(4, 5)
    ep = torch.export.export(ReshapeBatch(), (torch.randn(3, 5),), dynamic_shapes=({0: torch.export.Dim("b", max=10)},))
    contents = deserialize_pte(etkit.to_edge(ep).to_executorch().buffer)
    (got,) = _load(serialize_pte(contents)).execute([x])
    torch.testing.assert_close(got, ReshapeBatch()(x), rtol=0, atol=0)
    plan = contents.program.executionPlan[0]
    sym_size = plan.chains[0].instructions[0].instrArgs
    sym_size.args = [*sym_size.args[:2], 4]        # its result into value 4, the view's output tensor
    with pytest.raises(EtkitRuntimeError, match=r"aten::sym_size.int: its result is Int but its out value is Tensor"):
        _load(serialize_pte(contents)).execute([x])


def test_a_loop_whose_condition_nothing_writes_is_refused_at_load():
    """A backward JumpFalseCall on a value no instruction of its loop writes would never end once the value is
    false (execute() would hang); forward jumps and the unconditional jump to the end still load and run."""
    from .programs import jump_false_program

    def jump_back(plan):
        plan.chains[0].instructions[2].instrArgs.destinationInstruction = 1   # "goto end" becomes "goto 1"

    program = ProgramT.InitFromObj(Program.GetRootAs(jump_false_program(), 0))
    a = torch.randn(2, 3)
    (y,) = Runtime.get().load_program(jump_false_program()).load_method("forward").execute([a, False])
    torch.testing.assert_close(y, a * a, rtol=0, atol=0)
    jump_back(program.executionPlan[0])
    builder = flatbuffers.Builder(1024)
    builder.Finish(program.Pack(builder), file_identifier=b"ET12")
    with pytest.raises(EtkitRuntimeError, match=r"InvalidProgram: instruction 2 jumps back to instruction 1 on value 4, "
                                                r"which no instruction of that loop writes: the loop would never end"):
        _load(bytes(builder.Output()))


def _endless_loop_program() -> bytes:
    """jump_false_program with its add replaced by ``flag = False`` (a MoveCall from the constant False) and
    "goto end" by "if not flag goto 1": a loop whose condition its body writes, so load accepts it, but
    which never turns true."""
    from etkit.fb.InstructionArguments import InstructionArguments
    from etkit.fb.MoveCall import MoveCallT

    from .programs import jump_false_program

    def endless(plan):
        instructions = plan.chains[0].instructions
        move = MoveCallT()
        move.moveFrom, move.moveTo = 4, 1                           # flag = False
        instructions[1].instrArgsType, instructions[1].instrArgs = InstructionArguments.MoveCall, move
        instructions[2].instrArgs.condValueIndex = 1                # if not flag
        instructions[2].instrArgs.destinationInstruction = 1        # goto 1

    return _plan(endless, jump_false_program)


@pytest.fixture
def default_loop_limit_after():
    yield
    set_loop_limit(None)


def test_a_loop_that_never_ends_fails_at_the_loop_limit(default_loop_limit_after, etkit_runner, tmp_path):
    """The endless loop ends with InvalidProgram after the loop limit's backward jumps (2**24 by default, or
    what set_loop_limit / etkit_runner --loop_limit set), naming the jump, instead of hanging execute()."""
    a = torch.randn(2, 3)
    method = _load(_endless_loop_program())
    (y,) = method.execute([a, False])       # flag false: the loop is jumped over, y = a * a
    torch.testing.assert_close(y, a * a, rtol=0, atol=0)
    message = (r"InvalidProgram: instruction 2 of method 'forward' jumped back to instruction 1 more than {} times in "
               r"one execute: a loop whose condition stays false would never end")
    with pytest.raises(EtkitRuntimeError, match=message.format(2 ** 24)):
        method.execute([a, True])
    set_loop_limit(1000)
    with pytest.raises(EtkitRuntimeError, match=message.format(1000)):
        method.execute([a, True])
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        set_loop_limit(0)
    path = tmp_path / "endless_loop.pte"
    path.write_bytes(_endless_loop_program())
    # the runner keeps a scalar input's value from the program: flag True, the loop runs
    proc = subprocess.run([str(etkit_runner), "--model_path", str(path), "--iterations", "1", "--loop_limit", "50"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "more than 50 times in one execute" in proc.stderr, proc.stderr


def _add_weight_into_its_constant() -> bytes:
    """AddWeight's program with the add's ``out`` pointing at the weight, a constant of the file."""
    contents = deserialize_pte(etkit.to_edge(torch.export.export(AddWeight(), (torch.ones(8),))).to_executorch().buffer)
    plan = contents.program.executionPlan[0]
    (weight,) = [i for i, v in enumerate(plan.values)
                 if hasattr(v.val, "dataBufferIdx") and v.val.dataBufferIdx > 0 and v.val.allocationInfo is None]
    call = plan.chains[0].instructions[0].instrArgs
    call.args = [*call.args[:3], weight, weight]
    return serialize_pte(contents)


def test_a_kernel_cannot_write_a_constant(etkit_runner, tmp_path):
    """A constant named as an output: with the runner's memory-mapped file its bytes are read-only (a write would
    be SIGSEGV) and every Method shares them; Tensor::resize refuses it, from Python and from the runner."""
    x = torch.randn(8)
    with pytest.raises(EtkitRuntimeError, match=r"aten::add.out: cannot resize the output: Tensor::resize: the tensor "
                                                r"is a constant of the program \(read-only\)"):
        _load(_add_weight_into_its_constant()).execute([x])
    path = tmp_path / "add_into_constant.pte"
    path.write_bytes(_add_weight_into_its_constant())
    proc = subprocess.run([str(etkit_runner), "--model_path", str(path), "--iterations", "1"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "is a constant of the program (read-only)" in proc.stderr, \
        (proc.returncode, proc.stderr)
