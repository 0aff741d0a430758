"""The Vulkan delegate at run time: ExecuTorch's Vulkan payloads run on it, profiling events come from the
device's timestamps, corrupt payloads and bad inputs get precise errors (never a crash), and a machine
without Vulkan says why (and runs the fallback twin)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import etkit
from etkit.runtime import EtkitRuntimeError, ProfileEventKind, Runtime
from tests.interop.oracle import run_in_oracle
from vulkan_helpers import FP32_TOL, assert_close, load, lower

ORACLE_SCRIPT = Path(__file__).parent / "oracle_scripts" / "et_vulkan.py"


# ------------------------------------------------------------------------------------------ interop
@pytest.fixture(scope="module")
def executorch_programs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("et_vulkan")
    run_in_oracle(ORACLE_SCRIPT, directory, timeout=900)
    return directory


@pytest.mark.parametrize("name", ["linear_add_relu", "small_cnn", "mobilenet_v2"])
@pytest.mark.oracle
def test_executorchs_vulkan_programs_run_on_etkit(executorch_programs, name):
    """Same VkGraph format and op conventions (including ExecuTorch's fused et_vk.conv_with_clamp and
    et_vk.prepack): ExecuTorch 1.5.1's VulkanPartitioner output runs here and matches eager."""
    io = torch.load(executorch_programs / f"{name}.io.pt")
    method = load((executorch_programs / f"et_{name}.pte").read_bytes())
    assert_close(method.execute(io["inputs"]), io["reference"], FP32_TOL, f"ExecuTorch's {name}")


# ------------------------------------------------------------------------------------------ profiling
def test_profiling_reports_each_dispatch_inside_the_delegate_call():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 4), torch.nn.Softmax(-1)).eval()
    x = torch.randn(1, 3, 8, 8)
    _, pte = lower(model, (x,))
    method = load(pte)
    method.enable_profiling()
    method.execute([x])
    events = method.profiling_events()
    call = next(e for e in events if e.kind == ProfileEventKind.DELEGATE_CALL)
    assert call.backend == "VulkanBackend"
    inner = [e for e in events if e.kind == ProfileEventKind.DELEGATE_INTERNAL]
    shaders = [e.name.split("/")[0] for e in inner if "/" in e.name]
    assert shaders == ["nchw_to_tensor", "conv2d_tiled_f32", "copy_f32", "linear_f32", "softmax_f32",
                       "tensor_to_nchw"], shaders
    assert any("stage inputs" in e.name for e in inner) and any("read outputs" in e.name for e in inner)
    for e in inner:
        assert e.duration_ns >= 0 and e.backend == "VulkanBackend"
        assert call.start_ns <= e.start_ns and e.end_ns <= call.end_ns + 1_000_000, e
    method.enable_profiling(False)
    method.execute([x])
    assert method.profiling_events() == []


def test_etdump_maps_each_dispatch_to_its_edge_node(tmp_path):
    """In an ETDump each node's dispatch carries the node's debug handle as its delegate debug id (and the
    shader label); the payload's debug_handle_map and the ETRecord let the Inspector name the Edge op of
    every dispatch (seed page "Debugging Delegation")."""
    from etkit.devtools import Inspector
    from etkit_vulkan import VulkanPartitioner
    from vulkan_helpers import require_vulkan

    require_vulkan()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 4)).eval()
    x = torch.randn(1, 3, 8, 8)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[VulkanPartitioner()],
                                             generate_etrecord=True)
    program = edge.to_executorch()
    program.get_etrecord().save(tmp_path / "m.etrecord")
    loaded = Runtime.get().load_program(program.buffer, enable_etdump=True)
    (out,) = loaded.load_method("forward").execute([x])
    assert_close([out], model(x).detach(), FP32_TOL, "conv + linear")
    loaded.write_etdump_result_to_file(tmp_path / "m.etdp")
    events = Inspector(etdump_path=tmp_path / "m.etdp", etrecord=tmp_path / "m.etrecord").event_blocks[-1].events
    dispatches = [e for e in events if e.is_delegated_op and isinstance(e.delegate_debug_identifier, int)]
    by_shader = {e.name.split("/")[0]: e for e in dispatches}
    assert "aten.convolution.default" in by_shader["conv2d_tiled_f32"].op_types, by_shader
    assert any("linear" in t or "addmm" in t for t in by_shader["linear_f32"].op_types), by_shader
    assert all(e.delegate_backend_name == "VulkanBackend" for e in dispatches)
    staging = [e for e in events if e.is_delegated_op and not isinstance(e.delegate_debug_identifier, int)]
    assert staging and all(not e.op_types for e in staging)  # host staging belongs to no node


