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


def test_methods_of_one_program_run_concurrently_in_python_threads():
    """The runtime's thread-safety rule (docs/runtime.md): one loaded Program may be shared, each thread uses
    its own Method. 8 threads (execute releases the GIL), each with its own Method of one XNNPACK program
    (shared weights cache), 200 executions each on inputs of their own; every output equals the one a lone
    Method gives for the same input, bit for bit, and eager within 1e-4."""
    import threading

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32)).eval()
    inputs = [torch.randn(4, 64) for _ in range(8)]
    program = runtime.Runtime.get().load_program(lower(model, (inputs[0],))[0].to_executorch().buffer)
    alone = program.load_method("forward")
    want = [alone.execute([x])[0].clone() for x in inputs]
    with torch.no_grad():
        for x, w in zip(inputs, want):
            torch.testing.assert_close(w, model(x), atol=1e-4, rtol=1e-4)
    methods = [program.load_method("forward") for _ in inputs]
    mismatches, errors = [], []

    def work(k):
        try:
            for _ in range(200):
                (y,) = methods[k].execute([inputs[k]])
                if not torch.equal(y, want[k]):
                    mismatches.append(k)
        except Exception as exc:  # reported below, with the thread
            errors.append((k, exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not mismatches, f"{len(mismatches)} outputs differed from the lone Method's (threads {set(mismatches)})"


#: Each child's per-thread CPU time: {thread id: utime + stime ticks} from /proc/self/task.
_CPU_TICKS = r"""
import os


def cpu_ticks():
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        ticks[tid] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks
"""

_LENT_POOL_CHILD = _CPU_TICKS + r"""
import os, torch
import etkit
from etkit import _runtime
from etkit.runtime import Runtime, set_num_threads
from etkit_xnnpack import XnnpackPartitioner
import etkit.llm.custom_ops  # noqa: F401  (torch.ops.llama)


class Sdpa(torch.nn.Module):
    def forward(self, q, k, v, pos):
        return torch.ops.llama.custom_sdpa(q, k, v, pos[0].item(), None, 0.0, True, None)


before = set(os.listdir("/proc/self/task"))
_runtime.set_kernel_threads(2)
runtime_worker = set(os.listdir("/proc/self/task")) - before
assert len(runtime_worker) == 1, runtime_worker
set_num_threads(2)
linear = torch.nn.Linear(8, 8).eval()
x = torch.randn(2, 8)
ep = torch.export.export(linear, (x,))
program = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
before = set(os.listdir("/proc/self/task"))
xnnpack = Runtime.get().load_program(program.buffer).load_method("forward")
torch.testing.assert_close(xnnpack.execute([x])[0], linear(x), atol=1e-5, rtol=1e-5)
pool_worker = set(os.listdir("/proc/self/task")) - before
assert len(pool_worker) == 1, pool_worker  # XNNPACK's pthreadpool of 2 threads: the caller and one worker

torch.manual_seed(0)
q, k, v = torch.randn(1, 128, 8, 64), torch.randn(1, 1024, 2, 64), torch.randn(1, 1024, 2, 64)
args = [q, k, v, torch.tensor([700])]
method = Runtime.get().load_program(etkit.to_edge(torch.export.export(Sdpa(), tuple(args))).to_executorch().buffer
                                    ).load_method("forward")
(many,) = method.execute(args)
start = cpu_ticks()
for _ in range(80):
    (again,) = method.execute(args)
    assert torch.equal(again, many)
end = cpu_ticks()
_runtime.set_kernel_threads(1)
(one,) = method.execute(args)
assert torch.equal(one, many)
used = {tid: end[tid] - start.get(tid, 0) for tid in end}
print("RUNTIME", sum(used[t] for t in runtime_worker), "POOL", sum(used[t] for t in pool_worker))
"""


def test_runtime_kernels_run_on_the_delegates_threads():
    """With XNNPACK's threads created (set_num_threads(2)), the runtime's kernel loops (llama::custom_sdpa's,
    here) run on XNNPACK's pthreadpool instead of the runtime's own worker (set_parallel_for_provider): in a
    fresh process, per-thread CPU time (/proc/self/task) shows the runtime's worker idle and XNNPACK's busy
    while custom_sdpa runs, and the results are bit-identical to one thread. Two pools on the same cores had
    made a 64-token SmolLM2 prefill slower at 2 kernel threads than at 1."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _LENT_POOL_CHILD], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("RUNTIME"))
    _, runtime_ticks, _, pool_ticks = line.split()
    assert int(runtime_ticks) <= 2 and int(pool_ticks) >= 10, line


_SMALL_OPS_CHILD = _CPU_TICKS + r"""
import os, torch
import etkit
from etkit.runtime import Runtime, set_num_threads
from etkit_xnnpack import XnnpackPartitioner


class Chain(torch.nn.Module):  # 160 elementwise operators and 40 fully connected ones (each mean) on one tensor
    def forward(self, x):
        for _ in range(40):
            x = torch.sigmoid(x * 1.25 + 0.5)
            x = x - x.mean(-1, keepdim=True)
        return x


set_num_threads(2)
torch.manual_seed(0)
for label, shape in (("SMALL", (1, 576)), ("LARGE", (64, 1024))):  # 2.25 KiB and 256 KiB per value
    x = torch.randn(*shape)
    program = etkit.to_edge_transform_and_lower(torch.export.export(Chain(), (x,)),
                                                partitioner=[XnnpackPartitioner()]).to_executorch()
    before = set(os.listdir("/proc/self/task"))
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    (y,) = method.execute([x])
    torch.testing.assert_close(y, Chain()(x), atol=1e-5, rtol=1e-5)
    workers = set(os.listdir("/proc/self/task")) - before if label == "SMALL" else workers
    start = cpu_ticks()
    for _ in range(8000 if label == "SMALL" else 150):
        method.execute([x])
    end = cpu_ticks()
    used = {tid: end[tid] - start.get(tid, 0) for tid in end}
    print(label, sum(used[t] for t in workers), used[str(os.getpid())])
"""


def test_small_operators_run_on_the_calling_thread():
    """With 2 threads, XNNPACK elementwise operators whose output is at most 16 KiB and fully connected ones of
    at most 64K multiply-adds run on the calling thread (scripts/patches/xnnpack-small-elementwise-sequential.patch,
    xnnpack-small-fully-connected-sequential.patch): in a fresh process, 8000 executes of 160 elementwise
    operators and 40 means (each a [1, 576] filter) on a [1, 576] tensor leave the pool's worker idle
    (per-thread CPU time, /proc/self/task), while the same chain on [64, 1024] keeps it busy; both match eager
    within 1e-5."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _SMALL_OPS_CHILD], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in run.stdout.splitlines()
             if line.split()[:1] in (["SMALL"], ["LARGE"])}
    (small_worker, small_caller), (large_worker, _) = lines["SMALL"], lines["LARGE"]
    assert small_caller >= 10 and small_worker <= max(2, small_caller // 10), lines
    assert large_worker >= 10, lines
