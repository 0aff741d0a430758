"""``CoreMLQuantizer`` (PT2E, 8-bit) and torchao ``quantize_`` (4-bit) programs for Core ML.

Seed page: executorch-docs 042, "Quantization" (Core ML backend). Each PT2E case follows that page:
export, ``prepare_pt2e`` (or ``prepare_qat_pt2e``) with ``CoreMLQuantizer(LinearQuantizerConfig(...))``,
calibrate, ``convert_pt2e``, then export again and lower with ``CoreMLPartitioner`` (iOS17 target).

Accuracy criterion: cosine similarity of the quantized model's output (run in eager: float math
between quantize/dequantize nodes) with the fp32 model's output >= 0.99 for static 8-bit and >= 0.999
for weight-only 8-bit, plus a max-abs error bound relative to the output range. A missing or wrong
scale, zero point or weight layout drops the cosine far below these; 8-bit rounding does not.

Core ML cannot run on Linux, so the Core ML side is checked on the ML Program spec: int8 weights
(``constexpr_affine_dequantize`` with an INT8 ``quantized_data``) and activation ``quantize`` ops for
static configs; int4 data in ``constexpr_blockwise_shift_scale`` for the 4-bit ``quantize_`` flow.
"""
from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

ct = pytest.importorskip("coremltools")
pytest.importorskip("torchao")

from coremltools.optimize.torch.quantization import LinearQuantizerConfig, ModuleLinearQuantizerConfig  # noqa: E402
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e  # noqa: E402
from torchao.quantization.pt2e.quantizer import (FixedQParamsQuantizationSpec, QuantizationSpec,  # noqa: E402
                                                 SharedQuantizationSpec)

from etkit_coreml.quantizer import CoreMLQuantizer  # noqa: E402

qd = torch.ops.quantized_decomposed
aten = torch.ops.aten
STATIC_COSINE, WEIGHT_ONLY_COSINE, INT4_COSINE = 0.99, 0.999, 0.98


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _config(activation_dtype=torch.quint8, **fields) -> LinearQuantizerConfig:
    """The seed page's config: symmetric, qint8 per-channel weights, quint8 (or float32) activations."""
    options = dict(quantization_scheme="symmetric", activation_dtype=activation_dtype, weight_dtype=torch.qint8,
                   weight_per_channel=True)
    options.update(fields)
    return LinearQuantizerConfig(global_config=ModuleLinearQuantizerConfig(**options))


