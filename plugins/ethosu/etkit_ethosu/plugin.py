"""Entry point of the etkit-ethosu plugin (group ``etkit.backends``; docs/plugins.md).

Light on purpose: no torch, Vela or TOSA import here.
"""
from __future__ import annotations

from etkit.plugins import hookimpl
from etkit.plugins.spec import Availability, BackendSpec, distribution_version

#: Backend id stored in the .pte (ExecuTorch's id for the Arm Ethos-U backend).
BACKEND_ID = "EthosUBackend"

#: The sentence users see when they load an Ethos-U method on a host.
UNAVAILABLE_REASON = ("no Ethos-U NPU: run on a Corstone FVP or device (a native runner linking "
                      "etkit_ethosu::delegate and the Ethos-U core driver); on this host, check numerics with "
                      "etkit_ethosu.run_on_tosa_reference or keep a fallback (ExecutorchBackendConfig(delegate_fallback=True))")


def availability() -> Availability:
    """The command stream runs only on an Ethos-U NPU, which no host has; lowering works everywhere."""
    return Availability(False, UNAVAILABLE_REASON)


@hookimpl
def etkit_register_backends(register) -> None:
    """Register ``EthosUBackend``: preprocess, partitioner and quantizer; no runtime on a host."""
    register(BackendSpec(
        backend_id=BACKEND_ID,
        backend_details="etkit_ethosu.preprocess:EthosUBackend",
        partitioners={"EthosUPartitioner": "etkit_ethosu.partitioner:EthosUPartitioner"},
        quantizers={"EthosUQuantizer": "etkit_ethosu.quantizer:EthosUQuantizer"},
        runtime_module=None,
        plugin_api="1.0",
        version=distribution_version("etkit-ethosu"),
        availability=availability,
        runs_everywhere=False,
    ))


@hookimpl
def etkit_describe_payload(backend_id: str, processed: bytes, compile_specs: dict):
    """For ``etkit inspect``: the target, command stream and weight sizes, scratch size and the NPU's I/O."""
    if backend_id != BACKEND_ID:
        return None
    from .describe import describe_payload
    return describe_payload(processed, compile_specs)


@hookimpl
def etkit_conformance_prepare(backend_id: str, module, example_inputs):
    """The NPU runs int8 only: the suite's cases are quantized with EthosUQuantizer (per-channel weights),
    calibrated on the case's inputs."""
    if backend_id != BACKEND_ID:
        return None
    from .pt2e import quantize_for_ethosu
    return quantize_for_ethosu(module, example_inputs)


@hookimpl
def etkit_conformance_reference_run(backend_id: str, program, inputs):
    """"TOSA reference" mode: Ethos-U delegates run their TOSA graphs on Arm's TOSA reference model."""
    if backend_id != BACKEND_ID:
        return None
    from .reference import run_on_tosa_reference
    return run_on_tosa_reference(program, inputs)


@hookimpl
def etkit_conformance_tolerance(backend_id: str, dtype):
    """Against the PT2E reference: int8 results are exact or 1 LSB off at a rounding tie, and the suite's
    float outputs are dequantized with steps up to ~0.15, so 2 LSB of the coarsest output."""
    if backend_id == BACKEND_ID:
        return (0.3, 0.02)
    return None


@hookimpl
def etkit_dump_payload(backend_id: str, processed: bytes, compile_specs: dict, directory: str, stem: str):
    """For ``etkit inspect --dump DIR``: the command stream, the encoded weights, and the kept TOSA graph."""
    if backend_id != BACKEND_ID:
        return None
    from .describe import dump_payload
    return dump_payload(processed, directory, stem)
