"""A .pte that this installation cannot run, whoever made it, gets a precise message, never a crash:
``etkit inspect`` says which field, which version or which backend/kernel is the problem and what to
do, and loading it raises ``EtkitRuntimeError`` naming the same thing.

The programs are etkit-made (a small MLP) and edited the way a newer ExecuTorch, another vendor's
backend or a custom kernel library would change them.
"""
from __future__ import annotations

import pytest
import torch

from etkit.cli import main as etkit_main
from etkit.serialize import deserialize_pte, serialize_pte

runtime = pytest.importorskip("etkit.runtime")


def _mlp_program(partitioner=None) -> bytes:
    import etkit

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    ep = torch.export.export(model, (torch.randn(3, 4),))
    if partitioner is None:
        return etkit.to_edge(ep).to_executorch().buffer
    return etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner]).to_executorch().buffer


@pytest.fixture(scope="module")
def pte() -> bytes:
    return _mlp_program()


def _inspect(tmp_path, data: bytes, capsys) -> tuple[int, str, str]:
    path = tmp_path / "program.pte"
    path.write_bytes(data)
    code = etkit_main(["inspect", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _load_error(data: bytes) -> str:
    with pytest.raises(runtime.EtkitRuntimeError) as info:
        runtime.Runtime.get().load_program(data).load_method("forward")
    return str(info.value)


def test_program_this_runtime_runs_says_so(pte, tmp_path, capsys):
    code, out, _ = _inspect(tmp_path, pte, capsys)
    assert code == 0 and "runs here: yes" in out


def test_newer_format_version_names_the_identifier(pte, tmp_path, capsys):
    newer = pte[:4] + b"ET13" + pte[8:]
    code, _, err = _inspect(tmp_path, newer, capsys)
    assert code == 1 and "'ET13'" in err and "'ET12'" in err
    with pytest.raises(runtime.EtkitRuntimeError, match="ET13"):
        runtime.Runtime.get().load_program(newer)


def test_truncated_file_names_the_field(pte, tmp_path, capsys):
    code, _, err = _inspect(tmp_path, pte[:200], capsys)
    assert code == 1 and "truncated" in err


def test_kernel_this_runtime_lacks_is_named_with_the_fix(pte, tmp_path, capsys):
    contents = deserialize_pte(pte)
    contents.program.executionPlan[0].operators[0].name = "vendor::fused_mlp"
    edited = serialize_pte(contents)
    code, out, _ = _inspect(tmp_path, edited, capsys)
    assert code == 0 and "runs here: no" in out and "kernel 'vendor::fused_mlp." in out
    assert "vendor::fused_mlp" in _load_error(edited)


def test_backend_not_installed_is_named_with_the_fix(tmp_path, capsys):
    xnnpack = pytest.importorskip("etkit_xnnpack")
    contents = deserialize_pte(_mlp_program(xnnpack.XnnpackPartitioner()))
    (delegate,) = contents.program.executionPlan[0].delegates
    delegate.id = "VendorNpuBackend"
    edited = serialize_pte(contents)
    code, out, _ = _inspect(tmp_path, edited, capsys)
    assert code == 0 and "runs here: no" in out and "backend 'VendorNpuBackend'" in out and "install" in out
    message = _load_error(edited)
    assert "VendorNpuBackend" in message and "not registered" in message
