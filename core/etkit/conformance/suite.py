"""The conformance tests, collected by :mod:`etkit.conformance.pytest_plugin` for ``--etkit-backend``.

Not meant to be run directly: the plugin adds this file to the session and parametrizes it with the
backend under test.
"""
from __future__ import annotations

import gc
import importlib

import pytest

from etkit.conformance import cases as _cases
from etkit.conformance import checks
from etkit.conformance.pytest_plugin import BACKEND_KEY

CASE_NAMES = [case.name for case in _cases.CASES]
#: How many times the lifecycle test executes each loaded method.
EXECUTIONS = 3


@pytest.fixture(scope="session")
def backend(request) -> checks.BackendUnderTest:
    return request.config.stash[BACKEND_KEY]


@pytest.fixture(scope="session")
def _lowered_cache():
    return {}


@pytest.fixture
def lowered(request, backend, _lowered_cache) -> checks.LoweredCase:
    """The case of this test lowered to the backend (once per session; a lowering error fails every test
    of the case)."""
    name = request.node.callspec.params["case"]
    if name not in _lowered_cache:
        try:
            _lowered_cache[name] = checks.lower_case(backend, _cases.CASES_BY_NAME[name])
        except Exception as exc:  # noqa: BLE001 - reported as the failure of each test of this case
            _lowered_cache[name] = exc
    result = _lowered_cache[name]
    if isinstance(result, Exception):
        pytest.fail(f"lowering {name} to {backend.backend_id} failed: {type(result).__name__}: {result}",
                    pytrace=False)
    return result


@pytest.fixture
def runtime(backend):
    """``etkit.runtime.Runtime``, or a skip with the reason when the backend cannot run here."""
    availability = backend.spec.is_available()
    if not availability:
        pytest.skip(f"{backend.backend_id} is not available here: {availability.reason}")
    from etkit.runtime import Runtime
    return Runtime.get()


def _require_delegated(backend, lowered):
    if not lowered.delegated:
        pytest.skip(f"not delegated: {lowered.not_delegated_reason(backend.backend_id)}")


def _compare(backend, outputs, expected, what: str, portable: bool = False) -> None:
    """Outputs vs eager within the backend's tolerance (``portable``: the core's defaults, for programs
    that run on the portable kernels only)."""
    import torch

    assert len(outputs) == len(expected), f"{what}: {len(outputs)} outputs, eager has {len(expected)}"
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        atol, rtol = checks.default_tolerance(ref.dtype) if portable else backend.tolerance(ref.dtype)
        try:
            torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
            continue
        except AssertionError as exc:
            message = f"{what}: output {i} differs from torch eager beyond atol={atol}, rtol={rtol}:\n{exc}"
        pytest.fail(message, pytrace=False)


def _run(what: str, fn, *args):
    """``fn(*args)``; a runtime error fails the test with its message only (no runtime traceback)."""
    from etkit.runtime import EtkitRuntimeError
    try:
        return fn(*args)
    except EtkitRuntimeError as exc:
        message = f"{what}: {exc}"
    pytest.fail(message, pytrace=False)


def _load_and_run(runtime, pte: bytes, tmp_path, inputs, what: str):
    path = tmp_path / "program.pte"
    path.write_bytes(pte)
    method = _run(f"{what}: loading the program", lambda: runtime.load_program(path).load_method("forward"))
    return _run(f"{what}: executing", method.execute, list(inputs))


# ------------------------------------------------------------------------------------------------ programs

