"""Bundled programs: a .pte plus test cases (inputs and expected outputs), written as a .bpte.

ExecuTorch's ``executorch.devtools.bundled_program`` API and ExecuTorch 1.5.1's file format
(schema/bundled_program.fbs; seed page "Bundled Program"):

    from etkit.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from etkit.devtools.bundled_program.core import BundledProgram
    from etkit.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    suite = MethodTestSuite("forward", [MethodTestCase(inputs=[x], expected_outputs=model(x))])
    data = serialize_from_bundled_program_to_flatbuffer(BundledProgram(executorch_program, [suite]))

The runtime side is :func:`etkit.runtime.load_bundled_input` / :func:`etkit.runtime.verify_method_outputs`.
"""
from etkit.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from etkit.devtools.bundled_program.core import BundledProgram, BundledProgramError

__all__ = ["BundledProgram", "BundledProgramError", "MethodTestCase", "MethodTestSuite"]
