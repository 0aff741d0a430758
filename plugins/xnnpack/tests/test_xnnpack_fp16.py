"""float16 programs (``model.half()``): every op family whose config says ``fp16 = True`` lowers to
XNNPACK fp16 values, initializes (XNNPACK accepts the fp16 node) and matches the model run in float32
eager on the same (fp16-representable) inputs. Tolerance: 2e-2 of the output's spread — fp16 has an
11-bit mantissa (relative step 1e-3) and these cases chain at most a few rounded ops.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import requires_fb
from helpers import Fn, lower, lowered_modules, parse_payload
from helpers import seeded_randn as _randn

pytestmark = requires_fb

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

FP16 = 2
TOLERANCE = 2e-2


X4 = _randn(0, 1, 4, 8, 8)
X2 = _randn(1, 6, 16)
X3 = _randn(2, 2, 2, 5, 16)

CASES = {
    "linear": (lambda: Fn(lambda s, x: s.l(x), l=nn.Linear(16, 8)), (X2,)),
    "mm": (lambda: Fn(lambda s, x: x @ s.w, w=nn.Parameter(_randn(3, 16, 4))), (X2,)),
    "bmm": (lambda: Fn(lambda s, a: torch.bmm(a, a.transpose(1, 2))), (_randn(4, 2, 5, 8),)),
    "conv": (lambda: Fn(lambda s, x: s.c(x), c=nn.Conv2d(4, 6, 3, padding=1)), (X4,)),
    "depthwise_conv": (lambda: Fn(lambda s, x: s.c(x), c=nn.Conv2d(4, 4, 3, groups=4)), (X4,)),
    "conv_bn_relu": (lambda: Fn(lambda s, x: torch.relu(s.b(s.c(x))), c=nn.Conv2d(4, 6, 1), b=nn.BatchNorm2d(6)), (X4,)),
    "transposed_conv": (lambda: Fn(lambda s, x: s.c(x), c=nn.ConvTranspose2d(4, 3, 2, stride=2)), (X4,)),
    "binary": (lambda: Fn(lambda s, a, b: torch.maximum(a * b - a / (b.abs() + 1), torch.minimum(a, b)) + 2),
               (X3, _randn(5, 2, 2, 5, 16))),
    "activations": (lambda: Fn(lambda s, x: torch.sigmoid(x) + torch.tanh(x) + nn.functional.hardswish(x)
                               + torch.clamp(x, -0.5, 0.5) + nn.functional.hardtanh(x) + torch.relu(x)), (X3,)),
    "unary": (lambda: Fn(lambda s, x: torch.abs(x) + torch.neg(x) + torch.sqrt(x.abs() + 1) + torch.exp(x * 0.1)
                         + torch.floor(x) + torch.ceil(x) + x * x), (X3,)),
    "gelu_leaky_elu": (lambda: Fn(lambda s, x: nn.functional.gelu(x) + nn.functional.leaky_relu(x, 0.1)
                                  + nn.functional.elu(x)), (X3,)),
    "prelu": (lambda: Fn(lambda s, x: s.p(x), p=nn.PReLU(4)), (X4,)),
    "softmax": (lambda: Fn(lambda s, x: torch.softmax(x, dim=-1)), (X3,)),
    "pooling": (lambda: Fn(lambda s, x: nn.functional.max_pool2d(x, 2) + nn.functional.avg_pool2d(x, 2)), (X4,)),
    "mean": (lambda: Fn(lambda s, x: x.mean([2, 3], keepdim=True)), (X4,)),
    "standalone_bn": (lambda: Fn(lambda s, x: s.b(x), b=nn.BatchNorm2d(4)), (X4,)),
    "upsample": (lambda: Fn(lambda s, x: nn.functional.interpolate(x, scale_factor=2, mode="bilinear")), (X4,)),
    "shape_ops": (lambda: Fn(lambda s, x: torch.cat([x.permute(0, 2, 1, 3), x.permute(0, 2, 1, 3)[:, :, :1]], 2)
                             .reshape(2, -1)), (X3,)),
    "pad_expand_split": (lambda: Fn(lambda s, x: sum(nn.functional.pad(x, (1, 1)).split([9, 9], dim=-1))
                                    + x[:, :1].expand(2, 2, 5, 16).sum(-1, keepdim=True)), (X3,)),
}


def _randomize_bn(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_half_model_runs_on_xnnpack_fp16_and_matches_fp32_eager(name):
    factory, inputs = CASES[name]
    torch.manual_seed(0)
    model = factory().eval()
    _randomize_bn(model)
    half_inputs = tuple(x.half() for x in inputs)
    expected = model(*(x.float() for x in half_inputs))
    manager, partitioner = lower(model.half(), half_inputs)
    report = partitioner.report()
    assert report.num_delegated > 0, report.format()
    types = set()
    for module in lowered_modules(manager):
        _, graph, _ = parse_payload(module.processed_bytes)
        types |= {(v.xvalueUnion.tensorValue if hasattr(v.xvalueUnion, "tensorValue") else v.xvalueUnion).datatype
                  for v in graph.xvalues}
    assert FP16 in types, f"no fp16 values in the payload ({types})"
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    (y,) = method.execute(list(half_inputs))
    assert y.dtype == torch.float16
    spread = float(expected.max() - expected.min()) or 1.0
    error = float((y.float() - expected).abs().max())
    assert error <= TOLERANCE * spread, f"{name}: max error {error:.4g} > {TOLERANCE} x {spread:.4g}"


def test_half_mobilenet_v2_is_one_delegate_and_close_to_fp32():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from example_models import calibrated_mobilenet_v2

    model = calibrated_mobilenet_v2()
    x = _randn(7, 1, 3, 224, 224).half()
    expected = model(x.float())
    manager, partitioner = lower(model.half(), (x,))
    assert partitioner.report().num_partitions == 1 and not partitioner.report().rejected
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    (y,) = method.execute([x])
    spread = float(expected.max() - expected.min())
    assert float((y.float() - expected).abs().max()) <= 5e-2 * spread
    cosine = float(nn.functional.cosine_similarity(y.float().flatten(), expected.flatten(), dim=0))
    assert cosine >= 0.999, cosine


def test_fp16_inference_compile_spec_runs_a_float32_program_in_fp16():
    """``XnnpackPartitioner(fp16_inference=True)`` stores the compile spec; the delegate then creates
    its runtime in fp16 (results move by fp16 rounding, not bit-identical to fp32) while the program's
    inputs and outputs stay float32."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32)).eval()
    x = _randn(8, 16, 64)
    expected = model(x)
    outputs = {}
    for fp16 in (False, True):
        manager, _ = lower(model, (x,), fp16_inference=fp16)
        (module,) = lowered_modules(manager)
        assert [(s.key, s.value) for s in module.compile_specs] == ([("fp16_inference", b"\x01")] if fp16 else [])
        method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
        (outputs[fp16],) = method.execute([x])
    assert outputs[True].dtype == torch.float32
    torch.testing.assert_close(outputs[False], expected, atol=1e-5, rtol=1e-5)
    spread = float(expected.max() - expected.min())
    assert float((outputs[True] - expected).abs().max()) <= TOLERANCE * spread
    assert not torch.equal(outputs[True], outputs[False]), "fp16_inference had no effect"
