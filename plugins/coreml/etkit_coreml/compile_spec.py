"""Core ML compile specs: keys and value encodings of ExecuTorch 1.5's Core ML backend.

A ``.pte`` lowered by either tool carries these specs in ``BackendDelegate.compile_specs``; keys and
encodings are facts of that format (the ``executorch`` wheel, ``backends/apple/coreml/compiler/
coreml_preprocess.py``, ``COMPILE_SPEC_KEYS``):

=========================== ==========================================================================
key                         value (UTF-8)
=========================== ==========================================================================
``compute_units``           ``ct.ComputeUnit`` name in lower case: ``all``, ``cpu_only``, ``cpu_and_gpu``,
                            ``cpu_and_ne``
``min_deployment_target``   ``ct.target`` integer value (``"18"`` is iOS18), ``""`` for coremltools' default
``model_compute_precision`` ``ct.precision`` value: ``float16`` or ``float32``
``model_type``              ``model`` (an ``.mlpackage``) or ``compiled_model`` (an ``.mlmodelc``; needs macOS)
``op_linear_quantizer_config`` JSON of ``coremltools.optimize.coreml.OpLinearQuantizerConfig`` fields
``enumerated_shapes``       JSON list of ``[symbolic shape, [enumerated shape, ...]]`` pairs (see
                            :mod:`etkit_coreml.enumerated_shapes`)
``pass_pipeline``           JSON list of coremltools MIL pass names
``op_palettizer_config``    (etkit) JSON of ``coremltools.optimize.coreml.OpPalettizerConfig`` fields;
                            ExecuTorch has no such key, and its runtime ignores it (the payload is
                            an ordinary ML Program with ``constexpr_lut_to_dense`` weights)
=========================== ==========================================================================

Seed page: "Core ML Backend" (executorch-docs), section "Partitioner API".
"""
from __future__ import annotations

import enum
import json
from typing import Optional, Sequence

from etkit.backend import CompileSpec

from ._quiet import import_coremltools


class COMPILE_SPEC_KEYS(enum.Enum):  # noqa: N801 - ExecuTorch's name
    COMPUTE_UNITS = "compute_units"
    MODEL_TYPE = "model_type"
    MIN_DEPLOYMENT_TARGET = "min_deployment_target"
    MODEL_COMPUTE_PRECISION = "model_compute_precision"
    OP_LINEAR_QUANTIZER_CONFIG = "op_linear_quantizer_config"
    ENUMERATED_SHAPES = "enumerated_shapes"
    PASS_PIPELINE = "pass_pipeline"
    OP_PALETTIZER_CONFIG = "op_palettizer_config"


class MODEL_TYPE(enum.Enum):  # noqa: N801 - ExecuTorch's name
    """What the payload holds: an ML Program package, or the package compiled by Core ML (macOS only)."""

    MODEL = "model"
    COMPILED_MODEL = "compiled_model"


class CompileSpecError(ValueError):
    """A Core ML compile spec has a value this plugin cannot read; the message names the key."""


def _value(specs: Sequence[CompileSpec], key: COMPILE_SPEC_KEYS) -> Optional[str]:
    for spec in specs:
        if spec.key == key.value:
            try:
                return bytes(spec.value).decode("utf-8")
            except UnicodeDecodeError:
                raise CompileSpecError(f"compile spec {key.value!r} is not UTF-8 text: {bytes(spec.value)[:32]!r}") \
                    from None
    return None


def compute_unit_spec(compute_unit) -> CompileSpec:
    """``compute_units`` from a ``coremltools.ComputeUnit``."""
    return CompileSpec(COMPILE_SPEC_KEYS.COMPUTE_UNITS.value, compute_unit.name.lower().encode())


def minimum_deployment_target_spec(target) -> CompileSpec:
    """``min_deployment_target`` from a ``coremltools.target`` (``None``: coremltools' default)."""
    return CompileSpec(COMPILE_SPEC_KEYS.MIN_DEPLOYMENT_TARGET.value,
                       b"" if target is None else str(int(target.value)).encode())


def compute_precision_spec(precision) -> CompileSpec:
    """``model_compute_precision`` from a ``coremltools.precision``."""
    return CompileSpec(COMPILE_SPEC_KEYS.MODEL_COMPUTE_PRECISION.value, precision.value.encode())


def model_type_spec(model_type: MODEL_TYPE) -> CompileSpec:
    return CompileSpec(COMPILE_SPEC_KEYS.MODEL_TYPE.value, MODEL_TYPE(model_type).value.encode())


def op_linear_quantizer_config_spec(config: dict) -> CompileSpec:
    """``op_linear_quantizer_config``: a dict of ``OpLinearQuantizerConfig`` fields, e.g.
    ``{"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32}``."""
    return CompileSpec(COMPILE_SPEC_KEYS.OP_LINEAR_QUANTIZER_CONFIG.value, json.dumps(config).encode())


