"""``EthosUQuantizer``: int8 PT2E quantization annotated for what the Ethos-U NPU runs.

Used like ExecuTorch's (seed pages "Quantization" (Arm Ethos-U delegate) and "Getting Started Tutorial"
(Ethos-U))::

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from etkit_ethosu import EthosUCompileSpec, EthosUQuantizer, get_symmetric_quantization_config

    quantizer = EthosUQuantizer(EthosUCompileSpec("ethos-u55-128"))      # the compile spec is optional
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*calibration_inputs)                       # observers record ranges
    quantized = convert_pt2e(prepared)                  # float graph with quantize/dequantize pairs

The Ethos-U runs static int8 only (the seed "Quantization" page: "The Arm Ethos-U delegate only supports the
execution of quantized models"), so everything the TOSA lowering takes must arrive as
``dequantize -> op -> quantize``. What this quantizer annotates, on the graph ``torch.export`` produces
(``aten.*.default`` ops before decomposition):

* Quantization parameters: activations int8 per-tensor affine over ``[-128, 127]`` (zero point may be
  non-zero), weights of convolutions and linears int8 symmetric over ``[-127, 127]`` (per output channel,
  axis 0, when ``is_per_channel``), biases left float (the lowering derives the int32 bias with scale
  ``input_scale * weight_scale``).
* Convolution (``conv1d``, ``conv2d``, depthwise / grouped included) and ``linear``: input -> activation
  spec, weight -> weight spec, output -> activation spec. Followed by a single-user ``relu``, ``relu_``,
  ``relu6``, ``hardtanh`` / ``hardtanh_`` (``nn.ReLU6`` exports as ``hardtanh(x, 0, 6)``) or ``clamp``, the
  activation is *fused*: the op's output is not observed, the activation's output is (one ``quantize``
  after the activation, none between the op and it). In QAT graphs a ``batch_norm`` between the
  convolution and the activation belongs to the pattern as well (torchao folds it).
* ``add``, ``sub``, ``mul`` (``.Tensor`` overloads and in-place forms, ``alpha == 1``): each tensor operand ->
  activation spec, output -> activation spec, with the same single-user activation fusion. A Python scalar
  operand (``x + 1.0``, ``x * 2.0``) stays a scalar in the args and is not annotated.
* ``matmul``, ``mm``, ``bmm``: both operands and the output -> activation spec.
* Own output quantization (activation spec in and out): the elementwise functions ``sigmoid``, ``tanh``,
  ``hardswish``, ``hardsigmoid``, ``gelu``, ``silu``, ``elu``, ``leaky_relu``, ``exp``, ``log``, ``erf``,
  ``reciprocal``, ``rsqrt``, ``sqrt``, ``abs``, ``neg`` (TOSA lowers them to 256-entry tables), and
  ``softmax.int`` / ``_softmax``, ``sum`` (``.dim_IntList`` and ``.default``).
* Same quantization parameters in and out (output ``SharedQuantizationSpec((input, op))``; the input edge
  shares the producer's output when that is quantized): ``max_pool2d``, ``avg_pool2d``,
  ``adaptive_avg_pool2d``, ``mean`` (ExecuTorch shares these pooling / mean outputs too), ``relu``,
  ``relu6``, ``hardtanh``, ``clamp`` when not fused, and the data-movement ops ``view``, ``reshape``,
  ``flatten``, ``squeeze``, ``unsqueeze``, ``permute``, ``transpose``, ``t``, ``contiguous``, ``clone``,
  ``alias``, ``dropout``, ``slice``, ``select``, ``expand``, ``upsample_nearest2d``, ``amax``, ``amin``,
  and the pieces (``getitem``) of ``split`` / ``split_with_sizes`` / ``chunk`` / ``unbind``. These are
  annotated when their input is quantized, a graph input or a constant; after an op left float they stay
  float too.
* ``cat`` / ``concat`` / ``concatenate`` / ``stack``: every input and the output share one set of
  quantization parameters (``SharedQuantizationSpec((first_input, cat))``), as ExecuTorch does. torchao
  extends the sharing to the producers of the inputs, so no requantization sits before the ``cat``.

An input edge annotated with the activation spec reuses the producer's identical output observer (torchao's
implicit sharing), so each quantized tensor gets one ``quantize`` and one ``dequantize`` per reader.
* Everything else (``div``, ``layer_norm``, ``batch_norm`` outside a QAT conv pattern, unknown ops) is left
  unannotated: it stays float and the partitioner leaves it to the CPU.

Only float32 tensors are annotated (integer index arithmetic, e.g. ``num_batches_tracked += 1`` in a
training-mode export, is skipped).
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Iterable, Optional, Sequence

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import (FakeQuantize, MinMaxObserver, MovingAverageMinMaxObserver,
                                       PerChannelMinMaxObserver)
from torchao.quantization.pt2e.quantizer import (QuantizationAnnotation, QuantizationConfig, QuantizationSpec,
                                                 Quantizer, SharedQuantizationSpec)

__all__ = ["EthosUQuantizer", "QuantizationConfig", "get_symmetric_quantization_config"]

aten = torch.ops.aten
ANNOTATION = "quantization_annotation"
#: Smallest scale an observer reports (ExecuTorch's Arm 16-bit config uses the same bound).
EPS = 2 ** -12


# --------------------------------------------------------------------------------- configuration

def get_symmetric_quantization_config(is_per_channel: bool = True, is_qat: bool = False, is_dynamic: bool = False,
                                      act_qmin: int = -128, act_qmax: int = 127, weight_qmin: int = -127,
                                      weight_qmax: int = 127) -> QuantizationConfig:
    """The int8 configuration of the seed "Quantization" page (Arm Ethos-U delegate).

    Activations: ``torch.int8`` over ``[act_qmin, act_qmax]``, ``per_tensor_affine`` (one scale and one
    zero point per tensor; the zero point may be non-zero), ``MinMaxObserver`` (QAT: ``FakeQuantize`` with a
    ``MovingAverageMinMaxObserver``), scale at least ``2**-12``.

    Weights (of convolutions and linears): ``torch.int8`` over ``[weight_qmin, weight_qmax]``, symmetric
    (zero point 0); ``per_channel_symmetric`` along axis 0 (the output channels of a conv weight
    ``[out, in/groups, kh, kw]`` or a linear weight ``[out, in]``) when ``is_per_channel``, else
    ``per_tensor_symmetric``. Observer ``PerChannelMinMaxObserver`` / ``MinMaxObserver`` (QAT: wrapped in
    ``FakeQuantize``, so every step uses the current weights' range).

    Bias: ``None`` (left float; the lowering quantizes it to int32 with scale ``input_scale * weight_scale``).

    Args:
        is_per_channel: one weight scale per output channel instead of one per tensor.
        is_qat: fake-quantize modules for ``prepare_qat_pt2e`` instead of observers.
        is_dynamic: must be False (kept for ExecuTorch's signature).
        act_qmin, act_qmax: activation integer range (within int8).
        weight_qmin, weight_qmax: weight integer range (within int8).

    Returns:
        torchao's ``QuantizationConfig(input_activation, output_activation, weight, bias=None, is_qat)``; the
        same (frozen) object for the same arguments, as in ExecuTorch, so configurations compare equal.

    Raises:
        ValueError: ``is_dynamic=True`` (the NPU runs static int8 only), or a range outside int8.
    """
    if is_dynamic:
        raise ValueError("Ethos-U has no dynamic quantization: the NPU runs static int8 only; "
                         "calibrate with get_symmetric_quantization_config(is_dynamic=False)")
    for name, low, high in (("act", act_qmin, act_qmax), ("weight", weight_qmin, weight_qmax)):
        if not -128 <= low < high <= 127:
            raise ValueError(f"{name}_qmin/{name}_qmax = {low}/{high} is not a range within int8 [-128, 127]")
    return _symmetric_config(bool(is_per_channel), bool(is_qat), int(act_qmin), int(act_qmax), int(weight_qmin),
                             int(weight_qmax))


@functools.lru_cache
def _symmetric_config(is_per_channel: bool, is_qat: bool, act_qmin: int, act_qmax: int, weight_qmin: int,
                      weight_qmax: int) -> QuantizationConfig:
    if is_qat:
        act_ctr = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, eps=EPS)
        if is_per_channel:
            weight_ctr = FakeQuantize.with_args(observer=PerChannelMinMaxObserver, ch_axis=0, eps=EPS)
        else:
            weight_ctr = FakeQuantize.with_args(observer=MinMaxObserver, eps=EPS)
    else:
        act_ctr = MinMaxObserver.with_args(eps=EPS)
        weight_ctr = (PerChannelMinMaxObserver if is_per_channel else MinMaxObserver).with_args(eps=EPS)
    activation = QuantizationSpec(dtype=torch.int8, quant_min=act_qmin, quant_max=act_qmax,
                                  qscheme=torch.per_tensor_affine, is_dynamic=False,
                                  observer_or_fake_quant_ctr=act_ctr)
    weight = QuantizationSpec(dtype=torch.int8, quant_min=weight_qmin, quant_max=weight_qmax,
                              qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric,
                              ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=weight_ctr)
    return QuantizationConfig(activation, activation, weight, None, is_qat)


# --------------------------------------------------------------------------------- op sets

_CONV = {aten.conv1d.default, aten.conv2d.default, aten.conv1d.padding, aten.conv2d.padding}
_LINEAR = {aten.linear.default}
_WEIGHTED = _CONV | _LINEAR
#: batch norms that can sit between a convolution and its activation in a QAT graph (PTQ folds them
#: before annotation).
_BATCH_NORM = {aten.batch_norm.default, aten._native_batch_norm_legit.default,
               aten._native_batch_norm_legit_no_training.default}
_BINARY = {aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.sub_.Tensor, aten.mul.Tensor, aten.mul_.Tensor}
_MATMUL = {aten.matmul.default, aten.mm.default, aten.bmm.default}
#: activations fused into a preceding conv / linear / add / sub / mul with a single user.
_FUSABLE_ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.relu6.default, aten.hardtanh.default,
                        aten.hardtanh_.default, aten.clamp.default, aten.clamp_.default}
#: ops with their own output quantization parameters (activation spec in and out).
_OWN_QPARAMS = {aten.sigmoid.default, aten.tanh.default, aten.hardswish.default, aten.hardswish_.default,
                aten.hardsigmoid.default, aten.gelu.default, aten.silu.default, aten.silu_.default,
                aten.elu.default, aten.leaky_relu.default, aten.leaky_relu_.default, aten.exp.default,
                aten.log.default, aten.erf.default, aten.reciprocal.default, aten.rsqrt.default, aten.sqrt.default,
                aten.abs.default, aten.neg.default, aten.softmax.int, aten._softmax.default,
                aten.sum.dim_IntList, aten.sum.default}
#: ops whose output keeps the input's quantization parameters (first argument is the tensor).
_SHARE_INPUT = {
    aten.max_pool2d.default, aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default, aten.mean.dim,
    aten.mean.default, *_FUSABLE_ACTIVATIONS,
    aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.flatten.using_ints,
    aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default, aten.permute.default,
    aten.transpose.int, aten.t.default, aten.contiguous.default, aten.clone.default, aten.alias.default,
    aten.dropout.default, aten.slice.Tensor, aten.select.int, aten.expand.default,
    aten.upsample_nearest2d.vec, aten.amax.default, aten.amin.default,
}
#: ops returning a list of pieces of their input (the pieces are read with ``operator.getitem``).
_SPLIT = {aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int}
_CAT = {aten.cat.default, aten.concat.default, aten.concatenate.default, aten.stack.default}


# --------------------------------------------------------------------------------- helpers

def _annotation(node: Node) -> Optional[QuantizationAnnotation]:
    return node.meta.get(ANNOTATION)


def _is_annotated(node: Node) -> bool:
    annotation = _annotation(node)
    return annotation is not None and annotation._annotated


def _output_quantized(node: Any) -> bool:
    """True if ``node``'s output gets an observer (so a follower can share its parameters)."""
    if not isinstance(node, Node):
        return False
    annotation = _annotation(node)
    return annotation is not None and annotation.output_qspec is not None


def _is_float_tensor(arg: Any) -> bool:
    val = arg.meta.get("val") if isinstance(arg, Node) else None
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32


def _mark(node: Node, inputs: dict, output) -> None:
    node.meta[ANNOTATION] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output, _annotated=True)


def _shared_or(x: Node, spec: QuantizationSpec):
    """The spec for the edge ``x -> op`` of an op that keeps its input's parameters: ``x``'s own output
    quantization when ``x`` has one, so that no requantization sits in between (ExecuTorch's choice)."""
    return SharedQuantizationSpec(x) if _output_quantized(x) else spec


def _module_paths(node: Node) -> list[tuple[str, str]]:
    """``(qualified name, type name)`` of every module enclosing ``node``, outermost first."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = []
    for path, type_name in stack.values():
        path = path[len("L['self']."):] if path.startswith("L['self'].") else path
        if not isinstance(type_name, str):
            type_name = f"{type_name.__module__}.{type_name.__qualname__}"
        paths.append((path, type_name))
    return paths


def _type_name(module_type: Callable) -> str:
    return f"{module_type.__module__}.{module_type.__qualname__}"


# --------------------------------------------------------------------------------- quantizer

class EthosUQuantizer(Quantizer):
    """PT2E quantizer for the Arm Ethos-U backend (seed page "Quantization", Arm Ethos-U delegate).

    Args:
        compile_spec: an :class:`~etkit_ethosu.EthosUCompileSpec`, or ``None``. The annotation is the same for
            every Ethos-U target (U55, U65 and U85 all run int8 TOSA); the spec is kept for API parity with
            ExecuTorch and available as :attr:`compile_spec`.

    Configuration precedence for a node: :meth:`set_module_name` (the most specific matching name wins) >
    :meth:`set_module_type` (the innermost matching module wins) > :meth:`set_global`. A configuration of
    ``None`` leaves the matched nodes float. The setters return ``self`` so that they chain.

    Raises:
        TypeError: ``compile_spec`` is neither ``None`` nor an ``EthosUCompileSpec``; a setter given something
            other than torchao's ``QuantizationConfig`` (or ``None``).
    """

    def __init__(self, compile_spec=None) -> None:
        super().__init__()
        if compile_spec is not None:
            try:
                from .compile_spec import EthosUCompileSpec
            except ImportError:  # pragma: no cover - the spec module is optional for quantization
                EthosUCompileSpec = None
            if EthosUCompileSpec is not None and not isinstance(compile_spec, EthosUCompileSpec):
                raise TypeError(f"EthosUQuantizer expects an EthosUCompileSpec or None, "
                                f"got {type(compile_spec).__name__}")
        self.compile_spec = compile_spec
        self.global_config: Optional[QuantizationConfig] = None
        self.io_config: Optional[QuantizationConfig] = None
        self.module_type_config: dict[Callable, Optional[QuantizationConfig]] = {}
        self.module_name_config: dict[str, Optional[QuantizationConfig]] = {}

    # ----------------------------------------------------------------------------- setters

    @staticmethod
    def _check(config) -> None:
        if config is not None and not isinstance(config, QuantizationConfig):
            raise TypeError(f"expected torchao QuantizationConfig or None, got {type(config).__name__} "
                            f"(use etkit_ethosu.get_symmetric_quantization_config())")

    def set_global(self, quantization_config: Optional[QuantizationConfig]) -> "EthosUQuantizer":
        """Configuration for every node not matched by a module name or type (``None``: leave float)."""
        self._check(quantization_config)
        self.global_config = quantization_config
        return self

    def set_module_type(self, module_type: Callable,
                        quantization_config: Optional[QuantizationConfig]) -> "EthosUQuantizer":
        """Configuration for the nodes inside every instance of ``module_type`` (e.g. ``nn.Linear``), matched
        through the ``nn_module_stack`` metadata ``torch.export`` records; ``None`` leaves them float."""
        self._check(quantization_config)
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(self, module_name: str,
                        quantization_config: Optional[QuantizationConfig]) -> "EthosUQuantizer":
        """Configuration for the nodes inside the submodule with qualified name ``module_name`` (e.g.
        ``"blocks.0"``, as in ``model.named_modules()``); ``None`` leaves them float."""
        self._check(quantization_config)
        self.module_name_config[module_name] = quantization_config
        return self

    def set_io(self, quantization_config: Optional[QuantizationConfig]) -> "EthosUQuantizer":
        """Also quantize the graph's float inputs and outputs with ``quantization_config``'s activation spec
        (a ``quantize``/``dequantize`` pair right after each input and before each output)."""
        self._check(quantization_config)
        self.io_config = quantization_config
        return self

    # ----------------------------------------------------------------------------- config lookup

    def _config_for(self, node: Node) -> Optional[QuantizationConfig]:
        paths = _module_paths(node)
        if self.module_name_config:
            for path, _ in reversed(paths):
                if path in self.module_name_config:
                    return self.module_name_config[path]
        if self.module_type_config:
            by_name = {_type_name(t): c for t, c in self.module_type_config.items()}
            for _, type_name in reversed(paths):
                if type_name in by_name:
                    return by_name[type_name]
        return self.global_config

    # ----------------------------------------------------------------------------- annotation

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """Rewrite softmax and layer_norm into ops the NPU lowering has (:mod:`etkit_ethosu.decompositions`), so
        each piece gets its own quantization, as ExecuTorch's Arm quantizer does. Scalar operands (``x + 1.0``)
        stay Python scalars in the op's args (ExecuTorch lifts them to tensor attributes; the lowering folds
        them into the op)."""
        from .decompositions import decompose_for_npu
        return decompose_for_npu(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        """Attach ``quantization_annotation`` metadata following the rules in the module docstring.

        Nodes are visited in graph order, so an op that keeps its input's parameters sees whether its input
        was quantized; a fused activation is annotated together with the op it follows.
        """
        configs: dict[Node, Optional[QuantizationConfig]] = {}

        def config_of(n: Node) -> Optional[QuantizationConfig]:
            if n not in configs:
                configs[n] = self._config_for(n)
            return configs[n]

        if self.io_config is not None:
            self._annotate_io(model, self.io_config)
        for node in model.graph.nodes:
            if node.op != "call_function" or _is_annotated(node):
                continue
            if node.target is operator.getitem:
                self._annotate_getitem(node)
                continue
            config = config_of(node)
            if config is None or not _is_float_tensor(node):
                continue
            target = node.target
            if target in _WEIGHTED:
                self._annotate_weighted(node, config, config_of)
            elif target in _BINARY:
                self._annotate_binary(node, config, config_of)
            elif target in _MATMUL:
                self._annotate_operands(node, config, node.args[:2])
            elif target in _OWN_QPARAMS:
                self._annotate_operands(node, config, node.args[:1])
            elif target in _SHARE_INPUT:
                self._annotate_share_input(node, config)
            elif target in _CAT:
                self._annotate_cat(node, config)
        return model

    def validate(self, model: GraphModule) -> None:
        """Nothing to check beyond what ``prepare_pt2e`` checks."""

    # ----------------------------------------------------------------------------- per-op rules

    @staticmethod
    def _fused_chain(node: Node, config: QuantizationConfig, config_of, allow_bn: bool) -> list[Node]:
        """The nodes after ``node`` that fuse with it: ``[batch_norm?] + [activation?]``, each the single
        user of the previous node and under the same configuration."""
        chain: list[Node] = []
        current = node
        candidates = ([_BATCH_NORM] if allow_bn else []) + [_FUSABLE_ACTIVATIONS]
        for targets in candidates:
            users = list(current.users)
            if len(users) != 1:
                break
            user = users[0]
            if (user.op != "call_function" or user.target not in targets or _is_annotated(user)
                    or user.args[0] is not current or config_of(user) != config):
                continue
            chain.append(user)
            current = user
        return chain

    def _annotate_with_output(self, node: Node, inputs: dict, config: QuantizationConfig, config_of,
                              allow_bn: bool = False) -> None:
        chain = self._fused_chain(node, config, config_of, allow_bn)
        if not chain:
            _mark(node, inputs, config.output_activation)
            return
        _mark(node, inputs, None)
        for fused in chain[:-1]:
            _mark(fused, {}, None)
        _mark(chain[-1], {}, config.output_activation)

    def _annotate_weighted(self, node: Node, config: QuantizationConfig, config_of) -> None:
        x, weight = node.args[0], node.args[1]
        if not (_is_float_tensor(x) and _is_float_tensor(weight)):
            return
        inputs = {x: config.input_activation, weight: config.weight}
        bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if isinstance(bias, Node) and config.bias is not None:
            inputs[bias] = config.bias
        self._annotate_with_output(node, inputs, config, config_of, allow_bn=node.target in _CONV)

    def _annotate_binary(self, node: Node, config: QuantizationConfig, config_of) -> None:
        if node.kwargs.get("alpha", 1) != 1 or (len(node.args) > 2 and node.args[2] != 1):
            return
        operands = [a for a in node.args[:2] if isinstance(a, Node)]
        if not operands or not all(_is_float_tensor(a) for a in operands):
            return
        self._annotate_with_output(node, {a: config.input_activation for a in operands}, config, config_of)

    @staticmethod
    def _annotate_operands(node: Node, config: QuantizationConfig, operands: Sequence) -> None:
        if not operands or not all(_is_float_tensor(a) for a in operands):
            return
        _mark(node, {a: config.input_activation for a in operands}, config.output_activation)

    @staticmethod
    def _annotate_share_input(node: Node, config: QuantizationConfig) -> None:
        x = node.args[0] if node.args else None
        if not _is_float_tensor(x) or not _quantizable_source(x):
            return
        _mark(node, {x: _shared_or(x, config.input_activation)}, SharedQuantizationSpec((x, node)))

    @staticmethod
    def _annotate_cat(node: Node, config: QuantizationConfig) -> None:
        tensors = node.args[0] if node.args else None
        if not isinstance(tensors, (list, tuple)) or not tensors:
            return
        if not all(_is_float_tensor(t) for t in tensors):
            return
        first = tensors[0]
        shared = SharedQuantizationSpec((first, node))
        inputs = {first: config.input_activation}
        for t in tensors[1:]:
            if t is not first:
                inputs[t] = shared
        _mark(node, inputs, shared)

    def _annotate_getitem(self, node: Node) -> None:
        """A piece of ``split`` / ``chunk`` / ``unbind`` keeps the parameters of the split input."""
        source = node.args[0]
        if not isinstance(source, Node) or source.op != "call_function" or source.target not in _SPLIT:
            return
        if not _is_float_tensor(node):
            return
        if not _is_annotated(source):
            config = self._config_for(source)
            x = source.args[0] if source.args else None
            if config is None or not _is_float_tensor(x) or not _quantizable_source(x):
                return
            _mark(source, {x: _shared_or(x, config.input_activation)}, None)
        x = source.args[0]
        if x not in (_annotation(source).input_qspec_map or {}):
            return
        _mark(node, {}, SharedQuantizationSpec((x, source)))

    @staticmethod
    def _annotate_io(model: GraphModule, config: QuantizationConfig) -> None:
        for node in model.graph.nodes:
            if node.op == "placeholder" and node.users and _is_float_tensor(node) and not _is_annotated(node):
                _mark(node, {}, config.output_activation)
            elif node.op == "output":
                parents = [p for p in node.all_input_nodes if _is_float_tensor(p)]
                if parents:
                    _mark(node, {p: config.input_activation for p in parents}, None)

    # ----------------------------------------------------------------------------- convenience

    def quantize_with_submodules(self, model: GraphModule, calibration_samples: Iterable[tuple],
                                 is_qat: bool = False) -> GraphModule:
        """``prepare_pt2e`` (``prepare_qat_pt2e`` when ``is_qat``), run every sample, ``convert_pt2e``.

        Args:
            model: ``torch.export.export(...).module()`` of the float model.
            calibration_samples: positional-argument tuples, each one call of the model.
            is_qat: prepare for quantization-aware training (the samples then only update the fake
                quantizers; train the prepared model yourself for real QAT).

        Returns:
            The converted ``GraphModule`` (float graph with quantize/dequantize pairs).

        Control-flow submodules (``torch.cond`` branches) are not annotated: they stay float.
        """
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e

        prepared = (prepare_qat_pt2e if is_qat else prepare_pt2e)(model, self)
        for sample in calibration_samples:
            prepared(*sample)
        return convert_pt2e(prepared)


def _quantizable_source(x: Node) -> bool:
    """Whether an op that keeps its input's parameters should be quantized after ``x``: ``x`` is
    quantized, a graph input, or a constant (not the output of an op left float)."""
    return x.op in ("placeholder", "get_attr") or _output_quantized(x)
