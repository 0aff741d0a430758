"""Make small portable-only .pte programs with ExecuTorch 1.5.1 (runs INSIDE the oracle; see
tests/interop/oracle.py), plus their eager inputs and outputs.

    make_portable_programs.py OUTDIR

For each model NAME writes OUTDIR/NAME.pte (executorch.exir to_edge(...).to_executorch()) and
OUTDIR/NAME.pt = torch.save({"inputs": [...], "outputs": [...]}) from torch eager. The models cover
the portable kernels etkit's runtime must run: elementwise math with broadcasting and scalars,
matmuls, reductions, normalisations, convolution and pooling, view/copy ops, integer inputs.
"""
import copy
import sys
from pathlib import Path

import torch
from executorch.exir import to_edge


class Add(torch.nn.Module):
    def forward(self, a, b):
        return a + b


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Elementwise(torch.nn.Module):
    def forward(self, x, y):
        a = x * 2.0 - y / 3.0 + torch.sub(x, y, alpha=2)
        b = torch.where(x > 0, torch.tanh(x), torch.sigmoid(y))
        c = torch.clamp(a, -1.5, 2.0) + torch.nn.functional.hardtanh(b)
        d = torch.exp(-torch.abs(x)) + torch.rsqrt(torch.abs(y) + 1.0) + torch.sqrt(torch.abs(x))
        e = torch.nn.functional.gelu(x, approximate="tanh") + torch.nn.functional.gelu(y) + torch.erf(x)
        f = torch.log(torch.abs(y) + 1.0) + torch.pow(x, 2) - torch.neg(y) + 1.0 - x
        g = (x >= y).float() + (x != 0.5).float() + torch.logical_not(x < y).float()
        h = torch.div(x * 10, 3, rounding_mode="floor") + torch.div(x * 10, 3, rounding_mode="trunc")
        return a + b + c + d + e + f + g + h, x + y[0]  # second output broadcasts [3] over [2, 3]


class Reductions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(6)

    def forward(self, x):
        s = torch.softmax(x, dim=-1) + torch.log_softmax(x, dim=1)
        m = x.mean(dim=-1, keepdim=True) + x.sum(dim=1, keepdim=True) + torch.amax(x, dim=-1, keepdim=True)
        return self.ln(x) + s + m, x.sum(), x.mean(dim=[0, 1])


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, stride=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, stride=2)
        self.pool = torch.nn.MaxPool2d(2)
        self.avg = torch.nn.AvgPool2d(2)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.nn.functional.hardtanh(self.dw(y), 0.0, 6.0)
        y = self.pool(y) + self.avg(y)
        y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return self.fc(y)


class ShapeOps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, x, idx):
        p = x.permute(2, 0, 1).contiguous()           # [4, 2, 3]
        t = x.transpose(1, 2).reshape(2, 12)            # [2, 12]
        s = x[:, 1:, ::2]                                # slice with step
        sel = x.select(1, 0).unsqueeze(0)                # [1, 2, 4]
        c = torch.cat([x, x * 2], dim=1)                 # [2, 6, 4]
        e = x[:, :1, :].expand(2, 3, 4)
        isel = torch.index_select(x, 2, torch.tensor([3, 0]))
        emb = self.emb(idx)                              # [2, 3, 4]
        bm = torch.bmm(x, x.transpose(1, 2))             # [2, 3, 3]
        mm = torch.mm(t, t.t())                          # [2, 2]
        sq = sel.squeeze(0)
        return p, t, s, sel, c, e, isel, emb + x, bm, mm, sq


class Stateful(torch.nn.Module):
    """A mutable buffer with a non-zero initial state: each call adds x to it and returns it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.full((2, 3), 5.0))

    def forward(self, x):
        self.acc.add_(x)
        return self.acc * 1.0


class Dynamic(torch.nn.Module):
    """Exported with a dynamic batch dimension (upper bound 8)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(torch.relu(x) + 1.0), x.sum(dim=0)


class Vision(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = torch.nn.GroupNorm(2, 4)

    def forward(self, x):
        y = self.gn(x)
        up = torch.nn.functional.interpolate(y, scale_factor=2, mode="nearest")
        bl = torch.nn.functional.interpolate(y, size=(6, 10), mode="bilinear", align_corners=False)
        return up, bl, torch.var(x, dim=[2, 3], keepdim=True), torch.flip(x, [3]), torch.max(x)


SAMPLES = {
    "add": (Add(), lambda: (torch.randn(2, 3), torch.randn(2, 3))),
    "mlp": (MLP(), lambda: (torch.randn(2, 8),)),
    "elementwise": (Elementwise(), lambda: (torch.randn(2, 3), torch.randn(2, 3))),
    "reductions": (Reductions(), lambda: (torch.randn(4, 6),)),
    "convnet": (ConvNet(), lambda: (torch.randn(1, 3, 8, 8),)),
    "shape_ops": (ShapeOps(), lambda: (torch.randn(2, 3, 4), torch.randint(0, 10, (2, 3)))),
    "stateful": (Stateful(), lambda: (torch.randn(2, 3),)),
    "dynamic": (Dynamic(), lambda: (torch.randn(8, 3),)),
    "vision": (Vision(), lambda: (torch.randn(1, 4, 3, 5),)),
}


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[2:])
    for name, (model, make_inputs) in SAMPLES.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = model.eval()
        if isinstance(model, ConvNet):  # non-trivial BatchNorm statistics
            model.bn.running_mean.uniform_(-0.5, 0.5)
            model.bn.running_var.uniform_(0.5, 2.0)
        inputs = make_inputs()
        if isinstance(model, Dynamic):
            batch = torch.export.Dim("batch", min=1, max=8)
            ep = torch.export.export(model, inputs, dynamic_shapes=({0: batch},))
        else:
            ep = torch.export.export(model, inputs)
        eager = copy.deepcopy(model)  # the exported program shares buffers with `model`: keep them initial
        with torch.no_grad():
            outputs = eager(*inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        extra = {}
        if isinstance(model, Dynamic):  # a smaller batch, within the bound
            small = (inputs[0][:3].clone(),)
            with torch.no_grad():
                extra["small_inputs"] = list(small)
                extra["small_outputs"] = [o.clone() for o in eager(*small)]
        if isinstance(model, Stateful):  # second call sees the updated state
            with torch.no_grad():
                extra["second_outputs"] = [eager(*inputs).clone()]
        if isinstance(model, Stateful):
            # Ask ExecuTorch to store the buffer's initial state (mutable data segment); by default
            # a mutable buffer starts uninitialised.
            from executorch.exir import ExecutorchBackendConfig
            from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

            config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["acc"])])
            prog = to_edge(ep).to_executorch(config)
        else:
            prog = to_edge(ep).to_executorch()
        (out / f"{name}.pte").write_bytes(prog.buffer)
        torch.save({"inputs": list(inputs), "outputs": [o.clone() for o in outputs], **extra}, out / f"{name}.pt")
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
