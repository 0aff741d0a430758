"""Load one .pte and time it, in a process of its own (so peak RSS is the runtime's alone).

    python bench/pte_runner.py --runtime etkit|executorch --pte M.pte --inputs I.pt --threads N --repeats R

Prints one JSON line: {"load_ms", "first_ms", "median_ms", "peak_rss_mb"}. For ``executorch`` run it
with the oracle on PYTHONPATH (bench/xnnpack_vs_executorch.py does); it never imports etkit then.
Threads: ExecuTorch's threadpool via ``_unsafe_reset_threadpool``; etkit's through
``etkit.runtime.set_num_threads`` (before the method loads). Peak RSS is the process's VmHWM (Linux
keeps ``ru_maxrss`` across fork/exec, so it would report the parent's peak).
"""
import argparse
import json
import statistics
import time


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", choices=["etkit", "executorch"], required=True)
    ap.add_argument("--pte", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    inputs = list(torch.load(args.inputs))
    if args.runtime == "executorch":
        from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
        from executorch.runtime import Runtime

        _unsafe_reset_threadpool(args.threads)
    else:
        from etkit.runtime import Runtime, set_num_threads

        set_num_threads(args.threads)
    runtime = Runtime.get()
    start = time.perf_counter()  # load time: program + method (imports excluded)
    method = runtime.load_program(args.pte).load_method("forward")
    load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    method.execute(inputs)
    first_ms = (time.perf_counter() - start) * 1000
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        method.execute(inputs)
        times.append((time.perf_counter() - start) * 1000)
    peak = _peak_rss_mb()
    print(json.dumps({"load_ms": load_ms, "first_ms": first_ms, "median_ms": statistics.median(times),
                      "peak_rss_mb": peak}))


if __name__ == "__main__":
    main()
