"""etkit's side of the bundled-program tests: lower a model of tests/interop/bundled_models.py and bundle
it with test cases whose expected outputs are eager's."""
from __future__ import annotations

import torch

import etkit
from etkit.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from etkit.devtools.bundled_program.core import BundledProgram
from etkit.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
from tests.interop import bundled_models

#: How far etkit's outputs may be from eager's (|d| <= ATOL + RTOL * |actual|): the portable kernels and
#: XNNPACK's fp32 GEMM sum in another order than eager, ~1e-7 apart on these O(1) values.
RTOL = 1e-5
ATOL = 1e-5
#: Added to one expected output of a "wrong" bundle: far outside tolerance, and the largest difference a
#: verifier must report (up to float32 rounding of the sum).
OFFSET = 0.5


def lower(name: str):
    """(eager model, etkit's ExecutorchProgramManager)."""
    model, xnnpack = bundled_models.build(name)
    ep = torch.export.export(model, bundled_models.inputs(name, -1))
    if xnnpack:
        from etkit_xnnpack import XnnpackPartitioner

        edge = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        edge = etkit.to_edge(ep)
    return model, edge.to_executorch()


def bundle(name: str, *, wrong_case: int | None = None, lowered=None) -> BundledProgram:
    """NUM_CASES test cases with eager's expected outputs; with ``wrong_case``, that case's output 0 is
    shifted by OFFSET at element 0."""
    model, program = lowered or lower(name)
    cases = []
    for index in range(bundled_models.NUM_CASES):
        case_inputs = bundled_models.inputs(name, index)
        expected = bundled_models.expected(model, case_inputs)
        if index == wrong_case:
            expected[0] = expected[0].clone()
            expected[0].view(-1)[0] += OFFSET
        cases.append(MethodTestCase(inputs=list(case_inputs), expected_outputs=expected))
    return BundledProgram(program, [MethodTestSuite(method_name="forward", test_cases=cases)])


def bpte(name: str, **kwargs) -> bytes:
    return serialize_from_bundled_program_to_flatbuffer(bundle(name, **kwargs))