# ------------------------------------------------------------------------------------------ bad input
def _program_with_payload(mutate) -> bytes:
    """A .pte whose Vulkan payload went through ``mutate(bytes) -> bytes`` at preprocess time."""
    from etkit_vulkan import preprocess as pre

    original = pre.VulkanBackend.preprocess

    def corrupted(edge_program, compile_specs):
        result = original(edge_program, compile_specs)
        result.processed_bytes = mutate(bytes(result.processed_bytes))
        return result

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    pre.VulkanBackend.preprocess = staticmethod(corrupted)
    try:
        _, pte = lower(model, (torch.randn(2, 8),))
    finally:
        pre.VulkanBackend.preprocess = staticmethod(original)
    return pte


def _flip_op_name(b: bytes) -> bytes:
    name = b"etkit_vk.linear_with_clamp.default"  # linear + relu, fused by the lowering
    i = b.index(name)
    return b[:i] + name.replace(b"linear", b"lineaX") + b[i + len(name):]


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:20], "shorter than the 30-byte VH00 header"),
    (lambda b: b[:4] + b"XXXX" + b[8:], "does not start with the VH00 header"),
    (lambda b: b[:44] + b"\xff" * (len(b) - 44), "failed verification"),
    (lambda b: b[:len(b) // 2], "puts the flatbuffer at"),
    (_flip_op_name, "operator 0 'etkit_vk.lineaX_with_clamp.default' is not implemented"),
], ids=["truncated-header", "bad-magic", "garbage-graph", "truncated-graph", "unknown-op"])
def test_corrupt_payload_is_refused_at_load_with_the_reason(mutate, message):
    pte = _program_with_payload(mutate)
    with pytest.raises(EtkitRuntimeError, match=message):
        Runtime.get().load_program(pte).load_method("forward")


def test_compute_pipelines_live_only_as_long_as_the_methods_that_use_them():
    """Methods of one program share their compute pipelines, and the last one freed destroys them: loading and
    freeing programs of ever new shapes cannot grow the process (each pipeline holds code lavapipe compiled with
    LLVM; the long fuzz run of issue 24 found them kept until exit)."""
    import gc

    from etkit_vulkan import _delegate

    torch.manual_seed(0)
    gc.collect()
    base = _delegate.live_pipelines()
    for n in (5, 9, 13):
        model = torch.nn.Sequential(torch.nn.Linear(n, 3), torch.nn.ReLU()).eval()
        x = torch.randn(2, n)
        _, pte = lower(model, (x,))
        first = load(pte)
        held = _delegate.live_pipelines()
        assert held > base, (n, base, held)
        second = load(pte)
        assert _delegate.live_pipelines() == held, "a second method of the same program made new pipelines"
        with torch.no_grad():
            assert_close(first.execute([x]), model(x), FP32_TOL, f"Linear({n}, 3)")
            assert_close(second.execute([x]), model(x), FP32_TOL, f"Linear({n}, 3), second method")
        del first
        gc.collect()
        assert _delegate.live_pipelines() == held, "freeing one method destroyed pipelines the other still uses"
        del second
        gc.collect()
        assert _delegate.live_pipelines() == base, (n, base, _delegate.live_pipelines())


def test_device_memory_over_the_limit_is_refused_before_anything_is_allocated():
    """The graph's two tensors fit the memory limit at 4 bytes per element (32 KiB), but the device memory the
    delegate needs, as the driver sizes it with the staging buffers, is 64 KiB: at a limit of 60,000 bytes the
    method is refused naming the totals; at 1 MiB it loads and matches eager."""
    from etkit.runtime import set_memory_limit

    x = torch.randn(4096, 1)
    _, pte = lower(torch.nn.ReLU(), (x,))
    try:
        set_memory_limit(60_000)
        # 65536 = 32768 + 32768 + 0 on lavapipe; another driver may align differently
        with pytest.raises(EtkitRuntimeError, match=r"the graph needs \d+ bytes of device memory \(tensors \d+, "
                                                    r"buffers \d+, uploads \d+\), more than the memory limit of 60000"):
            load(pte)
        set_memory_limit(1 << 20)
        assert_close(load(pte).execute([x]), torch.relu(x), FP32_TOL, "ReLU at a 1 MiB limit")
    finally:
        set_memory_limit(None)


