"""Op coverage of the XNNPACK delegate on programs lowered by ExecuTorch's own XnnpackPartitioner.

This file is both sides of the check:
  * run as a script inside the ExecuTorch 1.5.1 oracle (tests/interop/oracle.py, separate process),
    it lowers the small modules below with ExecuTorch and writes NAME.pte, NAME.pt (eager inputs and
    outputs) and manifest.json (ops ExecuTorch left undelegated);
  * collected by pytest, it runs those programs with etkit's runtime and compares with eager.
Together the modules reach every XNNPACK node family the delegate defines from ExecuTorch payloads:
unary (xnn_define_unary: sigmoid, tanh, exp, log, sqrt, rsqrt, floor, ceil, negate, abs, hardswish,
gelu, leaky_relu, sine, cosine, clamp, square), binary (xnn_define_binary: add, subtract, multiply,
divide, minimum, maximum, prelu), convolution/deconvolution/depthwise, max/avg/global pooling,
bilinear resize, constant pad, concatenate 2..5, slice, transpose, softmax, batch matmul, reshape;
and quantized payloads from ExecuTorch's XNNPACKQuantizer (PT2E): per-tensor qint8 activations,
per-channel qcint8 weights, qint32 biases, convert nodes, and dynamically quantized (qdint8) linears.

Tolerance: float programs atol = 1e-4 * (max - min of the eager output), rtol = 0 (fp32 kernels
reorder sums and approximate transcendental functions to a few ulp). Quantized programs are compared
with the quantized (convert_pt2e) eager module at atol = 1e-2 * range: XNNPACK requantizes in integer
arithmetic and computes dynamic quantization parameters itself, a wrong scale or zero point is off by
far more.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


class Unary(nn.Module):
    def forward(self, x):
        return (torch.sigmoid(x), torch.tanh(x), torch.exp(x * 0.5), torch.log(x.abs() + 0.1),
                torch.sqrt(x.abs()), torch.rsqrt(x.abs() + 0.1), torch.floor(x), torch.ceil(x), -x,
                torch.abs(x), F.hardswish(x), F.gelu(x), F.leaky_relu(x, 0.1), torch.sin(x), torch.cos(x),
                F.hardtanh(x, -0.5, 0.5), torch.relu(x), x ** 2)


class Binary(nn.Module):
    def forward(self, a, b):  # b broadcasts over a's rows
        return (a + b, a - b, a * b, a / (b.abs() + 1.0), torch.minimum(a, b), torch.maximum(a, b))


class ConvPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.prelu = nn.PReLU(4)

    def forward(self, x):
        y = F.relu(self.conv(x))
        y = F.max_pool2d(y, 2)
        y = F.avg_pool2d(self.dw(y), 2)
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = F.pad(y, (1, 1, 2, 0), value=0.5)
        z = self.prelu(self.up(y))
        return z, z.mean([2, 3], keepdim=True)


class Shapes(nn.Module):
    def forward(self, x, y):
        c3 = torch.cat([x, x * 2.0, x + 1.0], dim=1)
        c5 = torch.cat([x, x, x, x, x], dim=2)
        return (c3, c5, c3[:, 1:4, :, 2:5], x.permute(0, 2, 3, 1), torch.softmax(x, dim=-1),
                torch.bmm(x.reshape(6, 4, 5), y).reshape(2, 3, 4, 6))


def cases() -> dict:
    """name -> (module in eval mode, inputs); deterministic."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    return {
        "ops_unary": (Unary().eval(), (torch.randn(2, 5, 7, generator=g) * 2,)),
        "ops_binary": (Binary().eval(), (torch.randn(3, 8, generator=g), torch.randn(1, 8, generator=g))),
        "ops_conv_pool": (ConvPool().eval(), (torch.randn(1, 3, 16, 16, generator=g),)),
        "ops_shapes": (Shapes().eval(), (torch.randn(2, 3, 4, 5, generator=g), torch.randn(6, 5, 6, generator=g))),
    }


class QuantMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class QuantConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.d = nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        return torch.relu(self.d(torch.relu(self.c(x))))


