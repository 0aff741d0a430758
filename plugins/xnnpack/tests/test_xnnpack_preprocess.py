"""XnnpackBackend.preprocess: the XNNGraph it writes (values, externs, layouts, weights, folding)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

from helpers import requires_fb
from helpers import node_kind_names, parse_payload, to_edge_program
from oracle_models import conv_block

pytestmark = requires_fb

XNN_INVALID = 0xFFFFFFFF


def preprocess_of(model, inputs):
    """The PreprocessResult (payload + named data) for ``model``."""
    from etkit_xnnpack.preprocess import XnnpackBackend

    ep = to_edge_program(model.eval(), inputs)
    return XnnpackBackend.preprocess(ep, [])


def payload_of(model, inputs):
    return preprocess_of(model, inputs).processed_bytes


def parsed(model, inputs):
    """``(header, XNNGraphT, named data)``: constants live in the program's named data."""
    result = preprocess_of(model, inputs)
    header, graph, _ = parse_payload(result.processed_bytes)
    return header, graph, result.named_data


def kinds(graph):
    names = node_kind_names()
    return [names[n.xnodeUnionType] for n in graph.xnodes]


def _key(entry) -> str:
    return entry.namedKey.decode() if isinstance(entry.namedKey, bytes) else entry.namedKey


def constant_array(graph, named_data, vid):
    tv = graph.xvalues[vid].xvalueUnion
    entry = graph.constantData[tv.constantBufferIdx]
    data = np.frombuffer(named_data[_key(entry)], dtype=np.float32)
    return data.reshape([int(d) for d in tv.dims])


@pytest.fixture(scope="module")
def conv_block_payload():
    model, inputs = conv_block()
    return model, inputs, parsed(model, inputs)


def test_conv_block_node_sequence_folds_batch_norm_and_stays_nhwc(conv_block_payload):
    _, _, (_, graph, _) = conv_block_payload
    # relu6 after conv + batch norm is the convolution's output clamp; the clamp of a value that is
    # also read by the add stays a node of its own.
    assert kinds(graph) == ["XNNStaticTranspose", "XNNConv2d", "XNNDepthwiseConv2d", "XNNConv2d",
                            "XNNClamp", "XNNAdd", "XNNGlobalAvgPooling2d", "XNNStaticTranspose",
                            "XNNStaticReshape", "XNNFullyConnected"]
    first = graph.xnodes[0].xnodeUnion
    assert list(first.perm) == [0, 2, 3, 1] and first.inputId == graph.inputIds[0]
    fused = graph.xnodes[1].outputMinMax
    assert fused is not None and (fused.outputMin, fused.outputMax) == (0.0, 6.0)
    assert graph.xnodes[2].outputMinMax is None and graph.xnodes[3].outputMinMax is None
    assert list(graph.xnodes[7].xnodeUnion.perm) == [0, 3, 1, 2]


def test_externs_are_inputs_then_outputs_with_flags(conv_block_payload):
    _, inputs, (_, graph, _) = conv_block_payload
    assert graph.numExterns == 2
    tin = graph.xvalues[graph.inputIds[0]].xvalueUnion
    tout = graph.xvalues[graph.outputIds[0]].xvalueUnion
    assert (tin.externalId, tin.flags, [int(d) for d in tin.dims]) == (0, 1, list(inputs[0].shape))
    assert (tout.externalId, tout.flags, [int(d) for d in tout.dims]) == (1, 2, [2, 5])
    internal = [v.xvalueUnion for v in graph.xvalues if v.xvalueUnion.idOut not in (tin.idOut, tout.idOut)]
    assert all(t.externalId == XNN_INVALID and t.flags == 0 for t in internal)
    assert [v.xvalueUnion.idOut for v in graph.xvalues] == list(range(len(graph.xvalues)))


def test_constants_are_named_data_keyed_by_sha256_and_sized(conv_block_payload):
    import hashlib

    from etkit_xnnpack.serialization.graph_builder import NAMED_DATA_OFFSET

    _, _, (header, graph, named) = conv_block_payload
    assert header.constant_data_size == 0
    entries = list(graph.constantData)[1:]
    assert entries and all(e.offset == NAMED_DATA_OFFSET for e in entries)
    assert {_key(e) for e in entries} == set(named)
    assert all(hashlib.sha256(data).hexdigest() == key for key, data in named.items())
    for v in graph.xvalues:
        tv = v.xvalueUnion
        if tv.constantBufferIdx:
            entry = graph.constantData[tv.constantBufferIdx]
            assert entry.size == len(named[_key(entry)]) == 4 * int(np.prod([int(d) for d in tv.dims]))


