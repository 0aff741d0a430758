"""A Core ML payload in a few lines, for ``etkit inspect`` (``BackendSpec.describe_payload``)."""
from __future__ import annotations

import collections
import json

from . import inmemoryfs, model_package

_MLMODEL = f"{model_package.MODEL_PACKAGE}/Data/com.apple.CoreML/model.mlmodel"


def describe_payload(processed: bytes, compile_specs: dict | None = None) -> list[str]:
    """Lines describing a Core ML delegate payload: what ``metadata.json`` says and, for an
    ``.mlpackage``, the ML Program's specification version and operation counts.

    Raises:
        inmemoryfs.InMemoryFSError: the payload is not a flattened directory.
    """
    files = inmemoryfs.read_files(processed)
    meta = json.loads(files.get(model_package.METADATA, b"{}"))
    lines = [f"Core ML model {meta.get('identifier', '?')}: inputs {meta.get('inputNames')}, "
             f"outputs {meta.get('outputNames')}"]
    if _MLMODEL not in files:
        compiled = sum(1 for k in files if k.startswith(model_package.COMPILED_MODEL + "/"))
        lines.append(f"compiled model ({model_package.COMPILED_MODEL}, {compiled} files)")
        return lines
    from .._quiet import import_coremltools
    import_coremltools()
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(files[_MLMODEL])
    kind = spec.WhichOneof("Type")
    counts = collections.Counter()
    if kind == "mlProgram":
        for function in spec.mlProgram.functions.values():
            block = function.block_specializations[function.opset]
            counts.update(op.type for op in block.operations if op.type != "const")
    ops = ", ".join(f"{name} {n}" for name, n in counts.most_common())
    lines.append(f"{kind}, specification version {spec.specificationVersion}, {sum(counts.values())} operations "
                 f"besides constants: {ops or 'none'}")
    return lines
