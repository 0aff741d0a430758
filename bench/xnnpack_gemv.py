"""How fast etkit's XNNPACK delegate streams weights through a matrix-vector product (one token of an LLM's
decode step), per weight format, against what one thread reads from memory here.

    .venv/bin/python bench/xnnpack_gemv.py [--threads 1] [--out-features 196608] [--repeats 15]

A decode step multiplies one row of activations by every weight matrix once, so its linears run at the speed
the kernel streams packed weights from DRAM. Each format is one ``nn.Linear(576, out_features)`` (SmolLM2's
hidden size; 196,608 outputs make the int8 weights 113 MB, beyond any cache), quantized by torchao as
``LlmConfig(quantize=...)`` does and lowered with the XnnpackPartitioner:

- ``fp32``: XNNPACK's f32 fully connected;
- ``8da8w``: int8 dynamic activations x int8 per-channel weights (qd8 x qc8w; a ``weight_qparams="gguf"``
  program's output projection);
- ``8da4w axis`` / ``8da4w g32``: int4 weights per channel (qc4w) / per 32 inputs (qb4w, an 8da4w LLM's linears).

Printed per format: the best ``execute`` time of ``--repeats`` (ms), the packed bytes the kernel read per ms
(GB/s: the ``.pte``'s size, which is the weights plus a few hundred bytes), and that rate over the read
bandwidth torch's sum gets on a 512 MB tensor with the same threads, taken right before the format's runs.
A ratio near 1 means the kernel runs at the memory's speed; XNNPACK 2024-11's own qc8w / qc4w GEMV kernels
prefetched 768-960 bytes ahead and streamed slower (scripts/patches/xnnpack-qd8-gemv-hardware-prefetch.patch).
This host's bandwidth drifts with its neighbours' traffic, so compare ratios, not GB/s across runs.
"""
from __future__ import annotations

import argparse
import time

import torch

FORMATS = ("fp32", "8da8w", "8da4w axis", "8da4w g32")


def _read_bandwidth_gbs(mb: int = 512, repeats: int = 7) -> float:
    """GB/s torch's sum reads from a ``mb`` MB float32 tensor with the current thread count (best of ``repeats``)."""
    a = torch.ones(mb * (1 << 20) // 4)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - start)
    return a.numel() * 4 / best / 1e9


def _program(fmt: str, out_features: int) -> bytes:
    import etkit
    from etkit_xnnpack import XnnpackPartitioner
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(576, out_features, bias=False)).eval()
    configs = {"8da8w": (torch.int8, PerAxis(0)), "8da4w axis": (torch.int4, PerAxis(0)),
               "8da4w g32": (torch.int4, PerGroup(32))}
    if fmt in configs:
        dtype, granularity = configs[fmt]
        quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=dtype, weight_granularity=granularity))
    ep = torch.export.export(model, (torch.randn(1, 576),))
    return etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def measure(fmt: str, threads: int = 1, out_features: int = 196608, repeats: int = 15) -> tuple:
    """One format's GEMV: ``(program MB, best execute ms, GB/s streamed, torch sum GB/s)``, with ``threads``
    threads for both (``etkit.runtime.set_num_threads`` and ``torch.set_num_threads``; torch's count is put back)."""
    import numpy as np
    from etkit.runtime import Runtime, set_num_threads

    set_num_threads(threads)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        pte = _program(fmt, out_features)
        method = Runtime.get().load_program(pte).load_method("forward")
        x = np.random.default_rng(0).standard_normal((1, 576), dtype=np.float32)
        method.execute([x])  # first touch of the packed weights
        read = _read_bandwidth_gbs()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            method.execute([x])
            best = min(best, time.perf_counter() - start)
        del method
    finally:
        torch.set_num_threads(previous)
    return len(pte) / 1e6, best * 1e3, len(pte) / best / 1e9, read


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-features", type=int, default=196608)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args(argv)
    formats = args.formats.split(",")
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        parser.error(f"unknown format(s) {unknown}; choose from {list(FORMATS)}")

    print(f"XNNPACK GEMV, [1, 576] x [576, {args.out_features}], {args.threads} thread(s), best of {args.repeats}")
    print(f"{'format':12s} {'MB':>7s} {'ms':>8s} {'GB/s':>6s} {'torch sum GB/s':>15s} {'ratio':>6s}")
    for fmt in formats:
        mb, ms, rate, read = measure(fmt, args.threads, args.out_features, args.repeats)
        print(f"{fmt:12s} {mb:7.1f} {ms:8.3f} {rate:6.1f} {read:15.1f} {rate / read:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