def test_out_of_range_embedding_index_is_refused_at_execute():
    model = torch.nn.Embedding(10, 4).eval()
    _, pte = lower(model, (torch.tensor([[1, 2, 3]]),))
    method = load(pte)
    with pytest.raises(EtkitRuntimeError, match="index 10 at position 1 is out of range for an embedding table of 10 rows"):
        method.execute([torch.tensor([[0, 10, 3]])])
    assert_close(method.execute([torch.tensor([[9, 0, 3]])]), model(torch.tensor([[9, 0, 3]])), FP32_TOL)


# ------------------------------------------------------------------------------------------ no Vulkan here
_UNAVAILABLE = textwrap.dedent("""
    import json, sys, torch, etkit
    from etkit.runtime import Runtime
    from etkit_vulkan import VulkanPartitioner
    from etkit_vulkan.plugin import availability
    from etkit import ExecutorchBackendConfig
    a = availability()
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[VulkanPartitioner()])
    result = {"available": a.available, "reason": a.reason}
    try:
        Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
        result["load"] = "loaded"
    except Exception as e:
        result["load"] = str(e)
    method = Runtime.get().load_program(
        edge.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).buffer).load_method("forward")
    (y,) = method.execute([x])
    result["fallback_error"] = (y - model(x)).abs().max().item()
    result["fallback_reason"] = method.fallback_reason
    print(json.dumps(result))
""")


@pytest.mark.parametrize("env, reason", [
    ({"VK_ICD_FILENAMES": "/nonexistent/icd.json", "VK_DRIVER_FILES": "/nonexistent/icd.json"},
     "no Vulkan ICD found: install mesa-vulkan-drivers"),
    ({"ETKIT_VULKAN_LOADER": "/nonexistent/libvulkan.so.1"}, "the Vulkan loader was not found"),
], ids=["no-icd", "no-loader"])
def test_unavailable_vulkan_says_why_and_the_fallback_twin_runs(env, reason, tmp_path):
    import json

    proc = subprocess.run([sys.executable, "-c", _UNAVAILABLE], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **env}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not result["available"] and reason in result["reason"], result
    assert reason in result["load"], result["load"]
    assert result["fallback_error"] < 1e-5 and reason in (result["fallback_reason"] or ""), result


def test_etkit_backends_lists_the_device():
    from etkit_vulkan.plugin import availability

    proc = subprocess.run([sys.executable, "-m", "etkit", "backends"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if "VulkanBackend" in l)
    assert availability().available and "yes" in line, proc.stdout


def test_shaders_run_with_robust_buffer_access():
    """The device is created with robustBufferAccess (lavapipe has it): an out-of-range shader access stays
    inside its buffer instead of reaching the process's heap (context.cpp)."""
    from etkit_vulkan import _delegate

    ok, text = _delegate.probe()
    assert ok and text.endswith(", robust buffer access"), text


_FUZZ = textwrap.dedent("""
    import random, sys, torch
    sys.path[:0] = [sys.argv[1], sys.argv[4]]
    from etkit.runtime import EtkitRuntimeError, Runtime
    import test_vulkan_runtime as t
    random.seed(int(sys.argv[2]))
    seen = {"refused": 0, "ran": 0, "run_error": 0}
    for i in range(int(sys.argv[3])):
        def mutate(b, i=i):
            b = bytearray(b)
            for _ in range(random.randint(1, 8)):
                b[random.randrange(32, len(b))] = random.randrange(256)
            return bytes(b)
        pte = t._program_with_payload(mutate)
        try:
            m = Runtime.get().load_program(pte).load_method("forward")
        except EtkitRuntimeError:
            seen["refused"] += 1
            continue
        try:
            m.execute([torch.randn(2, 8)])
            seen["ran"] += 1
        except (EtkitRuntimeError, ValueError):
            seen["run_error"] += 1
    print(seen)
""")


def test_randomly_corrupted_payloads_never_crash_the_process(tmp_path):
    """Random byte changes inside the graph flatbuffer: each load is refused with an error or runs; the process
    never crashes (checked in a subprocess, whose exit status would show a crash)."""
    here = Path(__file__).parent
    proc = subprocess.run([sys.executable, "-c", _FUZZ, str(here), "7", "60", str(here.parents[2])], capture_output=True,
                          text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "refused" in proc.stdout, proc.stdout