def test_conv_filter_is_ohwi_with_batch_norm_folded(conv_block_payload):
    model, _, (_, graph, constants) = conv_block_payload
    conv = graph.xnodes[1].xnodeUnion
    bn = model.bn
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    w = (model.conv.weight * scale.reshape(-1, 1, 1, 1)).permute(0, 2, 3, 1).detach().numpy()
    b = (bn.bias - bn.running_mean * scale).detach().numpy()   # the conv has no bias of its own
    np.testing.assert_allclose(constant_array(graph, constants, conv.filterId), w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(constant_array(graph, constants, conv.biasId), b, rtol=1e-6, atol=1e-7)
    assert (conv.kernelHeight, conv.kernelWidth, conv.paddingTop, conv.paddingLeft) == (3, 3, 1, 1)
    assert (conv.groups, conv.groupInputChannels, conv.groupOutputChannels) == (1, 3, 16)


def test_depthwise_filter_is_1hwo(conv_block_payload):
    model, _, (_, graph, constants) = conv_block_payload
    dw = graph.xnodes[2].xnodeUnion
    expected = model.dw.weight.permute(1, 2, 3, 0).detach().numpy()   # [16, 1, 3, 3] -> [1, 3, 3, 16]
    np.testing.assert_array_equal(constant_array(graph, constants, dw.filterId), expected)
    assert (dw.groups, dw.groupInputChannels, dw.groupOutputChannels) == (16, 1, 1)
    assert (dw.subsamplingHeight, dw.subsamplingWidth) == (2, 2)


def test_standalone_clamp_carries_its_bounds(conv_block_payload):
    _, _, (_, graph, _) = conv_block_payload
    clamp = graph.xnodes[4]
    assert (clamp.outputMinMax.outputMin, clamp.outputMinMax.outputMax) == (-0.5, 0.5)


def test_fully_connected_filter_is_out_by_in(conv_block_payload):
    model, _, (_, graph, constants) = conv_block_payload
    fc = graph.xnodes[-1].xnodeUnion
    assert fc.flags == 0
    np.testing.assert_array_equal(constant_array(graph, constants, fc.filterId), model.fc.weight.detach().numpy())


class ReturnsAliases(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return y, y.clone(), x.clone()


def test_outputs_aliasing_inputs_or_each_other_get_their_own_values():
    _, graph, _ = parse_payload(payload_of(ReturnsAliases(), (torch.randn(2, 3),)))
    outs = list(graph.outputIds)
    assert len(set(outs)) == 3 and graph.numExterns == 4
    assert kinds(graph).count("XNNCopy") == 2
    assert [graph.xvalues[o].xvalueUnion.externalId for o in outs] == [1, 2, 3]


class TwoInputs(nn.Module):
    def forward(self, a, b):
        return b * 2.0, a - b


def test_inputs_and_outputs_keep_argument_order():
    _, graph, _ = parse_payload(payload_of(TwoInputs(), (torch.randn(3), torch.randn(4, 3))))
    ins = [graph.xvalues[i].xvalueUnion for i in graph.inputIds]
    assert [[int(d) for d in t.dims] for t in ins] == [[3], [4, 3]]
    assert [t.externalId for t in ins] == [0, 1]
    outs = [graph.xvalues[i].xvalueUnion for i in graph.outputIds]
    assert [t.externalId for t in outs] == [2, 3]
    assert kinds(graph) == ["XNNMultiply", "XNNSubtract"]


def test_layer_norm_is_written_with_pooling_and_arithmetic():
    _, graph, _ = parse_payload(payload_of(nn.LayerNorm(8), (torch.randn(2, 5, 8),)))
    assert kinds(graph) == ["XNNStaticReshape", "XNNGlobalAvgPooling2d", "XNNSubtract", "XNNSquare",
                            "XNNGlobalAvgPooling2d", "XNNAdd", "XNNReciprocalSquareRoot", "XNNMultiply",
                            "XNNStaticReshape", "XNNMultiply", "XNNAdd"]
    assert [int(d) for d in graph.xvalues[graph.xnodes[0].xnodeUnion.outputId].xvalueUnion.dims] == [10, 8, 1, 1]


def test_preprocess_refuses_an_op_without_lowering():
    from etkit_xnnpack.operators import LoweringError
    from etkit_xnnpack.preprocess import XnnpackBackend

    class Where(nn.Module):
        def forward(self, x):
            return torch.where(x > 0, x, x)

    ep = to_edge_program(Where(), (torch.randn(3),))
    with pytest.raises(LoweringError, match=r"aten\.gt\.Scalar \(node gt\) has no XNNPACK lowering"):
        XnnpackBackend.preprocess(ep, [])


def test_python_scalars_become_float32_one_element_constants():
    class Scaled(nn.Module):
        def forward(self, x):
            return x * 2 + 0.5

    _, graph, constants = parsed(Scaled(), (torch.randn(4),))
    assert kinds(graph) == ["XNNMultiply", "XNNAdd"]
    mul, add = (n.xnodeUnion for n in graph.xnodes)
    np.testing.assert_array_equal(constant_array(graph, constants, mul.input2Id), [2.0])
    np.testing.assert_array_equal(constant_array(graph, constants, add.input2Id), [0.5])


def test_describe_lists_header_values_and_nodes():
    from etkit_xnnpack.serialization.describe import describe_payload

    text = describe_payload(payload_of(TwoInputs(), (torch.randn(3), torch.randn(4, 3))))
    assert text.startswith("header: flatbuffer at 32")
    assert "externs: 4, inputs [0, 1]" in text
    assert "node 0: XNNMultiply(" in text and "node 1: XNNSubtract(" in text
    assert "constant #1 named " in text
