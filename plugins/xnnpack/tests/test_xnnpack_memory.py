"""What a loaded XNNPACK method keeps in memory (runtime/src/delegate_builder.h).

- The packed filters' source bytes leave the process once packed: with the .pte mapped from a file,
  the mapping's resident pages after load and a run are a small part of the file, although a
  layer norm between the linears reads its (copied) weight at run time.
- The delegates of one method share one XNNPACK workspace, so intermediate tensors cost the largest
  delegate's need, not the sum; outputs still match eager when a later delegate grows it.
Outputs are compared with torch eager (fp32, atol/rtol 1e-4).
"""
from __future__ import annotations

import pytest
import torch

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

from helpers import lower  # noqa: E402


def _mapped_kib(path: str) -> int:
    """Resident KiB of the mappings of ``path`` in this process (/proc/self/smaps)."""
    total, current = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                current = len(parts) >= 6 and parts[5] == path
            elif current and parts[0] == "Rss:":
                total += int(parts[1])
    return total


class _Stack(torch.nn.Module):
    def __init__(self, width: int, depth: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(depth))

    def forward(self, x):
        for linear, norm in zip(self.layers, self.norms):
            x = norm(torch.relu(linear(x)))
        return x


def test_packed_weights_leave_the_mapped_file(tmp_path):
    torch.manual_seed(0)
    model = _Stack(1024, 8).eval()  # 32 MiB of fp32 weights
    x = torch.randn(4, 1024)
    pte = tmp_path / "stack.pte"
    lower(model, (x,))[0].to_executorch().write_to_file(str(pte))
    size_kib = pte.stat().st_size // 1024
    method = runtime.Runtime.get().load_program(str(pte)).load_method("forward")
    out = method.execute([x])[0]
    resident = _mapped_kib(str(pte))
    assert resident < size_kib // 4, f"{resident} KiB of the {size_kib} KiB program stay resident after load"
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)


class _TwoDelegates(torch.nn.Module):
    """A small delegate, a kernel XNNPACK does not take (a graph break), then a larger delegate."""

    def __init__(self):
        super().__init__()
        self.small = torch.nn.Linear(8, 16)
        self.large = torch.nn.Sequential(torch.nn.Linear(16, 512), torch.nn.ReLU(), torch.nn.Linear(512, 4))

    def forward(self, x):
        y = torch.relu(self.small(x))
        y = torch.cumsum(y, dim=1)
        return self.large(y)


def test_delegates_of_one_method_share_a_workspace_and_match_eager():
    torch.manual_seed(0)
    model = _TwoDelegates().eval()
    x = torch.randn(64, 8)
    manager, = lower(model, (x,))[:1]
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    assert len(method.metadata.backends) == 2, method.metadata.backends
    with torch.no_grad():
        expected = model(x)
    for _ in range(3):  # the first run grows the shared workspace for the second delegate
        torch.testing.assert_close(method.execute([x])[0], expected, atol=1e-4, rtol=1e-4)
