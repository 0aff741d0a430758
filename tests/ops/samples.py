"""Sample inputs for each Core ATen overload, at each dtype.

Two sources:

1. torch's OpInfos (``torch.testing._internal.common_methods_invocations.op_db``). An OpInfo
   describes a *Python* function (``torch.nn.functional.conv2d``, ``torch.add``), not an ATen
   overload, so its samples are not used as they are: each sample is run under a dispatch-level
   recorder, and every call that reaches the target overload is captured with its actual
   arguments. ``F.conv2d(x, w, padding=1)`` thus yields a sample of ``aten.convolution.default``
   with the nine arguments the overload takes, and an ``add`` sample whose ``other`` is a Python
   number yields ``aten.add.Tensor(x, 2)``, exactly what ``torch.export`` puts in a graph. Which
   OpInfos feed which overload: those named like the overload's packet, plus
   :data:`EXTRA_OPINFOS` where the names differ.
2. :data:`SCHEMA_SAMPLES`, a small hand-written table, for overloads no OpInfo reaches (``Scalar``
   overloads, which Python's argument parser never picks; batch norm without stats; the ``sym_*``
   ops; ...).

A dtype applies to an op when at least one sample at that dtype runs in eager: OpInfo samples only
exist for the dtypes the OpInfo declares for CPU, and hand-written ones are tried in eager and kept
only where eager accepts them.
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import types
import unittest
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .catalog import DTYPES, NOT_APPLICABLE, core_aten_ops

aten = torch.ops.aten

#: At most this many samples per (op, dtype); they run as one program. ``ETKIT_OPS_MAX_SAMPLES``
#: overrides it.
MAX_SAMPLES = int(os.environ.get("ETKIT_OPS_MAX_SAMPLES", "6"))
#: At most this many samples are taken from one OpInfo's ``sample_inputs`` (some yield hundreds).
_PER_OPINFO = 24
#: Reference inputs scanned for inf/nan samples per OpInfo, and how many of those are kept.
_REFERENCE_SCAN, _EXTREMAL = 80, 2


@dataclass
class Sample:
    """One call of an overload: ``op(*args, **kwargs)``. Tensors in args/kwargs become program inputs.

    Attributes:
        source: where the sample comes from, for messages ("OpInfo nn.functional.conv2d #3").
        dynamic_shapes: one entry per tensor in args/kwargs (in order), passed to
            ``torch.export.export`` (used for the ``sym_*`` ops), or None.
    """

    args: tuple
    kwargs: dict
    source: str
    dynamic_shapes: Any = None

    def describe(self) -> str:
        def show(x):
            if isinstance(x, torch.Tensor):
                return f"T{list(x.shape)}:{str(x.dtype).removeprefix('torch.')}"
            if isinstance(x, (list, tuple)):
                inner = ", ".join(show(v) for v in x)
                return f"[{inner}]" if isinstance(x, list) else f"({inner})"
            return repr(x)
        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"{self.source}: ({', '.join(parts)})"


# --------------------------------------------------------------------------------------------------
# OpInfo harvesting

#: OpInfos whose names differ from the overload's packet, by packet name. Candidates are always
#: checked by recording: an OpInfo only contributes the calls that actually reach the overload.
EXTRA_OPINFOS: dict = {
    "_adaptive_avg_pool2d": ["nn.functional.adaptive_avg_pool2d"],
    "_adaptive_avg_pool3d": ["nn.functional.adaptive_avg_pool3d"],
    "_cdist_forward": ["cdist"],
    "_pdist_forward": ["nn.functional.pdist"],
    "_local_scalar_dense": ["item"],
    "_log_softmax": ["log_softmax"],
    "_softmax": ["softmax"],
    "_to_copy": ["to", "softmax"],
    "addmm": ["nn.functional.linear"],
    "convolution": ["nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
                    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
                    "nn.functional.conv_transpose3d"],
    "hardtanh": ["nn.functional.relu6"],
    "index": ["__getitem__"],
    "max": ["max"],
    "max_pool2d_with_indices": ["nn.functional.max_pool2d"],
    "max_pool3d_with_indices": ["nn.functional.max_pool3d"],
    "maximum": ["max"],
    "minimum": ["min"],
    "native_group_norm": ["nn.functional.group_norm"],
    "native_layer_norm": ["nn.functional.layer_norm"],
    "reflection_pad1d": ["nn.functional.pad"],
    "reflection_pad2d": ["nn.functional.pad"],
    "reflection_pad3d": ["nn.functional.pad"],
    "replication_pad2d": ["nn.functional.pad"],
    "replication_pad3d": ["nn.functional.pad"],
    "squeeze": ["squeeze"],
    "sum": ["sum"],
    "upsample_bilinear2d": ["nn.functional.interpolate"],
    "upsample_nearest2d": ["nn.functional.interpolate"],
    "view": ["reshape", "view"],
    "embedding": ["nn.functional.embedding"],
    "gelu": ["nn.functional.gelu"],
    "elu": ["nn.functional.elu"],
    "leaky_relu": ["nn.functional.leaky_relu"],
    "relu": ["nn.functional.relu"],
    "grid_sampler_2d": ["nn.functional.grid_sample"],
    "avg_pool2d": ["nn.functional.avg_pool2d"],
    "avg_pool3d": ["nn.functional.avg_pool3d"],
    "_embedding_bag": ["nn.functional.embedding_bag"],
    "native_dropout": ["nn.functional.dropout"],
    "split_with_sizes": ["split"],
    "scatter_reduce": ["scatter_reduce"],
}


def _import_op_db() -> list:
    """``op_db``, importing torch's test utilities without their test-only dependency ``expecttest``
    when it is not installed (only its ``TestCase`` base class is referenced at import time, and the
    suite uses none of its features)."""
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            shim = types.ModuleType("expecttest")
            shim.TestCase = unittest.TestCase
            sys.modules["expecttest"] = shim
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return op_db


@functools.lru_cache(maxsize=None)
def _opinfos_by_name() -> dict:
    by_name: dict = {}
    for info in _import_op_db():
        by_name.setdefault(info.name, []).append(info)
    return by_name


def _candidate_opinfos(packet_name: str) -> list:
    """OpInfos that may reach overloads of ``packet_name`` (checked later by recording)."""
    by_name = _opinfos_by_name()
    wanted = [n for n in by_name if n.split(".")[-1] == packet_name]
    wanted += [n for n in EXTRA_OPINFOS.get(packet_name, []) if n in by_name]
    infos = []
    for name in dict.fromkeys(wanted):
        infos += by_name[name]
    return infos


class _Recorder(TorchDispatchMode):
    """Captures the calls that reach ``targets`` (arguments cloned before the call runs)."""

    def __init__(self, targets: set, known_tensors: list, scalars: list):
        super().__init__()
        self.targets = targets
        self.known = {id(t) for t in known_tensors}
        self.scalars = scalars
        self.calls: list = []

    def _unwrap_number(self, x):
        # Python's argument parser turns ``torch.add(x, 2)`` into ``aten.add.Tensor(x, <0-dim 2>)``
        # (a "wrapped number"); a 0-dim tensor that is not one of the sample's own tensors and equals
        # one of the sample's Python numbers is turned back into that number, as export records it.
        if isinstance(x, torch.Tensor) and x.dim() == 0 and id(x) not in self.known and x.dtype in (
                torch.float64, torch.int64, torch.bool):
            value = x.item()
            for s in self.scalars:
                if type(s) is type(value) and s == value:
                    return s
        return x

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.targets:
            def copy(x):
                return x.clone() if isinstance(x, torch.Tensor) else x
            # ``self`` is never a wrapped number (``torch.add(2, x)`` is refused by the parser)
            recorded = args[:1] + tuple(self._unwrap_number(a) for a in args[1:])
            self.calls.append((func, pytree.tree_map(copy, recorded), pytree.tree_map(copy, dict(kwargs))))
        return func(*args, **kwargs)


def _tensor_dtypes(tree) -> set:
    return {x.dtype for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)}


def _targets_of(infos_by_op: dict) -> dict:
    """``{OpInfo name+variant: (OpInfo, {overloads it may feed})}``."""
    out: dict = {}
    for op, infos in infos_by_op.items():
        for info in infos:
            key = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
            out.setdefault(key, (info, set()))[1].add(op)
    return out


def _extremal_samples(info, dtype) -> list:
    """Up to :data:`_EXTREMAL` of the OpInfo's reference inputs that hold inf or nan, as
    ``[(index, SampleInput)]``: ``sample_inputs`` has only finite values, and what a kernel does
    with inf/nan (``exp(-inf)``, ``log(-1)``, ``max`` with nan) is part of PyTorch's semantics."""
    if info.reference_inputs_func is None:
        return []
    picked = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, s in enumerate(itertools.islice(info.reference_inputs_func(info, "cpu", dtype, False),
                                                   _REFERENCE_SCAN)):
                leaves = pytree.tree_leaves((s.input, s.args, s.kwargs))
                if any(isinstance(x, torch.Tensor) and x.is_floating_point() and not bool(x.isfinite().all())
                       for x in leaves):
                    picked.append((i, s))
                    if len(picked) == _EXTREMAL:
                        break
    except Exception:
        pass
    return picked


