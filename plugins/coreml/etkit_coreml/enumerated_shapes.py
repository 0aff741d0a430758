"""Enumerated shapes: a Core ML model that accepts a fixed set of input shapes instead of one.

The user exports with ``torch.export`` dynamic dims, then lists the concrete shapes each dynamic input
takes; the list travels to ``preprocess`` as the ``enumerated_shapes`` compile spec and becomes
``coremltools.EnumeratedShapes`` inputs. Seed pages: "Enumerated Shapes", "Specifying Enumerated Shapes".

The compile spec's JSON is ExecuTorch's (a fact of the ``.pte`` format, from the ``executorch`` wheel's
``backends/apple/coreml/compiler/enumerated_shape_utils.py``): a list of pairs
``[{"shape": [dim, ...]}, [[[d0, d1, ...], ...], [input name, ...]]]`` where each ``dim`` of the symbolic
shape is an int or ``{"key_name": "s0", "low": 2, "high": 64}`` (``low``/``high`` may be ``null``), and
the second element holds the enumerated shapes of the inputs that have that symbolic shape, then those
inputs' names. Inputs with the same
symbolic shape share one enumeration; with several enumerated inputs (iOS18+), the i-th shapes of all
inputs go together.
"""
from __future__ import annotations

import json
from typing import Optional, Sequence

import torch
from torch.export import ExportedProgram

from etkit.backend import CompileSpec

from ._quiet import import_coremltools
from .compile_spec import COMPILE_SPEC_KEYS, CompileSpecError


class EnumeratedShapesError(ValueError):
    """Enumerated shapes that do not fit the exported program; the message names the input."""


def _bound(value) -> Optional[int]:
    text = str(value)
    if value is None or text in {"int_oo", "-int_oo", "oo", "-oo"}:
        return None
    return int(text)


def _symbolic_shape(shape, range_constraints) -> tuple:
    """A shape as JSON-ready dims: ints stay, each ``SymInt`` becomes ``{"key_name", "low", "high"}``."""
    dims = []
    for dim in shape:
        if isinstance(dim, int):
            dims.append(int(dim))
            continue
        key = str(dim.node.expr) if hasattr(dim, "node") else str(dim)
        low = high = None
        for sym, vr in (range_constraints or {}).items():
            if str(sym) == key:
                low, high = _bound(vr.lower), _bound(vr.upper)
        dims.append({"key_name": key, "low": low, "high": high})
    return tuple(dims)


def _user_inputs(ep: ExportedProgram):
    names = set(ep.graph_signature.user_inputs)
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            yield node.name, node.meta["val"]


def _key(shape: tuple) -> str:
    return json.dumps({"shape": list(shape)}, sort_keys=True)


def enumerated_shapes_map(ep: ExportedProgram, enumerated_shapes: dict) -> list:
    """Check ``enumerated_shapes`` (``{input name: [[d0, d1, ...], ...]}``) against ``ep``'s dynamic
    user inputs and return the compile spec's JSON list.

    Raises:
        EnumeratedShapesError: no shapes given; a dynamic input without an enumeration; an input with a
            single shape; unequal numbers of shapes; a rank, static dim or range constraint violated; two
            inputs sharing a symbolic shape with different enumerations.
    """
    if not enumerated_shapes:
        raise EnumeratedShapesError("no enumerated shapes given: pass {input name: [[shape], [shape], ...]}")
    counts = {name: len(shapes) for name, shapes in enumerated_shapes.items()}
    if len(enumerated_shapes) > 1 and (min(counts.values()) < 2 or len(set(counts.values())) > 1):
        raise EnumeratedShapesError(f"every enumerated input needs the same number (>= 2) of shapes; got {counts}")
    known = dict(_user_inputs(ep))
    unknown = sorted(set(enumerated_shapes) - set(known))
    if unknown:
        raise EnumeratedShapesError(f"enumerated shapes given for {unknown}, which are not user inputs of the "
                                    f"program (its inputs: {sorted(known)})")
    entries: dict[str, tuple] = {}
    names: dict[str, list] = {}
    for name, fake in known.items():
        symbolic = _symbolic_shape(fake.shape, ep.range_constraints)
        if all(isinstance(d, int) for d in symbolic):
            continue
        if name not in enumerated_shapes:
            raise EnumeratedShapesError(f"input {name!r} has the dynamic shape {list(fake.shape)} but no "
                                        f"enumeration; add enumerated_shapes[{name!r}] = [[...], ...]")
        shapes = [list(s) for s in enumerated_shapes[name]]
        for shape in shapes:
            _check_shape(name, symbolic, shape)
        key = _key(symbolic)
        if key in entries and entries[key][1] != shapes:
            raise EnumeratedShapesError(f"input {name!r} shares the symbolic shape {list(fake.shape)} with another "
                                        f"input that has a different enumeration; export them with different "
                                        f"dynamic dims")
        entries[key] = (symbolic, shapes)
        names.setdefault(key, []).append(name)
    return [[{"shape": list(symbolic)}, [shapes, names[key]]] for key, (symbolic, shapes) in entries.items()]


