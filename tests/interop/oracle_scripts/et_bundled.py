"""(Runs in the ExecuTorch oracle.) ExecuTorch 1.5.1's side of the bundled-program (.bpte) interop tests.

    et_bundled.py DIR NAME [NAME ...]

For each NAME of tests/interop/bundled_models.py:
  * verifies every test case of DIR/etkit_NAME.bpte and DIR/etkit_NAME_wrong.bpte (written by etkit) with
    ExecuTorch's runtime (pybindings ``_load_bundled_program_from_buffer`` +
    ``BundledModule.verify_result_with_bundled_expected_output``, rtol/atol from argv-free defaults below);
  * writes DIR/et_NAME.bpte: the model lowered by ExecuTorch (XnnpackPartitioner or plain to_edge) and
    bundled with ExecuTorch's ``BundledProgram`` + ``serialize_from_bundled_program_to_flatbuffer``, with
    NUM_CASES test cases whose expected outputs are eager's.
Writes DIR/et_bundled.pt: {NAME: {"etkit": [case results], "etkit_wrong": [...], "et_self": [...]}}, a case
result being {"passed": bool, "error": str or None, "outputs": [tensors] or None, "stored_inputs": [(scalar
type, sizes, dim order, bytes) of each input as ExecuTorch's schema reader sees it]}.
"""
import os
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bundled_models  # noqa: E402  (tests/interop/bundled_models.py: torch only)

# ExecuTorch's tolerance for comparing etkit's and its own outputs with eager's: XNNPACK's fp32 GEMM sums
# in another order than eager (differences ~1e-7 on O(1) values); the tests state the same numbers.
RTOL = 1e-5
ATOL = 1e-5


def _import_bundled_program_without_inspector() -> None:
    """executorch/devtools/__init__.py imports the Inspector, which needs pandas (not in the oracle);
    the bundled-program modules need neither, so the package is entered without running its __init__."""
    import executorch

    package = types.ModuleType("executorch.devtools")
    package.__path__ = [os.path.join(list(executorch.__path__)[0], "devtools")]
    sys.modules.setdefault("executorch.devtools", package)


def verify_all(path: Path, method: str = "forward") -> list:
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    data = path.read_bytes()
    bundle = _load_bundled_program_from_buffer(data)
    results = []
    # ExecuTorch's reader of the schema (a flatc JSON round trip) gives the cases to run.
    schema = deserialize_from_flatbuffer_to_bundled_program(data)
    suite = next(s for s in schema.method_test_suites if s.method_name == method)
    for index, case in enumerate(suite.test_cases):
        # What ExecuTorch's reader sees of each bundled input: (scalar type, sizes, dim order, bytes).
        stored = [(int(v.val.scalar_type), list(v.val.sizes), list(v.val.dim_order), bytes(v.val.data))
                  for v in case.inputs]
        try:
            outputs = bundle.verify_result_with_bundled_expected_output(method, index, RTOL, ATOL)
            results.append({"passed": True, "error": None, "outputs": [o.clone() for o in outputs],
                            "stored_inputs": stored})
        except Exception as exc:  # reported by the test with ExecuTorch's message
            results.append({"passed": False, "error": f"{type(exc).__name__}: {exc}", "outputs": None,
                            "stored_inputs": stored})
    return results


def write_bpte(name: str, path: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
    from executorch.exir import to_edge, to_edge_transform_and_lower

    model, xnnpack = bundled_models.build(name)
    ep = torch.export.export(model, bundled_models.inputs(name, -1))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]) if xnnpack else to_edge(ep)
    program = edge.to_executorch()
    cases = []
    for index in range(bundled_models.NUM_CASES):
        case_inputs = bundled_models.inputs(name, index)
        cases.append(MethodTestCase(inputs=list(case_inputs),
                                    expected_outputs=bundled_models.expected(model, case_inputs)))
    bundled = BundledProgram(program, [MethodTestSuite(method_name="forward", test_cases=cases)])
    path.write_bytes(serialize_from_bundled_program_to_flatbuffer(bundled))


def main(directory: Path, names: list) -> None:
    _import_bundled_program_without_inspector()
    report = {}
    for name in names:
        write_bpte(name, directory / f"et_{name}.bpte")
        report[name] = {
            "etkit": verify_all(directory / f"etkit_{name}.bpte"),
            "etkit_wrong": verify_all(directory / f"etkit_{name}_wrong.bpte"),
            "et_self": verify_all(directory / f"et_{name}.bpte"),
        }
        print(name, {k: [r["passed"] for r in v] for k, v in report[name].items()}, flush=True)
    torch.save(report, directory / "et_bundled.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
