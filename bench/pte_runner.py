"""Load one .pte and time it, in a process of its own (so peak RSS is the runtime's alone).

    python bench/pte_runner.py --runtime etkit|executorch --pte M.pte --inputs I.pt --threads N --repeats R

Prints one JSON line: {"load_ms", "first_ms", "median_ms", "peak_rss_mb"}. For ``executorch`` run it
with the oracle on PYTHONPATH (bench/xnnpack_vs_executorch.py does); it never imports etkit then.
Threads: ExecuTorch's threadpool via ``_unsafe_reset_threadpool``; etkit's XNNPACK delegate through
the ``ETKIT_XNNPACK_THREADS`` environment variable (set here before the runtime loads).
"""
import argparse
import json
import os
import resource
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", choices=["etkit", "executorch"], required=True)
    ap.add_argument("--pte", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    os.environ["ETKIT_XNNPACK_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(1)
    inputs = list(torch.load(args.inputs))
    if args.runtime == "executorch":
        from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
        from executorch.runtime import Runtime

        _unsafe_reset_threadpool(args.threads)
    else:
        from etkit.runtime import Runtime
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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"load_ms": load_ms, "first_ms": first_ms, "median_ms": statistics.median(times),
                      "peak_rss_mb": peak}))


if __name__ == "__main__":
    main()
