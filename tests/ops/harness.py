"""Run one (op, dtype) case: export, lower with no partitioner, run in etkit's runtime, compare.

All samples of a case go into one program (one output group per sample), so a case costs one
export + lowering whatever its number of samples.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from typing import Optional

import torch
from torch.utils import _pytree as pytree

import etkit
from etkit.dialects.edge import VIEW_TO_COPY

from .catalog import DTYPE_NAMES, FLOAT_REFERENCE, PROPERTY_CHECKS, tolerance
from .samples import Sample, clone_tree

PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"


@dataclass
class Outcome:
    """What happened to one (op, dtype) case.

    Attributes:
        status: ``PASS``, ``FAIL`` (wrong numbers) or ``ERROR`` (could not produce numbers).
        stage: where an ERROR happened: ``export``, ``to_edge``, ``to_executorch``, ``load``,
            ``execute``; ``compare`` for a FAIL.
        message: the error text, or one line per failing sample.
        edge_ops: the ops of the lowered graph.
        decomposed_into: when the op itself is not in the lowered graph, the ops that replaced it
            (export or ``to_edge`` decomposed it), else None.
        missing_kernels: kernels the program needs that the runtime does not register.
    """

    op: str
    dtype: str
    status: str
    stage: str = ""
    message: str = ""
    edge_ops: tuple = ()
    decomposed_into: Optional[tuple] = None
    missing_kernels: tuple = ()
    samples: int = 0

    @property
    def covered(self) -> bool:
        return self.status == PASS

    def summary(self) -> str:
        how = ""
        if self.decomposed_into is not None:
            how = f" (decomposed into {', '.join(self.decomposed_into) or 'nothing: export folded it to a constant'})"
        if self.status == PASS:
            return f"PASS{how}"
        if self.missing_kernels:
            return f"{self.status} at {self.stage}: missing kernel(s) {', '.join(self.missing_kernels)}{how}"
        return f"{self.status} at {self.stage}{how}: {self.message}"


class _Calls(torch.nn.Module):
    """Calls ``op`` once per sample; the samples' tensors are the inputs, everything else constant.

    Inputs are contiguous: ``Method.execute`` always hands the runtime contiguous data, so a program
    exported for a strided input would expect a ``dim_order`` the caller cannot give. An ``out=``
    argument is allocated inside the program (``torch.empty``), as a model would; passing it as an
    input would make the call a mutation of a user input.
    """

    def __init__(self, op, samples: list):
        super().__init__()
        self.op = op
        self.specs = []
        self.flat = []
        for s in samples:
            kwargs = dict(s.kwargs)
            out = kwargs.pop("out", None)
            leaves, spec = pytree.tree_flatten((tuple(s.args), kwargs))
            slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            out_like = None if out is None else (tuple(out.shape), out.dtype)
            self.specs.append((leaves, spec, slots, out_like))
            self.flat += [leaves[i].contiguous() for i in slots]

    def forward(self, *tensors):
        outputs = []
        k = 0
        for leaves, spec, slots, out_like in self.specs:
            leaves = list(leaves)
            for i in slots:
                leaves[i] = tensors[k]
                k += 1
            args, kwargs = pytree.tree_unflatten(leaves, spec)
            if out_like is not None:
                kwargs["out"] = torch.empty(out_like[0], dtype=out_like[1])
            outputs.append(self.op(*args, **kwargs))
        return tuple(outputs)


def _reference(op, dtype, sample):
    """Eager's result on fresh copies (some ops write into an ``out`` argument); for the ops of
    ``catalog.FLOAT_REFERENCE`` at float16/bfloat16, computed in float32 and rounded to ``dtype``."""
    args, kwargs = clone_tree(sample.args), clone_tree(sample.kwargs)
    if dtype in (torch.float16, torch.bfloat16) and str(op) in FLOAT_REFERENCE:
        up = lambda x: x.float() if isinstance(x, torch.Tensor) and x.dtype == dtype else x  # noqa: E731
        out = op(*pytree.tree_map(up, args), **pytree.tree_map(up, kwargs))
        return pytree.tree_map(lambda x: x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x, out)
    return op(*args, **kwargs)


def _edge_target(op):
    return VIEW_TO_COPY.get(op, op)


def _graph_ops(ep) -> tuple:
    return tuple(sorted({str(n.target) for n in ep.graph.nodes
                         if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)}))


def _needed_kernels(ep) -> set:
    from etkit.passes.out_variants import NoOutVariantError, kernel_name, out_variant
    names = set()
    for n in ep.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            try:
                name, overload = kernel_name(out_variant(n.target))
            except NoOutVariantError:
                name, overload = kernel_name(n.target)
            names.add(f"{name}.{overload}" if overload else name)
    return names


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()
    return " ".join(line.strip() for line in first[:4])[:600]


def run_case(op, dtype: torch.dtype, samples: list) -> Outcome:
    """Export ``op`` called on every sample, lower it, run it in etkit's runtime, compare with eager."""
    from etkit.runtime import Runtime

    name, dname = str(op), DTYPE_NAMES[dtype]
    base = dict(op=name, dtype=dname, samples=len(samples))
    module = _Calls(op, [Sample(clone_tree(s.args), clone_tree(s.kwargs), s.source) for s in samples])
    inputs = list(module.flat)
    dynamic = None
    if any(s.dynamic_shapes for s in samples):
        # one entry per input tensor, packed like forward's ``*tensors``
        specs = []
        for s in samples:
            count = sum(isinstance(x, torch.Tensor) for x in pytree.tree_leaves((s.args, s.kwargs)))
            specs += list(s.dynamic_shapes or [None] * count)
        dynamic = (tuple(specs),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # eager reference, on fresh copies (some ops write into an ``out`` argument)
        expected = [_reference(op, dtype, s) for s in samples]
        stage = "export"
        try:
            ep = torch.export.export(module, tuple(inputs), dynamic_shapes=dynamic)
            stage = "to_edge"
            edge = etkit.to_edge(ep)
            edge_ep = edge.exported_program()
            ops = _graph_ops(edge_ep)
            decomposed = None if str(_edge_target(op)) in ops else ops
            base.update(edge_ops=ops, decomposed_into=decomposed)
            stage = "to_executorch"
            buffer = edge.to_executorch().buffer
            stage = "load"
            missing = tuple(sorted(_needed_kernels(edge_ep) - Runtime.get().operator_registry.operator_names))
            base.update(missing_kernels=missing)
            method = Runtime.get().load_program(buffer).load_method("forward")
            stage = "execute"
            actual = method.execute(inputs)
        except Exception as exc:  # every failure is a result: report it with its stage
            named = tuple(re.findall(r"OperatorMissing: program needs kernel '([^']+)'", str(exc)))
            if named:
                base["missing_kernels"] = tuple(sorted(set(base.get("missing_kernels", ())) | set(named)))
            return Outcome(status=ERROR, stage=stage, message=_short(exc), **base)
    groups = _regroup(actual, expected)
    if isinstance(groups, str):
        return Outcome(status=FAIL, stage="compare", message=groups, **base)
    problems = []
    for i, (s, got, want) in enumerate(zip(samples, groups, expected)):
        problem = compare(name, dtype, s, got, want)
        if problem:
            problems.append(f"sample {i} {s.describe()}: {problem}")
    if problems:
        if base.get("decomposed_into") is not None:
            problems.insert(0, _judge_decomposition(name, dtype, samples, edge_ep, inputs, actual, expected))
        return Outcome(status=FAIL, stage="compare", message="\n".join(problems), **base)
    return Outcome(status=PASS, **base)


def _judge_decomposition(name, dtype, samples, edge_ep, inputs, actual, expected) -> str:
    """For a decomposed op that FAILs: does etkit agree with the decomposed graph run in eager?

    If it does, the kernels are right and the difference is torch's decomposition (e.g. it
    accumulates in the input's precision where the eager kernel uses float); if not, a kernel of
    the decomposition is wrong.
    """
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = pytree.tree_leaves(edge_ep.module()(*inputs))
    except Exception as exc:
        return f"(the decomposed graph does not run in eager: {_short(exc)})"
    groups = _regroup(list(reference), expected)
    if isinstance(groups, str):
        return f"(the decomposed graph in eager: {groups})"
    k = 0
    for s, ref, want in zip(samples, groups, expected):
        n = len(ref)
        if compare(name, dtype, s, actual[k:k + n], pytree.tree_unflatten(ref, pytree.tree_structure(want))):
            return "etkit also differs from the decomposed graph run in eager: a kernel of the decomposition is wrong"
        k += n
    return ("etkit matches the decomposed graph run in eager: torch's decomposition, not a kernel, differs "
            "from the eager kernel")


def _regroup(actual: list, expected: list):
    """Split the program's flat outputs into one group per sample, following eager's structure."""
    groups, k = [], 0
    for want in expected:
        n = len(pytree.tree_leaves(want))
        groups.append(actual[k:k + n])
        k += n
    if k != len(actual):
        return f"the program returned {len(actual)} outputs, eager {k}"
    return groups


def _max_err(a: torch.Tensor, b: torch.Tensor, atol: float = 0.0, rtol: float = 0.0) -> str:
    """The element furthest outside ``atol + rtol * |b|`` (the largest error when both are 0)."""
    if a.numel() == 0:
        return ""
    a64, b64 = a.double().flatten(), b.double().flatten()
    agree = (a64.isnan() & b64.isnan()) | ((a64 == b64) & a64.isinf())
    diff = (a64 - b64).abs().masked_fill(agree, 0)
    excess = diff.nan_to_num(math.inf) - (atol + rtol * b64.abs().nan_to_num(0))
    worst = int(excess.argmax())
    finite = diff[diff.isfinite()]
    largest = f"{float(finite.max()):.3g}" if finite.numel() else "n/a"
    return (f"max abs error {largest} (finite elements); worst element {worst}: "
            f"etkit {a.flatten()[worst].item()!r}, eager {b.flatten()[worst].item()!r}")


def _compare_tensor(op_name: str, dtype, got, want) -> Optional[str]:
    if not isinstance(got, torch.Tensor):
        return f"etkit returned {type(got).__name__}, eager a tensor"
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        return (f"etkit returned {str(got.dtype).removeprefix('torch.')}{list(got.shape)}, "
                f"eager {str(want.dtype).removeprefix('torch.')}{list(want.shape)}")
    want = want.contiguous()
    if want.dtype.is_floating_point:
        atol, rtol = tolerance(op_name, want.dtype)
        if not torch.allclose(got.double(), want.double(), atol=atol, rtol=rtol, equal_nan=True):
            return f"{_max_err(got, want, atol, rtol)} (atol {atol:g}, rtol {rtol:g})"
        return None
    if not torch.equal(got, want):
        return f"integer/bool values differ: {_max_err(got, want)}"
    return None


def _compare_values(op_name, dtype, got: list, want) -> Optional[str]:
    wants = pytree.tree_leaves(want)
    for j, (g, w) in enumerate(zip(got, wants)):
        if isinstance(w, torch.Tensor):
            p = _compare_tensor(op_name, dtype, g, w)
        elif isinstance(w, float):
            p = None if (math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-6) or (math.isnan(g) and math.isnan(w))) \
                else f"etkit {g!r}, eager {w!r}"
        else:
            p = None if g == w and type(g) is type(w) else f"etkit {g!r}, eager {w!r}"
        if p:
            return f"output {j}: {p}"
    return None