def _check_shape(name: str, symbolic: tuple, shape: list) -> None:
    if len(shape) != len(symbolic):
        raise EnumeratedShapesError(f"input {name!r}: enumerated shape {shape} has rank {len(shape)}, the input "
                                    f"has rank {len(symbolic)}")
    for i, (want, got) in enumerate(zip(symbolic, shape)):
        if not isinstance(got, int) or got < 1:
            raise EnumeratedShapesError(f"input {name!r}: enumerated shape {shape} has dim {i} = {got!r}; dims "
                                        f"must be ints >= 1")
        if isinstance(want, int):
            if want != got:
                raise EnumeratedShapesError(f"input {name!r}: enumerated shape {shape} changes static dim {i} "
                                            f"({want})")
            continue
        low, high = want["low"], want["high"]
        # torch.export specialises 0/1, so a dim declared from 1 reports low=2; 1 is still allowed
        if (low is not None and got < low and not (got == 1 and low == 2)) or (high is not None and got > high):
            raise EnumeratedShapesError(f"input {name!r}: enumerated shape {shape} puts dim {i} = {got} outside "
                                        f"the exported range [{low}, {high}]")


def generate_enumerated_shapes_compile_spec(ep: ExportedProgram, enumerated_shapes: dict) -> CompileSpec:
    """The ``enumerated_shapes`` compile spec for ``ep`` (the exported program, before lowering).

    Use with ``CoreMLPartitioner(lower_full_graph=True, compile_specs=[...])`` (seed: enumerated shapes need
    the whole graph in Core ML). Raises :class:`EnumeratedShapesError` as :func:`enumerated_shapes_map`.
    """
    return CompileSpec(COMPILE_SPEC_KEYS.ENUMERATED_SHAPES.value,
                       json.dumps(enumerated_shapes_map(ep, enumerated_shapes)).encode())


def coreml_inputs(ep: ExportedProgram, spec_json: list, minimum_deployment_target=None) -> list:
    """``coremltools.TensorType`` inputs for ``ep`` (a partition) from the compile spec's JSON list:
    ``EnumeratedShapes`` for dynamic inputs, fixed shapes for the others.

    Raises:
        CompileSpecError: a dynamic input has no enumeration; more than one enumerated input below iOS18.
        EnumeratedShapesError: an enumerated input's dtype is not float16, float32 or int32 (Core ML's
            rule for enumerated inputs).
    """
    ct = import_coremltools()

    by_key = {}
    for item in spec_json:
        ok = (isinstance(item, list) and len(item) == 2 and isinstance(item[0], dict) and "shape" in item[0]
              and isinstance(item[1], list) and len(item[1]) == 2 and isinstance(item[1][0], list))
        if not ok:
            raise CompileSpecError(f"compile spec 'enumerated_shapes' has an entry {item!r}; expected "
                                   f"[{{\"shape\": [...]}}, [[[...], ...], [input names]]]")
        by_key[_key(tuple(item[0]["shape"]))] = [tuple(s) for s in item[1][0]]
    dtypes = {torch.float16: ct.converters.mil.mil.types.fp16, torch.float32: ct.converters.mil.mil.types.fp32,
              torch.int32: ct.converters.mil.mil.types.int32}
    inputs, enumerated = [], 0
    for name, fake in _user_inputs(ep):
        symbolic = _symbolic_shape(fake.shape, ep.range_constraints)
        if all(isinstance(d, int) for d in symbolic):
            inputs.append(ct.TensorType(name=name, shape=tuple(symbolic)))
            continue
        shapes = by_key.get(_key(symbolic))
        if shapes is None:
            raise CompileSpecError(f"partition input {name!r} has the dynamic shape {list(fake.shape)}, which the "
                                   f"'enumerated_shapes' compile spec does not enumerate")
        if fake.dtype not in dtypes:
            raise EnumeratedShapesError(f"input {name!r} is {fake.dtype}; Core ML enumerates only float16, float32 "
                                        f"and int32 inputs")
        enumerated += 1
        inputs.append(ct.TensorType(name=name, shape=ct.EnumeratedShapes(shapes=shapes), dtype=dtypes[fake.dtype]))
    if enumerated > 1 and (minimum_deployment_target is None or minimum_deployment_target < ct.target.iOS18):
        raise CompileSpecError(f"{enumerated} inputs have enumerated shapes, which needs "
                               f"minimum_deployment_target=ct.target.iOS18 or later (got {minimum_deployment_target})")
    return inputs
