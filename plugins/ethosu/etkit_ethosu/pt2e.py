"""The PT2E flow for Ethos-U in one call: export, ``prepare_pt2e`` with :class:`EthosUQuantizer`, calibrate,
``convert_pt2e`` (seed page "Quantization" (Ethos-U) shows the same steps)."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

import torch


def quantize_for_ethosu(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
                        calibration: Optional[Iterable[Sequence[torch.Tensor]]] = None, *,
                        is_per_channel: bool = True, compile_spec=None) -> torch.fx.GraphModule:
    """``module`` quantized for the Ethos-U NPU (int8 activations, int8 symmetric weights).

    Args:
        module: a float model in eval mode.
        example_inputs: inputs for ``torch.export`` (and the calibration, when ``calibration`` is None).
        calibration: input tuples to observe activation ranges on; default ``[example_inputs]``.
        is_per_channel: per-output-channel weight scales (default) or one per tensor.
        compile_spec: an :class:`~etkit_ethosu.EthosUCompileSpec`, passed to the quantizer.

    Returns:
        The converted ``GraphModule`` (the PT2E reference model): export it and lower it with
        :class:`~etkit_ethosu.EthosUPartitioner`.
    """
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from .quantizer import EthosUQuantizer, get_symmetric_quantization_config

    example_inputs = tuple(example_inputs)
    quantizer = EthosUQuantizer(compile_spec) if compile_spec is not None else EthosUQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=is_per_channel))
    graph = torch.export.export(module.eval(), example_inputs).module()
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for batch in (calibration if calibration is not None else [example_inputs]):
            prepared(*batch)
    return convert_pt2e(prepared)
