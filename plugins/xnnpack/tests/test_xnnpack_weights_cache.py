"""The process-wide weights cache of the XNNPACK delegate (runtime/src/weights_cache.h).

Repeated loads and weights shared between programs are packed and stored once; every run still
matches torch eager (fp32: atol/rtol 1e-4) or the PT2E reference (int8: one output quantization
step), so a cache that hands out the wrong packed block fails here.
"""
from __future__ import annotations

import contextlib
import gc

import pytest
import torch

runtime = pytest.importorskip("etkit.runtime")
delegate = pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

from helpers import lower  # noqa: E402


def _stats() -> dict:
    gc.collect()
    return delegate.weights_cache_stats()


def _load(buffer: bytes):
    return runtime.Runtime.get().load_program(buffer).load_method("forward")


@contextlib.contextmanager
def _switched_off(option: str):
    """XnnpackBackend's 0/1 ``option`` at 0 for the loads inside, back to its default 1 after."""
    rt = runtime.Runtime.get()
    rt.set_backend_option("XnnpackBackend", option, 0)
    try:
        yield
    finally:
        rt.set_backend_option("XnnpackBackend", option, 1)


def _conv_net(seed: int, last_relu: bool) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers = [torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 3), torch.nn.Flatten(),
              torch.nn.Linear(8 * 12 * 12, 10)]
    if last_relu:
        layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).eval()


def test_a_second_load_reuses_the_packed_weights_and_both_match_eager():
    model = _conv_net(0, last_relu=False)
    x = torch.randn(1, 3, 16, 16)
    buffer = lower(model, (x,))[0].to_executorch().buffer
    before = _stats()
    first = _load(buffer)
    after_first = _stats()
    packed = after_first["packs"] - before["packs"]
    assert packed == 3, after_first  # two convolutions and one linear
    assert after_first["bytes"] > before["bytes"]

    second = _load(buffer)
    after_second = _stats()
    assert after_second["packs"] == after_first["packs"], "the second load packed again"
    assert after_second["reuses"] - after_first["reuses"] == 3
    assert after_second["bytes"] == after_first["bytes"], "the second load stored the weights again"

    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(first.execute([x])[0], expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(second.execute([x])[0], expected, atol=1e-4, rtol=1e-4)

    del first
    assert _stats()["bytes"] == after_first["bytes"], "blocks still used by the second load were freed"
    torch.testing.assert_close(second.execute([x])[0], expected, atol=1e-4, rtol=1e-4)
    del second
    assert _stats()["bytes"] == before["bytes"], "packed weights outlived every method using them"


def test_another_program_with_the_same_float_weights_shares_them():
    base = _conv_net(1, last_relu=False)
    variant = _conv_net(1, last_relu=True)  # same weights, a different graph (and payload)
    other = _conv_net(2, last_relu=False)  # different weights
    x = torch.randn(1, 3, 16, 16)
    buffers = [lower(m, (x,))[0].to_executorch().buffer for m in (base, variant, other)]

    before = _stats()
    methods = [_load(buffers[0])]
    one = _stats()
    methods.append(_load(buffers[1]))
    two = _stats()
    methods.append(_load(buffers[2]))
    three = _stats()
    assert two["bytes"] == one["bytes"] and two["packs"] == one["packs"], (one, two)
    assert three["packs"] - two["packs"] == 3 and three["bytes"] > two["bytes"], (two, three)
    with torch.no_grad():
        for i, model in enumerate((base, variant, other)):
            torch.testing.assert_close(methods[i].execute([x])[0], model(x), atol=1e-4, rtol=1e-4)
    del methods
    assert _stats()["bytes"] == before["bytes"]


def test_int8_program_loaded_twice_is_packed_once_and_matches_the_pt2e_reference():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    import etkit
    from etkit_xnnpack import XnnpackPartitioner
    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    model = _conv_net(3, last_relu=False)
    x = torch.randn(1, 3, 16, 16)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for _ in range(4):
        prepared(torch.randn(1, 3, 16, 16))
    converted = convert_pt2e(prepared)
    ep = torch.export.export(converted, (x,))
    buffer = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer

    before = _stats()
    first = _load(buffer)
    mid = _stats()
    second = _load(buffer)
    after = _stats()
    assert mid["packs"] > before["packs"]
    assert after["packs"] == mid["packs"] and after["bytes"] == mid["bytes"], (mid, after)
    reference = converted(x)
    # One output quantization step, from the output's dequantize node (the int8 runtime may round
    # one step differently from the float reference at a boundary: at most 2 steps allowed).
    step = next(float(n.args[1]) for n in reversed(list(ep.graph.nodes))
                if n.op == "call_function" and "dequantize_per_tensor" in str(n.target))
    out_first, out_second = first.execute([x])[0], second.execute([x])[0]
    torch.testing.assert_close(out_second, out_first, atol=0, rtol=0)  # the same packed weights
    torch.testing.assert_close(out_first, reference, atol=step * 2.01, rtol=0)


def test_the_cache_can_be_switched_off_per_load():
    model = _conv_net(4, last_relu=False)
    x = torch.randn(1, 3, 16, 16)
    buffer = lower(model, (x,))[0].to_executorch().buffer
    with _switched_off("weights_cache"):
        before = _stats()
        method = _load(buffer)
        assert _stats()["packs"] == before["packs"], "a private-cache load went through the shared cache"
    with torch.no_grad():
        torch.testing.assert_close(method.execute([x])[0], model(x), atol=1e-4, rtol=1e-4)
    with pytest.raises(Exception, match="weights_cache must be 0 or 1"):
        runtime.Runtime.get().set_backend_option("XnnpackBackend", "weights_cache", 2)


def _thp_mode() -> str:
    """The kernel's transparent-huge-page mode ("always", "madvise" or "never"; "" when it has none)."""
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return ""
    return text[text.index("[") + 1:text.index("]")] if "[" in text else ""


def _anon_huge_kb() -> int:
    """This process's anonymous memory backed by transparent huge pages, KiB."""
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


def _mlp(seed: int, width: int, hidden: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, width)).eval()