@pytest.mark.parametrize("case", CASE_NAMES)
def test_program_matches_eager(case, backend, lowered, request, tmp_path):
    """A delegated program runs from its .pte and matches torch eager; otherwise: not delegated, why."""
    _require_delegated(backend, lowered)
    runtime = request.getfixturevalue("runtime")  # after the delegation check, so its reason is reported
    what = f"{case} on {backend.backend_id}"
    outputs = _load_and_run(runtime, lowered.pte, tmp_path, lowered.inputs, what)
    _compare(backend, outputs, lowered.eager_outputs, what)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bundled_program_written(case, backend, lowered, request):
    """With ``--etkit-write-bpte DIR``: the delegated case is written as DIR/<backend id>_<case>.bpte (its .pte,
    its inputs, torch eager's outputs) and, where the backend runs, the file verifies in etkit's runtime
    within the backend's tolerance."""
    directory = request.config.getoption("etkit_write_bpte")
    _require_delegated(backend, lowered)
    from pathlib import Path

    from etkit.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from etkit.devtools.bundled_program.core import BundledProgram
    from etkit.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    test_case = MethodTestCase(inputs=list(lowered.inputs), expected_outputs=list(lowered.eager_outputs))
    data = serialize_from_bundled_program_to_flatbuffer(
        BundledProgram(lowered.pte, [MethodTestSuite(method_name="forward", test_cases=[test_case])]))
    path = Path(directory) / f"{backend.backend_id}_{case}.bpte"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if not backend.spec.is_available():
        return  # written for a device; nothing runs it here
    from etkit.runtime import Runtime, load_bundled_input, verify_method_outputs

    method = _run(f"{case}: loading {path.name}", lambda: Runtime.get().load_program(path).load_method("forward"))
    _run(f"{case}: loading the bundled inputs", load_bundled_input, method, data, 0)
    _run(f"{case}: executing", method.execute)
    atol, rtol = backend.tolerance(lowered.eager_outputs[0].dtype)
    _run(f"{case}: verifying {path.name} (atol={atol}, rtol={rtol})",
         lambda: verify_method_outputs(method, data, 0, rtol=rtol, atol=atol))


# ------------------------------------------------------------------------------------------------ lower only
# A backend that cannot run on this machine (an OS framework, an NPU) is checked in "lower only" mode:
# everything above that needs no runtime still runs; instead of executing, loading must fail with the
# plugin's own reason, and the program's fallback twin (lowered without the backend) must match eager.

@pytest.mark.parametrize("case", CASE_NAMES)
def test_unavailable_backend_says_why(case, backend, lowered, tmp_path):
    """Where the backend cannot run, loading a method that needs it fails with the plugin's reason."""
    _require_delegated(backend, lowered)
    availability = backend.spec.is_available()
    if availability:
        pytest.skip(f"{backend.backend_id} is available here: test_program_matches_eager runs it")
    from etkit.runtime import EtkitRuntimeError, Runtime
    path = tmp_path / "program.pte"
    path.write_bytes(lowered.pte)
    with pytest.raises(EtkitRuntimeError) as info:
        Runtime.get().load_program(path).load_method("forward")
    assert availability.reason in str(info.value), (
        f"loading a {backend.backend_id} program here must say why the backend is unavailable "
        f"({availability.reason!r}); the error was: {info.value}")


@pytest.mark.parametrize("case", CASE_NAMES)
def test_fallback_twin_matches_eager(case, backend, lowered, tmp_path):
    """``delegate_fallback`` gives the method a twin without the backend; where the backend is
    unavailable, ``load_method`` runs the twin, and it matches eager within the portable kernels'
    tolerance (docs/fallback.md)."""
    _require_delegated(backend, lowered)
    if backend.spec.runs_everywhere and backend.spec.is_available():
        pytest.skip(f"{backend.backend_id} runs everywhere (BackendSpec.runs_everywhere): no fallback needed")
    from etkit import ExecutorchBackendConfig
    from etkit.runtime import Runtime
    pte = lowered.manager.to_executorch(ExecutorchBackendConfig(delegate_fallback=[backend.backend_id])).buffer
    path = tmp_path / "program.pte"
    path.write_bytes(pte)
    program = _run(f"{case}: loading the program with its fallback", Runtime.get().load_program, path)
    name = "forward" if not backend.spec.is_available() else "forward#fallback"
    method = _run(f"{case}: loading {name}", program.load_method, name)
    if name == "forward":
        assert method.fallback_reason, "the backend is unavailable, but the method did not report using its fallback"
    # a prepared (e.g. quantized) program rounds like the backend's reference, so the backend's tolerance holds
    _compare(backend, _run(f"{case}: executing the fallback", method.execute, list(lowered.inputs)),
             lowered.eager_outputs, f"{case} fallback twin", portable=not lowered.prepared)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_reference_run_matches_eager(case, backend, lowered):
    """Where the backend offers a host-side reference execution (``BackendSpec.conformance_reference_run``:
    a vendor reference model or simulator), the delegated program run on it matches eager."""
    _require_delegated(backend, lowered)
    outputs = checks.reference_run(backend.backend_id, lowered.manager, lowered.inputs)
    if outputs is None:
        pytest.skip(f"{backend.backend_id} offers no host-side reference execution")
    _compare(backend, outputs, lowered.eager_outputs, f"{case} on the {backend.backend_id} reference")


# ------------------------------------------------------------------------------------------------ contract

