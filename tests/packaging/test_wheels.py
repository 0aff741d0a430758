"""The wheels work on their own: a fresh venv with only the built wheels (etkit-runtime, etkit,
etkit-xnnpack; torch borrowed from this environment, see venv_overlay.py) lowers and runs MobileNetV2 on
XNNPACK, runs portable-only programs without the plugin, builds native code from the installed CMake
packages, and forgets the plugin cleanly when it is uninstalled.

Wheels are built with --no-build-isolation from this checkout; their build trees (build/<wheel tag>)
are the editable installs' trees, and XNNPACK comes from the per-user cache, so nothing is rebuilt
from scratch.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .venv_overlay import make_overlay, make_venv

ROOT = Path(__file__).resolve().parents[2]
#: What the fresh venv borrows: torch and the etkit wheels' other dependencies, plus the build tools
#: `etkit runner build` uses.
BORROWED = ["torch", "torchvision", "numpy", "pluggy", "flatbuffers", "cmake", "ninja"]


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-4000:]}")
    return proc


def _xnnpack_root() -> str:
    root = os.environ.get("XNNPACK_ROOT") or (Path(sys.prefix) / "xnnpack-prefix").read_text().strip()
    assert Path(root, "lib").is_dir(), f"XNNPACK prefix {root} has no lib/ (run `make xnnpack`)"
    return root


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", out]
    _run(["flock", "/tmp/etkit-build.lock", *pip, ROOT, ROOT / "packaging" / "etkit"])
    _run(["flock", "/tmp/etkit-build.lock", *pip, ROOT / "plugins" / "xnnpack"],
         env={**os.environ, "XNNPACK_ROOT": _xnnpack_root()})
    found = {w.name.split("-")[0]: w for w in out.glob("*.whl")}
    assert set(found) == {"etkit_runtime", "etkit", "etkit_xnnpack"}, sorted(out.iterdir())
    return found


class FreshVenv:
    def __init__(self, path: Path, overlay: Path, work: Path):
        self.python = make_venv(path, overlay)
        self.bin = path / "bin"
        self.work = work
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"

    def run(self, *cmd) -> subprocess.CompletedProcess:
        return _run(cmd, cwd=self.work, env=self.env)

    def pip(self, *args) -> subprocess.CompletedProcess:
        return self.run(self.python, "-m", "pip", "--disable-pip-version-check", *args)

    def script(self, source: str) -> str:
        path = self.work / "script.py"
        path.write_text(textwrap.dedent(source))
        return self.run(self.python, path).stdout

    def install(self, *wheels) -> None:
        """Install ``wheels`` alone, then check that the borrowed packages meet every dependency they
        declare. (--no-deps: pip's resolver would otherwise fetch a torch of its own from the machine's
        wheel cache rather than accept the borrowed one; `pip check` proves nothing is missing.)"""
        self.pip("install", "-q", "--no-index", "--no-deps", *wheels)
        self.pip("check")
        site = Path(self.script("import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
        own = sorted(p.name for p in site.iterdir() if not p.name.startswith(("etkit", "_etkit", "pip", "_distutils")))
        assert own == [], f"the venv should hold only etkit's wheels and pip, found {own}"

    def has(self, dist: str) -> bool:
        return subprocess.run([self.python, "-m", "pip", "show", "-q", dist], capture_output=True,
                              env=self.env).returncode == 0


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheels) -> FreshVenv:
    base = tmp_path_factory.mktemp("fresh")
    make_overlay(base / "overlay", BORROWED)
    (base / "work").mkdir()
    fresh = FreshVenv(base / "venv", base / "overlay", base / "work")
    fresh.install(wheels["etkit_runtime"], wheels["etkit"])
    return fresh


_MODULES_COME_FROM_THE_VENV = """
    import sys, etkit
    assert etkit.__file__.startswith(sys.prefix), f"etkit imported from {etkit.__file__}, not the venv"