@functools.lru_cache(maxsize=None)
def _harvest(dtype: torch.dtype) -> dict:
    """``{overload: [Sample, ...]}`` captured from OpInfo samples at ``dtype`` (all candidates)."""
    infos_by_op = {op: _candidate_opinfos(op.overloadpacket.__name__) for op in core_aten_ops()
                   if str(op) not in NOT_APPLICABLE}
    found: dict = {}
    for key, (info, targets) in sorted(_targets_of(infos_by_op).items()):
        if dtype not in info.supported_dtypes("cpu"):
            continue
        torch.manual_seed(zlib.crc32(f"{key}/{dtype}".encode()))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # sample_inputs_func, not sample_inputs: the latter wraps the samples in a tracker
                # that walks the call stack (inspect.stack) per OpInfo, which costs ~0.1 s each
                samples = list(itertools.islice(info.sample_inputs_func(info, "cpu", dtype, False),
                                                _PER_OPINFO))
        except Exception:  # an OpInfo's generator failing is torch's business: no samples from it
            continue
        samples = [(f"#{i}", s) for i, s in enumerate(samples)]
        if dtype.is_floating_point:
            extremal = _extremal_samples(info, dtype)
            samples[2:2] = [(f"reference #{i}", s) for i, s in extremal]
        for i, s in samples:
            leaves = pytree.tree_leaves((s.input, s.args, s.kwargs))
            tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
            scalars = [x for x in leaves if isinstance(x, (bool, int, float))]
            recorder = _Recorder(targets, tensors, scalars)
            try:
                with warnings.catch_warnings(), recorder:
                    warnings.simplefilter("ignore")
                    info.op(s.input, *s.args, **s.kwargs)
            except Exception:
                continue
            for func, args, kwargs in recorder.calls:
                dtypes = _tensor_dtypes((args, kwargs))
                if not dtypes:  # factory functions: judge by the output
                    try:
                        dtypes = _tensor_dtypes(func(*clone_tree(args), **clone_tree(kwargs)))
                    except Exception:
                        continue
                if dtype in dtypes:
                    found.setdefault(func, {}).setdefault(key, []).append(
                        Sample(args, kwargs, f"OpInfo {key} {i}"))
    # Round-robin over source OpInfos so that e.g. conv1d, conv2d and conv_transpose3d all appear.
    result = {}
    for func, per_source in found.items():
        queues = [iter(v) for _, v in sorted(per_source.items())]
        merged = []
        while queues:
            for q in list(queues):
                s = next(q, None)
                if s is None:
                    queues.remove(q)
                else:
                    merged.append(s)
        result[func] = merged
    return result


