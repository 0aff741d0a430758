"""A report a person reads: one self-contained HTML file of an ETDump (and ETRecord), and a Chrome trace.

    etkit devtools report --etdump model.etdp [--etrecord model.etrecord] [--debug-buffer model.bin] \\
        -o report.html [--chrome-trace trace.json]

The HTML needs no network: its data is embedded as JSON and drawn by inline JavaScript and SVG.

- The per-operator table of the last "Execute" block has time (p50, ms), share of ``Method::execute``,
  op types, delegate and source line, and sorts by any column when its header is clicked.
- A timeline shows the last execute's events, one row per kind (kernels, delegate calls, events inside
  delegates).
- With an ETRecord and a debug buffer, a chart shows the numeric gap per operator (MSE against eager,
  log scale; :meth:`Inspector.calculate_numeric_gap`).

When the script has run, ``<body data-rendered="N">`` holds the number of table rows it drew, which is how
a test (or a person) checks that the page rendered. The Chrome trace (the Trace Event Format's "X"
complete events) opens in Perfetto or chrome://tracing: one process per block, one thread per event kind, times in us.
"""
from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Optional

from etkit.devtools.etdump import ProfileEvent, read_etdump

__all__ = ["chrome_trace", "write_chrome_trace", "write_report"]


def _source_line(stack_traces: dict) -> str:
    """"file.py:N" of the innermost frame of the first stack trace that is not torch's own code (torch's
    traces list the outermost frame first), else of the innermost frame."""
    for trace in stack_traces.values():
        frames = []
        for line in str(trace or "").splitlines():
            parts = line.strip().split('"')
            if line.strip().startswith("File ") and len(parts) >= 3 and ", line " in parts[2]:
                frames.append((parts[1], parts[2].split(", line ")[1].split(",")[0].strip()))
        if frames:
            mine = [f for f in frames if f"{os.sep}torch{os.sep}" not in f[0]] or frames
            path, line = mine[-1]
            return f"{os.path.basename(path)}:{line}"
    return ""


def _kind(event) -> str:
    if event.is_delegated_op:
        return "inside delegate"
    if event.name == "DELEGATE_CALL":
        return "delegate call"
    if event.name in ("Method::execute", "Program::load_method", "Method::init"):
        return "method"
    return "kernel"


def _rows(inspector) -> tuple[list, float]:
    blocks = [b for b in inspector.event_blocks if b.name == "Execute"] or inspector.event_blocks
    if not blocks:
        return [], 0.0
    block = blocks[-1]
    total = next((e.perf_data.p50 for e in block.events if e.name == "Method::execute" and e.perf_data), 0.0)
    rows = []
    for event in block.events:
        if event.name == "OPERATOR_CALL" or event.perf_data is None:
            continue  # its native_call_* twin carries the same span
        p50 = event.perf_data.p50
        rows.append({
            "event": event.name, "kind": _kind(event), "p50_ms": round(p50, 6),
            "share": round(100.0 * p50 / total, 2) if total and event.name != "Method::execute" else None,
            "ops": ", ".join(str(t) for t in event.op_types[:4]) + (" ..." if len(event.op_types) > 4 else ""),
            "delegate": event.delegate_backend_name or "", "source": _source_line(event.stack_traces),
            "start": event.start_time[-1] if event.start_time else 0,
        })
    return rows, total


def _gap_rows(inspector) -> list:
    try:
        table = inspector.calculate_numeric_gap("MSE")
    except ValueError:
        return []
    out = []
    for _, row in table.iterrows():
        gap = float(row["gap"][0])
        out.append({"op": row["aot_ops"][0], "mse": gap if math.isfinite(gap) else None})
    return out


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>etkit profile: {title}</title>
<style>
body {{ font: 13px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 18px; }} h2 {{ font-size: 15px; margin-top: 28px; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; white-space: nowrap;
          max-width: 340px; overflow: hidden; text-overflow: ellipsis; }}
