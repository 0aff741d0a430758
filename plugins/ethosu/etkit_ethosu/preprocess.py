"""``EthosUBackend.preprocess``: partition -> TOSA 1.0 INT flatbuffer -> Vela -> ``vela_bin_stream`` payload.

The payload is byte-identical to what ExecuTorch 1.5.1's Arm backend writes for the same Vela output
(:mod:`etkit_ethosu.payload`), so an etkit ``.pte`` delegate runs on ExecuTorch's Ethos-U runtime and the
other way round. Seed page: "Arm Ethos-U Backend".
"""
from __future__ import annotations

import logging

from torch.export import ExportedProgram

from etkit.backend import BackendDetails, CompileSpec, PreprocessResult

from .compile_spec import EthosUCompileSpec
from .layer_estimates import layer_debug_handles, named_data_key, pack_layer_estimates
from .lowering import lower_to_tosa
from .payload import pack

logger = logging.getLogger(__name__)


class EthosUBackend(BackendDetails):
    """The Ethos-U backend's ahead-of-time half (backend id ``EthosUBackend``)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Compile one partition for the compile spec's Ethos-U target.

        Args:
            edge_program: the partition (int8 inputs, ``quantize`` nodes as outputs).
            compile_specs: from :meth:`EthosUCompileSpec.to_list` (ExecuTorch's keys).

        Returns:
            ``PreprocessResult`` whose ``processed_bytes`` is the ``vela_bin_stream`` payload (command stream,
            encoded weights, scratch size, I/O layout; plus the TOSA graph with ``keep_tosa=True``); ``named_data``
            holds Vela's per-layer estimates and ``debug_handle_map`` maps each layer's index to its Edge nodes
            (:mod:`etkit_ethosu.layer_estimates`).

        Raises:
            etkit_ethosu.lowering.LoweringError: an op the TOSA lowering cannot express.
            etkit_ethosu.vela_compile.VelaCompileError: Vela refused the graph for this target.
            ImportError: tosa-tools is missing (the message says how to install it).
        """
        spec = EthosUCompileSpec.from_list(compile_specs)
        tosa = lower_to_tosa(edge_program)
        from .vela_compile import compile_tosa
        result = compile_tosa(tosa.flatbuffer, spec, estimate=True)
        summary = result.summary
        logger.info("Ethos-U partition for %s: %d TOSA operators, Vela estimate %s cycles (%.1f us), %s MACs; "
                    "etkit_ethosu.performance_report(program) gives the per-layer table", spec.target,
                    len(tosa.operators), f"{int(summary.get('cycles_total', 0)):,}",
                    float(summary.get("inference_time", 0.0)) * 1e6, f"{int(summary.get('nn_macs', 0)):,}")
        payload = result.payload
        if spec.keep_tosa:
            payload.tosa = tosa.flatbuffer
        # Vela's per-layer estimates, for the delegate's ETDump events (layer_estimates.py): beside the payload,
        # in named data, so the payload stays ExecuTorch's.
        estimates = {named_data_key(payload.cmd_data): pack_layer_estimates(result.layers)} if result.layers else {}
        return PreprocessResult(processed_bytes=pack(payload), named_data=estimates,
                                debug_handle_map=layer_debug_handles(result.layers, tosa.owners) or None)
