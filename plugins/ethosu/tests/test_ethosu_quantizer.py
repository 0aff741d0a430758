"""Tests of ``EthosUQuantizer`` (PT2E flow of the seed "Quantization" page, Arm Ethos-U delegate).

Every model is exported with ``torch.export.export(...).module()``, prepared with ``prepare_pt2e`` (QAT:
``prepare_qat_pt2e``), calibrated on fixed-seed data and converted with ``convert_pt2e``. The checks read the
converted graph: which ops are fed by ``dequantize`` and followed by ``quantize``, with which parameters, and
how far the converted model's output is from the float model's.
"""
from __future__ import annotations

import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e

from etkit_ethosu import EthosUCompileSpec, EthosUQuantizer, get_symmetric_quantization_config

aten = torch.ops.aten
Q = torch.ops.quantized_decomposed.quantize_per_tensor.default
DQ = torch.ops.quantized_decomposed.dequantize_per_tensor.default
DQ_CH = torch.ops.quantized_decomposed.dequantize_per_channel.default


# --------------------------------------------------------------------------------- helpers

def _calibration(shapes, batches=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [tuple(torch.randn(*s, generator=gen) for s in shapes) for _ in range(batches)]


def _quantize(model, shapes, config=None, quantizer=None, batches=4):
    """Export, prepare, calibrate on ``batches`` fixed-seed samples, convert. Returns (converted, samples)."""
    torch.manual_seed(0)
    model = model.eval()
    samples = _calibration(shapes, batches)
    if quantizer is None:
        quantizer = EthosUQuantizer(EthosUCompileSpec("ethos-u55-128"))
        quantizer.set_global(config or get_symmetric_quantization_config(is_per_channel=True))
    exported = torch.export.export(model, samples[0]).module()
    prepared = prepare_pt2e(exported, quantizer)
    for sample in samples:
        prepared(*sample)
    return convert_pt2e(prepared), samples


def _ops(gm, target):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == target]


def _op(gm, target):
    nodes = _ops(gm, target)
    assert len(nodes) == 1, f"expected one {target}, found {len(nodes)}:\n{gm.graph}"
    return nodes[0]


def _qparams(node):
    """``(scale, zero_point)`` of a per-tensor quantize / dequantize node."""
    assert node.target in (Q, DQ), node.format_node()
    return float(node.args[1]), int(node.args[2])


def _input_dq(node, index=0):
    arg = node.args[index]
    assert isinstance(arg, torch.fx.Node) and arg.target == DQ, (
        f"input {index} of {node.name} is {getattr(arg, 'target', arg)}, not a dequantize")
    return arg


def _output_q(node):
    """The single quantize node reading ``node``'s output (asserts there is exactly one user and it is Q)."""
    users = list(node.users)
    assert len(users) == 1 and users[0].target == Q, (
        f"{node.name} should be followed by exactly one quantize, users: {[u.target for u in users]}")
    return users[0]


def _not_quantized(node):
    return all(u.target not in (Q, DQ) for u in node.users)


def _max_error(float_model, converted, samples):
    """Largest |float - converted| over all samples and all outputs."""
    worst = 0.0
    with torch.no_grad():
        for sample in samples:
            expected, got = float_model(*sample), converted(*sample)
            if isinstance(expected, torch.Tensor):
                expected, got = (expected,), (got,)
            assert len(expected) == len(got)
            for e, g in zip(expected, got):
                worst = max(worst, (e - g).abs().max().item())
    return worst


def _attr(gm, target):
    """The tensor a ``get_attr`` node reads (``target`` may be dotted, e.g. ``conv.bias``)."""
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _weight_dq(gm, op):
    """The per-channel dequantize feeding ``op``'s weight, with its int8 tensor, scales and zero points."""
    dq = op.args[1]
    assert dq.target == DQ_CH, f"{op.name}'s weight is fed by {dq.target}, not dequantize_per_channel"
    q_weight, scales, zero_points = (_attr(gm, a.target) for a in dq.args[:3])
    return dq, q_weight, scales, zero_points


