"""etkit-coreml: lower PyTorch programs to Apple Core ML ML Programs (ExecuTorch's ``CoreMLBackend`` format).

    import coremltools as ct
    import etkit
    from etkit_coreml import CoreMLBackend, CoreMLPartitioner

    specs = CoreMLBackend.generate_compile_specs(minimum_deployment_target=ct.target.iOS17)
    program = etkit.to_edge_transform_and_lower(torch.export.export(model, inputs),
                                                partitioner=[CoreMLPartitioner(compile_specs=specs)])

Lowering works on every platform; running needs Core ML (macOS/iOS). Heavy imports (torch, coremltools)
happen on first use of a name.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "CoreMLPartitioner": "etkit_coreml.partition",
    "UnsupportedByCoreMLError": "etkit_coreml.partition",
    "CoreMLBackend": "etkit_coreml.preprocess",
    "CoreMLConversionError": "etkit_coreml.preprocess",
    "mlmodel_from_payload": "etkit_coreml.preprocess",
    "CoreMLQuantizer": "etkit_coreml.quantizer",
    "generate_enumerated_shapes_compile_spec": "etkit_coreml.enumerated_shapes",
    "EnumeratedShapesError": "etkit_coreml.enumerated_shapes",
    "COMPILE_SPEC_KEYS": "etkit_coreml.compile_spec",
    "MODEL_TYPE": "etkit_coreml.compile_spec",
    "CompileSpecError": "etkit_coreml.compile_spec",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'etkit_coreml' has no attribute {name!r}")
