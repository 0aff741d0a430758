"""etkit_ethosu.vela_compile: Vela 5.x run in process on hand-built TOSA 1.0 INT graphs.

The graphs are built with ``tosa_serializer`` as in docs/design/ethosu-route.md, section 3.1: (a) conv + per-channel
rescale + clamp + int32 add with two inputs and two outputs, (b) single INTDIV / EQUAL int32 graphs, which the
U55 cannot run (section 4.3) and the U85 can.

The differential test runs ExecuTorch 1.5.1's ``arm_vela.vela_compile`` (the oracle, scripts/et_oracle.sh) in a
separate process on the same TOSA bytes and flags and compares the payload bytes; it fails with the reason when
the oracle is unavailable, like the repository's other oracle tests.
"""
from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest

os.environ["TOSA_MODEL_NO_BACKTRACE"] = "1"

import tosa_serializer as ts  # noqa: E402
import ethosu.vela  # noqa: F401,E402  (installed with the plugin; a missing Vela fails, never skips)

from etkit_ethosu import vela_compile as vc  # noqa: E402
from etkit_ethosu.compile_spec import EthosUCompileSpec  # noqa: E402
from etkit_ethosu.lowering.tosa_writer import mult_shift  # noqa: E402
from etkit_ethosu.payload import pack, unpack  # noqa: E402
from etkit_ethosu.vela_compile import VelaCompileError, compile_tosa, vela_version  # noqa: E402

TARGETS = ("ethos-u55-128", "ethos-u85-256")


# ----------------------------------------------------------------------------------------------- TOSA graphs

_NP = {ts.DType.INT8: np.int8, ts.DType.INT32: np.int32}


class _Graph:
    """A TOSA 1.0 graph under construction, remembering every tensor name it declares."""

    def __init__(self):
        self.g = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        self.bb = self.g.currRegion.currBasicBlock
        self.names = set()
        self.inputs, self.outputs = [], []

    def input(self, name, shape, dtype):
        self.g.addInputTensor(ts.TosaSerializerTensor(name, shape, dtype))
        self.names.add(name)
        self.inputs.append((name, tuple(shape), dtype))

    def const(self, name, shape, dtype, values):
        self.g.addConst(list(shape), dtype, np.asarray(values, dtype=_NP[dtype]).reshape(shape), name=name)
        self.names.add(name)

    def op(self, op, inputs, out, shape, dtype, attr):
        self.bb.addTensor(out, list(shape), dtype)
        self.names.add(out)
        self.g.addOperator(op, list(inputs), [out], attr)

    def rescale(self, src, out, shape, scales, in_dtype, out_dtype, in_zp, out_zp, per_channel=False):
        pairs = [mult_shift(s) for s in scales]
        self.const(f"{out}_mult", [len(pairs)], ts.DType.INT32, [m for m, _ in pairs])
        self.const(f"{out}_shift", [len(pairs)], ts.DType.INT8, [s for _, s in pairs])
        self.const(f"{out}_izp", [1], in_dtype, [in_zp])
        self.const(f"{out}_ozp", [1], out_dtype, [out_zp])
        attr = ts.TosaSerializerAttribute()
        attr.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, per_channel, False, False)
        self.op(ts.Op.RESCALE, [src, f"{out}_mult", f"{out}_shift", f"{out}_izp", f"{out}_ozp"], out, shape,
                out_dtype, attr)

    def output(self, name):
        self.g.addOutputTensor(self.bb.tensors[name])
        self.outputs.append((name, tuple(self.bb.tensors[name].shape)))

    def serialize(self) -> bytes:
        return bytes(self.g.serialize())