def quantized_cases() -> dict:
    """name -> (float module, inputs, get_symmetric_quantization_config kwargs); deterministic."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return {
        "q_mlp_static": (QuantMLP().eval(), (torch.randn(4, 16, generator=g),), {"is_per_channel": True}),
        "q_conv_static": (QuantConv().eval(), (torch.randn(1, 3, 12, 12, generator=g),), {"is_per_channel": True}),
        "q_mlp_dynamic": (QuantMLP().eval(), (torch.randn(4, 16, generator=g),),
                          {"is_per_channel": True, "is_dynamic": True}),
    }


def _quantize_with_executorch(module, inputs, config_kwargs):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**config_kwargs))
    prepared = prepare_pt2e(torch.export.export(module, inputs).module(), quantizer)
    prepared(*inputs)  # calibration
    return convert_pt2e(prepared)


def make_programs_with_executorch(outdir: Path) -> None:
    """Oracle side: lower every case with ExecuTorch's XnnpackPartitioner (never imports etkit)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    manifest = {}
    todo = dict(cases())
    for name, (module, inputs, config_kwargs) in quantized_cases().items():
        todo[name] = (_quantize_with_executorch(module, inputs, config_kwargs), inputs)
    for name, (module, inputs) in todo.items():
        with torch.no_grad():
            out = module(*inputs)
        edge = to_edge_transform_and_lower(torch.export.export(module, inputs), partitioner=[XnnpackPartitioner()])
        undelegated = sorted({getattr(n.target, "__name__", str(n.target)) for n in edge.exported_program().graph.nodes
                              if n.op == "call_function" and "executorch_call_delegate" not in str(n.target)
                              and "getitem" not in str(n.target)})
        (outdir / f"{name}.pte").write_bytes(edge.to_executorch().buffer)
        torch.save({"inputs": list(inputs), "outputs": list(out) if isinstance(out, tuple) else [out]},
                   outdir / f"{name}.pt")
        manifest[name] = {"undelegated": undelegated}
    (outdir / "manifest.json").write_text(json.dumps(manifest, indent=2))


if __name__ == "__main__":  # run by the oracle
    make_programs_with_executorch(Path(sys.argv[1]))
    sys.exit(0)


# ------------------------------------------------------------------------------------- pytest side
import pytest  # noqa: E402

pytestmark = pytest.mark.oracle

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def et_op_programs(tmp_path_factory) -> Path:
    pytest.importorskip("etkit.runtime")
    pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")
    spec = importlib.util.spec_from_file_location("etkit_interop_oracle", REPO_ROOT / "tests" / "interop" / "oracle.py")
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    out = tmp_path_factory.mktemp("et_op_programs")
    try:
        oracle.run_in_oracle(Path(__file__), out)
    except oracle.OracleError as exc:
        pytest.fail(f"the ExecuTorch oracle could not lower the op-coverage modules: {str(exc)[:500]}")
    return out


@pytest.mark.parametrize("name", sorted(cases()) + sorted(quantized_cases()))
def test_executorch_lowered_ops_run_on_etkit_xnnpack_and_match_eager(et_op_programs, name):
    from etkit.runtime import Runtime

    manifest = json.loads((et_op_programs / "manifest.json").read_text())
    # Everything but at most a concatenation or a final mean is delegated, so the numbers below come
    # from XNNPACK.
    assert set(manifest[name]["undelegated"]) <= {"aten.cat.default", "aten.mean.dim"}, manifest[name]
    ref = torch.load(et_op_programs / f"{name}.pt")
    method = Runtime.get().load_program(et_op_programs / f"{name}.pte").load_method("forward")
    actual = method.execute(list(ref["inputs"]))
    assert len(actual) == len(ref["outputs"])
    relative_atol = 1e-2 if name in quantized_cases() else 1e-4
    for i, (a, e) in enumerate(zip(actual, ref["outputs"])):
        spread = (e.max() - e.min()).item()
        torch.testing.assert_close(a, e, atol=relative_atol * spread, rtol=0,
                                   msg=lambda m: f"{name} output {i}: {m}")
