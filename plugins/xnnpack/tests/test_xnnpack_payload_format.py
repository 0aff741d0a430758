"""The payload container: XH00 header, XN01 flatbuffer, 16-byte aligned constant data
(ExecuTorch 1.5's ``xnnpack_graph_serialize.py`` layout)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from helpers import requires_fb
from etkit_xnnpack.serialization.payload import (CONSTANT_ALIGNMENT, HEADER_LENGTH, XnnHeader, assemble_payload,
                                                 split_payload)


def _fake_flatbuffer(size: int) -> bytes:
    body = bytearray(size)
    body[4:8] = b"XN01"
    return bytes(body)


def test_header_bytes_follow_the_executorch_layout():
    payload = assemble_payload(_fake_flatbuffer(50), b"\x01" * 7)
    pad, magic, length, fb_off, fb_size, cd_off, cd_size = struct.unpack_from("<4s4sHIIIQ", payload, 0)
    assert (pad, magic, length) == (b"\0\0\0\0", b"XH00", 30)
    assert fb_off == 32 and fb_size == 50          # header padded to 16-byte alignment
    assert cd_off == 32 + 64 and cd_size == 7      # flatbuffer padded to a multiple of 16
    assert payload[cd_off:cd_off + cd_size] == b"\x01" * 7
    assert payload[fb_off + 4:fb_off + 8] == b"XN01"


def test_split_payload_inverts_assemble():
    fb, constants = _fake_flatbuffer(33), bytes(range(40))
    header, fb2, constants2 = split_payload(assemble_payload(fb, constants))
    assert (fb2, constants2) == (fb, constants)
    assert header.constant_data_offset % CONSTANT_ALIGNMENT == 0


@pytest.mark.parametrize("corrupt, message", [
    (lambda p: p[:4] + b"XX00" + p[8:], "magic"),
    (lambda p: p[:8] + struct.pack("<H", 31) + p[10:], "length"),
    (lambda p: p[:20], "shorter than"),
    (lambda p: p[:40], "truncated"),
])
def test_split_payload_rejects_bad_headers(corrupt, message):
    payload = assemble_payload(_fake_flatbuffer(16), b"abc")
    with pytest.raises(ValueError, match=message):
        split_payload(corrupt(payload))


def test_header_refuses_constants_overlapping_the_flatbuffer():
    with pytest.raises(ValueError, match="inconsistent"):
        XnnHeader(32, 100, 64, 0).to_bytes()
    assert len(XnnHeader(32, 16, 48, 0).to_bytes()) == HEADER_LENGTH


def test_assemble_refuses_a_flatbuffer_without_the_xn01_identifier():
    with pytest.raises(ValueError, match="XN01"):
        assemble_payload(bytes(32), b"")


@requires_fb
def test_graph_builder_round_trips_values_nodes_and_named_constants():
    import hashlib

    from etkit_xnnpack.serialization.graph_builder import (NAMED_DATA_OFFSET, XNN_INVALID_VALUE_ID,
                                                           XNN_VALUE_FLAG_EXTERNAL_INPUT,
                                                           XNN_VALUE_FLAG_EXTERNAL_OUTPUT, XnnGraphBuilder)
    from helpers import node_kind_names, parse_payload

    b = XnnGraphBuilder()
    x = b.add_value([2, 3])
    b.mark_external(x, is_input=True)
    w = b.add_constant(np.arange(6, dtype=np.float32).reshape(2, 3))   # 24 bytes
    bias = b.add_constant(np.array([0.5, -1.0], dtype=np.float32))
    again = b.add_constant(np.arange(6, dtype=np.float32).reshape(2, 3))  # same bytes: same key
    y = b.add_value([2, 2])
    b.add_node("XNNFullyConnected", "XNNFullyConnected", input1Id=x, filterId=w, biasId=bias, outputId=y, flags=0)
    b.mark_external(y, is_input=False)

    header, graph, constants = parse_payload(b.to_payload())
    assert graph.numExterns == 2
    assert list(graph.inputIds) == [x] and list(graph.outputIds) == [y]
    tv = [v.xvalueUnion for v in graph.xvalues]
    assert [t.idOut for t in tv] == [0, 1, 2, 3, 4]
    assert (tv[x].externalId, tv[x].flags) == (0, XNN_VALUE_FLAG_EXTERNAL_INPUT)
    assert (tv[y].externalId, tv[y].flags) == (1, XNN_VALUE_FLAG_EXTERNAL_OUTPUT)
    assert tv[w].externalId == XNN_INVALID_VALUE_ID and tv[w].constantBufferIdx == 1
    # Constants live in the program's named data, keyed by sha256 (ExecuTorch's layout); the payload's
    # own constant section is empty.
    w_bytes = np.arange(6, dtype=np.float32).tobytes()
    b_bytes = np.array([0.5, -1.0], dtype=np.float32).tobytes()
    keys = [hashlib.sha256(w_bytes).hexdigest(), hashlib.sha256(b_bytes).hexdigest()]
    entries = [(c.offset, c.size, c.namedKey.decode() if isinstance(c.namedKey, bytes) else c.namedKey)
               for c in graph.constantData[1:]]
    assert entries == [(NAMED_DATA_OFFSET, 24, keys[0]), (NAMED_DATA_OFFSET, 8, keys[1]),
                       (NAMED_DATA_OFFSET, 24, keys[0])]
    assert tv[again].constantBufferIdx == 3
    assert b.named_data == {keys[0]: w_bytes, keys[1]: b_bytes}
    assert header.constant_data_size == len(constants) == 0
    node = graph.xnodes[0]
    assert node_kind_names()[node.xnodeUnionType] == "XNNFullyConnected"
    assert (node.xnodeUnion.filterId, node.xnodeUnion.biasId, node.xnodeUnion.outputId) == (w, bias, y)


@requires_fb
def test_a_value_cannot_be_extern_twice():
    from etkit_xnnpack.serialization.graph_builder import XnnGraphBuilder

    b = XnnGraphBuilder()
    v = b.add_value([1])
    b.mark_external(v, is_input=True)
    with pytest.raises(ValueError, match="already extern"):
        b.mark_external(v, is_input=False)
