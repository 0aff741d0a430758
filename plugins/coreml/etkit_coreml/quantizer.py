"""``CoreMLQuantizer``: 8-bit PT2E quantization for the Core ML backend, configured by coremltools'
``LinearQuantizerConfig``.

Seed page: "Quantization" of the Core ML backend (executorch-docs 042, "8-bit Quantization using the
PT2E Flow"). Used exactly as that page shows::

    import coremltools as ct
    import etkit
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from etkit_coreml import CoreMLBackend, CoreMLPartitioner, CoreMLQuantizer

    config = ct.optimize.torch.quantization.LinearQuantizerConfig(
        global_config=ct.optimize.torch.quantization.ModuleLinearQuantizerConfig(
            quantization_scheme="symmetric", activation_dtype=torch.quint8,
            weight_dtype=torch.qint8, weight_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), CoreMLQuantizer(config))
    prepared(*calibration_inputs)             # at least one sample, even for weight-only configs
    quantized = convert_pt2e(prepared)        # a float graph with quantize/dequantize nodes
    program = etkit.to_edge_transform_and_lower(
        torch.export.export(quantized, inputs),
        partitioner=[CoreMLPartitioner(compile_specs=CoreMLBackend.generate_compile_specs(
            minimum_deployment_target=ct.target.iOS17))])   # quantize/dequantize need iOS17+

``prepare_qat_pt2e`` works with the same quantizer (quantization-aware training): every observer is
wrapped in a fake-quantize module, so the prepared model simulates the quantization in its forward
pass (also during calibration in the post-training flow, as coremltools' own quantizer does).

coremltools ships a quantizer with this name, built on ``torch.ao.quantization.quantizer``, which
torch 2.14 no longer has; this one reads the same config object and applies coremltools' annotation
rules on ``torchao.quantization.pt2e.quantizer``, plus cat, bmm / mm, fixed parameters for sigmoid /
tanh outputs, and parameter sharing between a quantized output and the ops reading it.

What gets annotated
-------------------
Walking the graph in order, each node is quantized with the config of its scope (see
:class:`CoreMLQuantizer`):

* **conv1d / conv2d / conv3d and linear** (``aten.conv{1,2,3}d``, ``aten.linear``): input activation,
  weight (``weight_dtype``, per output channel = axis 0 when ``weight_per_channel``), bias left float.
  The pattern extends through a ``batch_norm`` (present in QAT graphs; ``prepare_pt2e`` folds it into
  the convolution / linear before annotating) and one activation (relu, relu6, hardtanh, leaky_relu,
  silu, elu, celu, selu, mish, hardswish, hardsigmoid, gelu, sigmoid, log_sigmoid, tanh, in-place
  forms too) when each is the only user of the previous node; the pattern's output is quantized
  once, after its last node.
* **add / mul** (``aten.add.Tensor``, ``aten.mul.Tensor`` and in-place forms) and **matmul / bmm /
  mm**: every float tensor input and the output (again through one fused activation).
* **cat**: all inputs and the output share one set of quantization parameters.
* **shared-parameter ops** -- max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d,
  ``mean.dim``, flatten: when their input is already quantized, input and output reuse that input's
  parameters (no requantization).

An input produced by an already quantized node reuses that node's parameters. Activation outputs with
a known range get better parameters: relu / relu6 / ``hardtanh(min_val >= 0)`` outputs use affine
parameters even under the symmetric scheme (zero point 0 instead of 128); sigmoid / hardsigmoid
outputs use the fixed scale 1/256 and zero point 0, tanh outputs scale 2/256 and zero point 128.

Nothing else is quantized (e.g. softmax, layer_norm, standalone activations): such ops read the
dequantized float value.

Tensor dtypes in the converted graph: activations ``uint8`` per tensor (``quantize_per_tensor`` /
``dequantize_per_tensor``), weights ``int8`` or ``uint8`` per tensor or per channel (with
``convert_pt2e``'s default ``fold_quantize=True`` the weight is stored already quantized, followed by
``dequantize_per_channel`` / ``dequantize_per_tensor``). For an iOS17 target coremltools turns the
weight dequantizations into ``constexpr_affine_dequantize`` ops holding the int8 / uint8 data and the
activation pairs into ``quantize`` / ``dequantize`` ops (which need iOS17).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import (FakeQuantize, MinMaxObserver, MovingAverageMinMaxObserver,
                                       MovingAveragePerChannelMinMaxObserver, PerChannelMinMaxObserver)
from torchao.quantization.pt2e.quantizer import (FixedQParamsQuantizationSpec, QuantizationAnnotation,
                                                 QuantizationSpec, QuantizationSpecBase, Quantizer,
                                                 SharedQuantizationSpec, get_module_name_filter)

if TYPE_CHECKING:  # coremltools is imported on first use: it is slow to import
    from coremltools.optimize.torch.quantization import LinearQuantizerConfig, ModuleLinearQuantizerConfig

__all__ = ["CoreMLQuantizer"]

aten = torch.ops.aten
_KEY = "quantization_annotation"

# ----------------------------------------------------------------------------------- op tables

_WEIGHTED = {aten.conv1d.default, aten.conv2d.default, aten.conv3d.default, aten.linear.default}
_BATCH_NORM = {aten.batch_norm.default}
_BINARY = {aten.add.Tensor, aten.add_.Tensor, aten.mul.Tensor, aten.mul_.Tensor,
           aten.matmul.default, aten.bmm.default, aten.mm.default}
_CAT = {aten.cat.default}
_SHARES_INPUT = {aten.max_pool1d.default, aten.max_pool2d.default, aten.max_pool3d.default,
                 aten.avg_pool1d.default, aten.avg_pool2d.default, aten.avg_pool3d.default,
                 aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default,
                 aten.adaptive_avg_pool3d.default, aten.mean.dim, aten.flatten.using_ints}


def _both(*names: str) -> set:
    """The out-of-place and in-place overloads of each named aten op (in-place when it exists)."""
    ops = set()
    for name in names:
        ops.add(getattr(aten, name).default)
        inplace = getattr(aten, name + "_", None)
        if inplace is not None:
            ops.add(inplace.default)
    return ops


#: Activations fused into the output of the op before them (coremltools' list).
_ACTIVATIONS = _both("relu", "relu6", "hardtanh", "leaky_relu", "silu", "elu", "celu", "selu", "mish",
                     "hardswish", "hardsigmoid", "gelu", "sigmoid", "log_sigmoid", "tanh")
_RELU = _both("relu", "relu6")
_HARDTANH = _both("hardtanh")
_SIGMOID_RANGE = _both("sigmoid", "hardsigmoid")  # outputs in [0, 1]
_TANH_RANGE = _both("tanh")  # outputs in [-1, 1]

# ----------------------------------------------------------------------------------- config -> specs


@dataclasses.dataclass(frozen=True)
class _Specs:
    """The quantization specs of one config scope; ``activation is None`` means weight-only."""

    activation: Optional[QuantizationSpec]
    weight: QuantizationSpec


def _observer_name(config: "ModuleLinearQuantizerConfig", field: str, where: str) -> str:
    name = getattr(config, field).value
    if name not in ("moving_average_min_max", "min_max"):
        raise ValueError(
            f"{where}: {field}={name!r} is not supported by etkit's CoreMLQuantizer: coremltools' "
            f"EMA observer is built on torch.ao.quantization and cannot run in torchao's PT2E flow; use "
            f"'moving_average_min_max' or 'min_max'")
    return name


def _specs_from_config(config: Optional["ModuleLinearQuantizerConfig"], where: str) -> Optional[_Specs]:
    """Quantization specs for one ``ModuleLinearQuantizerConfig``; ``None``: leave the scope in float.

    Raises:
        ValueError: a field this quantizer cannot honour; the message names it and ``where``.
    """
    if config is None:
        return None
    from coremltools.optimize.torch.quantization import ModuleLinearQuantizerConfig

    if not isinstance(config, ModuleLinearQuantizerConfig):
        raise TypeError(f"{where} must be a coremltools ModuleLinearQuantizerConfig or None, "
                        f"not {type(config).__name__}")
    if config.algorithm != "vanilla":
        raise ValueError(f"{where}: algorithm={config.algorithm!r} is not supported by etkit's CoreMLQuantizer "
                         f"(only 'vanilla': observers with fake quantization)")
    if config.milestones is not None:
        raise ValueError(
            f"{where}: milestones={config.milestones} is not supported: milestones schedule coremltools' "
            f"eager LinearQuantizer.step(); in the PT2E flow, switch observers and fake quantization on the "
            f"prepared model with torchao.quantization.pt2e's enable_observer / disable_observer / "
            f"enable_fake_quant / disable_fake_quant (model.apply(...))")
    if config.weight_dtype == torch.float32:
        return None  # coremltools: a float weight dtype disables quantization of the scope altogether
    if config.weight_n_bits != 8:
        raise ValueError(
            f"{where}: weight_dtype={config.weight_dtype!r} ({config.weight_n_bits}-bit) is not supported by the "
            f"PT2E flow, which quantizes to 8 bits only; for 4-bit weights use torchao's quantize_ with "
            f"IntxWeightOnlyConfig(weight_dtype=torch.int4, ...) and minimum_deployment_target iOS18")
    if config.weight_dtype not in (torch.qint8, torch.quint8):
        raise ValueError(f"{where}: weight_dtype={config.weight_dtype!r} is not supported "
                         f"(expected torch.qint8, torch.quint8 or torch.float32)")
    symmetric = config.quantization_scheme.value == "symmetric"

    activation = None
    if config.activation_dtype != torch.float32:  # coremltools allows only quint8 besides float32
        observer = {"moving_average_min_max": MovingAverageMinMaxObserver, "min_max": MinMaxObserver}[
            _observer_name(config, "activation_observer", where)]
        activation = QuantizationSpec(
            dtype=torch.uint8, observer_or_fake_quant_ctr=FakeQuantize.with_args(observer=observer),
            qscheme=torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine)

    per_channel = config.weight_per_channel
    observer = {("moving_average_min_max", False): MovingAverageMinMaxObserver,
                ("min_max", False): MinMaxObserver,
                ("moving_average_min_max", True): MovingAveragePerChannelMinMaxObserver.with_args(ch_axis=0),
                ("min_max", True): PerChannelMinMaxObserver.with_args(ch_axis=0)}[
        (_observer_name(config, "weight_observer", where), per_channel)]
    if per_channel:
        qscheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
    else:
        qscheme = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
    weight = QuantizationSpec(dtype=torch.int8 if config.weight_dtype == torch.qint8 else torch.uint8,
                              observer_or_fake_quant_ctr=FakeQuantize.with_args(observer=observer),
                              qscheme=qscheme, ch_axis=0 if per_channel else None)
    return _Specs(activation, weight)


# ----------------------------------------------------------------------------------- scope filters

def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', t)}"


def _module_type_filter(key: Any) -> Callable[[Node], bool]:
    """Whether a node was produced inside a module of type ``key`` (a class, or its name), or -- for a
    function key such as ``torch.add`` or ``operator.add`` -- by a call of a function of that name
    (torch.export records it as ``torch_fn``; ``source_fn_stack`` when present)."""
    if isinstance(key, type) or isinstance(key, str):
        want = _type_name(key)

        def by_type(node: Node) -> bool:
            for _, t in node.meta.get("nn_module_stack", {}).values():
                name = _type_name(t)
                if name == want or (isinstance(key, str) and name.endswith("." + key)):
                    return True
            return False

        return by_type

    fn_name = getattr(key, "__name__", None)

    def by_function(node: Node) -> bool:
        if any(fn is key for _, fn in node.meta.get("source_fn_stack", None) or []):
            return True
        torch_fn = node.meta.get("torch_fn")
        return bool(fn_name and torch_fn and str(torch_fn[1]).rsplit(".", 1)[-1] == fn_name)

    return by_function


# ----------------------------------------------------------------------------------- helpers

def _is_float_tensor(arg: Any) -> bool:
    val = arg.meta.get("val") if isinstance(arg, Node) else None
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _annotated(node: Node) -> bool:
    annotation = node.meta.get(_KEY)
    return annotation is not None and annotation._annotated


def _output_spec_of(node: Node) -> Optional[QuantizationSpecBase]:
    annotation = node.meta.get(_KEY)
    return annotation.output_qspec if annotation is not None else None


def _sole_user(node: Node, targets: set) -> Optional[Node]:
    """``node``'s only user when it is a call of one of ``targets`` not annotated yet."""
    users = list(node.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target in targets and not _annotated(users[0]):
        return users[0]
    return None


def _arg(node: Node, index: int, name: str, default: Any) -> Any:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


class CoreMLQuantizer(Quantizer):
    """PT2E quantizer for Core ML, configured like coremltools' ``CoreMLQuantizer`` (seed page 042,
    "Quantization"; the annotated patterns are listed in the module docstring).

    Args:
        config: a ``coremltools.optimize.torch.quantization.LinearQuantizerConfig``; ``None`` is its
            default (symmetric, ``quint8`` activations, ``qint8`` per-channel weights). Scopes, in
            priority order (coremltools' order): ``module_name_configs`` (in their order; a name matches
            the nodes of that submodule and of everything inside it), ``module_type_configs`` (a module
            class or its name, or a function such as ``torch.add`` / ``operator.add``), then
            ``global_config``. Each op takes the config of the scope of its anchor node (the conv,
            linear, add, ... -- not its weight or fused activation); a ``None`` config, or one with
            ``weight_dtype=torch.float32``, leaves that scope in float.

    Config fields, per ``ModuleLinearQuantizerConfig``:

    * ``quantization_scheme``: ``"symmetric"`` (weights: zero point 0; activations: zero point 128,
      or 0 after relu-like ops) or ``"affine"`` (zero points from the observed range).
    * ``activation_dtype``: ``torch.quint8`` -> activations quantized to ``uint8`` per tensor
      (static quantization; needs calibration); ``torch.float32`` -> weight-only quantization.
    * ``weight_dtype``: ``torch.qint8`` -> ``int8`` weights, ``torch.quint8`` -> ``uint8`` weights,
      ``torch.float32`` -> nothing in the scope is quantized.
    * ``weight_per_channel``: one scale (and zero point) per output channel, axis 0 of the weight of
      conv (``[out, in/groups, *kernel]``) and linear (``[out, in]``); else one per tensor.
    * ``activation_observer`` / ``weight_observer``: ``"moving_average_min_max"`` (default) or
      ``"min_max"``; each observer is wrapped in a torchao ``FakeQuantize``.

    Raises:
        TypeError: ``config`` is not a ``LinearQuantizerConfig`` (or a scope's config is not a
            ``ModuleLinearQuantizerConfig``).
        ValueError: a field with no meaning in the PT2E flow, naming it -- ``milestones`` (QAT
            scheduling of coremltools' eager quantizer), ``algorithm="learnable"``, a weight dtype of
            other than 8 bits (``qint4`` / ``quint4``; 4-bit weights go through ``quantize_``, see the
            seed page), an ``"ema_min_max"`` observer (a ``torch.ao`` observer torchao cannot use),
            non-empty ``non_traceable_module_names`` or ``preserved_attributes`` (eager-mode options).
    """

    def __init__(self, config: Optional["LinearQuantizerConfig"] = None) -> None:
        from coremltools.optimize.torch.quantization import LinearQuantizerConfig

        if config is None:
            config = LinearQuantizerConfig()
        if not isinstance(config, LinearQuantizerConfig):
            raise TypeError(f"config must be a coremltools.optimize.torch.quantization.LinearQuantizerConfig or "
                            f"None, not {type(config).__name__}")
        for field in ("non_traceable_module_names", "preserved_attributes"):
            if getattr(config, field):
                raise ValueError(f"LinearQuantizerConfig.{field}={getattr(config, field)!r} is not supported: it "
                                 f"configures coremltools' eager LinearQuantizer; PT2E quantizes an exported graph")
        self.config = config
        self._name_scopes = [(get_module_name_filter(name),
                              _specs_from_config(cfg, f"module_name_configs[{name!r}]"))
                             for name, cfg in config.module_name_configs.items()]
        self._type_scopes = [(_module_type_filter(key),
                              _specs_from_config(cfg, f"module_type_configs[{_type_name(key)!r}]"))
                             for key, cfg in config.module_type_configs.items()]
        self._global = _specs_from_config(config.global_config, "global_config")

    # ---- Quantizer API -----------------------------------------------------------------------

    def annotate(self, model: GraphModule) -> GraphModule:
        """Attach ``quantization_annotation`` metadata to the nodes of ``model`` (in place) and return it.

        Nodes annotated before (e.g. by another quantizer composed with this one) are left alone.
        """
        for node in list(model.graph.nodes):
            if node.op != "call_function" or _annotated(node):
                continue
            target = node.target
            if target in _WEIGHTED:
                self._annotate_weighted(node)
            elif target in _BINARY:
                self._annotate_binary(node)
            elif target in _CAT:
                self._annotate_cat(node)
            elif target in _SHARES_INPUT:
                self._annotate_shared(node)
        return model

    def validate(self, model: GraphModule) -> None:
        """Nothing to check: the annotations above are the only ones this quantizer makes, and each
        converts to Core ML (weight dequantization from iOS16, activation quantize/dequantize from iOS17)."""

    # ---- scopes ------------------------------------------------------------------------------

    def _specs(self, node: Node) -> Optional[_Specs]:
        for matches, specs in self._name_scopes:
            if matches(node):
                return specs
        for matches, specs in self._type_scopes:
            if matches(node):
                return specs
        return self._global

    # ---- patterns ----------------------------------------------------------------------------

    @staticmethod
    def _input_spec(value: Node, specs: _Specs) -> Optional[QuantizationSpecBase]:
        """How an activation input is quantized: as its producer already quantizes it, if it does."""
        if specs.activation is None:
            return None
        if _output_spec_of(value) is not None:
            return SharedQuantizationSpec(value)
        return specs.activation

    @staticmethod
    def _output_spec(last: Node, specs: _Specs) -> Optional[QuantizationSpecBase]:
        """The activation spec for the output of ``last``, refined by what its op guarantees."""
        spec = specs.activation
        if spec is None or last.op != "call_function":
            return spec
        target = last.target
        if target in _SIGMOID_RANGE:
            return FixedQParamsQuantizationSpec(dtype=torch.uint8, scale=1.0 / 256.0, zero_point=0,
                                                quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine)
        if target in _TANH_RANGE:
            return FixedQParamsQuantizationSpec(dtype=torch.uint8, scale=2.0 / 256.0, zero_point=128,
                                                quant_min=0, quant_max=255, qscheme=torch.per_tensor_symmetric)
        non_negative = target in _RELU or (target in _HARDTANH and _arg(last, 1, "min_val", -1.0) >= 0)
        if non_negative and spec.qscheme == torch.per_tensor_symmetric:
            return dataclasses.replace(spec, qscheme=torch.per_tensor_affine)
        return spec

    def _fused_tail(self, node: Node, through_batch_norm: bool) -> list[Node]:
        """The nodes after ``node`` that share its output quantization: a batch_norm (if allowed)
        and/or one activation, each the only user of the node before it."""
        tail, last = [], node
        if through_batch_norm:
            bn = _sole_user(last, _BATCH_NORM)
            if bn is not None:
                tail.append(bn)
                last = bn
        act = _sole_user(last, _ACTIVATIONS)
        if act is not None:
            tail.append(act)
        return tail

    def _finish(self, anchor: Node, inputs: dict, tail: list[Node], specs: _Specs) -> None:
        last = tail[-1] if tail else anchor
        output = self._output_spec(last, specs)
        if tail:
            anchor.meta[_KEY] = QuantizationAnnotation(input_qspec_map=inputs, _annotated=True)
            for node in tail[:-1]:
                node.meta[_KEY] = QuantizationAnnotation(_annotated=True)
            last.meta[_KEY] = QuantizationAnnotation(output_qspec=output, _annotated=True)
        else:
            anchor.meta[_KEY] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output, _annotated=True)

    def _annotate_weighted(self, node: Node) -> None:
        specs = self._specs(node)
        x, weight = node.args[0], _arg(node, 1, "weight", None)
        if specs is None or not (_is_float_tensor(x) and _is_float_tensor(weight)):
            return
        # Insertion order matters: torchao's QAT conv-bn fusion reads it as (input, weight, bias).
        inputs = {x: self._input_spec(x, specs), weight: specs.weight}
        bias = _arg(node, 2, "bias", None)
        if isinstance(bias, Node):
            inputs[bias] = None
        tail = self._fused_tail(node, through_batch_norm=True) if specs.activation is not None else []
        self._finish(node, inputs, tail, specs)

    def _annotate_binary(self, node: Node) -> None:
        specs = self._specs(node)
        if specs is None or not _is_float_tensor(node):
            return
        operands = [a for a in node.args[:2] if _is_float_tensor(a)]
        if not operands:
            return
        inputs = {a: self._input_spec(a, specs) for a in operands}
        tail = self._fused_tail(node, through_batch_norm=False) if specs.activation is not None else []
        self._finish(node, inputs, tail, specs)

    def _annotate_cat(self, node: Node) -> None:
        specs = self._specs(node)
        tensors = node.args[0]
        if specs is None or specs.activation is None or not isinstance(tensors, (list, tuple)) or not tensors \
                or not all(_is_float_tensor(t) for t in tensors):
            return
        first = tensors[0]
        shared = SharedQuantizationSpec((first, node))
        inputs = {first: self._input_spec(first, specs)}
        for t in tensors[1:]:
            inputs.setdefault(t, shared)
        node.meta[_KEY] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=shared, _annotated=True)

    def _annotate_shared(self, node: Node) -> None:
        specs = self._specs(node)
        x = node.args[0]
        if specs is None or specs.activation is None or not isinstance(x, Node) or _output_spec_of(x) is None \
                or not _is_float_tensor(node):
            return
        shared = SharedQuantizationSpec(x)
        node.meta[_KEY] = QuantizationAnnotation(input_qspec_map={x: shared}, output_qspec=shared, _annotated=True)
