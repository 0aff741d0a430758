"""Both main-job models end to end: export → XNNPACK lowering → .pte → etkit runtime, vs torch eager."""
import importlib.util
import pathlib

import pytest
import torch

import etkit

runtime = pytest.importorskip("etkit.runtime")
etkit_xnnpack = pytest.importorskip("etkit_xnnpack")

_DEMO = pathlib.Path(__file__).resolve().parents[2] / "examples" / "demo.py"
_spec = importlib.util.spec_from_file_location("etkit_demo", _DEMO)
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)


def _lower_and_load(model, example, tmp_path):
    ep = torch.export.export(model, example)
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[etkit_xnnpack.XnnpackPartitioner()])
    path = tmp_path / "model.pte"
    edge.to_executorch().write_to_file(path)
    return edge, runtime.Runtime.get().load_program(path).load_method("forward")


def test_mobilenet_v2_is_one_delegate_and_matches_eager(tmp_path):
    model, inputs = demo.mobilenet_case(3)
    edge, method = _lower_and_load(model, inputs[0], tmp_path)
    (report,) = edge.partition_reports["forward"]
    assert report.num_partitions == 1 and not report.rejected, report.format()
    ops = [str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert ops == ["executorch_call_delegate", "<built-in function getitem>"]
    for x in inputs:
        with torch.no_grad():
            expected = model(*x)
        (actual,) = method.execute(list(x))
        spread = (expected.max() - expected.min()).item()
        assert actual.argmax() == expected.argmax()
        # XNNPACK's fp32 kernels reorder sums: 1e-4 of the logit range, as the main job requires
        torch.testing.assert_close(actual, expected, atol=1e-4 * spread, rtol=0)


def test_minilm_embeddings_match_eager(tmp_path):
    model, (inputs,) = demo.minilm_case()
    edge, method = _lower_and_load(model, inputs, tmp_path)
    with torch.no_grad():
        expected = model(*inputs)
    (actual,) = method.execute(list(inputs))
    cos = torch.nn.functional.cosine_similarity(actual, expected, dim=-1)
    assert (cos >= 0.9999).all(), cos
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-3)
