"""The conformance suite's machinery, in-process and without native builds: backend resolution,
tolerances (``BackendSpec.conformance_tolerance``), the tag checks, the archive symbol reader, and the
pytest plugin's usage errors. (A full run against a real backend: tests/scaffold/test_new_backend.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from etkit.backend import DelegationSpec, PartitionReport, Rejection
from etkit.conformance import checks
from etkit.conformance.cases import CASES
from etkit.plugins import PluginError
from tests.core.conftest import toy_backend_with, toy_plugin  # noqa: F401 - the fixture
from tests.core.toy_backend import TOY_ID


def _loose(dtype):
    return (0.5, 0.25) if dtype == torch.float16 else None


def test_backend_is_found_by_id_or_plugin_name(toy_plugin):
    assert checks.resolve_backend(TOY_ID).plugin == "toy"
    by_plugin = checks.resolve_backend("toy")
    assert by_plugin.backend_id == TOY_ID and by_plugin.partitioner_name == "ToyPartitioner"
    assert by_plugin.new_partitioner().delegation_spec.backend_id == TOY_ID


def test_unknown_backend_lists_the_installed_ones(toy_plugin):
    with pytest.raises(checks.ConformanceUsageError, match=rf"no installed backend.*{TOY_ID} \(plugin toy\)"):
        checks.resolve_backend("nosuchbackend")
    with pytest.raises(checks.ConformanceUsageError, match="has partitioners ToyPartitioner"):
        checks.resolve_backend(TOY_ID, partitioner="Other")


def test_tolerance_defaults_and_the_backend_spec_field(toy_plugin):
    assert checks.tolerance(TOY_ID, torch.float32) == (1e-4, 1e-4)
    assert checks.tolerance(TOY_ID, torch.int64) == (0.0, 0.0)
    with toy_backend_with(conformance_tolerance=_loose):
        assert checks.tolerance(TOY_ID, torch.float16) == (0.5, 0.25)
        assert checks.tolerance(TOY_ID, torch.float32) == (1e-4, 1e-4)   # the field returned None
        assert checks.resolve_backend(TOY_ID, atol=1.0).tolerance(torch.float16) == (1.0, 0.25)
        assert checks.tolerance("OtherBackend", torch.float16) == (1e-2, 1e-2)   # not installed: the default


def test_a_malformed_tolerance_is_a_plugin_error(toy_plugin):
    with toy_backend_with(conformance_tolerance=lambda dtype: "loose"):
        with pytest.raises(PluginError, match="expected \\(atol, rtol\\)"):
            checks.tolerance(TOY_ID, torch.float32)


def _snapshot(report, tags=None, nodes=None):
    nodes = nodes or [
        checks.NodeRecord("x", "placeholder", "placeholder", None, False, ("t0",)),
        checks.NodeRecord("w", "placeholder", "placeholder", "t0", True, ("t0",)),
        checks.NodeRecord("add", "call_function", "aten.add.Tensor", "t0", False, (None,)),
        checks.NodeRecord("sig", "call_function", "aten.sigmoid.default", None, False, ()),
    ]
    return checks.PartitionSnapshot(nodes, tags if tags is not None else {"t0": DelegationSpec(TOY_ID)}, report)


def _report(**kw):
    base = dict(delegated={"aten.add.Tensor": 1}, rejected=[Rejection("sig", "aten.sigmoid.default", "no")],
                num_partitions=1)
    base.update(kw)
    return PartitionReport(TOY_ID, **base)


def test_tag_checks_accept_a_conforming_partition():
    assert checks.check_tags(TOY_ID, _snapshot(_report())) == []
    assert checks.check_tags(TOY_ID, _snapshot(None)) == []


@pytest.mark.parametrize("breakage, message", [
    (dict(tags={"t0": DelegationSpec("OtherBackend")}), "names backend 'OtherBackend'"),
    (dict(tags={}), "which partition_tags does not list"),
    (dict(report=_report(rejected=[Rejection("add", "aten.add.Tensor", "unsupported")])), "report rejects it"),
    (dict(report=_report(delegated={"aten.add.Tensor": 2})), "differs from the tagged operator calls"),
    (dict(report=_report(num_partitions=3)), "but 1 tag(s) are used"),
    (dict(nodes=[checks.NodeRecord("w", "placeholder", "placeholder", "t0", True, ("t0", None)),
                 checks.NodeRecord("x", "placeholder", "placeholder", "t0", False, ("t0",))]), "also used outside"),
])
def test_tag_checks_catch_each_breakage(breakage, message):
    kw = dict(report=_report())
    kw.update(breakage)
    problems = checks.check_tags(TOY_ID, _snapshot(**kw))
    assert any(message in p for p in problems), problems


def test_not_delegated_reason_comes_from_the_report():
    lowered = checks.LoweredCase((), [], None, [_snapshot(_report(delegated={}, num_partitions=0))])
    assert lowered.not_delegated_reason(TOY_ID) == "aten.sigmoid.default (node sig): no"
    assert "keeps no report" in checks.LoweredCase((), [], None, [_snapshot(None)]).not_delegated_reason(TOY_ID)


def test_archive_symbols_reads_a_static_library():
    import etkit._runtime as native
    archive = Path(native.__file__).parent / "lib" / "libetkit_runtime_static.a"
    if not archive.is_file():
        pytest.skip(f"{archive} is not installed")
    assert "etkit_register_backend" in checks.archive_symbols(archive)
    with pytest.raises(ValueError, match="not an ar archive"):
        checks.archive_symbols(native.__file__)


def test_cases_are_deterministic_and_uniquely_named():
    assert len({c.name for c in CASES}) == len(CASES)
    case = next(c for c in CASES if c.name == "conv2d")
    (m1, x1), (m2, x2) = case.build(), case.build()
    assert torch.equal(x1[0], x2[0]) and torch.equal(m1(*x1), m2(*x2))


def test_unknown_backend_is_a_usage_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ETKIT_PLUGINS", "ETKIT_BLOCK_PLUGINS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "etkit.conformance.pytest_plugin", "-p",
                           "no:cacheprovider", "--etkit-backend", "nosuchbackend"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--etkit-backend nosuchbackend: no installed backend" in proc.stderr


def test_without_the_option_the_plugin_collects_nothing_extra(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "etkit.conformance.pytest_plugin", "-p",
                           "no:cacheprovider", "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


class _Doubled(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *xs):
        return self.inner(*xs) * 2


def _prepares(module, example_inputs):
    """A backend that runs only a transformed version of each case (as an int8 NPU runs quantized programs)."""
    return _Doubled(module)


def _reference_run(program, inputs):
    """A host-side reference execution."""
    return [torch.full((2,), float(len(inputs)))]


def test_prepare_and_reference_run_fields(toy_plugin):
    """``BackendSpec.conformance_prepare`` replaces the case's module (eager outputs come from the prepared one,
    and the lowered case says it was prepared); ``conformance_reference_run`` answers for its backend only."""
    module = torch.nn.Identity()
    assert checks.prepare_case(TOY_ID, module, (torch.ones(2),)) is None
    assert checks.reference_run(TOY_ID, None, (torch.ones(2),)) is None
    with toy_backend_with(conformance_prepare=_prepares, conformance_reference_run=_reference_run):
        prepared = checks.prepare_case(TOY_ID, module, (torch.ones(2),))
        assert torch.equal(prepared(torch.ones(2)), torch.full((2,), 2.0))
        assert checks.prepare_case("OtherBackend", module, (torch.ones(2),)) is None
        outputs = checks.reference_run(TOY_ID, object(), (torch.ones(2), torch.ones(2)))
        assert len(outputs) == 1 and torch.equal(outputs[0], torch.full((2,), 2.0))
        case = next(c for c in CASES if c.name == "add")
        lowered = checks.lower_case(checks.resolve_backend(TOY_ID), case)
        module_, inputs = case.build()
        assert lowered.prepared
        torch.testing.assert_close(lowered.eager_outputs[0], module_(*inputs) * 2)


def test_a_prepare_field_must_return_a_module(toy_plugin):
    with toy_backend_with(conformance_prepare=lambda module, example_inputs: "quantized"):
        with pytest.raises(PluginError, match="expected a torch.nn.Module"):
            checks.prepare_case(TOY_ID, torch.nn.Identity(), ())
