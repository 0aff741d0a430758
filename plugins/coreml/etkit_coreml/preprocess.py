"""``CoreMLBackend``: ``preprocess`` converts a partition to a Core ML ML Program with coremltools.

The partition (an Edge ``ExportedProgram``, which coremltools' torch.export frontend accepts) is
converted with ``coremltools.convert(..., convert_to="mlprogram")`` using the compile specs
(:mod:`etkit_coreml.compile_spec`), optionally weight-compressed with
``coremltools.optimize.coreml.linear_quantize_weights``, saved as an ``.mlpackage`` and flattened into
the payload ExecuTorch's Core ML runtime loads (:mod:`etkit_coreml.payload`).

Seed page: "Core ML Backend"; payload layout: the ``executorch`` wheel's
``backends/apple/coreml/compiler/coreml_preprocess.py``.
"""
from __future__ import annotations

import logging
import platform
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from torch.export import ExportedProgram

from etkit.backend import BackendDetails, CompileSpec, PreprocessResult

from . import compile_spec as specs
from .compile_spec import MODEL_TYPE
from .enumerated_shapes import coreml_inputs, generate_enumerated_shapes_compile_spec
from ._quiet import import_coremltools
from ._quiet import quiet as _quiet
from .payload import inmemoryfs, model_package

logger = logging.getLogger(__name__)


class CoreMLConversionError(RuntimeError):
    """coremltools could not convert a partition; the message carries coremltools' own error."""


def spell_out_default_args(edge_program: ExportedProgram) -> None:
    """Give every operator call all its positional arguments, defaults included.

    coremltools' converters index positional inputs (``max_pool2d(x, [2])`` fails with "expected minimum
    3 inputs"); the values are the schema's defaults, so the program's meaning does not change.
    """
    import torch

    for node in edge_program.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        args, kwargs = list(node.args), dict(node.kwargs)
        full = []
        for i, arg in enumerate(node.target._schema.arguments):
            if arg.kwarg_only:
                break
            if i < len(args):
                full.append(args[i])
            elif arg.name in kwargs:
                full.append(kwargs.pop(arg.name))
            elif arg.has_default_value():
                full.append(arg.default_value)
            else:
                break
        if len(full) > len(args):
            node.args, node.kwargs = tuple(full), kwargs
    edge_program.graph_module.recompile()


def convert_to_mlmodel(edge_program: ExportedProgram, compile_specs: Sequence[CompileSpec]):
    """The partition as a ``coremltools.models.MLModel`` (ML Program), per the compile specs.

    Raises:
        CoreMLConversionError: coremltools failed (its message is included).
        etkit_coreml.compile_spec.CompileSpecError: a compile spec cannot be read.
    """
    ct = import_coremltools()

    target = specs.minimum_deployment_target(compile_specs)
    emap = specs.enumerated_shapes_json(compile_specs)
    inputs = coreml_inputs(edge_program, emap, target) if emap is not None else None
    spell_out_default_args(edge_program)
    names = specs.pass_pipeline(compile_specs)
    pipeline = ct.PassPipeline(pass_names=names) if names is not None else None
    try:
        with _quiet():
            # a compiled model needs the model loaded (coremltools compiles it then); only possible on macOS
            skip_load = specs.model_type(compile_specs) != MODEL_TYPE.COMPILED_MODEL or platform.system() != "Darwin"
            mlmodel = ct.convert(edge_program, source="pytorch", convert_to="mlprogram", skip_model_load=skip_load,
                                 compute_precision=specs.compute_precision(compile_specs),
                                 minimum_deployment_target=target, compute_units=specs.compute_unit(compile_specs),
                                 inputs=inputs, pass_pipeline=pipeline)
    except Exception as exc:
        raise CoreMLConversionError(f"coremltools {ct.__version__} could not convert the partition: "
                                    f"{type(exc).__name__}: {exc}") from exc
    config = specs.op_linear_quantizer_config(compile_specs)
    if config is not None:
        mlmodel = compress_weights(mlmodel, config)
    palette = specs.op_palettizer_config(compile_specs)
    if palette is not None:
        mlmodel = palettize_weights(mlmodel, palette)
    return mlmodel



def _gathers_sharing_a_table(mlmodel) -> list[str]:
    """Names of ``gather`` ops whose constant table another kind of op also reads (a tied embedding):
    coremltools refuses to optimize one constant under two configs, so these follow the other op."""
    program = getattr(mlmodel, "_mil_program", None)
    if program is None:
        return []
    readers: dict[str, list] = {}
    for function in program.functions.values():
        for op in function.operations:
            for value in op.inputs.values():
                for var in value if isinstance(value, (list, tuple)) else [value]:
                    source = getattr(var, "op", None)
                    if source is not None and source.op_type == "const":
                        readers.setdefault(var.name, []).append(op)
    tied = []
    for ops in readers.values():
        gathers = [op.name for op in ops if op.op_type == "gather"]
        if gathers and len(gathers) < len(ops):
            tied += gathers
    return tied


def _optimize_weights(mlmodel, config: dict, config_class: str, function: str, key: str):
    """Apply one of ``coremltools.optimize.coreml``'s weight optimizations to every op but ``gather``
    (embedding tables are left alone, as ExecuTorch does, except tables tied to another op's weight).

    Raises:
        CoreMLConversionError: coremltools rejected the config or the model.
    """
    import coremltools.optimize as cto

    try:
        op_config = getattr(cto.coreml, config_class)(**config)
        opt = cto.coreml.OptimizationConfig(global_config=op_config, op_type_configs={"gather": None},
                                            op_name_configs={name: op_config for name in _gathers_sharing_a_table(mlmodel)})
        with _quiet():
            return getattr(cto.coreml, function)(mlmodel, config=opt)
    except Exception as exc:
        raise CoreMLConversionError(f"{function} with {key}={config} failed: {type(exc).__name__}: {exc}") from exc


