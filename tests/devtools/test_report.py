"""`etkit devtools report`: a self-contained HTML file rendered by headless Chromium (Debian's `chromium`,
scripts/setup_system.sh) without script errors, its table holding one row per event of the last execute,
the numeric gap chart drawn from an ETRecord and a debug buffer, and a Chrome trace of the same events.

The program (models.ConvHeadTail: conv + linear lowered to XNNPACK, a cumsum and a sum on portable kernels) is compared with eager on its
inputs (|d| <= 1e-4).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import torch

import etkit
from etkit.cli import main as etkit_main
from etkit.runtime import Runtime

from .models import ConvHeadTail

pytest.importorskip("etkit_xnnpack")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: scripts/setup_system.sh (make system) installs it")
        pytest.skip("chromium is not installed (make system installs it)")
    return found


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    from etkit_xnnpack import XnnpackPartitioner

    directory = tmp_path_factory.mktemp("report")
    model = ConvHeadTail().eval()
    x = torch.randn(1, 3, 8, 8)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()],
                                             generate_etrecord=True)
    program = edge.to_executorch()
    program.get_etrecord().save(directory / "m.etrecord")
    loaded = Runtime.get().load_program(program.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    method = loaded.load_method("forward")
    for _ in range(3):
        out = method.execute([x])
    for got, want in zip(out, model(x)):
        torch.testing.assert_close(got, want.detach(), atol=1e-4, rtol=1e-4)
    loaded.write_etdump_result_to_file(directory / "m.etdp", directory / "m.bin")
    return directory


def test_report_renders_in_chromium(artifacts, capsys):
    d = artifacts
    assert etkit_main(["devtools", "report", "--etdump", str(d / "m.etdp"), "--etrecord", str(d / "m.etrecord"),
                       "--debug-buffer", str(d / "m.bin"), "-o", str(d / "r.html"),
                       "--chrome-trace", str(d / "t.json")]) == 0
    printed = capsys.readouterr().out
    rows = int(re.search(r"r\.html: (\d+) events", printed).group(1))
    page = (d / "r.html").read_text()
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page  # no network
    embedded = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert len(embedded["rows"]) == rows and embedded["gaps"], "table rows and numeric gaps are embedded"
    assert any(r["delegate"] == "XnnpackBackend" for r in embedded["rows"])
    assert any(r["source"].startswith("models.py:") for r in embedded["rows"])  # the model's own line

    chromium = _chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", (d / "r.html").as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console  # no script errors or warnings
    assert f'data-rendered="{rows}"' in dom.stdout  # the script ran and drew every row
    assert dom.stdout.count("<tr>") == rows + 1  # header plus one row per event
    assert dom.stdout.count("<rect") >= rows  # timeline bars and gap bars were drawn
    shot = d / "r.png"
    proc = subprocess.run([chromium, *flags, "--window-size=1200,900", f"--screenshot={shot}", (d / "r.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.stat().st_size > 10_000, proc.stderr[-2000:]
    from PIL import Image

    colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 20  # more than a blank page

    trace = json.loads((d / "t.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans} >= {"Method::execute", "DELEGATE_CALL", "Program::load_method"}
    assert all(e["dur"] >= 0 for e in spans)


def test_report_refuses_a_broken_etdump(artifacts, tmp_path, capsys):
    (tmp_path / "bad.etdp").write_bytes((artifacts / "m.etdp").read_bytes()[:40])
    assert etkit_main(["devtools", "report", "--etdump", str(tmp_path / "bad.etdp"), "-o",
                       str(tmp_path / "r.html")]) == 1
    assert "size prefix" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
