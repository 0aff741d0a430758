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