def conv_add_graph() -> _Graph:
    """Section 3.1: out = add(relu(conv3x3(x)), z) in int8 (int32 add), outputs (out, y)."""
    rng = np.random.default_rng(0)
    sx, sz, sy, so = 0.05, 0.04, 0.03, 0.06
    sw = rng.uniform(0.002, 0.01, 6)
    y_zp, z_zp, out_zp = -10, 5, 2
    g = _Graph()
    shape = [1, 8, 8, 6]
    g.input("x", [1, 8, 8, 4], ts.DType.INT8)
    g.input("z", shape, ts.DType.INT8)
    g.const("w", [6, 3, 3, 4], ts.DType.INT8, rng.integers(-127, 128, (6, 3, 3, 4)))
    g.const("b", [6], ts.DType.INT32, rng.integers(-500, 500, 6))
    g.const("x_zp", [1], ts.DType.INT8, [-3])
    g.const("w_zp", [1], ts.DType.INT8, [0])
    conv = ts.TosaSerializerAttribute()
    conv.Conv2dAttribute([1, 1, 1, 1], [1, 1], [1, 1], False, ts.DType.INT32)
    g.op(ts.Op.CONV2D, ["x", "w", "b", "x_zp", "w_zp"], "acc", shape, ts.DType.INT32, conv)
    g.rescale("acc", "y_pre", shape, list(sx * sw / sy), ts.DType.INT32, ts.DType.INT8, 0, y_zp, per_channel=True)
    clamp = ts.TosaSerializerAttribute()
    clamp.ClampAttribute(list(np.int8([y_zp]).view(np.uint8)), [127], ts.NanPropagationMode.PROPAGATE)
    g.op(ts.Op.CLAMP, ["y_pre"], "y", shape, ts.DType.INT8, clamp)
    s32 = 2 * max(sy, sz) / 2 ** 20
    g.rescale("y", "y32", shape, [sy / s32], ts.DType.INT8, ts.DType.INT32, y_zp, 0)
    g.rescale("z", "z32", shape, [sz / s32], ts.DType.INT8, ts.DType.INT32, z_zp, 0)
    add = ts.TosaSerializerAttribute()
    add.AddAttribute()
    g.op(ts.Op.ADD, ["y32", "z32"], "sum", shape, ts.DType.INT32, add)
    g.rescale("sum", "out", shape, [s32 / so], ts.DType.INT32, ts.DType.INT8, 0, out_zp)
    g.output("out")
    g.output("y")
    return g


def conv_stack_graph(layers: int = 10, channels: int = 32, size: int = 32) -> _Graph:
    """``layers`` 3x3 convolutions with per-channel requantization (94 MMAC by default): large enough that Vela
    cascades, buffers weights and chooses between schedules, unlike the small graph."""
    rng = np.random.default_rng(3)
    g = _Graph()
    shape = [1, size, size, channels]
    g.input("in", shape, ts.DType.INT8)
    src = "in"
    for i in range(layers):
        g.const(f"w{i}", [channels, 3, 3, channels], ts.DType.INT8, rng.integers(-127, 128, (channels, 3, 3, channels)))
        g.const(f"b{i}", [channels], ts.DType.INT32, rng.integers(-500, 500, channels))
        g.const(f"izp{i}", [1], ts.DType.INT8, [0])
        g.const(f"wzp{i}", [1], ts.DType.INT8, [0])
        conv = ts.TosaSerializerAttribute()
        conv.Conv2dAttribute([1, 1, 1, 1], [1, 1], [1, 1], False, ts.DType.INT32)
        g.op(ts.Op.CONV2D, [src, f"w{i}", f"b{i}", f"izp{i}", f"wzp{i}"], f"acc{i}", shape, ts.DType.INT32, conv)
        g.rescale(f"acc{i}", f"act{i}", shape, list(rng.uniform(3e-4, 6e-4, channels)), ts.DType.INT32,
                  ts.DType.INT8, 0, 0, per_channel=True)
        src = f"act{i}"
    g.output(src)
    return g