@pytest.mark.parametrize("case", CASE_NAMES)
def test_tags_only_on_supported_nodes(case, backend, lowered):
    assert lowered.snapshots, f"the partitioner of {backend.backend_id} was never asked to partition"
    problems = [p for s in lowered.snapshots for p in checks.check_tags(backend.backend_id, s)]
    assert not problems, f"{backend.backend_id} partitioner ({case}):\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_preprocess_is_deterministic(case, backend, lowered):
    _require_delegated(backend, lowered)
    problems = checks.check_preprocess_deterministic(backend.spec, lowered.delegates)
    assert not problems, f"{backend.backend_id} preprocess ({case}):\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_init_execute_destroy_lifecycle(case, backend, lowered, runtime, tmp_path):
    """Two loaded methods (two inits per delegate) execute alternately and repeatedly with the same
    results; after both are dropped (destroy) a fresh load runs again."""
    _require_delegated(backend, lowered)
    import torch

    path = tmp_path / "program.pte"
    path.write_bytes(lowered.pte)
    other_inputs = [torch.flip(x, dims=[0]) if x.is_floating_point() else x for x in lowered.inputs]
    inputs = list(lowered.inputs)
    program = _run(f"{case}: loading", runtime.load_program, path)
    first = _run(f"{case}: loading the method", program.load_method, "forward")
    second = _run(f"{case}: loading the method a second time", program.load_method, "forward")
    reference = _run(f"{case}: first execution", first.execute, inputs)
    _compare(backend, reference, lowered.eager_outputs, f"{case}: first execution")
    for i in range(EXECUTIONS):
        # a different input through the other handle must not leak into `first`
        _run(f"{case}: executing method 2", second.execute, other_inputs)
        _compare(backend, _run(f"{case}: executing method 1", first.execute, inputs), reference,
                 f"{case}: execution {i + 2} of method 1")
    _compare(backend, _run(f"{case}: executing method 2", second.execute, inputs), reference, f"{case}: method 2")
    del first, second, program
    gc.collect()
    again = _run(f"{case}: reloading after destroy", lambda: runtime.load_program(path).load_method("forward"))
    _compare(backend, _run(f"{case}: executing after reload", again.execute, inputs), reference,
             f"{case}: after destroy and reload")


# ------------------------------------------------------------------------------------------------ registration

def test_spec_names_loadable_classes(backend):
    from etkit.backend import BackendDetails, Partitioner
    from etkit.plugins import PLUGIN_API_VERSION, load_object

    spec = backend.spec
    details = spec.load_backend_details()
    assert isinstance(details, type) and issubclass(details, BackendDetails), \
        f"backend_details {spec.backend_details!r} is not a BackendDetails subclass"
    for name, ref in spec.partitioners.items():
        cls = load_object(ref)
        assert isinstance(cls, type) and issubclass(cls, Partitioner), f"partitioner {name} ({ref}) is not a Partitioner"
        instance = cls()
        assert instance.delegation_spec is None or instance.delegation_spec.backend_id == spec.backend_id, \
            f"partitioner {name} delegates to {instance.delegation_spec.backend_id!r}, not {spec.backend_id!r}"
    for name, ref in spec.quantizers.items():
        # a PT2E quantizer (torchao's Quantizer: prepare_pt2e calls annotate, then validate)
        cls = load_object(ref)
        assert isinstance(cls, type) and callable(getattr(cls, "annotate", None)) and \
            callable(getattr(cls, "validate", None)), f"quantizer {name} ({ref}) is not a PT2E Quantizer"
    assert spec.plugin_api.split(".")[0] == PLUGIN_API_VERSION.split(".")[0]


def test_runtime_module_registers_the_backend(backend, runtime):
    spec = backend.spec
    assert spec.runtime_module, (f"{spec.backend_id} is available but declares no runtime_module, so the Python "
                                 f"runtime cannot run its delegates")
    assert spec.backend_id not in runtime.plugin_import_errors, runtime.plugin_import_errors.get(spec.backend_id)
    importlib.import_module(spec.runtime_module)
    registered = runtime.backend_registry.registered_backend_names
    assert spec.backend_id in registered, (f"importing {spec.runtime_module} did not register {spec.backend_id} "
                                           f"(registered: {registered})")
    assert runtime.backend_registry.is_available(spec.backend_id), \
        f"the C++ delegate of {spec.backend_id} says it is not available, but its plugin says it is"


def test_register_function_is_exported(backend):
    problems, skip = checks.check_register_function(backend.spec, backend.plugin)
    if skip:
        pytest.skip(skip)
    assert not problems, "\n".join(problems)

