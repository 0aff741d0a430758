"""``constant_methods`` of ``to_edge`` / ``to_edge_transform_and_lower`` (ExecuTorch's ``exir.to_edge``):
each entry is one more method, with no inputs and no instructions, returning the value(s)."""
from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

import etkit
from etkit import ExecutorchBackendConfig
from etkit.fallback import FALLBACK_SUFFIX
from etkit.fb.KernelTypes import KernelTypes
from etkit.runtime import Runtime
from etkit.serialize import deserialize_pte
from etkit.serialize.inspect import format_program
from tests.core.toy_backend import TOY_ID, ToyPartitioner


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x * y + y)


INPUTS = (torch.randn(2, 5), torch.randn(2, 5))
FREQS = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7

#: one of each kind, in this order in the program (after "forward")
CONSTANTS = {
    "get_max_seq_len": 128,
    "get_temperature": 0.75,
    "use_kv_cache": True,
    "get_eos_ids": [2, 3],
    "get_freqs": FREQS,
    "get_name": "tiny-llm",
}


def _export():
    return torch.export.export(AddMul(), INPUTS)


def _lower(how: str, constant_methods=CONSTANTS, partitioner=None):
    if how == "to_edge":
        return etkit.to_edge(_export(), constant_methods=constant_methods)
    return etkit.to_edge_transform_and_lower(_export(), partitioner=partitioner, constant_methods=constant_methods)


def _plan_names(data: bytes) -> list:
    return [p.name.decode() if isinstance(p.name, bytes) else p.name
            for p in deserialize_pte(data).program.executionPlan]


def _ints(values) -> list:
    return [] if values is None else [int(v) for v in values]


def _assert_constants(program, constants=CONSTANTS) -> None:
    for name, value in constants.items():
        method = program.load_method(name)
        assert method.metadata.num_inputs == 0
        outputs = method.execute([])
        expected = pytree.tree_leaves(value)
        assert len(outputs) == len(expected), name
        for got, want in zip(outputs, expected):
            if isinstance(want, torch.Tensor):
                assert isinstance(got, torch.Tensor) and torch.equal(got, want), name
            else:
                assert type(got) is type(want) and got == want, (name, got, want)


@pytest.mark.parametrize("how", ["to_edge", "to_edge_transform_and_lower"])
def test_constant_methods_run_in_etkit_runtime(how):
    edge = _lower(how)
    assert edge.methods == {"forward"}
    assert edge.config_methods == set(CONSTANTS)
    et = edge.to_executorch()
    assert et.config_methods == set(CONSTANTS)
    data = et.buffer
    # the exported methods (sorted) first, then the constant methods in the order given (ExecuTorch's order)
    assert _plan_names(data) == ["forward", *CONSTANTS]
    program = Runtime.get().load_program(data)
    assert program.method_names == {"forward", *CONSTANTS}
    _assert_constants(program)
    assert program.load_method("get_max_seq_len").execute() == [128]  # no inputs: execute() works too
    assert program.metadata("get_eos_ids").output_tags == ("Int", "Int")
    assert program.metadata("get_freqs").outputs[0].sizes == (2, 3)
    (out,) = program.load_method("forward").execute(list(INPUTS))
    torch.testing.assert_close(out, AddMul()(*INPUTS), atol=1e-6, rtol=1e-6)


def test_plans_are_written_as_executorch_writes_them():
    program = deserialize_pte(etkit.to_edge(_export(), constant_methods=CONSTANTS).to_executorch().buffer).program
    plans = {p.name.decode() if isinstance(p.name, bytes) else p.name: p for p in program.executionPlan}
    for name, value in CONSTANTS.items():
        plan = plans[name]
        leaves, spec = pytree.tree_flatten(value)
        assert _ints(plan.inputs) == []
        assert _ints(plan.outputs) == list(range(len(leaves)))
        assert _ints(plan.nonConstBufferSizes) == [0]
        assert len(plan.operators or []) == 0 and len(plan.delegates or []) == 0
        assert len(plan.chains) == 1 and len(plan.chains[0].instructions or []) == 0
        meta = plan.containerMetaType
        text = lambda s: s.decode() if isinstance(s, bytes) else (s or "")  # noqa: E731
        assert text(meta.encodedInpStr) == ""
        assert text(meta.encodedOutStr) == pytree.treespec_dumps(spec)
    kinds = {name: [v.valType for v in plans[name].values] for name in CONSTANTS}
    assert kinds == {
        "get_max_seq_len": [KernelTypes.Int], "get_temperature": [KernelTypes.Double],
        "use_kv_cache": [KernelTypes.Bool], "get_eos_ids": [KernelTypes.Int, KernelTypes.Int],
        "get_freqs": [KernelTypes.Tensor], "get_name": [KernelTypes.String],
    }
    tensor = plans["get_freqs"].values[0].val
    assert tensor.dataBufferIdx > 0 and tensor.allocationInfo is None  # a constant, in the constant segment
    assert _ints(tensor.sizes) == [2, 3] and tensor.shapeDynamism == 0