"""


def test_core_wheel_alone_runs_portable_programs(venv):
    if venv.has("etkit-xnnpack"):
        venv.pip("uninstall", "-y", "-q", "etkit-xnnpack")
    listing = venv.run(venv.bin / "etkit", "backends").stdout
    assert "no backend plugins installed" in listing and "Xnnpack" not in listing, listing
    out = venv.script(_MODULES_COME_FROM_THE_VENV + """
    import torch, etkit
    from etkit.runtime import Runtime
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()
    x = torch.randn(2, 3, 16, 16)
    etkit.to_edge(torch.export.export(model, (x,))).to_executorch().write_to_file("portable.pte")
    (y,) = Runtime.get().load_program("portable.pte").load_method("forward").execute([x])
    torch.testing.assert_close(y, model(x), atol=1e-5, rtol=1e-5)
    print("portable ok")
    """)
    assert "portable ok" in out


def test_plugin_wheel_lowers_and_runs_mobilenet_v2(venv, wheels):
    venv.install(wheels["etkit_runtime"], wheels["etkit"], wheels["etkit_xnnpack"])
    assert "XnnpackBackend" in venv.run(venv.bin / "etkit", "backends").stdout
    out = venv.script(_MODULES_COME_FROM_THE_VENV + """
    import torch, torchvision, etkit, etkit_xnnpack
    assert etkit_xnnpack.__file__.startswith(sys.prefix), etkit_xnnpack.__file__
    from etkit.runtime import Runtime
    from etkit_xnnpack import XnnpackPartitioner
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()])
    edge.to_executorch().write_to_file("mv2.pte")
    method = Runtime.get().load_program("mv2.pte").load_method("forward")
    (y,) = method.execute([x])
    with torch.no_grad():
        ref = model(x)
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)    # fp32 XNNPACK vs eager
    assert edge.partition_reports["forward"][0].format().count("XnnpackBackend") >= 1
    print("mobilenet_v2 ok", float((y - ref).abs().max()))
    """)
    assert "mobilenet_v2 ok" in out


def test_native_builds_use_the_installed_packages(venv, wheels):
    """`etkit runner build` and the C++ example (examples/cpp) build against the wheels' CMake packages."""
    if not venv.has("etkit-xnnpack"):
        venv.install(wheels["etkit_xnnpack"])
    prefixes = venv.run(venv.bin / "etkit", "cmake-prefix-path").stdout.strip().split(";")
    assert [Path(p).name for p in prefixes] == ["etkit", "etkit_xnnpack"]
    assert all(p.startswith(str(venv.bin.parent)) for p in prefixes), prefixes
    venv.script("""
    import torch, etkit
    from etkit_xnnpack import XnnpackPartitioner
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    ep = torch.export.export(model, (x,))
    etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().write_to_file("mlp.pte")
    x.numpy().tofile("x.bin")
    with torch.no_grad():
        model(x).numpy().tofile("ref.bin")
    """)
    build = venv.run(venv.bin / "etkit", "runner", "build", "--backends", "xnnpack", "--model", "mlp.pte",
                     "-o", "runner").stdout
    assert "backends: XnnpackBackend" in build, build
    runner = venv.run(venv.work / "runner" / "etkit_runner", "--model_path", "mlp.pte", "--list_backends",
                      "--iterations", "1").stdout
    assert "XnnpackBackend" in runner and "shape [4, 8]" in runner, runner

    venv.run("cmake", "-S", ROOT / "examples" / "cpp", "-B", "example", "-G", "Ninja",
             f"-DCMAKE_PREFIX_PATH={';'.join(prefixes)}")
    venv.run("cmake", "--build", "example")
    printed = venv.run(venv.work / "example" / "run_model", "mlp.pte", "x.bin").stdout.split()
    import numpy as np
    got = np.array([float(v) for v in printed], dtype=np.float32)
    ref = np.fromfile(venv.work / "ref.bin", dtype=np.float32)
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)


def test_uninstalling_the_plugin_removes_it_cleanly(venv, wheels):
    if not venv.has("etkit-xnnpack"):
        venv.install(wheels["etkit_xnnpack"])
    venv.pip("uninstall", "-y", "-q", "etkit-xnnpack")
    listing = venv.run(venv.bin / "etkit", "backends").stdout
    assert "no backend plugins installed" in listing and "failed to load" not in listing, listing
    site = venv.script("import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    leftovers = [p.name for p in Path(site).iterdir() if "xnnpack" in p.name.lower()]
    assert leftovers == [], leftovers