def binary_int32_graph(kind: str) -> _Graph:
    """One INTDIV (int32 -> int32) or EQUAL (int32 -> bool): valid TOSA 1.0, refused by Vela on U55/U65."""
    g = _Graph()
    shape = [1, 4, 4, 8]
    g.input("a", shape, ts.DType.INT32)
    g.input("b", shape, ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    if kind == "intdiv":
        attr.IntDivAttribute()
        g.op(ts.Op.INTDIV, ["a", "b"], "q", shape, ts.DType.INT32, attr)
    else:
        attr.EqualAttribute()
        g.op(ts.Op.EQUAL, ["a", "b"], "q", shape, ts.DType.BOOL, attr)
    g.output("q")
    return g


# ------------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def conv_graph():
    g = conv_add_graph()
    return g, g.serialize()


@pytest.fixture(scope="module")
def compiled(conv_graph):
    _, tosa = conv_graph
    return {t: compile_tosa(tosa, EthosUCompileSpec(t)) for t in TARGETS}


def _pad6(shape):
    return (1,) * (6 - len(shape)) + tuple(shape)


# -------------------------------------------------------------------------------------------------- tests

def test_conv_graph_is_valid_tosa(conv_graph):
    import tosa_reference_model as trm
    g, tosa = conv_graph
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-128, 128, shape, dtype=np.int8) for _, shape, _ in g.inputs]
    outs, status = trm.run(tosa, inputs)
    assert status == trm.GraphStatus.TOSA_VALID
    assert [o.shape for o in outs] == [shape for _, shape in g.outputs]


@pytest.mark.parametrize("target", TARGETS)
def test_payload_describes_the_graphs_io(compiled, conv_graph, target):
    g, _ = conv_graph
    p = compiled[target].payload
    assert p.cmd_data.startswith(b"COP1")
    assert len(p.weight_data) > 0
    assert [io.shape for io in p.inputs] == [_pad6(shape) for _, shape, _ in g.inputs]
    assert [io.shape for io in p.outputs] == [_pad6(shape) for _, shape in g.outputs]
    for io in p.inputs + p.outputs:
        assert io.elem_size == 1 and io.region == 1
        assert 0 <= io.offset and io.offset + io.nbytes <= p.scratch_size
    # the packed bytes decode back to the same payload
    assert unpack(pack(p)) == p


@pytest.mark.parametrize("target", TARGETS)
def test_estimate_names_graph_tensors_and_counts_cycles(compiled, conv_graph, target):
    g, _ = conv_graph
    r = compiled[target]
    assert r.layers, r.log
    assert {layer.name for layer in r.layers} <= g.names
    assert all(layer.target == "NPU" and layer.op_cycles > 0 for layer in r.layers)
    # the conv: 8*8 pixels * 6 output channels * 3*3*4 taps
    conv = [layer for layer in r.layers if layer.original_operator == "Conv2D"]
    assert len(conv) == 1 and conv[0].mac_count == 8 * 8 * 6 * 3 * 3 * 4 and conv[0].name == "y_pre"
    assert sum(layer.network_percent_cycles for layer in r.layers) == pytest.approx(100, abs=0.5)
    s = r.summary
    for key in vc.SUMMARY_KEYS:
        assert isinstance(s[key], (int, float)), key
    assert s["cycles_total"] > 0 and s["cycles_npu"] > 0
    assert s["nn_macs"] >= conv[0].mac_count
    assert s["inference_time"] == pytest.approx(s["cycles_total"] / s["core_clock"])
    assert s["accelerator_configuration"] == "Ethos_U" + target[len("ethos-u"):].replace("-", "_")
    text = r.format_estimate()
    assert all(layer.name in text for layer in r.layers)
    assert f"{s['inference_time'] * 1e6:.2f} us at {s['core_clock'] / 1e6:g} MHz" in text
    assert "CPU operators = 0" in r.log


@pytest.fixture(scope="module")
def stack_tosa():
    return conv_stack_graph().serialize()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", ["conv", "stack"])
def test_compile_is_deterministic_and_estimate_does_not_change_bytes(conv_graph, stack_tosa, graph, target):
    tosa = conv_graph[1] if graph == "conv" else stack_tosa
    spec = EthosUCompileSpec(target)
    first, again = compile_tosa(tosa, spec), compile_tosa(tosa, spec)
    assert first.layers and pack(again.payload) == pack(first.payload)
    # --verbose-performance (estimate=True) only adds reports; the compiled bytes stay the same
    plain = compile_tosa(tosa, spec, estimate=False)
    assert plain.layers == []
    assert pack(plain.payload) == pack(first.payload)
    assert plain.summary["cycles_total"] == first.summary["cycles_total"]