# --------------------------------------------------------------------------------------------------
# Hand-written samples, for overloads no OpInfo reaches

def _t(shape, dtype, low=None, high=None):
    from torch.testing import make_tensor
    return make_tensor(shape, dtype=dtype, device="cpu", low=low, high=high)


def _scalar_for(dtype, value=2.5):
    """A Python scalar of the kind that keeps ``dtype`` for a scalar overload."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point:
        return value
    return int(value) + 1


def _idx(shape, high):
    return torch.randint(0, high, shape, dtype=torch.int64)


def _binary_scalar(dt):
    s = _scalar_for(dt)
    return [((_t((4, 5), dt), s), {}), ((_t((), dt), s), {}), ((_t((2, 0, 3), dt), s), {})]


def _compare_scalar(dt):
    x = _t((4, 5), dt)
    pick = x.flatten()[3].item()
    return [((x, pick), {}), ((_t((3,), dt), _scalar_for(dt)), {})]


def _bitwise_scalar(dt):
    if dt.is_floating_point:
        return []
    s = True if dt == torch.bool else 6
    return [((_t((4, 5), dt), s), {}), ((_t((), dt), s), {})]


def _nonzero(dt):
    return _t((3, 4), dt, low=1, high=5) if dt != torch.bool else torch.ones(3, 4, dtype=torch.bool)


def _dynamic(*args, dim=0):
    """A sample whose first tensor is exported with a dynamic dimension ``dim`` (``Dim("n", max=16)``).

    The ``sym_*`` ops return a size, stride or count; with static shapes export replaces the call
    by its value, so only a dynamic dimension keeps them in the graph (the program returns the
    Python int; eager returns the same int).
    """
    return Sample(args, {}, "schema table", dynamic_shapes=[{dim: torch.export.Dim("n", max=16)}])


#: ``{overload name: fn(dtype) -> [((args), {kwargs}) | Sample, ...]}``.
SCHEMA_SAMPLES: dict = {
    "aten.add.Scalar": _binary_scalar,
    "aten.sub.Scalar": _binary_scalar,
    "aten.mul.Scalar": _binary_scalar,
    "aten.div.Scalar": _binary_scalar,
    "aten.div.Scalar_mode": lambda dt: [((_t((4, 5), dt), _scalar_for(dt, 1.5)), {"rounding_mode": m})
                                        for m in ("trunc", "floor")],
    "aten.fmod.Scalar": lambda dt: [((_t((4, 5), dt), _scalar_for(dt, 1.5)), {})],
    "aten.remainder.Scalar": lambda dt: [((_t((4, 5), dt), _scalar_for(dt, 1.5)), {}),
                                         ((_t((4, 5), dt), -_scalar_for(dt, 1.5)), {})],
    "aten.pow.Scalar": lambda dt: [((_scalar_for(dt, 1.5), _t((4, 5), dt, low=0, high=4)), {})],
    "aten.pow.Tensor_Scalar": lambda dt: [((_t((4, 5), dt, low=0, high=4), 2), {}),
                                          ((_t((4, 5), dt, low=0.5, high=4), 0.5), {})],
    "aten.eq.Scalar": _compare_scalar,
    "aten.ne.Scalar": _compare_scalar,
    "aten.lt.Scalar": _compare_scalar,
    "aten.le.Scalar": _compare_scalar,
    "aten.gt.Scalar": _compare_scalar,
    "aten.ge.Scalar": _compare_scalar,
    "aten.bitwise_and.Scalar": _bitwise_scalar,
    "aten.bitwise_or.Scalar": _bitwise_scalar,
    "aten.bitwise_xor.Scalar": _bitwise_scalar,
    "aten.atan2.out": lambda dt: [((_t((4, 5), dt), _t((4, 5), dt)), {"out": torch.empty(4, 5, dtype=dt)})],
    "aten.copy.default": lambda dt: [((_t((3, 4), dt), _t((3, 4), dt)), {}),
                                     ((_t((3, 4), dt), _t((4,), dt)), {}),
                                     ((_t((3, 4), dt), _t((3, 4), torch.float32)), {})],
    "aten.scatter.value": lambda dt: [((_t((4, 5), dt), 1, _idx((4, 3), 5), _scalar_for(dt)), {}),
                                      ((_t((4, 5), dt), 0, _idx((2, 5), 4), _scalar_for(dt)), {})],
    "aten._native_batch_norm_legit_no_training.default": lambda dt: [
        ((_t((2, 3, 4, 4), dt), _t((3,), dt), _t((3,), dt), _t((3,), dt), _t((3,), dt, low=0.5, high=2),
          0.1, 1e-5), {}),
        ((_t((2, 3, 5), dt), None, None, _t((3,), dt), _t((3,), dt, low=0.5, high=2), 0.1, 1e-5), {})],
    "aten._native_batch_norm_legit.no_stats": lambda dt: [
        ((_t((2, 3, 4, 4), dt), _t((3,), dt), _t((3,), dt), True, 0.1, 1e-5), {}),
        ((_t((4, 3), dt), None, None, True, 0.1, 1e-5), {})],
    "aten._embedding_bag.default": lambda dt: [
        ((_t((10, 3), dt), _idx((8,), 10), torch.tensor([0, 3, 5]), False, mode), {}) for mode in (0, 1, 2)],
    "aten.adaptive_avg_pool1d.default": lambda dt: [((_t((2, 3, 8), dt), [4]), {}),
                                                    ((_t((3, 7), dt), [3]), {})],
    "aten.avg_pool1d.default": lambda dt: [((_t((2, 3, 8), dt), [3], [2], [1], False, True), {}),
                                           ((_t((3, 9), dt), [2]), {})],
    "aten.col2im.default": lambda dt: [((_t((1, 12, 12), dt), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {})],
    "aten.reflection_pad1d.default": lambda dt: [((_t((2, 3, 6), dt), [2, 1]), {})],
    "aten.reflection_pad2d.default": lambda dt: [((_t((2, 3, 5, 6), dt), [2, 1, 1, 2]), {})],
    "aten.reflection_pad3d.default": lambda dt: [((_t((1, 2, 4, 5, 6), dt), [1, 2, 1, 1, 2, 0]), {})],
    "aten.replication_pad2d.default": lambda dt: [((_t((2, 3, 5, 6), dt), [2, 1, 1, 2]), {})],
    "aten.replication_pad3d.default": lambda dt: [((_t((1, 2, 4, 5, 6), dt), [1, 2, 1, 1, 2, 0]), {})],
    "aten.upsample_bilinear2d.vec": lambda dt: [
        ((_t((1, 2, 4, 5), dt), [7, 9], False, None), {}),
        ((_t((1, 2, 4, 5), dt), [8, 10], True, None), {}),
        ((_t((2, 1, 3, 3), dt), None, False, [2.0, 1.5]), {})],
    "aten.upsample_nearest2d.vec": lambda dt: [
        ((_t((1, 2, 4, 5), dt), [7, 9], None), {}),
        ((_t((2, 1, 3, 3), dt), None, [2.0, 1.5]), {})],
    "aten.var.dim": lambda dt: [((_t((4, 5), dt), [1], True, False), {}),
                                ((_t((3, 4, 5), dt), [0, 2], False, True), {})],
    "aten.native_dropout.default": lambda dt: [((_t((8, 16), dt), 0.5, True), {}),
                                               ((_t((8, 16), dt), 0.5, False), {})],
    "aten.rand.default": lambda dt: [(([4, 5],), {"dtype": dt})],
    "aten.randperm.default": lambda dt: [((10,), {"dtype": dt})],
    "aten.fill.Scalar": lambda dt: [((_t((3, 4), dt), _scalar_for(dt)), {})],
    "aten.nonzero.default": lambda dt: [((_nonzero(dt),), {})],
    "aten.alias.default": lambda dt: [((_t((3, 4), dt),), {})],
    "aten.sym_size.int": lambda dt: [_dynamic(_t((6, 4), dt), 0)],
    "aten.sym_numel.default": lambda dt: [_dynamic(_t((6, 4), dt))],
    "aten.sym_stride.int": lambda dt: [_dynamic(_t((4, 6), dt), 0, dim=1)],
    # An input's storage offset is 0 and its contiguity is known, dynamic or not: export always
    # folds these two to constants, so they are exported with static shapes.
    "aten.sym_storage_offset.default": lambda dt: [((_t((6, 4), dt),), {})],
    "aten.sym_is_contiguous.default": lambda dt: [((_t((6, 4), dt),), {})],
    "aten.clamp.default": lambda dt: [((_t((4, 5), dt), _scalar_for(dt, -1.5), _scalar_for(dt, 1.5)), {}),
                                      ((_t((4, 5), dt), None, _scalar_for(dt, 0.5)), {}),
                                      ((_t((4, 5), dt), _scalar_for(dt, 0.5), None), {})],
}


def _as_sample(entry) -> Sample:
    if isinstance(entry, Sample):
        return entry
    args, kwargs = entry
    return Sample(tuple(args), dict(kwargs), "schema table")


def _runs_in_eager(op, sample: Sample) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op(*clone_tree(sample.args), **clone_tree(sample.kwargs))
        return True
    except Exception:
        return False


def clone_tree(tree):
    return pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, tree)


def samples_for(op: torch._ops.OpOverload, dtype: torch.dtype, limit: Optional[int] = None) -> list:
    """Samples of ``op`` at ``dtype`` (OpInfo-harvested first, then the hand-written table), each one
    checked to run in eager; at most ``limit`` (default :data:`MAX_SAMPLES`). Deterministic."""
    limit = MAX_SAMPLES if limit is None else limit
    samples = list(_harvest(dtype).get(op, []))
    make = SCHEMA_SAMPLES.get(str(op))
    if make is not None:
        torch.manual_seed(zlib.crc32(f"{op}/{dtype}".encode()))
        samples += [_as_sample(e) for e in make(dtype)]
    kept = []
    for s in samples:
        if len(kept) >= limit:
            break
        if _runs_in_eager(op, s):
            kept.append(s)
    return kept


def applicable_dtypes(op: torch._ops.OpOverload, dtypes=DTYPES) -> list:
    """The dtypes of ``dtypes`` for which ``op`` has at least one sample that runs in eager."""
    return [d for d in dtypes if samples_for(op, d, limit=1)]