th {{ background: #f2f2f2; cursor: pointer; user-select: none; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.bar {{ background: #4c78a8; height: 10px; display: inline-block; }}
.note {{ color: #666; }}
</style></head>
<body data-rendered="0">
<h1>etkit profile: {title}</h1>
<p class="note">{summary}</p>
<h2>Operators (last execute; click a header to sort)</h2>
<table id="ops"><thead><tr>
<th data-key="event">event</th><th data-key="kind">kind</th><th data-key="p50_ms">time (ms, p50)</th>
<th data-key="share">share</th><th data-key="ops">op types</th><th data-key="delegate">delegate</th>
<th data-key="source">source line</th></tr></thead><tbody></tbody></table>
<h2>Timeline (last execute)</h2>
<svg id="timeline" width="1100" height="120"></svg>
<h2>Numeric gap per operator (MSE against eager, log scale)</h2>
<p class="note" id="gapnote"></p>
<svg id="gap" width="1100" height="220"></svg>
<script id="data" type="application/json">{data}</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
function cell(tr, text, cls) {{ const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }}
function draw(rows) {{
  const body = document.querySelector("#ops tbody"); body.replaceChildren();
  const top = Math.max(...rows.map(r => r.p50_ms), 1e-9);
  for (const r of rows) {{
    const tr = document.createElement("tr");
    cell(tr, r.event); cell(tr, r.kind);
    const td = document.createElement("td"); td.className = "num";
    const bar = document.createElement("span"); bar.className = "bar"; bar.style.width = (60 * r.p50_ms / top) + "px";
    td.append(r.p50_ms.toFixed(4) + " ", bar); tr.appendChild(td);
    cell(tr, r.share === null ? "" : r.share.toFixed(1) + "%", "num");
    cell(tr, r.ops); tr.lastChild.title = r.ops; cell(tr, r.delegate); cell(tr, r.source);
    body.appendChild(tr);
  }}
  return rows.length;
}}
let order = {{ key: "p50_ms", desc: true }};
function sorted() {{
  const k = order.key, s = order.desc ? -1 : 1;
  return data.rows.slice().sort((a, b) => (a[k] === b[k] ? 0 : (a[k] === null ? 1 : b[k] === null ? -1 : (a[k] < b[k] ? -s : s))));
}}
for (const th of document.querySelectorAll("#ops th")) {{
  th.addEventListener("click", () => {{ order = {{ key: th.dataset.key, desc: order.key === th.dataset.key ? !order.desc : true }}; draw(sorted()); }});
}}
function rect(svg, x, y, w, h, fill, title) {{
  const r = document.createElementNS(NS, "rect");
  r.setAttribute("x", x); r.setAttribute("y", y); r.setAttribute("width", Math.max(w, 1)); r.setAttribute("height", h);
  r.setAttribute("fill", fill); const t = document.createElementNS(NS, "title"); t.textContent = title; r.appendChild(t); svg.appendChild(r);
}}
function text(svg, x, y, s) {{ const t = document.createElementNS(NS, "text"); t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("font-size", "11"); t.textContent = s; svg.appendChild(t); }}
function timeline() {{
  const svg = document.getElementById("timeline"), lanes = ["kernel", "delegate call", "inside delegate"];
  const rows = data.rows.filter(r => lanes.includes(r.kind)); if (!rows.length) return;
  const t0 = Math.min(...rows.map(r => r.start)), t1 = Math.max(...rows.map(r => r.start + r.p50_ms * 1e6));
  const colors = ["#4c78a8", "#f58518", "#54a24b"];
  lanes.forEach((lane, i) => text(svg, 0, 22 + 32 * i, lane));
  for (const r of rows) {{
    const i = lanes.indexOf(r.kind), x = 110 + 980 * (r.start - t0) / Math.max(t1 - t0, 1);
    rect(svg, x, 10 + 32 * i, 980 * r.p50_ms * 1e6 / Math.max(t1 - t0, 1), 18, colors[i], r.event + ": " + r.p50_ms.toFixed(4) + " ms");
  }}
}}
function gaps() {{
  const svg = document.getElementById("gap"), g = data.gaps.filter(r => r.mse !== null);
  if (!g.length) {{ document.getElementById("gapnote").textContent = "No numeric gap: give an ETRecord and the debug buffer of a run with intermediate outputs."; svg.setAttribute("height", "0"); return; }}
  const logs = g.map(r => Math.log10(Math.max(r.mse, 1e-30))), lo = Math.min(...logs), hi = Math.max(...logs, lo + 1);
  const w = 1080 / g.length;
  g.forEach((r, i) => {{ const h = 190 * (logs[i] - lo) / (hi - lo) + 2; rect(svg, 10 + i * w, 200 - h, Math.max(w - 1, 1), h, "#e45756", r.op + ": MSE " + r.mse.toExponential(2)); }});
  text(svg, 10, 214, "operators in execution order; bar height: log10(MSE) from " + lo.toFixed(1) + " to " + hi.toFixed(1));
}}
const drawn = draw(sorted()); timeline(); gaps();
document.body.dataset.rendered = String(drawn);
</script>
</body></html>
"""


def write_report(etdump_path: "str | os.PathLike", output: "str | os.PathLike",
                 etrecord: "str | os.PathLike | None" = None,
                 debug_buffer_path: "str | os.PathLike | None" = None) -> int:
    """Writes the HTML report of an ETDump; returns the number of operator rows.

    Raises:
        ETDumpError / ETRecordError: an input cannot be read (names the file and the part).
        OSError: ``output`` cannot be written.
    """
    from etkit.devtools.inspector import Inspector

    inspector = Inspector(etdump_path=etdump_path, etrecord=etrecord, debug_buffer_path=debug_buffer_path)
    rows, total = _rows(inspector)
    gaps = _gap_rows(inspector) if etrecord is not None and debug_buffer_path is not None else []
    title = os.path.basename(os.fspath(etdump_path))
    executes = sum(len(e.perf_data.raw) for b in inspector.event_blocks for e in b.events[:1] if b.name == "Execute"
                   and e.perf_data)
    summary = (f"{executes} execute(s); Method::execute p50 {total:.4f} ms; {len(rows)} events in the last execute"
               + (f"; {inspector.dropped_events} events dropped by the runtime" if inspector.dropped_events else "")
               + ("" if etrecord is not None else "; no ETRecord: op types and source lines are empty"))
    # "</" must not appear inside the <script> element holding the data
    data = json.dumps({"rows": rows, "gaps": gaps}).replace("</", "<\\/")
    Path(output).write_text(_PAGE.format(title=html.escape(title), summary=html.escape(summary), data=data))
    return len(rows)


def chrome_trace(etdump_path: "str | os.PathLike") -> dict:
    """The ETDump's profile events as Chrome trace "X" (complete) events: pid = block index, tid = 0 for
    the method and loading, 1 for kernels and delegate calls, 2 for events inside delegates; ts/dur in us."""
    dump = read_etdump(etdump_path)
    events = []
    for pid, run in enumerate(dump.run_data):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{pid}: {run.name}"}})
        for event in run.events:
            if not isinstance(event, ProfileEvent):
                continue
            delegate_id = event.delegate_debug_id
            name = event.name if event.name else str(delegate_id)
            if name == "OPERATOR_CALL":
                continue
            tid = 2 if delegate_id is not None else (0 if event.chain_index == -1 else 1)
            events.append({"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": event.start_time / 1e3,
                           "dur": max(event.end_time - event.start_time, 0) / 1e3,
                           "args": {"instruction_id": event.instruction_id}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(etdump_path: "str | os.PathLike", output: "str | os.PathLike") -> int:
    """Writes :func:`chrome_trace` as JSON; returns the number of events."""
    trace = chrome_trace(etdump_path)
    Path(output).write_text(json.dumps(trace))
    return sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