@pytest.mark.skipif(_thp_mode() in ("", "never"),
                    reason="needs Linux with transparent huge pages in 'always' or 'madvise' mode")
def test_packed_weights_sit_in_huge_pages_and_a_neighbour_unloading_leaves_them_intact():
    # Two programs of about 6.5 MB of packed float weights each: their blocks are consecutive in one
    # chunk (packed_memory.h), so unloading the first gives back its pages while the second keeps the
    # chunk; the second's bytes in the page it shares with the first must survive. (A 600-wide layer
    # packs to 2,434,432 bytes, so the programs meet inside a page.)
    width = 1000
    first_model, second_model = _mlp(5, width, 600), _mlp(6, width, 600)
    x = torch.randn(2, width)
    buffers = [lower(m, (x,))[0].to_executorch().buffer for m in (first_model, second_model)]
    before, huge_before = _stats(), _anon_huge_kb()
    first = _load(buffers[0])
    second = _load(buffers[1])
    loaded = _stats()
    added = loaded["bytes"] - before["bytes"]
    assert added >= 8 << 20, loaded
    assert loaded["huge_page_bytes"] - before["huge_page_bytes"] == added, "packed weights outside huge-page memory"
    assert _anon_huge_kb() - huge_before >= 4096, "the kernel backed none of the packed weights with huge pages"
    with torch.no_grad():
        torch.testing.assert_close(first.execute([x])[0], first_model(x), atol=1e-4, rtol=1e-4)
        expected = second_model(x)
    torch.testing.assert_close(second.execute([x])[0], expected, atol=1e-4, rtol=1e-4)
    del first
    mid = _stats()
    assert loaded["huge_page_bytes"] - mid["huge_page_bytes"] == loaded["bytes"] - mid["bytes"] > 0, mid
    torch.testing.assert_close(second.execute([x])[0], expected, atol=1e-4, rtol=1e-4)
    del second
    after = _stats()
    assert after["bytes"] == before["bytes"] and after["huge_page_bytes"] == before["huge_page_bytes"], after


def test_huge_pages_can_be_switched_off_per_load():
    model = _mlp(7, 1000, 600)
    x = torch.randn(2, 1000)
    buffer = lower(model, (x,))[0].to_executorch().buffer
    with _switched_off("huge_pages"):
        before = _stats()
        method = _load(buffer)
        loaded = _stats()
    assert loaded["bytes"] > before["bytes"] and loaded["huge_page_bytes"] == before["huge_page_bytes"], loaded
    with torch.no_grad():
        torch.testing.assert_close(method.execute([x])[0], model(x), atol=1e-4, rtol=1e-4)
    with pytest.raises(Exception, match="huge_pages must be 0 or 1"):
        runtime.Runtime.get().set_backend_option("XnnpackBackend", "huge_pages", 2)