class SmallCNN(nn.Module):
    """conv-bn-relu, max pool, conv-relu6 (module: hardtanh(0, 6)), residual add, global average
    pool, flatten, linear: the shape of the seed page's MobileNet at toy size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.relu6 = nn.ReLU6()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        h = F.max_pool2d(self.relu(self.bn1(self.conv1(x))), 2)
        h = h + self.relu6(self.conv2(h))
        return self.fc(torch.flatten(self.pool(h), 1))


def _small_cnn() -> SmallCNN:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    with torch.no_grad():  # non-trivial batch norm statistics, so folding it matters
        model.bn1.running_mean.uniform_(-0.3, 0.3)
        model.bn1.running_var.uniform_(0.5, 2.0)
        model.bn1.weight.uniform_(0.5, 1.5)
        model.bn1.bias.uniform_(-0.2, 0.2)
    return model


CNN_INPUT = (_randn(0, 1, 3, 16, 16),)


def _quantize(model: nn.Module, inputs: tuple, quantizer, calibration_batches: int = 4):
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    with torch.no_grad():
        for seed in range(calibration_batches):
            prepared(*[_randn(100 + seed, *x.shape) for x in inputs])
        prepared(*inputs)
    return convert_pt2e(prepared)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return F.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


def _calls(gm: torch.fx.GraphModule, target) -> list:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == target]


@pytest.fixture(scope="module")
def static_cnn():
    model = _small_cnn()
    return model, _quantize(model, CNN_INPUT, CoreMLQuantizer(_config()))


@pytest.fixture(scope="module")
def weight_only_cnn():
    model = _small_cnn()
    return model, _quantize(model, CNN_INPUT, CoreMLQuantizer(_config(activation_dtype=torch.float32)))


# ----------------------------------------------------------------------------------- PT2E numerics + graph


def test_static_8bit_cnn_is_close_to_fp32_and_quantizes_activations(static_cnn):
    model, qmodel = static_cnn
    x = _randn(7, 1, 3, 16, 16)
    with torch.no_grad():
        ref, out = model(x), qmodel(x)
    assert _cosine(ref, out) >= STATIC_COSINE
    assert (ref - out).abs().max().item() <= 0.1 * ref.abs().max().item()

    # Weights: int8, one scale per output channel (axis 0), for both convolutions and the linear.
    weights = _calls(qmodel, qd.dequantize_per_channel.default)
    assert len(weights) == 3
    for dq in weights:
        assert dq.args[3] == 0 and dq.args[-1] == torch.int8
    # Activations: the input and the input of every conv / linear are dequantized uint8 values.
    for op in _calls(qmodel, aten.conv2d.default) + _calls(qmodel, aten.linear.default):
        assert op.args[0].target == qd.dequantize_per_tensor.default, op.name
        assert op.args[1].target == qd.dequantize_per_channel.default, op.name
    quants = _calls(qmodel, qd.quantize_per_tensor.default)
    assert quants and all(q.args[-1] == torch.uint8 for q in quants)
    # Batch norm folded into conv1 by prepare_pt2e; relu / relu6 fused (quantized after, not between).
    assert not _calls(qmodel, aten.batch_norm.default)
    relu = _calls(qmodel, aten.relu.default)[0]
    assert relu.args[0].target == aten.conv2d.default
    (q_relu,) = relu.users
    assert q_relu.target == qd.quantize_per_tensor.default
    assert q_relu.args[2] == 0, "relu output is non-negative: affine zero point 0 even when symmetric"
    # The pools reuse their input's parameters: same scale and zero point on both sides.
    for pool in _calls(qmodel, aten.max_pool2d.default) + _calls(qmodel, aten.adaptive_avg_pool2d.default):
        dq_in = pool.args[0]
        (q_out,) = pool.users
        assert dq_in.target == qd.dequantize_per_tensor.default and q_out.target == qd.quantize_per_tensor.default
        assert dq_in.args[1:3] == q_out.args[1:3], pool.name
    # A quantized value feeds its consumers as is: no dequantize -> quantize requantization anywhere.
    requantized = [q.name for q in quants if q.args[0].target == qd.dequantize_per_tensor.default]
    assert not requantized


def test_weight_only_8bit_quantizes_only_weights(weight_only_cnn):
    model, qmodel = weight_only_cnn
    x = _randn(8, 1, 3, 16, 16)
    with torch.no_grad():
        ref, out = model(x), qmodel(x)
    assert _cosine(ref, out) >= WEIGHT_ONLY_COSINE
    assert (ref - out).abs().max().item() <= 0.02 * ref.abs().max().item()
    assert not _calls(qmodel, qd.quantize_per_tensor.default)
    assert not _calls(qmodel, qd.dequantize_per_tensor.default)
    weights = _calls(qmodel, qd.dequantize_per_channel.default)
    assert len(weights) == 3 and all(dq.args[-1] == torch.int8 for dq in weights)
    for op in _calls(qmodel, aten.conv2d.default) + _calls(qmodel, aten.linear.default):
        assert op.args[1].target == qd.dequantize_per_channel.default, op.name


def test_affine_per_tensor_uint8_weights():
    model = _small_cnn()
    config = _config(quantization_scheme="affine", weight_dtype=torch.quint8, weight_per_channel=False,
                     activation_observer="min_max", weight_observer="min_max")
    qmodel = _quantize(model, CNN_INPUT, CoreMLQuantizer(config))
    x = _randn(9, 1, 3, 16, 16)
    with torch.no_grad():
        assert _cosine(model(x), qmodel(x)) >= STATIC_COSINE
    assert not _calls(qmodel, qd.dequantize_per_channel.default)
    weights = [n for n in _calls(qmodel, qd.dequantize_per_tensor.default) if n.args[0].op == "get_attr"]
    assert len(weights) == 3 and all(dq.args[-1] == torch.uint8 for dq in weights)


def _fake_quant(gm: torch.fx.GraphModule, node):
    """The fake-quantize module ``node`` calls (``None`` if ``node`` is not such a call)."""
    from torchao.quantization.pt2e import FakeQuantizeBase

    if isinstance(node, torch.fx.Node) and node.op == "call_module":
        module = gm.get_submodule(node.target)
        if isinstance(module, FakeQuantizeBase):
            return module
    return None


def test_qat_prepare_conv_bn_relu_keeps_annotations_through_bn_fusion():
    """prepare_qat_pt2e fuses conv + batch_norm after annotating: the weight fake-quantizer must see the
    bn-scaled weight (int8 per channel), the input a uint8 one, and the only output fake-quantizer sits
    after the relu -- nothing between the convolution and the batch norm.

    (convert_pt2e of a conv-bn QAT model is not run here: torchao's ``_fold_conv_bn_qat`` traces ~100
    pattern graphs, ~25 s on this machine; ``test_qat_convert`` covers QAT conversion without bn.)"""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    x = _randn(1, 4, 3, 8, 8)
    prepared = prepare_qat_pt2e(torch.export.export(model, (x,)).module(), CoreMLQuantizer(_config()))
    (conv,) = _calls(prepared, aten.conv2d.default)
    input_fq, weight_fq = _fake_quant(prepared, conv.args[0]), _fake_quant(prepared, conv.args[1])
    assert input_fq is not None and input_fq.dtype == torch.uint8
    assert weight_fq is not None and weight_fq.dtype == torch.int8
    assert weight_fq.qscheme == torch.per_channel_symmetric and weight_fq.ch_axis == 0
    assert conv.args[1].args[0].target == aten.mul.Tensor, "weight fake-quantized after the bn scaling"
    (bn,) = _calls(prepared, aten.batch_norm.default)
    (relu,) = _calls(prepared, aten.relu.default)
    assert relu.args[0] is bn
    (out_fq,) = relu.users
    assert _fake_quant(prepared, out_fq).qscheme == torch.per_tensor_affine
    between = [n for n in prepared.graph.nodes if _fake_quant(prepared, n) is not None
               and n not in (conv.args[0], conv.args[1], out_fq)]
    assert not between, between
    optimizer = torch.optim.SGD(prepared.parameters(), lr=1e-3)
    loss = prepared(x).square().mean()
    loss.backward()
    optimizer.step()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in prepared.parameters())


def test_qat_convert():
    """prepare_qat_pt2e -> a few training steps -> convert_pt2e: the converted model matches the
    fake-quantized one and holds int8 per-channel weights and uint8 activations."""
    from torchao.quantization.pt2e import move_exported_model_to_eval

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 4))
    x = _randn(1, 4, 3, 8, 8)
    prepared = prepare_qat_pt2e(torch.export.export(model, (x,)).module(), CoreMLQuantizer(_config()))
    optimizer = torch.optim.SGD(prepared.parameters(), lr=1e-3)
    for seed in range(2):
        loss = prepared(_randn(10 + seed, 4, 3, 8, 8)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    move_exported_model_to_eval(prepared)
    with torch.no_grad():
        fake_quantized = prepared(x)
    qmodel = convert_pt2e(prepared)
    with torch.no_grad():
        assert _cosine(fake_quantized, qmodel(x)) >= STATIC_COSINE
    assert [dq.args[-1] for dq in _calls(qmodel, qd.dequantize_per_channel.default)] == [torch.int8, torch.int8]
    for op in _calls(qmodel, aten.conv2d.default) + _calls(qmodel, aten.linear.default):
        assert op.args[0].target == qd.dequantize_per_tensor.default, op.name


# ----------------------------------------------------------------------------------- annotation rules


class Fn(nn.Module):
    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            setattr(self, name, module)

    def forward(self, *xs):
        return self.fn(self, *xs)


def _annotate(model: nn.Module, inputs: tuple, config=None) -> torch.fx.GraphModule:
    gm = torch.export.export(model, inputs).module()
    CoreMLQuantizer(config if config is not None else _config()).annotate(gm)
    return gm


def _ann(gm, target):
    (node,) = _calls(gm, target)
    return node, node.meta.get("quantization_annotation")


X4 = _randn(1, 1, 4, 6, 6)
PATTERNS = {
    # name: (model, inputs, anchor op, op carrying the output spec, expected output spec kind)
    "conv1d_relu": (Fn(lambda s, x: torch.relu(s.c(x)), c=nn.Conv1d(4, 4, 3)), (_randn(2, 1, 4, 8),),
                    aten.conv1d.default, aten.relu.default, "affine"),
    "conv2d_hardtanh": (Fn(lambda s, x: F.hardtanh(s.c(x), 0.0, 6.0), c=nn.Conv2d(4, 4, 3)), (X4,),
                        aten.conv2d.default, aten.hardtanh.default, "affine"),
    "conv2d_sigmoid": (Fn(lambda s, x: torch.sigmoid(s.c(x)), c=nn.Conv2d(4, 4, 1)), (X4,),
                       aten.conv2d.default, aten.sigmoid.default, "fixed"),
    "conv2d_silu": (Fn(lambda s, x: F.silu(s.c(x)), c=nn.Conv2d(4, 4, 1)), (X4,),
                    aten.conv2d.default, aten.silu.default, "symmetric"),
    "linear_gelu": (Fn(lambda s, x: F.gelu(s.l(x)), l=nn.Linear(6, 5)), (_randn(3, 2, 6),),
                    aten.linear.default, aten.gelu.default, "symmetric"),
    "linear_tanh": (Fn(lambda s, x: torch.tanh(s.l(x)), l=nn.Linear(6, 5)), (_randn(3, 2, 6),),
                    aten.linear.default, aten.tanh.default, "fixed"),
    "linear": (Fn(lambda s, x: s.l(x), l=nn.Linear(6, 5)), (_randn(3, 2, 6),),
               aten.linear.default, aten.linear.default, "symmetric"),
    "add_relu": (Fn(lambda s, a, b: torch.relu(a + b)), (_randn(4, 2, 3), _randn(5, 2, 3)),
                 aten.add.Tensor, aten.relu.default, "affine"),
    "mul": (Fn(lambda s, a, b: a * b), (_randn(4, 2, 3), _randn(5, 2, 3)),
            aten.mul.Tensor, aten.mul.Tensor, "symmetric"),
    "matmul": (Fn(lambda s, a, b: a @ b), (_randn(4, 2, 3), _randn(5, 3, 2)),
               aten.matmul.default, aten.matmul.default, "symmetric"),
    "bmm_relu": (Fn(lambda s, a, b: F.relu(torch.bmm(a, b))), (_randn(4, 2, 2, 3), _randn(5, 2, 3, 2)),
                 aten.bmm.default, aten.relu.default, "affine"),
}


@pytest.mark.parametrize("case", sorted(PATTERNS))
def test_pattern_annotation(case):
    model, inputs, anchor_op, output_op, kind = PATTERNS[case]
    gm = _annotate(model, inputs)
    anchor, ann = _ann(gm, anchor_op)
    assert ann is not None and ann._annotated, f"{anchor_op} not annotated"
    tensor_inputs = [a for a in anchor.args[:2] if isinstance(a, torch.fx.Node)]
    for a in tensor_inputs:
        assert a in ann.input_qspec_map
    if anchor_op in (aten.conv1d.default, aten.conv2d.default, aten.linear.default):
        weight_spec = ann.input_qspec_map[anchor.args[1]]
        assert weight_spec.dtype == torch.int8 and weight_spec.qscheme == torch.per_channel_symmetric
        assert weight_spec.ch_axis == 0
        assert ann.input_qspec_map[anchor.args[0]].dtype == torch.uint8
        assert ann.input_qspec_map[anchor.args[2]] is None, "bias stays float"
    else:
        assert all(ann.input_qspec_map[a].dtype == torch.uint8 for a in tensor_inputs)
    out_node, out_ann = _ann(gm, output_op)
    if out_node is not anchor:
        assert ann.output_qspec is None, "fused activation: nothing quantized between the op and it"
    spec = out_ann.output_qspec
    if kind == "fixed":
        assert isinstance(spec, FixedQParamsQuantizationSpec)
        assert spec.scale == (1 / 256 if output_op == aten.sigmoid.default else 2 / 256)
    else:
        assert isinstance(spec, QuantizationSpec) and spec.dtype == torch.uint8
        assert spec.qscheme == {"affine": torch.per_tensor_affine, "symmetric": torch.per_tensor_symmetric}[kind]


def test_shared_parameter_ops_and_cat():
    model = Fn(lambda s, x: torch.cat([F.avg_pool2d(s.a(x), 2), F.max_pool2d(s.b(x), 2)], 1).mean(-1),
               a=nn.Conv2d(4, 4, 1), b=nn.Conv2d(4, 4, 1))
    gm = _annotate(model, (X4,))
    for op in (aten.avg_pool2d.default, aten.max_pool2d.default):
        node, ann = _ann(gm, op)
        producer = node.args[0]
        assert ann.input_qspec_map == {producer: SharedQuantizationSpec(producer)}
        assert ann.output_qspec == SharedQuantizationSpec(producer)
    cat, ann = _ann(gm, aten.cat.default)
    first, second = cat.args[0]
    assert isinstance(ann.output_qspec, SharedQuantizationSpec) and ann.output_qspec.edge_or_node == (first, cat)
    assert ann.input_qspec_map[second] == SharedQuantizationSpec((first, cat))
    mean, ann = _ann(gm, aten.mean.dim)
    assert ann.output_qspec == SharedQuantizationSpec(cat)
    # ... and the annotated graph prepares, calibrates and converts.
    qmodel = _quantize(model, (X4,), CoreMLQuantizer(_config()), calibration_batches=2)
    with torch.no_grad():
        assert _cosine(model(X4), qmodel(X4)) >= STATIC_COSINE


def test_pool_of_unquantized_value_is_left_alone():
    gm = _annotate(Fn(lambda s, x: F.max_pool2d(x, 2)), (X4,))
    _, ann = _ann(gm, aten.max_pool2d.default)
    assert ann is None


def test_weight_only_annotates_no_activation():
    gm = _annotate(Fn(lambda s, x: torch.relu(s.c(x)) + x, c=nn.Conv2d(4, 4, 1)), (X4,),
                   _config(activation_dtype=torch.float32))
    conv, ann = _ann(gm, aten.conv2d.default)
    assert ann.input_qspec_map[conv.args[0]] is None and ann.output_qspec is None
    assert ann.input_qspec_map[conv.args[1]].dtype == torch.int8
    for op in (aten.relu.default, aten.add.Tensor):
        _, ann = _ann(gm, op)
        assert ann is None or (ann.output_qspec is None and not any(ann.input_qspec_map.values()))


def test_module_name_and_type_configs():
    """Name configs win over type configs, which win over the global config; ``None`` keeps float."""
    model = Fn(lambda s, x: s.fc2(s.fc1(torch.flatten(s.conv(x), 1))),
               conv=nn.Conv2d(4, 2, 1), fc1=nn.Linear(72, 8), fc2=nn.Linear(8, 3))
    weight_only = ModuleLinearQuantizerConfig(quantization_scheme="symmetric", activation_dtype=torch.float32)
    config = LinearQuantizerConfig(
        global_config=ModuleLinearQuantizerConfig(quantization_scheme="symmetric"),
        module_type_configs={nn.Linear: weight_only},
        module_name_configs={"fc2": None})
    gm = _annotate(model, (X4,), config)
    conv, fc1, fc2 = (_calls(gm, aten.conv2d.default) + _calls(gm, aten.linear.default))
    conv_ann = conv.meta["quantization_annotation"]
    assert conv_ann.input_qspec_map[conv.args[0]] is not None  # global: static
    fc1_ann = fc1.meta["quantization_annotation"]
    assert fc1_ann.input_qspec_map[fc1.args[0]] is None and fc1_ann.input_qspec_map[fc1.args[1]] is not None
    assert "quantization_annotation" not in fc2.meta  # named None: float

    # Type keys given by name and function keys select the same way.
    by_name = LinearQuantizerConfig(global_config=None, module_type_configs={"Conv2d": ModuleLinearQuantizerConfig()})
    gm = _annotate(model, (X4,), by_name)
    assert [("quantization_annotation" in n.meta) for n in _calls(gm, aten.conv2d.default) +
            _calls(gm, aten.linear.default)] == [True, False, False]
    by_fn = LinearQuantizerConfig(global_config=ModuleLinearQuantizerConfig(),
                                  module_type_configs={operator.add: None})
    gm = _annotate(Fn(lambda s, a, b: (a + b) * b), (_randn(1, 3), _randn(2, 3)), by_fn)
    assert "quantization_annotation" not in _calls(gm, aten.add.Tensor)[0].meta
    assert "quantization_annotation" in _calls(gm, aten.mul.Tensor)[0].meta


@pytest.mark.parametrize("fields, field", [
    (dict(milestones=[0, 1, 2, 3]), "milestones"),
    (dict(weight_dtype="qint4"), "weight_dtype"),
    (dict(weight_observer="ema_min_max"), "weight_observer"),
    (dict(activation_observer="ema_min_max"), "activation_observer"),
    (dict(algorithm="learnable"), "algorithm"),
])
def test_unsupported_fields_raise(fields, field):
    options = dict(quantization_scheme="symmetric")
    options.update(fields)
    with pytest.raises(ValueError, match=field):
        CoreMLQuantizer(LinearQuantizerConfig(global_config=ModuleLinearQuantizerConfig(**options)))


def test_unsupported_top_level_fields_and_types_raise():
    with pytest.raises(ValueError, match="preserved_attributes"):
        CoreMLQuantizer(LinearQuantizerConfig(preserved_attributes=["foo"]))
    with pytest.raises(ValueError, match="non_traceable_module_names"):
        CoreMLQuantizer(LinearQuantizerConfig(non_traceable_module_names=["foo"]))
    with pytest.raises(TypeError, match="LinearQuantizerConfig"):
        CoreMLQuantizer(ModuleLinearQuantizerConfig())
    # A float weight dtype disables quantization (coremltools' meaning), it does not raise.
    gm = _annotate(Fn(lambda s, x: s.l(x), l=nn.Linear(3, 2)), (_randn(0, 1, 3),),
                   _config(weight_dtype=torch.float32))
    assert "quantization_annotation" not in _calls(gm, aten.linear.default)[0].meta


# ----------------------------------------------------------------------------------- Core ML programs


def _specs(target):
    from etkit_coreml import CoreMLBackend
    return CoreMLBackend.generate_compile_specs(minimum_deployment_target=target)


def _mil_ops(mlmodel) -> list[tuple[str, set[str]]]:
    """``(op type, names of the MIL dtypes of its inline values, attributes and outputs)`` per op."""
    from coremltools.proto import MIL_pb2

    def name(value_type):
        return MIL_pb2.DataType.Name(value_type.tensorType.dataType)

    ops = []
    for function in mlmodel.get_spec().mlProgram.functions.values():
        for block in function.block_specializations.values():
            for op in block.operations:
                dtypes = {name(v.type) for k, v in op.attributes.items() if k != "name"}
                dtypes |= {name(a.value.type) for b in op.inputs.values() for a in b.arguments if a.HasField("value")}
                dtypes |= {name(o.type) for o in op.outputs}
                ops.append((op.type, dtypes))
    return ops


def _lowered_modules(manager) -> list:
    gm = manager.exported_program().graph_module
    return [getattr(gm, n.target) for n in gm.graph.nodes
            if n.op == "get_attr" and n.target.startswith("lowered_module_")]


def _assert_fully_delegated(manager) -> None:
    gm = manager.exported_program().graph_module
    outside = [n.target for n in gm.graph.nodes if n.op == "call_function"
               and n.target is not operator.getitem and "executorch_call_delegate" not in str(n.target)]
    assert not outside, f"not delegated: {outside}"
    assert len(_lowered_modules(manager)) == 1


@pytest.mark.parametrize("mode", ["static", "weight_only"])
def test_quantized_cnn_converts_to_int8_ml_program(mode, static_cnn, weight_only_cnn):
    """The converted graph (Edge dialect) becomes an ML Program with int8 weights, and activation
    quantize/dequantize ops only for the static config."""
    import etkit
    from etkit_coreml.preprocess import convert_to_mlmodel

    _, qmodel = static_cnn if mode == "static" else weight_only_cnn
    edge = etkit.to_edge(torch.export.export(qmodel, CNN_INPUT)).exported_program()
    ops = _mil_ops(convert_to_mlmodel(edge, _specs(ct.target.iOS17)))
    int8_weights = [d for t, d in ops if t == "constexpr_affine_dequantize" and "INT8" in d]
    assert len(int8_weights) == 3, ops
    quantize_ops = [d for t, d in ops if t == "quantize"]
    if mode == "static":
        assert quantize_ops and all(d & {"INT8", "UINT8"} for d in quantize_ops)
        assert any(t == "dequantize" for t, _ in ops)
    else:
        assert not quantize_ops and not any(t == "dequantize" for t, _ in ops)


@pytest.mark.parametrize("mode", ["static", "weight_only"])
def test_quantized_cnn_lowers_whole_to_coreml(mode, static_cnn, weight_only_cnn, tmp_path):
    """The seed page's flow end to end: the whole quantized model in one Core ML delegate with int8 weights."""
    import etkit
    from etkit_coreml import CoreMLPartitioner, mlmodel_from_payload

    _, qmodel = static_cnn if mode == "static" else weight_only_cnn
    manager = etkit.to_edge_transform_and_lower(
        torch.export.export(qmodel, CNN_INPUT),
        partitioner=[CoreMLPartitioner(compile_specs=_specs(ct.target.iOS17))])
    _assert_fully_delegated(manager)
    (lowered,) = _lowered_modules(manager)
    mlmodel, _ = mlmodel_from_payload(bytes(lowered.processed_bytes), workdir=tmp_path)
    ops = _mil_ops(mlmodel)
    assert len([d for t, d in ops if t == "constexpr_affine_dequantize" and "INT8" in d]) == 3
    assert any(t == "quantize" for t, _ in ops) == (mode == "static")


def test_int4_quantize_linear_lowers_with_4bit_weights(tmp_path):
    """Seed page, "LLM quantization with quantize_": IntxWeightOnlyConfig(int4, PerGroup(32)) on linears,
    lowered for iOS18, keeps 4-bit weights in the Core ML program."""
    import etkit
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import IntxWeightOnlyConfig, quantize_

    from etkit_coreml import CoreMLPartitioner, mlmodel_from_payload

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16)).eval()
    x = _randn(3, 2, 64)
    with torch.no_grad():
        ref = model(x)
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    with torch.no_grad():
        assert _cosine(ref, model(x)) >= INT4_COSINE
    manager = etkit.to_edge_transform_and_lower(
        torch.export.export(model, (x,)), partitioner=[CoreMLPartitioner(compile_specs=_specs(ct.target.iOS18))])
    _assert_fully_delegated(manager)
    (lowered,) = _lowered_modules(manager)
    mlmodel, _ = mlmodel_from_payload(bytes(lowered.processed_bytes), workdir=tmp_path)
    ops = _mil_ops(mlmodel)
    four_bit = [d for t, d in ops if t == "constexpr_blockwise_shift_scale" and d & {"INT4", "UINT4"}]
    assert len(four_bit) == 2, ops