def test_extra_flags_reach_vela(stack_tosa):
    base = compile_tosa(stack_tosa, EthosUCompileSpec("ethos-u55-128"))
    small = compile_tosa(stack_tosa, EthosUCompileSpec("ethos-u55-128", extra_flags=["--optimise=Size"]))
    assert pack(small.payload) != pack(base.payload)
    assert small.payload.scratch_size < base.payload.scratch_size


def test_u55_and_u85_command_streams_differ(compiled):
    a, b = (compiled[t].payload for t in TARGETS)
    assert a.cmd_data != b.cmd_data


@pytest.mark.parametrize("kind, vela_op", [("intdiv", "Div"), ("equal", "Equal")])
def test_operator_the_u55_cannot_run_is_refused(kind, vela_op):
    g = binary_int32_graph(kind)
    tosa = g.serialize()
    with pytest.raises(VelaCompileError) as info:
        compile_tosa(tosa, EthosUCompileSpec("ethos-u55-128"))
    message = str(info.value)
    assert f"({vela_op})" in message and "could not run on NPU" in message
    assert "ethos-u55-128" in message and "no CPU fallback" in message
    assert info.value.target == "ethos-u55-128"
    # the same graph is fine on the U85, with int32 / bool I/O element sizes
    p = compile_tosa(tosa, EthosUCompileSpec("ethos-u85-256")).payload
    assert [io.elem_size for io in p.inputs] == [4, 4]
    assert [io.elem_size for io in p.outputs] == [4 if kind == "intdiv" else 1]


def test_memory_mode_with_fast_scratch_is_refused(conv_graph):
    _, tosa = conv_graph
    # ExecuTorch's U65 default, Dedicated_Sram_384KB, puts part of the working memory in region 2
    with pytest.raises(VelaCompileError, match="fast scratch") as info:
        compile_tosa(tosa, EthosUCompileSpec("ethos-u65-256"))
    assert "Shared_Sram" in str(info.value) and "ethos-u65-256" in str(info.value)
    # and the U65 compiles with a mode that needs none
    p = compile_tosa(tosa, EthosUCompileSpec("ethos-u65-256", memory_mode="Shared_Sram")).payload
    assert p.cmd_data.startswith(b"COP1")


def test_vela_cli_error_is_refused_with_its_text(conv_graph):
    _, tosa = conv_graph
    with pytest.raises(VelaCompileError, match="unrecognized arguments: --no-such-flag") as info:
        compile_tosa(tosa, EthosUCompileSpec("ethos-u85-256", extra_flags=["--no-such-flag"]))
    assert "ethos-u85-256" in str(info.value) and "exited with status 2" in str(info.value)


def test_flag_that_writes_no_npz_is_refused(conv_graph):
    _, tosa = conv_graph
    with pytest.raises(VelaCompileError, match="wrote no out_vela.npz"):
        compile_tosa(tosa, EthosUCompileSpec("ethos-u55-128", extra_flags=["--list-config-files"]))


def test_invalid_flatbuffer_is_refused():
    with pytest.raises(VelaCompileError, match="ethos-u55-128"):
        compile_tosa(b"this is not a TOSA flatbuffer", EthosUCompileSpec("ethos-u55-128"))


def test_oversized_flatbuffer_is_refused_before_vela_runs(monkeypatch, conv_graph):
    _, tosa = conv_graph
    assert vc.MAX_TOSA_BYTES == 2 ** 31
    monkeypatch.setattr(vc, "MAX_TOSA_BYTES", len(tosa) - 1)
    with pytest.raises(VelaCompileError, match="2 GiB"):
        compile_tosa(tosa, EthosUCompileSpec("ethos-u55-128"))


def test_vela_output_is_captured_including_cpp_writes(capfd, conv_graph):
    _, tosa = conv_graph
    capfd.readouterr()
    # --verbose-schedule is printed by Vela's C++ core straight to file descriptor 1
    r = compile_tosa(tosa, EthosUCompileSpec("ethos-u55-128", extra_flags=["--verbose-schedule"]))
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "Schedule:" in r.log  # the C++ trace
    assert "Network summary for out" in r.log  # Vela's Python print
    # the Python streams work again afterwards
    print("after")
    os.write(1, b"fd after\n")
    assert capfd.readouterr().out == "after\nfd after\n"


