"""Human-readable listing of an XNNPACK payload (debugging aid).

    python -m etkit_xnnpack.serialization.describe payload.bin

prints the header, every value (id, dims, constant index, extern id, flags) and every node with its
fields, in the order the delegate defines them.
"""
from __future__ import annotations

import sys

from .graph_builder import XNN_INVALID_VALUE_ID, parse_graph
from .payload import split_payload


def _fmt(v):
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, int) and v == XNN_INVALID_VALUE_ID:
        return "INVALID"
    return v


def _describe_quant(params) -> str:
    if hasattr(params, "zeroPoint"):
        return f"per-tensor(scale={params.scale:.6g}, zero_point={params.zeroPoint})"
    fields = {k: _fmt(v) for k, v in vars(params).items() if k != "scale" or len(v)}
    return f"{type(params).__name__.removesuffix('T')}({', '.join(f'{k}={v}' for k, v in fields.items())})"


def describe_payload(payload: bytes) -> str:
    """One line per header field, value and node."""
    from etkit_xnnpack.fb.XNodeUnion import XNodeUnion

    kind = {v: k for k, v in vars(XNodeUnion).items() if not k.startswith("_")}
    header, fb, constants = split_payload(payload)
    graph = parse_graph(fb)
    lines = [f"header: flatbuffer at {header.flatbuffer_offset} ({header.flatbuffer_size} bytes), constants at "
             f"{header.constant_data_offset} ({header.constant_data_size} bytes)",
             f"externs: {graph.numExterns}, inputs {_fmt(graph.inputIds)}, outputs {_fmt(graph.outputIds)}"]
    for value in graph.xvalues:
        t = value.xvalueUnion
        quant = ""
        if hasattr(t, "tensorValue"):  # XNNQuantizedTensorValue
            quant = f" quant {_describe_quant(t.quantParams)}"
            t = t.tensorValue
        where = ""
        if t.constantBufferIdx:
            entry = graph.constantData[t.constantBufferIdx]
            key = entry.namedKey.decode() if isinstance(entry.namedKey, bytes) else entry.namedKey
            where = f" constant #{t.constantBufferIdx} " + (f"named {key[:16]}... ({entry.size} bytes)" if key
                                                               else f"@{entry.offset}+{entry.size}")
        lines.append(f"  value {t.idOut}: dims {_fmt(t.dims)} dtype {t.datatype}{where} "
                     f"extern {_fmt(t.externalId)} flags {t.flags}{quant}")
    for i, node in enumerate(graph.xnodes):
        fields = ", ".join(f"{k}={_fmt(v)}" for k, v in vars(node.xnodeUnion).items())
        clamp = ""
        if node.outputMinMax is not None:
            clamp = f" clamp[{node.outputMinMax.outputMin}, {node.outputMinMax.outputMax}]"
        lines.append(f"  node {i}: {kind[node.xnodeUnionType]}({fields}){clamp}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m etkit_xnnpack.serialization.describe PAYLOAD_FILE", file=sys.stderr)
        return 2
    with open(argv[0], "rb") as f:
        print(describe_payload(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
