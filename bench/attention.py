"""llama::custom_sdpa at SmolLM2-135M's decode and prefill shapes: each instruction-set copy of etkit's
kernel beside torch eager's SDPA (issue 20, item 2).

    .venv/bin/python bench/attention.py [--positions 64,256,511] [--repeats 200]

One program holding only ``llama::custom_sdpa`` (query [1, S, 9, 64], key/value caches [1, 512, 3, 64],
float32, causal: SmolLM2-135M's 9 query heads over 3 kv heads of 64) is run, in a fresh process per copy
(``ETKIT_CPU_CAPABILITY``=generic, avx2, avx512; docs/runtime.md), on one thread; the caches are the
program's constants, as they sit in planned memory in a model, so a call passes only the query. For each start position
it prints the median microseconds of ``Method.execute`` for a decode step (S=1) and a 64-token prefill
chunk, and the ratio torch/etkit, where torch is ``F.scaled_dot_product_attention`` on the same cache rows
(kv heads repeated, boolean causal mask, ``torch.set_num_threads(1)``). A ratio above 1 means etkit is
faster. The execute time includes the runtime's per-call work (argument checks, output binding), which
a model pays too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HEADS, KV_HEADS, HEAD_DIM, MAX_SEQ = 9, 3, 64, 512

_CHILD = r"""
import json, statistics, sys, time
import torch, torch.nn.functional as F
import etkit
from etkit import _runtime
from etkit.runtime import Runtime
import etkit.llm.custom_ops  # registers torch.ops.llama
H, H_KV, D, MAX = {heads}, {kv_heads}, {head_dim}, {max_seq}
torch.set_num_threads(1)

class Sdpa(torch.nn.Module):
    # the caches are the module's buffers (in a model: mutable buffers in planned memory), so a call
    # passes only the query and the start position
    def __init__(self, k, v):
        super().__init__()
        self.register_buffer("k", k)
        self.register_buffer("v", v)

    def forward(self, q, pos):
        return torch.ops.llama.custom_sdpa(q, self.k, self.v, pos[0].item(), None, 0.0, True, None)

def median_us(fn, repeats):
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)

rows = []
for seq in (1, 64):
    torch.manual_seed(0)
    q, k, v = torch.randn(1, seq, H, D), torch.randn(1, MAX, H_KV, D), torch.randn(1, MAX, H_KV, D)
    ep = torch.export.export(Sdpa(k, v), (q, torch.tensor([0])))
    method = Runtime.get().load_program(etkit.to_edge(ep).to_executorch().buffer).load_method("forward")
    for pos in {positions}:
        if pos + seq > MAX:
            continue
        args = [q, torch.tensor([pos])]
        length = pos + seq
        kt = k[:, :length].transpose(1, 2).repeat_interleave(H // H_KV, 1).contiguous()
        vt = v[:, :length].transpose(1, 2).repeat_interleave(H // H_KV, 1).contiguous()
        qt = q.transpose(1, 2).contiguous()
        mask = torch.arange(length)[None] <= (torch.arange(seq)[:, None] + pos)
        (got,) = method.execute(args)
        ref = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask).transpose(1, 2)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
        et = median_us(lambda: method.execute(args), {repeats})
        eager = median_us(lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask), {repeats})
        rows.append({{"seq": seq, "pos": pos, "etkit_us": et, "torch_us": eager}})
print(json.dumps({{"capability": _runtime.kernel_cpu_capability(), "rows": rows}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", default="64,256,447")
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    positions = [int(p) for p in args.positions.split(",")]
    code = _CHILD.format(heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, max_seq=MAX_SEQ,
                         positions=positions, repeats=args.repeats)
    print(f"llama::custom_sdpa, query [1, S, {HEADS}, {HEAD_DIM}], caches [1, {MAX_SEQ}, {KV_HEADS}, {HEAD_DIM}], "
          f"float32, causal, 1 thread; median of {args.repeats} (microseconds)")
    print(f"{'copy':<8} {'S':>3} {'start_pos':>9} {'etkit us':>9} {'torch us':>9} {'torch/etkit':>11}")
    seen = set()
    for capability in ("generic", "avx2", "avx512"):
        env = {**os.environ, "ETKIT_CPU_CAPABILITY": capability, "OMP_NUM_THREADS": "1"}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        if run.returncode != 0:
            raise SystemExit(f"bench/attention.py: the {capability} run failed:\n{run.stderr[-2000:]}")
        result = json.loads(run.stdout.strip().splitlines()[-1])
        if result["capability"] in seen:  # the CPU cannot run this copy: it fell back to a narrower one
            print(f"{capability:<8} (this CPU runs at most {result['capability']})")
            continue
        seen.add(result["capability"])
        for row in result["rows"]:
            print(f"{result['capability']:<8} {row['seq']:>3} {row['pos']:>9} {row['etkit_us']:>9.1f} "
                  f"{row['torch_us']:>9.1f} {row['torch_us'] / row['etkit_us']:>10.2f}x")


if __name__ == "__main__":
    main()
