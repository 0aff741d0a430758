"""``etkit.runtime.set_num_threads``: the XNNPACK delegate's thread count, process-wide."""
from __future__ import annotations

import pytest
import torch

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

from helpers import lower  # noqa: E402


def test_two_threads_give_the_same_result_as_one():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 3)).eval()
    x = torch.randn(1, 3, 32, 32)
    buffer = lower(model, (x,))[0].to_executorch().buffer
    outputs = []
    try:
        for threads in (1, 2):
            runtime.set_num_threads(threads)
            method = runtime.Runtime.get().load_program(buffer).load_method("forward")
            outputs.append(method.execute([x])[0])
    finally:
        runtime.set_num_threads(1)
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(outputs[1], model(x), atol=1e-4, rtol=1e-4)


def test_thread_count_must_be_positive():
    with pytest.raises(ValueError, match="num_threads"):
        runtime.set_num_threads(0)