def test_vela_version():
    from importlib.metadata import version
    assert vela_version() == version("ethos-u-vela")
    assert vela_version().split(".")[0] == "5"


# ------------------------------------------------------------------------------- ExecuTorch 1.5.1 differential

# Runs in the oracle process (tests/interop/oracle.py; etkit imports are blocked there). It executes ExecuTorch
# 1.5.1's own backends/arm/arm_vela.py from the oracle directory. The module is loaded from its file rather than
# through `import executorch.backends.arm.arm_vela`, because the package's __init__ imports torch and torchao
# (~10 s) while arm_vela itself needs only numpy and ethosu.vela (the main venv's Vela, the one etkit uses).
_ORACLE_SCRIPT = textwrap.dedent('''
    import contextlib, importlib.util, io, json, os, sys
    from importlib.metadata import version

    work = sys.argv[1]
    oracle_root = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    path = os.path.join(oracle_root, "executorch", "backends", "arm", "arm_vela.py")
    spec = importlib.util.spec_from_file_location("executorch_arm_vela", path)
    arm_vela = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(arm_vela)
    assert arm_vela.has_vela, "ExecuTorch's arm_vela could not import ethosu.vela"
    jobs = json.load(open(os.path.join(work, "jobs.json")))
    for job in jobs:
        tosa = open(os.path.join(work, job["tosa"]), "rb").read()
        with contextlib.redirect_stdout(io.StringIO()):
            result = arm_vela.vela_compile(tosa, list(job["flags"]), verbose=False)
        with open(os.path.join(work, job["out"]), "wb") as f:
            f.write(result.processed_bytes)
    print(json.dumps({"arm_vela": path, "vela": version("ethos-u-vela"),
                      "executorch": version("executorch")}))
''')


@pytest.fixture(scope="module")
def executorch_payloads(tmp_path_factory, conv_graph, stack_tosa):
    from tests.interop.oracle import OracleError, run_in_oracle

    work = tmp_path_factory.mktemp("et_vela")
    graphs = {"conv": conv_graph[1], "stack": stack_tosa, "intdiv": binary_int32_graph("intdiv").serialize()}
    cases = [(name, t) for name in ("conv", "stack") for t in TARGETS] + [("intdiv", "ethos-u85-256")]
    jobs = []
    for name, tosa in graphs.items():
        (work / f"{name}.tosa").write_bytes(tosa)
    for name, target in cases:
        jobs.append({"tosa": f"{name}.tosa", "flags": EthosUCompileSpec(target).vela_flags(),
                     "out": f"{name}_{target}.bin"})
    (work / "jobs.json").write_text(json.dumps(jobs))
    script = work / "et_vela_compile.py"
    script.write_text(_ORACLE_SCRIPT)
    try:
        proc = run_in_oracle(script, work, timeout=300)
    except OracleError as exc:
        pytest.fail(f"ExecuTorch oracle unavailable or failed (run make oracle to see why): {str(exc)[:2000]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    payloads = {(name, target): (work / f"{name}_{target}.bin").read_bytes() for name, target in cases}
    return info, graphs, payloads


@pytest.mark.oracle
def test_executorch_oracle_ran_its_own_arm_vela_with_our_vela(executorch_payloads):
    info, _, _ = executorch_payloads
    assert info["executorch"] == "1.5.1"
    from pathlib import Path

    from tests.interop.oracle import oracle_dir
    assert Path(info["arm_vela"]).resolve().is_relative_to(oracle_dir().resolve())
    assert info["vela"] == vela_version()


@pytest.mark.parametrize("name, target", [("conv", "ethos-u55-128"), ("conv", "ethos-u85-256"),
                                          ("stack", "ethos-u55-128"), ("stack", "ethos-u85-256"),
                                          ("intdiv", "ethos-u85-256")])
def test_payload_bytes_equal_executorchs_vela_compile(executorch_payloads, name, target):
    _, graphs, payloads = executorch_payloads
    theirs = payloads[(name, target)]
    ours = pack(compile_tosa(graphs[name], EthosUCompileSpec(target)).payload)
    assert ours == theirs, (len(ours), len(theirs))
