"""ONNX graph -> QNN HTP context binary, with ONNX Runtime's QNN execution provider as the HTP compiler.

The route (docs/design/qnn-route.md section 2): register ``onnxruntime-qnn``'s plugin EP library with
``onnxruntime``, add its device to a session with ``backend_type=htp``, the target's ``soc_model`` and
``htp_arch`` (and ``enable_htp_fp16_precision`` for fp16), ``offload_graph_io_quantization=0`` (the boundary
quantization goes inside the context) and CPU fallback disabled, then ``ModelCompiler`` writes an EPContext
model whose single ``EPContext`` node carries the context binary (``ep_cache_context``, embed mode 1) and its
graph name (``partition_name``). QNN's offline prepare lives in ``libQnnHtp.so``.

Each compile runs in a fresh Python process: QNN numbers its tensors per process, so two compiles in one
process give different bytes, and ``preprocess`` must be deterministic (two fresh processes agree).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

EP_NAME = "QNNExecutionProvider"
INSTALL_HINT = "install etkit-qnn's runtime extra: pip install 'etkit-qnn[runtime]' (onnxruntime-qnn==2.7.0)"


class HtpCompileError(RuntimeError):
    """The HTP compiler refused the graph; the message carries its reason."""


@dataclass(frozen=True)
class ContextBinary:
    """A compiled QNN context: the binary, the graph's name inside it, and the QNN SDK build that made it."""

    binary: bytes
    graph_name: str
    sdk_version: str


def provider_options(soc_model: int, htp_arch: int, fp16: bool) -> dict:
    """The QNN EP options of a compile (all strings, as ONNX Runtime takes them)."""
    options = {"backend_type": "htp", "soc_model": str(int(soc_model)), "htp_arch": str(int(htp_arch)),
               "offload_graph_io_quantization": "0", "htp_graph_finalization_optimization_mode": "3"}
    if fp16:
        options["enable_htp_fp16_precision"] = "1"
    return options


def compile_onnx(onnx_bytes: bytes, soc_model: int, htp_arch: int, fp16: bool, timeout: float = 600) -> ContextBinary:
    """Compile an ONNX graph (from :func:`etkit_qnn.onnx_export.export_partition`) to an HTP context.

    Args:
        onnx_bytes: the serialized ONNX model (static shapes, float32 I/O).
        soc_model, htp_arch: the target chipset id and its HTP architecture.
        fp16: run float ops in fp16 (``enable_htp_fp16_precision``).
        timeout: seconds before the compile process is stopped.

    Raises:
        ImportError: onnxruntime or onnxruntime-qnn is not installed (the message says what to install).
        HtpCompileError: the graph was not compiled into one context (names the nodes QNN refused).
    """
    import importlib.util
    for module in ("onnxruntime", "onnxruntime_qnn"):
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"compiling for the QNN HTP needs {module}: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="etkit-qnn-") as tmp:
        src, dst = os.path.join(tmp, "graph.onnx"), os.path.join(tmp, "compiled.bin")
        with open(src, "wb") as f:
            f.write(onnx_bytes)
        request = json.dumps({"src": src, "dst": dst, "options": provider_options(soc_model, htp_arch, fp16)})
        proc = subprocess.run([sys.executable, "-m", "etkit_qnn.htp_compile"], input=request, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            reason = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
            raise HtpCompileError(f"QNN HTP compile failed: {reason}")
        with open(dst + ".json") as f:
            info = json.load(f)
        with open(dst, "rb") as f:
            return ContextBinary(f.read(), info["graph_name"], info["sdk_version"])


def register_qnn_ep():
    """Register the QNN plugin EP with this process's onnxruntime (once); return its devices."""
    import onnxruntime as ort
    import onnxruntime_qnn

    try:
        ort.register_execution_provider_library(EP_NAME, onnxruntime_qnn.get_library_path())
    except Exception as exc:  # registering twice is refused; the first registration stands
        if "already registered" not in str(exc):
            raise
    devices = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if not devices:
        raise HtpCompileError(f"onnxruntime-qnn registered no {EP_NAME} device")
    return devices


def _compile_in_this_process(src: str, options: dict) -> tuple[bytes, str, str]:
    import onnx
    import onnxruntime as ort

    # From bytes, not from the path: ONNX Runtime derives the graph's name from the model's path when it has
    # one, and the temporary directory differs between runs.
    with open(src, "rb") as f:
        src = f.read()

    ort.set_default_logger_severity(3)
    devices = register_qnn_ep()

    def session_options(fallback: bool):
        so = ort.SessionOptions()
        so.log_severity_level = 3
        if not fallback:
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices(devices, options)
        return so

    try:
        compiled = ort.ModelCompiler(session_options(False), src, embed_compiled_data_into_model=True).compile_to_bytes()
    except Exception as exc:
        # Say which nodes QNN refused: compile again with CPU fallback and list what stayed outside.
        try:
            partial = ort.ModelCompiler(session_options(True), src,
                                        embed_compiled_data_into_model=True).compile_to_bytes()
            left = [f"{n.op_type} ({n.name or n.output[0]})" for n in onnx.load_from_string(partial).graph.node
                    if n.op_type != "EPContext"]
        except Exception:
            left = []
        detail = f"QNN does not support: {', '.join(left)}" if left else str(exc).splitlines()[-1]
        raise HtpCompileError(detail) from None
    model = onnx.load_from_string(compiled)
    nodes = list(model.graph.node)
    if len(nodes) != 1 or nodes[0].op_type != "EPContext":
        raise HtpCompileError(f"expected one EPContext node, got {[n.op_type for n in nodes]}")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    if attrs.get("embed_mode") != 1:
        raise HtpCompileError("the EPContext node does not embed its context binary")
    name = attrs.get("partition_name", nodes[0].name)
    return attrs["ep_cache_context"], name.decode() if isinstance(name, bytes) else name, \
        attrs.get("ep_sdk_version", b"").decode()


def _main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        binary, name, sdk = _compile_in_this_process(request["src"], request["options"])
    except Exception as exc:  # reported on the last line of stderr
        print(f"{type(exc).__name__}: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    with open(request["dst"], "wb") as f:
        f.write(binary)
    with open(request["dst"] + ".json", "w") as f:
        json.dump({"graph_name": name, "sdk_version": sdk}, f)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