def compress_weights(mlmodel, config: dict):
    """Linear-quantize the weights (``OpLinearQuantizerConfig`` fields in ``config``, e.g. int8 or int4,
    per channel or per block)."""
    return _optimize_weights(mlmodel, config, "OpLinearQuantizerConfig", "linear_quantize_weights",
                             "op_linear_quantizer_config")


def palettize_weights(mlmodel, config: dict):
    """Replace the weights by look-up tables (``OpPalettizerConfig`` fields in ``config``)."""
    return _optimize_weights(mlmodel, config, "OpPalettizerConfig", "palettize_weights", "op_palettizer_config")


def payload_from_mlmodel(mlmodel, model_type: MODEL_TYPE = MODEL_TYPE.MODEL) -> PreprocessResult:
    """Save ``mlmodel`` and flatten it into the delegate payload.

    Raises:
        CoreMLConversionError: ``MODEL_TYPE.COMPILED_MODEL`` off macOS (compiling needs Core ML itself).
    """
    spec = mlmodel.get_spec()
    inputs = [i.name for i in spec.description.input]
    outputs = [o.name for o in spec.description.output]
    with tempfile.TemporaryDirectory(prefix="etkit_coreml_") as tmp:
        package = Path(tmp) / model_package.MODEL_PACKAGE
        mlmodel.save(str(package))
        compiled = None
        if model_type == MODEL_TYPE.COMPILED_MODEL:
            if platform.system() != "Darwin":
                raise CoreMLConversionError(
                    f"model_type=compiled_model needs Core ML to compile the model, which exists only on macOS "
                    f"(this is {platform.system()}); use MODEL_TYPE.MODEL (the runtime compiles it on device)")
            compiled = Path(mlmodel.get_compiled_model_path())
        files, handles = model_package.build_files(package, inputs, outputs, compiled)
    return PreprocessResult(processed_bytes=inmemoryfs.flatten_files(files),
                            debug_handle_map={k: tuple(v) for k, v in handles.items()} if handles else None)


class CoreMLBackend(BackendDetails):
    """Core ML's ahead-of-time half (ExecuTorch's ``CoreMLBackend``), id ``"CoreMLBackend"``."""

    MODEL_TYPE = MODEL_TYPE

    generate_compile_specs = staticmethod(specs.generate_compile_specs)
    generate_compute_unit_compile_spec = staticmethod(specs.compute_unit_spec)
    generate_minimum_deployment_target_compile_spec = staticmethod(specs.minimum_deployment_target_spec)
    generate_compute_precision_compile_spec = staticmethod(specs.compute_precision_spec)
    generate_model_type_compile_spec = staticmethod(specs.model_type_spec)
    generate_op_linear_quantizer_config_compile_spec = staticmethod(specs.op_linear_quantizer_config_spec)
    generate_pass_pipeline_compile_spec = staticmethod(specs.pass_pipeline_spec)
    generate_op_palettizer_config_compile_spec = staticmethod(specs.op_palettizer_config_spec)
    generate_enumerated_shapes_compile_spec = staticmethod(generate_enumerated_shapes_compile_spec)
    # readers, ExecuTorch's names
    compute_unit_from_compile_specs = staticmethod(specs.compute_unit)
    min_deployment_target_from_compile_specs = staticmethod(specs.minimum_deployment_target)
    model_compute_precision_from_compile_specs = staticmethod(specs.compute_precision)
    model_type_from_compile_specs = staticmethod(specs.model_type)
    op_linear_quantizer_config_from_compile_specs = staticmethod(specs.op_linear_quantizer_config)
    pass_pipeline_from_compile_specs = staticmethod(specs.pass_pipeline)

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Convert one partition and return its payload (see the module docstring).

        Raises:
            CoreMLConversionError: coremltools failed, or a compiled model was asked for off macOS.
            etkit_coreml.compile_spec.CompileSpecError: unreadable compile spec.
        """
        mlmodel = convert_to_mlmodel(edge_program, compile_specs)
        return payload_from_mlmodel(mlmodel, specs.model_type(compile_specs))


def mlmodel_from_payload(payload: bytes, workdir: Optional[Path] = None):
    """The ``coremltools.models.MLModel`` (not loaded: ``skip_model_load=True``) and ``metadata.json`` of a
    payload, for inspection and tests.

    Raises:
        inmemoryfs.InMemoryFSError: the payload is not a flattened directory.
        ValueError: the directory has no ``model.mlpackage`` or ``metadata.json``.
    """
    import json

    ct = import_coremltools()
    files = inmemoryfs.read_files(payload)
    if model_package.METADATA not in files or not any(k.startswith(model_package.MODEL_PACKAGE + "/") for k in files):
        raise ValueError(f"not a Core ML payload: expected {model_package.METADATA} and {model_package.MODEL_PACKAGE}/, "
                         f"found {sorted(files)[:8]}")
    root = Path(workdir or tempfile.mkdtemp(prefix="etkit_coreml_"))
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    with _quiet():
        model = ct.models.MLModel(str(root / model_package.MODEL_PACKAGE), skip_model_load=True)
    return model, json.loads(files[model_package.METADATA])