def op_palettizer_config_spec(config: dict) -> CompileSpec:
    """``op_palettizer_config`` (etkit's addition): a dict of ``OpPalettizerConfig`` fields, e.g.
    ``{"mode": "kmeans", "nbits": 4, "granularity": "per_tensor"}``: weights become look-up tables
    (palettization, seed page "Quantization" of Core ML) applied after conversion."""
    return CompileSpec(COMPILE_SPEC_KEYS.OP_PALETTIZER_CONFIG.value, json.dumps(config).encode())


def pass_pipeline_spec(pass_names: Sequence[str]) -> CompileSpec:
    return CompileSpec(COMPILE_SPEC_KEYS.PASS_PIPELINE.value, json.dumps(list(pass_names)).encode())


def generate_compile_specs(compute_unit=None, minimum_deployment_target=None, compute_precision=None,
                           model_type: MODEL_TYPE = MODEL_TYPE.MODEL, op_linear_quantizer_config: Optional[dict] = None,
                           pass_names: Optional[Sequence[str]] = None,
                           op_palettizer_config: Optional[dict] = None) -> list[CompileSpec]:
    """The compile specs of one Core ML delegate, with ExecuTorch's defaults: ``ComputeUnit.ALL``,
    coremltools' default deployment target, ``precision.FLOAT16``, ``MODEL_TYPE.MODEL``."""
    ct = import_coremltools()

    specs = [
        compute_unit_spec(compute_unit if compute_unit is not None else ct.ComputeUnit.ALL),
        minimum_deployment_target_spec(minimum_deployment_target),
        compute_precision_spec(compute_precision if compute_precision is not None else ct.precision.FLOAT16),
        model_type_spec(model_type),
    ]
    if op_linear_quantizer_config is not None:
        specs.append(op_linear_quantizer_config_spec(op_linear_quantizer_config))
    if pass_names is not None:
        specs.append(pass_pipeline_spec(pass_names))
    if op_palettizer_config is not None:
        specs.append(op_palettizer_config_spec(op_palettizer_config))
    return specs


# --- reading ----------------------------------------------------------------------------------------

def compute_unit(specs: Sequence[CompileSpec]):
    ct = import_coremltools()

    value = _value(specs, COMPILE_SPEC_KEYS.COMPUTE_UNITS)
    if value is None:
        return ct.ComputeUnit.ALL
    try:
        return ct.ComputeUnit[value.upper()]
    except KeyError:
        names = ", ".join(u.name.lower() for u in ct.ComputeUnit)
        raise CompileSpecError(f"compile spec 'compute_units' is {value!r}; expected one of {names}") from None


def minimum_deployment_target(specs: Sequence[CompileSpec]):
    ct = import_coremltools()

    value = _value(specs, COMPILE_SPEC_KEYS.MIN_DEPLOYMENT_TARGET)
    if not value:
        return None
    try:
        return ct.target(int(value))
    except ValueError:
        raise CompileSpecError(f"compile spec 'min_deployment_target' is {value!r}, which is not a "
                               f"coremltools.target value (e.g. {int(ct.target.iOS18.value)} for iOS18)") from None


def compute_precision(specs: Sequence[CompileSpec]):
    ct = import_coremltools()

    value = _value(specs, COMPILE_SPEC_KEYS.MODEL_COMPUTE_PRECISION)
    if value is None:
        return ct.precision.FLOAT16
    try:
        return ct.precision(value)
    except ValueError:
        raise CompileSpecError(f"compile spec 'model_compute_precision' is {value!r}; expected float16 or "
                               f"float32") from None


def model_type(specs: Sequence[CompileSpec]) -> MODEL_TYPE:
    value = _value(specs, COMPILE_SPEC_KEYS.MODEL_TYPE)
    if value is None:
        return MODEL_TYPE.MODEL
    try:
        return MODEL_TYPE(value)
    except ValueError:
        raise CompileSpecError(f"compile spec 'model_type' is {value!r}; expected 'model' or 'compiled_model'") \
            from None


def _json(specs: Sequence[CompileSpec], key: COMPILE_SPEC_KEYS):
    value = _value(specs, key)
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise CompileSpecError(f"compile spec {key.value!r} is not valid JSON: {exc}") from None


def op_linear_quantizer_config(specs: Sequence[CompileSpec]) -> Optional[dict]:
    return _json(specs, COMPILE_SPEC_KEYS.OP_LINEAR_QUANTIZER_CONFIG)


def op_palettizer_config(specs: Sequence[CompileSpec]) -> Optional[dict]:
    return _json(specs, COMPILE_SPEC_KEYS.OP_PALETTIZER_CONFIG)


def pass_pipeline(specs: Sequence[CompileSpec]) -> Optional[list]:
    return _json(specs, COMPILE_SPEC_KEYS.PASS_PIPELINE)


def enumerated_shapes_json(specs: Sequence[CompileSpec]) -> Optional[list]:
    return _json(specs, COMPILE_SPEC_KEYS.ENUMERATED_SHAPES)