def test_nested_values_dtypes_and_non_contiguous_tensors():
    constants = {
        "config": {"layers": 2, "dims": (8, 16), "eps": 1e-5},
        "get_dtype": torch.float16,
        "get_transposed": FREQS.t(),  # stored contiguous
        "get_empty_list": [],
    }
    data = etkit.to_edge(_export(), constant_methods=constants).to_executorch().buffer
    program = Runtime.get().load_program(data)
    assert program.load_method("config").execute() == [2, 8, 16, 1e-5]
    assert program.load_method("get_dtype").execute() == [5]  # ScalarType Half
    (t,) = program.load_method("get_transposed").execute()
    assert torch.equal(t, FREQS.t())
    assert program.load_method("get_empty_list").execute() == []


def test_constant_methods_survive_transform_and_to_backend(toy_plugin):
    edge = etkit.to_edge(_export(), constant_methods={"get_max_seq_len": 64})
    edge = edge.transform([lambda gm: gm]).to_backend(ToyPartitioner())
    assert edge.config_methods == {"get_max_seq_len"}
    data = edge.to_executorch().buffer
    assert _plan_names(data) == ["forward", "get_max_seq_len"]
    assert Runtime.get().load_program(data).load_method("get_max_seq_len").execute() == [64]


def test_constant_methods_with_fallback_twins(toy_plugin):
    edge = _lower("to_edge_transform_and_lower", partitioner=[ToyPartitioner()])
    data = edge.to_executorch(ExecutorchBackendConfig(delegate_fallback=[TOY_ID])).buffer
    assert _plan_names(data) == ["forward", "forward" + FALLBACK_SUFFIX, *CONSTANTS]
    program = Runtime.get().load_program(data)
    assert program.method_names == {"forward", *CONSTANTS}
    _assert_constants(program)
    method = program.load_method("forward")  # the toy backend has no runtime: the twin runs
    assert method.fallback_reason is not None
    (out,) = method.execute(list(INPUTS))
    torch.testing.assert_close(out, AddMul()(*INPUTS), atol=1e-6, rtol=1e-6)


def test_multi_method_program():
    class Sub(torch.nn.Module):
        def forward(self, x):
            return x - 1

    programs = {"forward": _export(), "decode": torch.export.export(Sub(), (torch.randn(3),))}
    data = etkit.to_edge(programs, constant_methods={"get_vocab_size": 32000}).to_executorch().buffer
    assert _plan_names(data) == ["decode", "forward", "get_vocab_size"]
    program = Runtime.get().load_program(data)
    assert program.load_method("get_vocab_size").execute([]) == [32000]
    x = torch.randn(3)
    torch.testing.assert_close(program.load_method("decode").execute([x])[0], x - 1)


def test_inspect_prints_constant_methods():
    text = format_program(etkit.to_edge(_export(), constant_methods=CONSTANTS).to_executorch().buffer)
    assert "method 'get_eos_ids':" in text
    assert "inputs [], outputs [0, 1]" in text
    assert "0: Int 2" in text and "1: Int 3" in text
    assert "String 'tiny-llm'" in text
    assert "Tensor float32[2, 3] constant #" in text


@pytest.mark.parametrize("lower", [etkit.to_edge, etkit.to_edge_transform_and_lower])
@pytest.mark.parametrize("value, what", [
    (object(), "object"),
    ({1, 2}, "set"),
    ([1, 2, object()], "object"),  # an element of a list
    (None, "NoneType"),  # as in ExecuTorch: None is no value a method can return
    (torch.randn(2).to_sparse(), "sparse"),
    (torch.tensor([1 + 2j]), "complex"),
])
def test_unsupported_values_raise_type_error_naming_the_method(lower, value, what):
    with pytest.raises(TypeError, match=f"(?s)constant method 'get_bad'.*{what}"):
        lower(_export(), constant_methods={"get_max_seq_len": 1, "get_bad": value})


@pytest.mark.parametrize("lower", [etkit.to_edge, etkit.to_edge_transform_and_lower])
def test_name_collision_with_an_exported_method_raises(lower):
    with pytest.raises(ValueError, match="constant method 'forward' has the name of an exported method"):
        lower(_export(), constant_methods={"forward": 1})


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="does not fit in a 64-bit integer"):
        etkit.to_edge(_export(), constant_methods={"big": 2 ** 64})
    with pytest.raises(TypeError, match="method names must be non-empty strings"):
        etkit.to_edge(_export(), constant_methods={3: 1})
    with pytest.raises(TypeError, match="compile_config="):
        etkit.to_edge(_export(), etkit.EdgeCompileConfig())  # the config passed positionally
    with pytest.raises(ValueError, match="reserved for fallback twins"):
        etkit.to_edge(_export(), constant_methods={"forward" + FALLBACK_SUFFIX: 1})
    # names added after to_edge (ExecuTorch's passes write _config_methods) are checked when writing
    edge = etkit.to_edge(_export())
    edge._config_methods = {"forward": 1}
    with pytest.raises(ValueError, match="has the name of an exported method"):
        edge.to_executorch()


def test_no_constant_methods_changes_nothing():
    plain = etkit.to_edge(_export()).to_executorch().buffer
    assert etkit.to_edge(_export(), constant_methods={}).to_executorch().buffer == plain
    assert etkit.to_edge(_export()).config_methods == set()