def compare(op_name: str, dtype, sample: Sample, got: list, want) -> Optional[str]:
    """None if the program's outputs ``got`` agree with eager's ``want``, else what differs."""
    check = PROPERTY_CHECKS.get(op_name, (None,))[0]
    wants = pytree.tree_leaves(want)
    if check is None:
        return _compare_values(op_name, dtype, got, want)
    if check == "embedding_bag":
        if _mode_arg(sample) != 0:
            return _compare_values(op_name, dtype, got, want)
        p = _compare_values(op_name, dtype, got[:1], wants[0])
        return p and f"bag sums: {p}"
    for g, w in zip(got, wants):
        if g.dtype != w.dtype or tuple(g.shape) != tuple(w.shape):
            return (f"etkit returned {g.dtype}{list(g.shape)}, eager {w.dtype}{list(w.shape)}")
    if check == "shape_dtype":
        return None
    out = got[0]
    if check == "uniform":
        return None if bool(((out >= 0) & (out < 1)).all()) else f"values outside [0, 1): {out}"
    if check == "normal":
        if not bool(out.isfinite().all()):
            return "non-finite values"
        return None if out.numel() < 2 or out.double().std() > 0 else "all values equal"
    if check == "permutation":
        n = out.numel()
        return None if torch.equal(out.sort().values.long(), torch.arange(n)) else f"not a permutation: {out}"
    if check == "dropout":
        x, p, train = sample.args[0], sample.args[1], sample.args[2]
        if not train:
            return _compare_values(op_name, dtype, got, want)
        value, mask = got
        if mask.dtype != torch.bool:
            return f"mask dtype {mask.dtype}"
        kept = (x / (1 - p)).to(x.dtype)
        atol, rtol = tolerance(op_name, x.dtype)
        ok = torch.where(mask, (value.double() - kept.double()).abs() <= atol + rtol * kept.double().abs(),
                         value == 0)
        return None if bool(ok.all()) else "outputs inconsistent with the mask"
    if check == "sorted_with_indices":
        values, indices = got
        p = _compare_tensor(op_name, dtype, values, wants[0])
        if p:
            return f"values: {p}"
        x = sample.args[0]
        dim = _dim_arg(op_name, sample)
        if x.dim() == 0:
            picked = x.reshape(1)[indices.reshape(-1)].reshape(indices.shape)
        else:
            picked = torch.gather(x, dim, indices)
        return _compare_tensor(op_name, dtype, picked, wants[0]) and "indices do not point at the values"
    raise AssertionError(f"unknown property check {check!r}")


def _dim_arg(op_name: str, sample: Sample) -> int:
    schema = {"aten.sort.default": ("dim", 1, -1), "aten.topk.default": ("dim", 2, -1)}[op_name]
    key, pos, default = schema
    if key in sample.kwargs:
        return sample.kwargs[key]
    return sample.args[pos] if len(sample.args) > pos else default


def _mode_arg(sample: Sample) -> int:
    """``mode`` of an ``_embedding_bag`` call (0 sum, 1 mean, 2 max)."""
    return sample.kwargs.get("mode", sample.args[4] if len(sample.args) > 4 else 0)
