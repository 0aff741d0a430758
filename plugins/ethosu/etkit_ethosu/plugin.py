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


def conformance_tolerance(dtype):
    """Against the PT2E reference: int8 results are exact or 1 LSB off at a rounding tie, and the suite's
    float outputs are dequantized with steps up to ~0.15, so 2 LSB of the coarsest output."""
    return (0.3, 0.02)


@hookimpl
def etkit_register_backends(register) -> None:
    """Register ``EthosUBackend``: preprocess, partitioner and quantizer; no runtime on a host."""
    register(BackendSpec(
        backend_id=BACKEND_ID,
        backend_details="etkit_ethosu.preprocess:EthosUBackend",
        partitioners={"EthosUPartitioner": "etkit_ethosu.partition:EthosUPartitioner"},
        quantizers={"EthosUQuantizer": "etkit_ethosu.quantizer:EthosUQuantizer"},
        runtime_module=None,
        describe_payload="etkit_ethosu.describe:describe_payload",
        dump_payload="etkit_ethosu.describe:dump_payload",
        conformance_prepare="etkit_ethosu.pt2e:quantize_for_ethosu",
        conformance_reference_run="etkit_ethosu.reference:run_on_tosa_reference",
        conformance_tolerance=conformance_tolerance,
        plugin_api="2.0",
        version=distribution_version("etkit-ethosu"),
        availability=availability,
        runs_everywhere=False,
    ))