# --------------------------------------------------------------------------------- models

class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        with torch.no_grad():  # non-trivial statistics so that folding is visible
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x) + x)


class ConvRelu6(nn.Module):
    def __init__(self, functional: bool):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.act = nn.ReLU6()
        self.functional = functional

    def forward(self, x):
        y = self.conv(x * 3.0)  # wide range so that the clamp at 6 matters
        return F.relu6(y) if self.functional else self.act(y)


class Depthwise(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, groups=8, padding=1)

    def forward(self, x):
        return self.dw(x)


class Pools(nn.Module):
    def forward(self, x):
        x = F.relu(x)  # input quantized by a standalone (shared) ReLU
        return F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 1), x.mean(dim=(2, 3))


class Cat(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return torch.cat([self.a(x), self.b(x) * 4.0], dim=1)


class Softmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        return self.fc(x).softmax(dim=-1)


class MatmulSigmoid(nn.Module):
    def forward(self, a, b):
        return torch.sigmoid(torch.matmul(a, b.transpose(-1, -2)))


class FloatTail(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        y = self.fc(x)
        return self.ln(y), y / (torch.cos(x) + 2.0)


class TwoBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.second = nn.Sequential(nn.Linear(8, 8), nn.ReLU())

    def forward(self, x):
        return self.second(self.first(x))


class Scalars(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * 2.0 + 1.0


# --------------------------------------------------------------------------------- configuration

def test_symmetric_config_specs():
    """Activations int8 [-128, 127] per-tensor affine with MinMax observers; weights int8 [-127, 127]
    symmetric, per channel along axis 0; bias float; QAT swaps in fake quantizers."""
    config = get_symmetric_quantization_config(is_per_channel=True)
    act, weight = config.input_activation, config.weight
    assert config.output_activation == act and config.bias is None and not config.is_qat
    assert (act.dtype, act.quant_min, act.quant_max, act.qscheme) == (torch.int8, -128, 127, torch.per_tensor_affine)
    assert (weight.dtype, weight.quant_min, weight.quant_max, weight.qscheme, weight.ch_axis) == (
        torch.int8, -127, 127, torch.per_channel_symmetric, 0)
    observer = act.observer_or_fake_quant_ctr()
    assert type(observer).__name__ == "MinMaxObserver" and observer.eps.item() == pytest.approx(2 ** -12)

    per_tensor = get_symmetric_quantization_config(is_per_channel=False)
    assert per_tensor.weight.qscheme == torch.per_tensor_symmetric

    assert get_symmetric_quantization_config() is get_symmetric_quantization_config(is_per_channel=True)
    qat = get_symmetric_quantization_config(is_qat=True)
    assert qat.is_qat and type(qat.input_activation.observer_or_fake_quant_ctr()).__name__ == "FakeQuantize"


def test_quantize_with_submodules_matches_manual_flow():
    """The seed page's ``quantize_with_submodules``: prepare, calibrate on every sample, convert; the same
    graph and outputs as the manual flow."""
    model = Mlp().eval()
    manual, samples = _quantize(model, [(4, 16)])
    quantizer = EthosUQuantizer().set_global(get_symmetric_quantization_config())
    converted = quantizer.quantize_with_submodules(torch.export.export(model, samples[0]).module(), samples)
    assert [n.target for n in converted.graph.nodes] == [n.target for n in manual.graph.nodes]
    with torch.no_grad():
        assert torch.equal(converted(*samples[0]), manual(*samples[0]))


def test_dynamic_config_is_rejected():
    with pytest.raises(ValueError, match="no dynamic quantization"):
        get_symmetric_quantization_config(is_dynamic=True)


def test_quantizer_rejects_wrong_argument_types():
    with pytest.raises(TypeError):
        EthosUQuantizer("ethos-u55-128")
    with pytest.raises(TypeError):
        EthosUQuantizer().set_global({"not": "a config"})


# --------------------------------------------------------------------------------- PTQ graphs

def test_conv_bn_relu_folds_bn_and_fuses_relu():
    """BatchNorm is folded into the conv, the ReLU fused: ``dq -> conv -> relu -> q`` with no quantize between
    conv and relu, the conv weight per-channel int8 in [-127, 127] with zero points 0 along axis 0, the bias
    float. Numerics: |float - quantized| <= 3 output scales (input rounding through a 27-tap dot product
    plus output rounding)."""
    model = ConvBnRelu()
    gm, samples = _quantize(model, [(2, 3, 8, 8)])
    assert not _ops(gm, aten.batch_norm.default)
    conv, relu = _op(gm, aten.conv2d.default), _op(gm, aten.relu.default)
    _input_dq(conv)
    assert list(conv.users) == [relu], "a quantize was inserted between conv and relu"
    q = _output_q(relu)
    assert len(_ops(gm, Q)) == 2  # graph input, relu output
    dq, q_weight, scales, zero_points = _weight_dq(gm, conv)
    assert dq.args[3:] == (0, -127, 127, torch.int8)
    assert q_weight.dtype == torch.int8 and q_weight.min() >= -127 and q_weight.max() <= 127
    assert scales.shape == (8,) and torch.all(zero_points == 0)
    assert conv.args[2].op == "get_attr" and _attr(gm, conv.args[2].target).dtype == torch.float32
    scale, zero_point = _qparams(q)
    assert zero_point == -128  # ReLU output range [0, max] maps to the bottom of int8
    assert _max_error(model, gm, samples) <= 3 * scale


def test_mlp_linears_quantized_per_channel():
    """Both linears read dequantized inputs and per-channel int8 weights; fc1's ReLU is fused; fc2's output is
    quantized. Numerics: |float - quantized| <= 4 output scales."""
    model = Mlp()
    gm, samples = _quantize(model, [(4, 16)])
    fc1, fc2 = _ops(gm, aten.linear.default)
    relu = _op(gm, aten.relu.default)
    assert list(fc1.users) == [relu]
    _output_q(relu)
    assert _input_dq(fc2).args[0].args[0] is relu
    for fc, out_features in ((fc1, 32), (fc2, 10)):
        _input_dq(fc)
        _, _, scales, _ = _weight_dq(gm, fc)
        assert scales.shape == (out_features,)
    scale, _ = _qparams(_output_q(fc2))
    assert _max_error(model, gm, samples) <= 4 * scale


def test_residual_add_fuses_relu():
    """``relu(conv(x) + x)``: both add operands are dequantized (the skip edge shares the graph input's
    parameters), the ReLU after add is fused (no quantize between add and relu)."""
    model = Residual()
    gm, samples = _quantize(model, [(1, 4, 6, 6)])
    conv, add, relu = _op(gm, aten.conv2d.default), _op(gm, aten.add.Tensor), _op(gm, aten.relu.default)
    conv_q = _output_q(conv)
    assert _input_dq(add, 0).args[0] is conv_q
    assert _qparams(_input_dq(add, 1)) == _qparams(_input_dq(conv))  # same tensor, one set of parameters
    assert list(add.users) == [relu]
    scale, _ = _qparams(_output_q(relu))
    assert _max_error(model, gm, samples) <= 4 * scale


@pytest.mark.parametrize("functional", [False, True], ids=["nn.ReLU6-hardtanh", "F.relu6"])
def test_conv_relu6_fused(functional):
    """``nn.ReLU6`` exports as ``hardtanh(x, 0, 6)``, ``F.relu6`` as ``relu6``; either is fused into the conv,
    and the output range is [0, 6] (scale 6/255, zero point -128) because the inputs saturate."""
    model = ConvRelu6(functional)
    gm, samples = _quantize(model, [(1, 3, 8, 8)])
    act = _op(gm, aten.relu6.default if functional else aten.hardtanh.default)
    conv = _op(gm, aten.conv2d.default)
    assert list(conv.users) == [act]
    scale, zero_point = _qparams(_output_q(act))
    assert zero_point == -128 and scale == pytest.approx(6.0 / 255, rel=1e-6)
    # the scalar multiplication keeps its Python scalar operand: only the tensor is annotated
    mul = _op(gm, aten.mul.Tensor)
    assert mul.args[1] == 3.0 and _input_dq(mul)
    assert _max_error(model, gm, samples) <= 4 * scale


def test_depthwise_conv_per_channel_and_per_tensor():
    """Depthwise conv (groups = channels): one weight scale per channel along axis 0 when per-channel, a
    single ``dequantize_per_tensor`` with zero point 0 otherwise."""
    gm, samples = _quantize(Depthwise(), [(1, 8, 5, 5)])
    conv = _op(gm, aten.conv2d.default)
    assert conv.args[-1] == 8
    _, q_weight, scales, _ = _weight_dq(gm, conv)
    assert q_weight.shape == (8, 1, 3, 3) and scales.shape == (8,)
    assert q_weight.abs().amax(dim=(1, 2, 3)).eq(127).all()  # each channel's max uses the full range

    model = Depthwise()
    gm, samples = _quantize(model, [(1, 8, 5, 5)], config=get_symmetric_quantization_config(is_per_channel=False))
    conv = _op(gm, aten.conv2d.default)
    weight_dq = conv.args[1]
    assert weight_dq.target == DQ and weight_dq.args[2:] == (0, -127, 127, torch.int8)
    scale, _ = _qparams(_output_q(conv))
    assert _max_error(model, gm, samples) <= 4 * scale


def test_pools_and_mean_keep_input_parameters():
    """max_pool2d, avg_pool2d, adaptive_avg_pool2d and mean: dequantized input, quantized output with the same
    scale and zero point as the input (a standalone ReLU shares its input's parameters as well). Numerics
    within 1.5 scales (averaging requantizes once)."""
    model = Pools()
    gm, samples = _quantize(model, [(1, 4, 8, 8)])
    relu = _op(gm, aten.relu.default)
    relu_in = _qparams(_input_dq(relu))
    assert _qparams(_output_q(relu)) == relu_in
    for target in (aten.max_pool2d.default, aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default,
                   aten.mean.dim):
        node = _op(gm, target)
        assert _qparams(_input_dq(node)) == relu_in
        assert _qparams(_output_q(node)) == relu_in, target
    assert _max_error(model, gm, samples) <= 1.5 * relu_in[0]


def test_cat_inputs_and_output_share_parameters():
    """Both cat inputs (two convs, one scaled by 4) and the cat output use one scale / zero point."""
    model = Cat()
    gm, samples = _quantize(model, [(1, 3, 4, 4)])
    cat = _op(gm, aten.cat.default)
    out = _qparams(_output_q(cat))
    inputs = [_qparams(dq) for dq in cat.args[0]]
    assert all(dq.target == DQ for dq in cat.args[0])
    assert inputs == [out, out]
    assert _max_error(model, gm, samples) <= 3 * out[0]


def test_softmax_is_decomposed_and_each_piece_quantized():
    """softmax is rewritten before annotation (etkit_ethosu.decompositions, as ExecuTorch's Arm quantizer does):
    ``e = exp(x - amax(x)); e * reciprocal(sum(e))``, each piece with its own quantization (amax shares its
    input's), so every piece has a TOSA lowering. Numerics against float softmax: within 4 output scales."""
    model = Softmax()
    gm, samples = _quantize(model, [(3, 8)])
    assert not _ops(gm, aten.softmax.int) and not _ops(gm, aten._softmax.default)
    amax, exp = _op(gm, aten.amax.default), _op(gm, aten.exp.default)
    assert _qparams(_output_q(amax)) == _qparams(_input_dq(amax))
    s_exp, zp_exp = _qparams(_output_q(exp))
    assert zp_exp == -128 and s_exp <= 1 / 255 + 1e-6  # exp of a value <= 0 lies in (0, 1]
    for target in (aten.sum.dim_IntList, aten.reciprocal.default, aten.mul.Tensor):
        _output_q(_op(gm, target))
    out, _ = _qparams(_output_q(_op(gm, aten.mul.Tensor)))
    assert _max_error(model, gm, samples) <= 4 * out


def test_matmul_and_sigmoid():
    """matmul: both operands dequantized (the transposed operand shares the graph input's parameters), output
    quantized; sigmoid: own output parameters. Numerics: the matmul result is off by at most ~2 of its output
    steps ``s_mm`` (operand rounding over 5 products plus output rounding), sigmoid's slope is at most 1/4, and
    its own rounding adds up to one output step ``s_sig``: |diff| <= 2 * s_mm / 4 + s_sig."""
    model = MatmulSigmoid()
    gm, samples = _quantize(model, [(2, 4, 5), (2, 4, 5)])
    matmul, transpose = _op(gm, aten.matmul.default), _op(gm, aten.transpose.int)
    _input_dq(matmul, 0)
    assert _input_dq(matmul, 1).args[0] is _output_q(transpose)
    assert _qparams(_output_q(transpose)) == _qparams(_input_dq(transpose))
    sigmoid = _op(gm, aten.sigmoid.default)
    assert _input_dq(sigmoid).args[0] is _output_q(matmul)
    s_mm, _ = _qparams(_output_q(matmul))
    s_sig, _ = _qparams(_output_q(sigmoid))
    assert _max_error(model, gm, samples) <= 2 * s_mm / 4 + s_sig


def test_elementwise_functions_have_own_parameters():
    """gelu, silu, exp, neg, hardswish, tanh: each reads a dequantized input and gets its own output
    quantization (neg too: an affine range [lo, hi] does not hold [-hi, -lo]). Numerics per output:
    |diff| <= max|f'| * s_in / 2 (input rounding) + s_out (output rounding, clamping at the range ends)."""
    class Elementwise(nn.Module):
        def forward(self, x):
            x = F.relu(x)
            return F.gelu(x), F.silu(x), torch.exp(x), torch.neg(x), F.hardswish(x), torch.tanh(x)

    model = Elementwise()
    gm, samples = _quantize(model, [(2, 3, 8)])
    s_in, zp_in = _qparams(_output_q(_op(gm, aten.relu.default)))
    x_max = s_in * (127 - zp_in)
    slopes = {aten.gelu.default: 1.13, aten.silu.default: 1.1, aten.exp.default: float(torch.tensor(x_max).exp()),
              aten.neg.default: 1.0, aten.hardswish.default: 1.5, aten.tanh.default: 1.0}
    bounds = []
    for target, slope in slopes.items():
        node = _op(gm, target)
        assert _qparams(_input_dq(node)) == (s_in, zp_in)
        s_out, zp_out = _qparams(_output_q(node))
        assert (s_out, zp_out) != (s_in, zp_in)
        bounds.append(slope * s_in / 2 + s_out)
    assert _qparams(_output_q(_op(gm, aten.neg.default)))[1] == 127  # range [-max, 0]: zero at the top of int8
    with torch.no_grad():
        for sample in samples:
            for expected, got, bound in zip(model(*sample), gm(*sample), bounds, strict=True):
                assert (expected - got).abs().max().item() <= bound


def test_div_stays_float_and_layer_norm_is_decomposed():
    """div is not annotated: no quantize after it (its inputs may be dequantized outputs of quantized ops).
    layer_norm is rewritten before annotation into mean, sub, mul, add, rsqrt (quantized, a TABLE on the NPU)
    and the affine mul/add. cos, an op the quantizer does not know, is not annotated either: the quantize
    after it is the input quantization of the add that reads it."""
    gm, _ = _quantize(FloatTail(), [(2, 8)])
    div = _op(gm, aten.div.Tensor)
    assert _not_quantized(div) and all(u.op == "output" for u in div.users)
    assert not _ops(gm, aten.layer_norm.default)
    _output_q(_op(gm, aten.rsqrt.default))
    assert len(_ops(gm, aten.mean.dim)) == 2
    cos = _op(gm, aten.cos.default)  # unknown op: reads the float graph input; its reader (add) quantizes
    assert cos.args[0].op == "placeholder" and [u.target for u in cos.users] == [Q]
    assert [u.target for u in _output_q(cos).users] == [DQ]
    # exactly one add reads cos through that quantize/dequantize pair (the unpacking fails otherwise)
    (_cos_add,) = [a for a in _ops(gm, aten.add.Tensor) if a.args[0].target == DQ and a.args[0].args[0].args[0] is cos]


def test_split_pieces_share_input_parameters():
    """``torch.split`` pieces (getitem) keep the split input's parameters."""
    class Split(nn.Module):
        def forward(self, x):
            a, b = torch.split(F.relu(x), 2, dim=1)
            return a * b

    gm, _ = _quantize(Split(), [(1, 4, 3, 3)])
    relu_out = _qparams(_output_q(_op(gm, aten.relu.default)))
    pieces = _ops(gm, operator.getitem)
    assert len(pieces) == 2 and all(_qparams(_output_q(p)) == relu_out for p in pieces)


def test_scalar_operands_are_not_annotated():
    """``fc(x) * 2.0 + 1.0``: mul and add keep their Python scalars, their tensor inputs are dequantized and
    their outputs quantized (each with its own parameters)."""
    model = Scalars()
    gm, samples = _quantize(model, [(3, 4)])
    mul, add = _op(gm, aten.mul.Tensor), _op(gm, aten.add.Tensor)
    assert mul.args[1] == 2.0 and add.args[1] == 1.0
    assert _input_dq(add).args[0] is _output_q(mul)
    scale, _ = _qparams(_output_q(add))
    assert _max_error(model, gm, samples) <= 6 * scale


# --------------------------------------------------------------------------------- scoping and IO

def test_module_name_none_leaves_module_float():
    quantizer = EthosUQuantizer().set_global(get_symmetric_quantization_config())
    quantizer.set_module_name("second", None)
    gm, _ = _quantize(TwoBlocks(), [(2, 8)], quantizer=quantizer)
    first, second = _ops(gm, aten.linear.default)
    _input_dq(first)
    assert first.args[1].target == DQ_CH
    assert second.args[1].op == "get_attr", "the float module's weight must stay float"
    relu_first, relu_second = _ops(gm, aten.relu.default)
    _output_q(relu_first)  # fused into the first linear
    assert _not_quantized(relu_second)


def test_module_type_config_overrides_global():
    """``set_module_type(nn.Linear, per-tensor)`` with a per-channel global config; ``set_module_type(...,
    None)`` leaves every Linear float."""
    quantizer = EthosUQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    quantizer.set_module_type(nn.Linear, get_symmetric_quantization_config(is_per_channel=False))
    gm, _ = _quantize(Mlp(), [(2, 16)], quantizer=quantizer)
    assert [fc.args[1].target for fc in _ops(gm, aten.linear.default)] == [DQ, DQ]

    quantizer = EthosUQuantizer().set_global(get_symmetric_quantization_config())
    quantizer.set_module_type(nn.Linear, None)
    gm, _ = _quantize(Mlp(), [(2, 16)], quantizer=quantizer)
    assert not _ops(gm, DQ_CH)
    assert all(fc.args[1].op == "get_attr" for fc in _ops(gm, aten.linear.default))


def test_set_io_quantizes_float_outputs():
    """With ``set_io`` the float ``div`` output is quantized before the graph output."""
    quantizer = EthosUQuantizer().set_global(get_symmetric_quantization_config())
    quantizer.set_io(get_symmetric_quantization_config())
    gm, _ = _quantize(FloatTail(), [(2, 8)], quantizer=quantizer)
    _output_q(_op(gm, aten.div.Tensor))


# --------------------------------------------------------------------------------- QAT

@pytest.fixture
def conv2d_only_bn_patterns(monkeypatch):
    """torchao's conv + batch-norm QAT fusion (prepare) and folding (convert) export its match patterns for
    conv1d, conv2d, conv_transpose1d and conv_transpose2d, about 20 s in all; the model here has only a
    conv2d, so the other three pattern families are skipped (the conv2d rewrite is torchao's own)."""
    from torchao.quantization.pt2e import qat_utils

    for name in ("_fuse_conv_bn_qat_helper", "_fold_conv_bn_qat_helper"):
        helper = getattr(qat_utils, name, None)
        if helper is None:
            continue

        def only_conv2d(m, conv_fn, *args, _helper=helper, **kwargs):
            return _helper(m, conv_fn, *args, **kwargs) if conv_fn is F.conv2d else m

        monkeypatch.setattr(qat_utils, name, only_conv2d)


def test_qat_conv_bn_relu(conv2d_only_bn_patterns):
    """``prepare_qat_pt2e`` on a training-mode export: fake quantizers train, convert folds the batch norm,
    the ReLU is fused and the weight is per-channel int8. Numerics vs the eval-mode float model (same
    running statistics) within 4 output scales."""
    torch.manual_seed(0)
    model = ConvBnRelu()
    samples = _calibration([(4, 3, 8, 8)], batches=3)
    exported = torch.export.export(model.train(), samples[0]).module()
    quantizer = EthosUQuantizer().set_global(get_symmetric_quantization_config(is_qat=True))
    prepared = prepare_qat_pt2e(exported, quantizer)
    for sample in samples:
        prepared(*sample)  # updates batch-norm statistics and fake-quantizer ranges
    # the float reference: the same parameters and the batch-norm statistics the QAT steps accumulated
    reference = model.state_dict()
    model.load_state_dict({k: v for k, v in prepared.state_dict().items() if k in reference})
    converted = convert_pt2e(prepared)
    assert not _ops(converted, aten.batch_norm.default)
    conv, relu = _op(converted, aten.conv2d.default), _op(converted, aten.relu.default)
    assert list(conv.users) == [relu]
    _input_dq(conv)
    _, _, scales, _ = _weight_dq(converted, conv)
    assert scales.shape == (8,)
    scale, _ = _qparams(_output_q(relu))
    assert _max_error(model.eval(), converted, samples) <= 4 * scale


# --------------------------------------------------------------------------------- annotations

def test_annotations_of_fused_pattern():
    """Directly on the annotated graph: the fused conv has no output spec, the ReLU has the activation spec,
    max_pool2d shares ``(relu, max_pool2d)``."""
    from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return F.max_pool2d(F.relu(self.conv(x)), 2)

    config = get_symmetric_quantization_config()
    gm = torch.export.export(M().eval(), (torch.randn(1, 3, 6, 6),)).module()
    EthosUQuantizer().set_global(config).annotate(gm)
    conv, relu, pool = (_op(gm, t) for t in (aten.conv2d.default, aten.relu.default, aten.max_pool2d.default))
    conv_ann, relu_ann, pool_ann = (n.meta["quantization_annotation"] for n in (conv, relu, pool))
    assert conv_ann.output_qspec is None
    assert conv_ann.input_qspec_map == {conv.args[0]: config.input_activation, conv.args[1]: config.weight}
    assert relu_ann.output_qspec == config.output_activation and not relu_ann.input_qspec_map
    assert isinstance(pool_ann.output_qspec, SharedQuantizationSpec)
    assert pool_ann.output_qspec.edge_or_node == (relu, pool)
